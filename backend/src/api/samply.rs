//! samply pipelines (the seed's `POST /v0/pipelines/{pipeline_name}/samply_profile`):
//! record a local process named in `--targets` (see `runs::samply`), and its latest run.

use axum::extract::State as AxumState;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::ids::SessionId;
use stacklens_core::timestamp::Timestamp;
use utoipa::ToSchema;

use super::access::{Reader, Writer};
use super::request::{session_url, Params, PathParam};
use super::{ApiError, ErrorBody};
use crate::records::captures::Done;
use crate::records::samply::{self as records, Run};
use crate::records::Tenant;
use crate::runs::samply::{begin, preflight, Unavailable, MAX_SECONDS};
use crate::runs::StartError;
use crate::state::{AppState, State};

/// A samply run and, once done, its session (snake_case, like the seed's v0 API).
#[derive(Serialize, ToSchema)]
pub struct SamplyProfile {
    pipeline_name: String,
    id: String,
    /// running, completed or failed.
    status: String,
    pid: u32,
    ordinal: usize,
    duration_secs: u64,
    #[schema(value_type = String)]
    started_at: Timestamp,
    #[schema(value_type = Option<String>)]
    completed_at: Option<Timestamp>,
    #[schema(value_type = Option<String>)]
    session_id: Option<SessionId>,
    /// The page's share link for the recorded profile.
    flame_graph_url: Option<String>,
    error: Option<String>,
}

fn unknown_pipeline(name: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "UnknownPipelineName", format!("Unknown pipeline name '{name}'"))
        .details(json!({ "pipeline_name": name }))
}

fn unavailable(e: Unavailable, name: &str) -> ApiError {
    let code = match e {
        Unavailable::NotInstalled => "SamplyNotInstalled",
        Unavailable::ProcessNotFound(_) => "ProcessNotFound",
        Unavailable::PerfEventsNotAllowed(_) => "PerfEventsNotAllowed",
    };
    let message = match e {
        Unavailable::ProcessNotFound(pid) => format!("process {pid} of pipeline '{name}' is not running"),
        other => other.to_string(),
    };
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message).details(json!({ "pipeline_name": name }))
}

/// `start`'s query parameters (snake_case, as samply's own options).
#[derive(Deserialize)]
pub struct StartParams {
    duration_secs: Option<String>,
    ordinal: Option<String>,
}

/// Records a profile of the pipeline's process for `duration_secs`; 202 while it runs.
#[utoipa::path(post, path = "/v0/pipelines/{pipeline_name}/samply_profile", tag = "samply", operation_id = "StartSamplyProfile",
    params(("pipeline_name" = String, Path), ("duration_secs" = Option<u64>, Query, description = "1..300, default 10"),
        ("ordinal" = Option<usize>, Query, description = "which of the pipeline's processes (default 0)"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 202, body = SamplyProfile),
        (status = 400, description = "InvalidParameter", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "UnknownPipelineName", body = ErrorBody),
        (status = 409, description = "SamplyProfileInProgress: a samply profile of this pipeline is being recorded", body = ErrorBody),
        (status = 503, description = "SamplyNotInstalled, PerfEventsNotAllowed, ProcessNotFound, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn start(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    PathParam(name): PathParam,
    Params(query): Params<StartParams>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<SamplyProfile>), ApiError> {
    let pipeline = state.targets.pipeline(&name, &tenant).cloned().ok_or_else(|| unknown_pipeline(&name))?;
    let number = |key: &str, given: &Option<String>, default: u64| -> Result<u64, ApiError> {
        given
            .as_ref()
            .map_or(Ok(default), |v| v.parse())
            .map_err(|_| ApiError::invalid(key, format!("{key} must be a whole number")))
    };
    let duration = number("duration_secs", &query.duration_secs, 10)?;
    if !(1..=MAX_SECONDS).contains(&duration) {
        return Err(ApiError::invalid("duration_secs", format!("duration_secs must be 1..{MAX_SECONDS}")));
    }
    let ordinal = number("ordinal", &query.ordinal, 0)? as usize;
    let pids = pipeline.pids().map_err(|e| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ProcessNotFound", e).details(json!({ "pipeline_name": name }))
    })?;
    let pid = *pids.get(ordinal).ok_or_else(|| {
        ApiError::bad_request(
            "InvalidParameter",
            format!("ordinal {ordinal} is out of range: the pipeline has {} processes", pids.len()),
        )
        .details(json!({ "field": "ordinal", "pipeline_name": name }))
    })?;
    let samply = preflight(pid).map_err(|e| unavailable(e, &name))?;
    let run = begin(&state, &tenant, pipeline, pid, ordinal, duration, samply).await.map_err(|e| match e {
        StartError::Running => ApiError::new(
            StatusCode::CONFLICT,
            "SamplyProfileInProgress",
            format!("a samply profile of pipeline '{name}' is already being recorded"),
        )
        .details(json!({ "pipeline_name": name })),
        StartError::Record(r) => r.into(),
    })?;
    Ok((StatusCode::ACCEPTED, Json(respond(&state, &headers, &tenant, &name, &run, None))))
}

fn respond(
    state: &AppState,
    headers: &HeaderMap,
    tenant: &Tenant,
    name: &str,
    run: &Run,
    outcome: Option<Done>,
) -> SamplyProfile {
    let status = Done::status(outcome.as_ref());
    let outcome = outcome.unwrap_or_default();
    SamplyProfile {
        pipeline_name: name.to_owned(),
        id: run.id.clone(),
        status: status.to_owned(),
        pid: run.pid,
        ordinal: run.ordinal,
        duration_secs: run.duration_secs,
        started_at: run.started_at.clone(),
        completed_at: outcome.completed_at,
        flame_graph_url: outcome.session_id.as_ref().map(|id| session_url(state, headers, tenant, id)),
        session_id: outcome.session_id,
        error: outcome.error,
    }
}

/// The latest samply run of the pipeline.
#[utoipa::path(get, path = "/v0/pipelines/{pipeline_name}/samply_profile", tag = "samply", operation_id = "GetSamplyProfile",
    params(("pipeline_name" = String, Path), ("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 200, body = SamplyProfile),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "UnknownPipelineName, NoSamplyProfile", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn latest(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    PathParam(name): PathParam,
    headers: HeaderMap,
) -> Result<Json<SamplyProfile>, ApiError> {
    if state.targets.pipeline(&name, &tenant).is_none() {
        return Err(unknown_pipeline(&name));
    }
    let (run, outcome) = records::latest(&state.store, &tenant, &name).await?.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "NoSamplyProfile", format!("pipeline '{name}' has no samply profile yet"))
            .details(json!({ "pipeline_name": name }))
    })?;
    Ok(Json(respond(&state, &headers, &tenant, &name, &run, outcome)))
}
