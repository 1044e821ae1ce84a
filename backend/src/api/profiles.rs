//! Raw profiles: upload (validated by core, content-addressed), record, raw bytes,
//! listing newest first, delete.

use std::collections::{BTreeMap, HashMap};

use axum::body::Body;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use stacklens_core::analysis::summary::sample_count;
use stacklens_core::ProfileKind;

use utoipa::ToSchema;

use super::{authorize, blocking, load, now_rfc3339, share_url, valid_id, ApiError, ErrorBody, State, Tenant};
use crate::store::Store;

/// What is stored beside each raw profile.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionRecord {
    pub id: String,
    pub service: String,
    pub profile_type: ProfileKind,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub sample_types: Vec<String>,
    pub sample_count: i64,
    pub duration_seconds: f64,
    pub created_at: String,
    pub size: u64,
    pub sha256: String,
    pub content_type: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionResponse {
    #[serde(flatten)]
    record: SessionRecord,
    share_url: String,
}

fn respond(state: &super::AppState, headers: &HeaderMap, tenant: &Tenant, record: SessionRecord) -> SessionResponse {
    let share_url = share_url(state, headers, tenant, &format!("s/{}", record.id));
    SessionResponse { record, share_url }
}

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.json"))
}

fn raw_key(tenant: &Tenant, sha256: &str) -> String {
    tenant.key(&format!("raw/{sha256}"))
}

/// Index entries sort newest first: the key starts with the inverted creation time.
fn index_key(tenant: &Tenant, record: &SessionRecord) -> String {
    let millis = humantime::parse_rfc3339(&record.created_at)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    tenant.key(&format!("sessions-by-time/{:016x}-{}", u64::MAX - millis, record.id))
}

/// The session of `tenant`'s raw bytes with this hash: the same bytes always get the same id.
fn session_id(tenant: &Tenant, sha256: &str) -> String {
    let digest = Sha256::new().chain_update(tenant.0.as_bytes()).chain_update([0]).chain_update(sha256).finalize();
    format!("sess-{}", &hex::encode(digest)[..32])
}

/// Reads a request body, refusing more than `limit` bytes with 413.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match axum::body::to_bytes(body, limit).await {
        Ok(b) => Ok(b),
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.downcast_ref::<http_body_util::LengthLimitError>().is_some());
            if too_large {
                Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "PayloadTooLarge",
                    format!("the body is larger than {limit} bytes"),
                )
                .details(json!({ "limit": limit })))
            } else {
                Err(ApiError::bad_request("BadBody", format!("cannot read the request body: {e}")))
            }
        }
    }
}

/// Reads a JSON request body of at most `limit` bytes; 400 says it is not `what`.
pub async fn read_json<T: serde::de::DeserializeOwned>(body: Body, limit: usize, what: &str) -> Result<T, ApiError> {
    let body = read_body(body, limit).await?;
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("InvalidRequest", format!("not {what}: {e}")))
}

/// A parameter from the query string, or else from an `X-Stacklens-…` header.
fn param(query: &HashMap<String, String>, headers: &HeaderMap, name: &str) -> Option<String> {
    query.get(name).cloned().or_else(|| {
        headers
            .get(format!("x-stacklens-{}", name.to_ascii_lowercase()))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    })
}

/// Free text (service, name, label) must be short and printable.
fn check_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "InvalidParameter",
            format!("{field} must be at most {max} printable characters"),
        )
        .details(json!({ "field": field })));
    }
    Ok(())
}

/// `k=v,k2=v2`.
fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ApiError::bad_request("InvalidParameter", format!("label '{pair}' is not key=value"))
                .details(json!({ "field": "labels" })));
        };
        check_text("labels", k, 128)?;
        check_text("labels", v, 512)?;
        labels.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    Ok(labels)
}

pub fn parse_kind(text: &str) -> Result<ProfileKind, ApiError> {
    ProfileKind::parse(text).ok_or_else(|| {
        ApiError::bad_request("InvalidProfileType", format!("unknown profileType '{text}'"))
            .details(json!({ "profileType": text, "known": ProfileKind::ALL.map(|k| k.as_str()) }))
    })
}

/// Stores a raw profile after core parsed it; the same bytes give the same session.
#[utoipa::path(post, path = "/api/v1/profiles", tag = "profiles",
    params(
        ("service" = Option<String>, Query, description = "service name (or X-Stacklens-Service)"),
        ("profileType" = Option<String>, Query, description = "cpu|memory|alloc|block|mutex|goroutine|threadcreate; detected when absent"),
        ("labels" = Option<String>, Query, description = "k=v,k2=v2"),
        ("name" = Option<String>, Query, description = "file name"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the raw profile (pprof, gzipped or not; Go texts and dumps; Firefox Profiler JSON)"),
    responses(
        (status = 201, description = "stored", body = SessionResponse),
        (status = 200, description = "these bytes were stored before: the existing session", body = SessionResponse),
        (status = 400, description = "not a profile core can read, or a bad parameter", body = ErrorBody),
        (status = 401, description = "a token is required", body = ErrorBody),
        (status = 413, description = "larger than --max-upload", body = ErrorBody),
        (status = 422, description = "profileType does not match the profile", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub async fn upload(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    authorize(&state, &headers)?;
    let service = param(&query, &headers, "service").unwrap_or_default();
    check_text("service", &service, 128)?;
    let name = param(&query, &headers, "name").unwrap_or_default();
    check_text("name", &name, 256)?;
    let labels = parse_labels(&param(&query, &headers, "labels").unwrap_or_default())?;
    let claimed = param(&query, &headers, "profileType").map(|t| parse_kind(&t)).transpose()?;
    let bytes = read_body(body, state.max_upload).await?;
    let (status, record) =
        store_profile(&state.store, &tenant, bytes, NewSession { service, name, labels, claimed }).await?;
    Ok((status, Json(respond(&state, &headers, &tenant, record))).into_response())
}

/// What a new session is filed under, besides its bytes.
pub struct NewSession {
    pub service: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub claimed: Option<ProfileKind>,
}

/// Parses `bytes` with core, then stores them and their record (201), or finds the
/// session these bytes already are (200). Used by uploads and captures.
pub async fn store_profile(
    store: &Store,
    tenant: &Tenant,
    bytes: Bytes,
    meta: NewSession,
) -> Result<(StatusCode, SessionRecord), ApiError> {
    // Parse before storing: only profiles core can read are kept.
    let parsed = bytes.clone();
    let profile = blocking(move || stacklens_core::parse(&parsed)).await?.map_err(|e| {
        ApiError::bad_request("InvalidProfile", format!("not a profile stacklens can read: {e}"))
            .details(json!({ "coreError": e.code() }))
    })?;
    let detected = ProfileKind::of(&profile);
    let profile_type = match meta.claimed {
        Some(c) if !detected.accepts(c) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ProfileTypeMismatch",
                format!("profileType '{c}' does not match the profile, which is {detected}"),
            )
            .details(json!({ "profileType": c, "detected": detected })));
        }
        Some(c) => c,
        None => detected,
    };
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let id = session_id(tenant, &sha256);
    if let Some(existing) = load::<SessionRecord>(store, &record_key(tenant, &id)).await? {
        finish(store, tenant, &existing, &bytes).await?;
        return Ok((StatusCode::OK, existing));
    }
    let text = !bytes.starts_with(&[0x1f, 0x8b]) && std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_ok();
    let record = SessionRecord {
        id: id.clone(),
        service: meta.service,
        profile_type,
        name: meta.name,
        labels: meta.labels,
        sample_types: (0..profile.sample_types.len()).map(|i| profile.sample_type_name(i).to_owned()).collect(),
        sample_count: sample_count(&profile),
        duration_seconds: profile.duration_nanos as f64 / 1e9,
        created_at: now_rfc3339(),
        size: bytes.len() as u64,
        sha256,
        content_type: if text { "text/plain; charset=utf-8" } else { "application/octet-stream" }.to_owned(),
    };
    // Raw bytes first, then the record, then the index: a record never points at
    // missing bytes, and a re-upload completes whatever a crash left out.
    store.create(&raw_key(tenant, &record.sha256), bytes.clone()).await?;
    let created = store.create(&record_key(tenant, &id), Bytes::from(serde_json::to_vec(&record)?)).await?;
    let (status, record) = if created {
        (StatusCode::CREATED, record)
    } else {
        // Another replica stored the same bytes meanwhile: its record wins.
        let theirs = load::<SessionRecord>(store, &record_key(tenant, &id)).await?.unwrap_or(record);
        (StatusCode::OK, theirs)
    };
    finish(store, tenant, &record, &bytes).await?;
    Ok((status, record))
}

/// Makes sure the raw bytes and the index entry of a stored record exist.
async fn finish(store: &Store, tenant: &Tenant, record: &SessionRecord, bytes: &Bytes) -> Result<(), ApiError> {
    store.create(&raw_key(tenant, &record.sha256), bytes.clone()).await?;
    store.create(&index_key(tenant, record), Bytes::new()).await?;
    Ok(())
}

/// The stored record of a session, or 404.
pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord, ApiError> {
    if !valid_id(id, "sess") {
        return Err(ApiError::not_found("session", id));
    }
    load(store, &record_key(tenant, id)).await?.ok_or_else(|| ApiError::not_found("session", id))
}

/// A session's raw bytes, or 404.
pub async fn raw_bytes(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<Bytes, ApiError> {
    store.get(&raw_key(tenant, &record.sha256)).await?.ok_or_else(|| ApiError::not_found("session", &record.id))
}

/// A session's record.
#[utoipa::path(get, path = "/api/v1/profiles/{id}", tag = "profiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "session id")),
    responses((status = 200, body = SessionResponse), (status = 404, description = "unknown id", body = ErrorBody)))]
pub async fn record(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<SessionResponse>, ApiError> {
    let record = find(&state.store, &tenant, &id).await?;
    Ok(Json(respond(&state, &headers, &tenant, record)))
}

/// The exact bytes uploaded (`go tool pprof <this URL>` works).
#[utoipa::path(get, path = "/api/v1/profiles/{id}/raw", tag = "profiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "session id")),
    responses((status = 200, description = "the raw profile", content_type = "application/octet-stream", body = Vec<u8>), (status = 404, description = "unknown id", body = ErrorBody)))]
pub async fn raw(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let record = find(&state.store, &tenant, &id).await?;
    let bytes = raw_bytes(&state.store, &tenant, &record).await?;
    let file =
        if record.name.is_empty() { format!("{}.pb.gz", record.id) } else { record.name.replace(['"', '\\'], "_") };
    Ok((
        [
            (header::CONTENT_TYPE, record.content_type.clone()),
            (header::ETAG, format!("\"{}\"", record.sha256)),
            // Content-addressed: these bytes never change.
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable".to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{file}\"")),
        ],
        bytes,
    )
        .into_response())
}

/// Deletes a session and its bytes (token holder only).
#[utoipa::path(delete, path = "/api/v1/profiles/{id}", tag = "profiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "session id")),
    responses((status = 204, description = "deleted"), (status = 401, body = ErrorBody), (status = 404, description = "unknown id", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn delete(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    authorize(&state, &headers)?;
    let record = find(&state.store, &tenant, &id).await?;
    delete_session(&state.store, &tenant, &record).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a session: its index entry first (listings stop showing it), then its record and bytes.
pub async fn delete_session(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<(), ApiError> {
    store.delete(&index_key(tenant, record)).await?;
    store.delete(&record_key(tenant, &record.id)).await?;
    store.delete(&raw_key(tenant, &record.sha256)).await?;
    Ok(())
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileList {
    profiles: Vec<SessionResponse>,
    next_cursor: Option<String>,
}

/// Sessions, newest first.
#[utoipa::path(get, path = "/api/v1/profiles", tag = "profiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"),
        ("service" = Option<String>, Query), ("profileType" = Option<String>, Query),
        ("limit" = Option<usize>, Query, description = "1..1000, default 50"),
        ("cursor" = Option<String>, Query, description = "nextCursor of the previous page")),
    responses((status = 200, body = ProfileList), (status = 400, body = ErrorBody)))]
pub async fn list(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Json<ProfileList>, ApiError> {
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::bad_request("InvalidParameter", "limit must be a number from 1 to 1000")
                .details(json!({ "field": "limit" })))
        }
    };
    let kind = query.get("profileType").map(|t| parse_kind(t)).transpose()?;
    let service = query.get("service");
    let cursor = query.get("cursor").filter(|c| !c.is_empty());
    if let Some(c) = &cursor {
        let valid =
            c.len() == 16 + 1 + 37 && c[..16].bytes().all(|b| b.is_ascii_hexdigit()) && valid_id(&c[17..], "sess");
        if !valid {
            return Err(ApiError::bad_request("InvalidParameter", "cursor is not one this API returned")
                .details(json!({ "field": "cursor" })));
        }
    }
    let entries = state.store.list(&tenant.key("sessions-by-time"), cursor.map(String::as_str)).await?;
    let mut profiles = Vec::new();
    let mut next_cursor = None;
    for entry in entries {
        if profiles.len() == limit {
            break;
        }
        next_cursor = Some(entry.clone());
        let Some(record) = load::<SessionRecord>(&state.store, &record_key(&tenant, &entry[17..])).await? else {
            continue; // deleted meanwhile
        };
        if service.is_some_and(|s| *s != record.service) || kind.is_some_and(|k| k != record.profile_type) {
            continue;
        }
        profiles.push(respond(&state, &headers, &tenant, record));
    }
    if profiles.len() < limit {
        next_cursor = None;
    }
    Ok(Json(ProfileList { profiles, next_cursor }))
}
