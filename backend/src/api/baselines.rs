//! Baselines, field for field as the seed's CreateBaseline: a labelled session whose
//! top functions later profiles are compared with.

use std::collections::HashMap;

use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use stacklens_core::analysis::summary::top_functions;
use stacklens_core::analysis::Query as ProfileQuery;
use stacklens_core::ProfileKind;

use super::access::{Open, Reader, Writer};
use super::analysis::{analysis_failed, stored_profiles};
use super::request::{check_name, parse_kind, read_json, share_url, Params, PathParam};
use super::{ApiError, ErrorBody};
use stacklens_core::api::{BaselineList, BaselineRecord, BaselineResponse, CreateBaseline};

use crate::records::baselines::{self, NewBaseline};
use crate::records::{sessions, Tenant};
use crate::state::{AppState, State};

/// Functions a baseline keeps when the request gives none.
const TOP_FUNCTIONS: usize = 20;

fn respond(
    state: &AppState,
    headers: &HeaderMap,
    tenant: &Tenant,
    record: BaselineRecord,
    is_latest: bool,
) -> BaselineResponse {
    let share_url = share_url(state, headers, tenant, &format!("b/{}", record.baseline_id));
    BaselineResponse { record, is_latest, share_url }
}

/// Saves a session as a baseline (the seed's CreateBaseline); without topFunctions
/// core computes the top 20 by self from the stored session. The baseline pins the
/// session's bytes until it is deleted.
#[utoipa::path(post, path = "/api/v1/profiling/baselines", tag = "baselines", operation_id = "CreateBaseline",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = CreateBaseline,
    responses((status = 201, body = BaselineResponse),
        (status = 400, description = "InvalidRequest, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "ProfileNotFound: unknown sessionId", body = ErrorBody),
        (status = 410, description = "Expired: the session's link has expired", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge, OverMemoryBudget", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch, AnalysisFailed, EncryptedBlob (sessionId is the id of an encrypted blob, which the server cannot read)", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: the body is not sent as application/json", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn create(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    headers: HeaderMap,
    request: Request,
) -> Result<(StatusCode, Json<BaselineResponse>), ApiError> {
    let request: CreateBaseline = read_json(request, "a CreateBaseline request").await?;
    let label = request.label.trim().to_owned();
    if label.is_empty() || label.len() > 200 || label.chars().any(char::is_control) {
        return Err(ApiError::invalid_request("label", "label must be 1-200 printable characters"));
    }
    if request.description.len() > 4000 {
        return Err(ApiError::invalid_request("description", "description must be at most 4000 characters"));
    }
    if request.tags.len() > 50
        || request.tags.iter().any(|t| t.is_empty() || t.len() > 64 || t.chars().any(char::is_control))
    {
        return Err(ApiError::invalid_request("tags", "at most 50 tags of 1-64 printable characters"));
    }
    if request.top_functions.len() > 1000 {
        return Err(ApiError::invalid_request("topFunctions", "at most 1000 top functions"));
    }
    let kind = parse_kind(&request.profile_type.0)?;
    let session = sessions::find(&state.store, &tenant, &request.session_id).await?;
    if !session.profile_type.accepts(kind) {
        return Err(ApiError::unprocessable(
            "ProfileTypeMismatch",
            format!("session {} is a {} profile, not {kind}", session.id, session.profile_type),
        )
        .details(json!({ "sessionId": session.id, "sessionProfileType": session.profile_type, "profileType": kind })));
    }
    let top_functions = if request.top_functions.is_empty() {
        let parsed = stored_profiles(&state, &tenant, std::slice::from_ref(&session)).await?;
        tokio::task::spawn_blocking(move || {
            let profile = &parsed.profiles[0];
            let query = ProfileQuery::of_sample(kind.sample_type(profile));
            top_functions(&query.prepare(profile)?, TOP_FUNCTIONS)
        })
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", e.to_string()))?
        .map_err(analysis_failed)?
    } else {
        request.top_functions
    };
    let new =
        NewBaseline { label, profile_type: kind, description: request.description, top_functions, tags: request.tags };
    let record = baselines::create_baseline(&state.store, &tenant, &session, new).await?;
    let is_latest = baselines::latest_id(&state.store, &tenant, kind, &record.service).await?.as_deref()
        == Some(&record.baseline_id);
    Ok((StatusCode::CREATED, Json(respond(&state, &headers, &tenant, record, is_latest))))
}

/// A baseline; isLatest is true for the newest of its profile type and service.
#[utoipa::path(get, path = "/api/v1/profiling/baselines/{id}", tag = "baselines", operation_id = "GetBaseline",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "baseline id")),
    responses((status = 200, body = BaselineResponse), (status = 404, description = "BaselineNotFound", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn record(
    AxumState(state): AxumState<State>,
    Open(tenant): Open,
    PathParam(id): PathParam,
    headers: HeaderMap,
) -> Result<Json<BaselineResponse>, ApiError> {
    let record = baselines::find(&state.store, &tenant, &id).await?;
    let latest = baselines::latest_id(&state.store, &tenant, record.profile_type, &record.service).await?;
    let is_latest = latest.as_deref() == Some(&record.baseline_id);
    Ok(Json(respond(&state, &headers, &tenant, record, is_latest)))
}

/// Deletes a baseline; its link answers 404 at once and the session's bytes are
/// released (removed if nothing else holds them).
#[utoipa::path(delete, path = "/api/v1/profiling/baselines/{id}", tag = "baselines", operation_id = "DeleteBaseline",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("id" = String, Path, description = "baseline id")),
    responses((status = 204, description = "deleted"),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 404, description = "BaselineNotFound", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn delete(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    PathParam(id): PathParam,
) -> Result<StatusCode, ApiError> {
    let record = baselines::find(&state.store, &tenant, &id).await?;
    baselines::delete(&state.store, &tenant, &record).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `list`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    profile_type: Option<String>,
    latest: Option<String>,
    tag: Option<String>,
    service: Option<String>,
}

/// Baselines, newest first.
#[utoipa::path(get, path = "/api/v1/profiling/baselines", tag = "baselines", operation_id = "ListBaselines",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("profileType" = Option<String>, Query), ("tag" = Option<String>, Query), ("service" = Option<String>, Query),
        ("latest" = Option<bool>, Query, description = "only the latest of each type and service")),
    responses((status = 200, body = BaselineList),
        (status = 400, description = "InvalidRequest, InvalidParameter (a service that reads as a path), InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn list(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    Params(query): Params<ListParams>,
    headers: HeaderMap,
) -> Result<Json<BaselineList>, ApiError> {
    let kind = query.profile_type.map(|t| parse_kind(&t)).transpose()?;
    let only_latest = match query.latest.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::invalid_request("latest", format!("latest must be true or false, not '{other}'")))
        }
    };
    let (tag, service) = (query.tag.as_ref(), query.service.as_ref());
    if let Some(service) = service {
        check_name("service", service, 128)?;
    }
    let mut latest: HashMap<(ProfileKind, String), Option<String>> = HashMap::new();
    let mut found = Vec::new();
    for record in baselines::list(&state.store, &tenant).await? {
        if kind.is_some_and(|k| k != record.profile_type)
            || tag.is_some_and(|t| !record.tags.contains(t))
            || service.is_some_and(|s| *s != record.service)
        {
            continue;
        }
        let group = (record.profile_type, record.service.clone());
        let newest = match latest.get(&group) {
            Some(l) => l.clone(),
            None => {
                let l = baselines::latest_id(&state.store, &tenant, record.profile_type, &record.service).await?;
                latest.insert(group, l.clone());
                l
            }
        };
        let is_latest = newest.as_deref() == Some(&record.baseline_id);
        if only_latest && !is_latest {
            continue;
        }
        found.push(respond(&state, &headers, &tenant, record, is_latest));
    }
    Ok(Json(BaselineList { baselines: found }))
}
