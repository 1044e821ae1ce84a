//! Baselines, field for field as the seed's CreateBaseline: a labelled session whose
//! top functions later profiles are compared with. "Latest" is not stored (it would
//! need an overwrite): it is the newest entry of a per-type-and-service index, whose
//! keys are time-ordered ids.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::analysis::summary::{top_functions, FunctionShare};
use stacklens_core::ProfileKind;

use super::profiles::{find, parse_kind, raw_bytes, read_json};
use utoipa::ToSchema;

use super::{
    authorize, blocking, load, now_rfc3339, share_url, valid_id, ApiError, AppState, ErrorBody, State, Tenant,
};
use crate::store::Store;

/// Functions a baseline keeps when the request gives none.
const TOP_FUNCTIONS: usize = 20;
const MAX_REQUEST: usize = 1 << 20;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateBaseline {
    label: String,
    session_id: String,
    profile_type: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    top_functions: Vec<FunctionShare>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselineRecord {
    pub baseline_id: String,
    pub baseline_label: String,
    pub profile_type: ProfileKind,
    pub session_id: String,
    /// The session's service: "latest" is per type and service.
    pub service: String,
    pub description: String,
    pub top_functions: Vec<FunctionShare>,
    pub created_at: String,
    pub tags: Vec<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselineResponse {
    #[serde(flatten)]
    record: BaselineRecord,
    is_latest: bool,
    share_url: String,
}

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("baselines/by-id/{id}.json"))
}

/// The folder of one type and service's baselines; the service is hex-encoded so any
/// text is a safe key.
fn group_key(tenant: &Tenant, kind: ProfileKind, service: &str) -> String {
    tenant.key(&format!("baselines/latest/{kind}/s{}", hex::encode(service)))
}

/// The newest baseline of a type and service.
pub async fn latest_id(
    store: &Store,
    tenant: &Tenant,
    kind: ProfileKind,
    service: &str,
) -> Result<Option<String>, ApiError> {
    Ok(store.list(&group_key(tenant, kind, service), None).await?.pop())
}

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

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request("InvalidRequest", message).details(json!({ "field": field }))
}

/// Saves a session as a baseline (the seed's CreateBaseline); without topFunctions
/// core computes the top 20 by self from the stored session.
#[utoipa::path(post, path = "/api/v1/profiling/baselines", tag = "baselines",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter")),
    request_body = CreateBaseline,
    responses((status = 201, body = BaselineResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "unknown sessionId", body = ErrorBody),
        (status = 422, description = "profileType does not match the session", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn create(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<BaselineResponse>), ApiError> {
    authorize(&state, &headers)?;
    let request: CreateBaseline = read_json(body, MAX_REQUEST, "a CreateBaseline request").await?;
    let label = request.label.trim().to_owned();
    if label.is_empty() || label.len() > 200 || label.chars().any(char::is_control) {
        return Err(invalid("label", "label must be 1-200 printable characters"));
    }
    if request.description.len() > 4000 {
        return Err(invalid("description", "description must be at most 4000 characters"));
    }
    if request.tags.len() > 50
        || request.tags.iter().any(|t| t.is_empty() || t.len() > 64 || t.chars().any(char::is_control))
    {
        return Err(invalid("tags", "at most 50 tags of 1-64 printable characters"));
    }
    let kind = parse_kind(&request.profile_type)?;
    let session = find(&state.store, &tenant, &request.session_id).await?;
    if !session.profile_type.accepts(kind) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "ProfileTypeMismatch",
            format!("session {} is a {} profile, not {kind}", session.id, session.profile_type),
        )
        .details(json!({ "sessionId": session.id, "sessionProfileType": session.profile_type, "profileType": kind })));
    }
    let top_functions = if request.top_functions.is_empty() {
        let bytes = raw_bytes(&state.store, &tenant, &session).await?;
        blocking(move || -> Result<Vec<FunctionShare>, stacklens_core::Error> {
            let profile = stacklens_core::parse(&bytes)?;
            top_functions(&profile, kind.sample_type(&profile), TOP_FUNCTIONS)
        })
        .await?
        .map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "AnalysisFailed",
                format!("cannot rank the session's functions: {e}"),
            )
        })?
    } else {
        request.top_functions
    };
    let record = BaselineRecord {
        baseline_id: format!("base-{}", uuid::Uuid::now_v7().simple()),
        baseline_label: label,
        profile_type: kind,
        session_id: session.id,
        service: session.service,
        description: request.description,
        top_functions,
        created_at: now_rfc3339(),
        tags: request.tags,
    };
    // The record, then its index entry: "latest" moves only to a stored baseline.
    state.store.create(&record_key(&tenant, &record.baseline_id), Bytes::from(serde_json::to_vec(&record)?)).await?;
    let group = group_key(&tenant, kind, &record.service);
    state.store.create(&format!("{group}/{}", record.baseline_id), Bytes::new()).await?;
    let is_latest =
        latest_id(&state.store, &tenant, kind, &record.service).await?.as_deref() == Some(&record.baseline_id);
    Ok((StatusCode::CREATED, Json(respond(&state, &headers, &tenant, record, is_latest))))
}

pub async fn find_baseline(store: &Store, tenant: &Tenant, id: &str) -> Result<BaselineRecord, ApiError> {
    if !valid_id(id, "base") {
        return Err(ApiError::not_found("baseline", id));
    }
    load(store, &record_key(tenant, id)).await?.ok_or_else(|| ApiError::not_found("baseline", id))
}

/// A baseline; isLatest is true for the newest of its profile type and service.
#[utoipa::path(get, path = "/api/v1/profiling/baselines/{id}", tag = "baselines",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "baseline id")),
    responses((status = 200, body = BaselineResponse), (status = 404, description = "unknown id", body = ErrorBody)))]
pub async fn record(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<BaselineResponse>, ApiError> {
    let record = find_baseline(&state.store, &tenant, &id).await?;
    let latest = latest_id(&state.store, &tenant, record.profile_type, &record.service).await?;
    let is_latest = latest.as_deref() == Some(&record.baseline_id);
    Ok(Json(respond(&state, &headers, &tenant, record, is_latest)))
}

#[derive(Serialize, ToSchema)]
pub struct BaselineList {
    baselines: Vec<BaselineResponse>,
}

/// Baselines, newest first.
#[utoipa::path(get, path = "/api/v1/profiling/baselines", tag = "baselines",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"),
        ("profileType" = Option<String>, Query), ("tag" = Option<String>, Query), ("service" = Option<String>, Query),
        ("latest" = Option<bool>, Query, description = "only the latest of each type and service")),
    responses((status = 200, body = BaselineList), (status = 400, body = ErrorBody)))]
pub async fn list(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Json<BaselineList>, ApiError> {
    let kind = query.get("profileType").map(|t| parse_kind(t)).transpose()?;
    let only_latest = match query.get("latest").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(invalid("latest", format!("latest must be true or false, not '{other}'"))),
    };
    let tag = query.get("tag");
    let service = query.get("service");
    let ids = state.store.list(&tenant.key("baselines/by-id"), None).await?;
    let mut latest: HashMap<(ProfileKind, String), Option<String>> = HashMap::new();
    let mut baselines = Vec::new();
    // Newest first: ids are time-ordered.
    for name in ids.iter().rev() {
        let Some(id) = name.strip_suffix(".json") else { continue };
        let Some(record) = load::<BaselineRecord>(&state.store, &record_key(&tenant, id)).await? else { continue };
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
                let l = latest_id(&state.store, &tenant, record.profile_type, &record.service).await?;
                latest.insert(group, l.clone());
                l
            }
        };
        let is_latest = newest.as_deref() == Some(&record.baseline_id);
        if only_latest && !is_latest {
            continue;
        }
        baselines.push(respond(&state, &headers, &tenant, record, is_latest));
    }
    Ok(Json(BaselineList { baselines }))
}
