//! Captures from running Go services: start, status, and history for trend charts.

use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::analysis::summary::FunctionShare;
use stacklens_core::ids::{CaptureId, SessionId};
use stacklens_core::timestamp::Timestamp;
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::access::{Reader, Writer};
use super::request::{check_name, parse_kind, read_json, required, session_url, Params, PathParam};
use super::{ApiError, ErrorBody};
use stacklens_core::api::{History, HistoryPoint};

use crate::records::captures::{self, Done, Started};
use crate::records::{now_millis, Tenant};
use crate::runs::capture::{begin, deadline_seconds, BeginError, MAX_SECONDS};
use crate::runs::StartError;
use crate::state::{AppState, State};

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartCapture {
    /// A service from `--targets`.
    service: String,
    /// cpu, memory, alloc, block, mutex or goroutine.
    profile_type: String,
    /// How long a cpu profile runs (1..300, default 10); other types are snapshots.
    duration_seconds: Option<u64>,
    /// Recorded with the capture; Go's handlers sample at the rates the program set.
    sample_rate: Option<u64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaptureResponse {
    #[schema(value_type = String)]
    id: CaptureId,
    service: String,
    #[schema(value_type = String)]
    profile_type: ProfileKind,
    /// running, completed or failed.
    status: String,
    #[schema(value_type = String)]
    started_at: Timestamp,
    #[schema(value_type = Option<String>)]
    completed_at: Option<Timestamp>,
    duration_seconds: u64,
    sample_rate: Option<u64>,
    /// For scheduled captures: the interval number it fills.
    slot: Option<u64>,
    sample_count: Option<i64>,
    top_functions: Vec<FunctionShare>,
    /// The page's share link for the captured session.
    flame_graph_url: Option<String>,
    #[schema(value_type = Option<String>)]
    session_id: Option<SessionId>,
    /// For goroutine captures: the session of the `debug=0` pprof form.
    #[schema(value_type = Option<String>)]
    goroutine_pprof_session_id: Option<SessionId>,
    /// Why a capture failed.
    error: Option<String>,
}

/// Maps why a run could not start.
impl From<BeginError> for ApiError {
    fn from(e: BeginError) -> Self {
        let message = e.to_string();
        match e {
            BeginError::UnknownService(service) => {
                ApiError::new(StatusCode::NOT_FOUND, "UnknownService", message).details(json!({ "service": service }))
            }
            BeginError::NotCapturable(kind) => {
                ApiError::bad_request("InvalidProfileType", message).details(json!({ "profileType": kind }))
            }
            BeginError::Running { service, kind } => ApiError::new(StatusCode::CONFLICT, "CaptureInProgress", message)
                .details(json!({ "service": service, "profileType": kind })),
            BeginError::Start(StartError::Record(r)) => r.into(),
            BeginError::Start(StartError::Running) => ApiError::new(StatusCode::CONFLICT, "CaptureInProgress", message),
        }
    }
}

/// Starts a capture; 202 with its id while it runs.
#[utoipa::path(post, path = "/api/v1/observability/profiling/start", tag = "capture", operation_id = "StartCapture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = StartCapture,
    responses((status = 202, body = CaptureResponse),
        (status = 400, description = "InvalidRequest, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "UnknownService", body = ErrorBody),
        (status = 409, description = "CaptureInProgress: a capture of this service and type is running on some replica", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: the body is not sent as application/json", body = ErrorBody),
        (status = 503, description = "StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn start(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    headers: HeaderMap,
    request: Request,
) -> Result<(StatusCode, Json<CaptureResponse>), ApiError> {
    let request: StartCapture = read_json(request, "a capture request").await?;
    let kind = parse_kind(&request.profile_type)?;
    let seconds = request.duration_seconds.unwrap_or(10);
    if !(1..=MAX_SECONDS).contains(&seconds) {
        return Err(ApiError::bad_request("InvalidRequest", format!("durationSeconds must be 1..{MAX_SECONDS}"))
            .details(json!({ "field": "durationSeconds" })));
    }
    let started = begin(&state, &tenant, &request.service, kind, seconds, request.sample_rate, None).await?;
    Ok((StatusCode::ACCEPTED, Json(respond(&state, &headers, &tenant, &started, None))))
}

fn respond(
    state: &AppState,
    headers: &HeaderMap,
    tenant: &Tenant,
    started: &Started,
    done: Option<Done>,
) -> CaptureResponse {
    let status = Done::status(done.as_ref());
    let done = done.unwrap_or_default();
    CaptureResponse {
        id: started.id.clone(),
        service: started.service.clone(),
        profile_type: started.profile_type,
        status: status.to_owned(),
        started_at: started.started_at.clone(),
        completed_at: done.completed_at,
        duration_seconds: started.duration_seconds,
        sample_rate: started.sample_rate,
        slot: started.slot,
        sample_count: done.sample_count,
        top_functions: done.top_functions,
        flame_graph_url: done.session_id.as_ref().map(|id| session_url(state, headers, tenant, id)),
        session_id: done.session_id,
        goroutine_pprof_session_id: done.pprof_session_id,
        error: done.error,
    }
}

/// A capture's outcome, or "interrupted" once its deadline passed without one (its
/// server stopped before it finished).
fn outcome(state: &AppState, started: &Started, done: Option<Done>) -> Option<Done> {
    let deadline = started.started_at.millis() + deadline_seconds(state, started.duration_seconds) * 1000;
    done.or_else(|| {
        (deadline < now_millis()).then(|| Done::failed("the capture was interrupted (its server stopped)".to_owned()))
    })
}

/// A capture and, once done, its outcome.
#[utoipa::path(get, path = "/api/v1/observability/profiling/{id}", tag = "capture", operation_id = "GetCapture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("id" = String, Path, description = "capture id")),
    responses((status = 200, body = CaptureResponse),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "CaptureNotFound", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn status(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    PathParam(id): PathParam,
    headers: HeaderMap,
) -> Result<Json<CaptureResponse>, ApiError> {
    let (started, done) = captures::find(&state.store, &tenant, &id).await?;
    let done = outcome(&state, &started, done);
    Ok(Json(respond(&state, &headers, &tenant, &started, done)))
}

/// `history`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryParams {
    service: Option<String>,
    profile_type: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// Captures over time with their totals and top functions, for trend charts.
#[utoipa::path(get, path = "/api/v1/observability/profiling/history", tag = "capture", operation_id = "GetCaptureHistory",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query, description = "RFC 3339; inclusive"), ("to" = Option<String>, Query, description = "RFC 3339; inclusive")),
    responses((status = 200, body = History),
        (status = 400, description = "InvalidParameter, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn history(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    Params(query): Params<HistoryParams>,
) -> Result<Json<History>, ApiError> {
    let service = required(&query.service, "service")?;
    check_name("service", service, 128)?;
    let kind = parse_kind(required(&query.profile_type, "profileType")?)?;
    let bound = |name: &str, given: &Option<String>, default: u64| -> Result<u64, ApiError> {
        let Some(value) = given.as_ref().filter(|v| !v.is_empty()) else { return Ok(default) };
        let at = humantime::parse_rfc3339_weak(value)
            .map_err(|e| ApiError::invalid(name, format!("{name} is not an RFC 3339 time: {e}")))?;
        Ok(at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64))
    };
    let (from, to) = (bound("from", &query.from, 0)?, bound("to", &query.to, u64::MAX)?);
    let mut points = Vec::new();
    for entry in captures::history(&state.store, &tenant, service, kind, from, to).await? {
        let started = entry.started;
        let done = outcome(&state, &started, entry.done);
        let status = Done::status(done.as_ref());
        let done = done.unwrap_or_default();
        points.push(HistoryPoint {
            id: started.id,
            service: started.service,
            profile_type: started.profile_type,
            started_at: started.started_at.into(),
            slot: started.slot,
            status: status.to_owned(),
            session_id: done.session_id,
            sample_count: done.sample_count,
            total: done.total,
            unit: done.unit,
            top_functions: done.top_functions.into_iter().take(5).collect(),
        });
    }
    Ok(Json(History { captures: points }))
}
