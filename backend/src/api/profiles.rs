//! Raw profiles: upload (validated by core, stored once per content, optionally with a
//! link that expires), record, raw bytes, listing newest first, delete (by a credential
//! or the upload's delete token).

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::access::{wrong_token, Deleter, Open, Reader, Writer};
use super::request::{
    check_name, check_text, expires_at, param, parse_kind, parse_labels, read_held_body, session_url, Params, PathParam,
};
use super::{ApiError, ErrorBody};
use crate::intake::{file_profile_held, Intake};
use stacklens_core::api::{SessionRecord, SessionResponse};

use crate::records::index;
use crate::records::refs::Holder;
use crate::records::series::FiledBy;
use crate::records::sessions::{self, Stored};
use crate::records::Tenant;
use crate::state::{AppState, State};

fn respond(state: &AppState, headers: &HeaderMap, tenant: &Tenant, record: SessionRecord) -> SessionResponse {
    let share_url = session_url(state, headers, tenant, &record.id);
    SessionResponse { record, share_url, delete_token: None }
}

/// `upload`'s query parameters (each may come as an `X-Stacklens-…` header instead).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadParams {
    service: Option<String>,
    name: Option<String>,
    labels: Option<String>,
    profile_type: Option<String>,
    expires_in: Option<String>,
}

/// Stores a raw profile after core read it; the same bytes give the same session, and
/// so the same link. Each upload gets its own delete token, and any of them revokes
/// that link for everyone: a revocation never leaves the link open behind its
/// uploader's back (whoever uploads the same bytes could delete the session with their
/// credential anyway). With `expiresIn` the link answers 410 once its time is up, and
/// retention removes the bytes nothing else holds; uploads of the same bytes extend the
/// link, never shorten it: it expires at the latest time asked, and never once an
/// upload asked for no expiry (so no upload takes a lasting link away).
#[utoipa::path(post, path = "/api/v1/profiles", tag = "profiles", operation_id = "UploadProfile",
    params(
        ("service" = Option<String>, Query, description = "service name (or X-Stacklens-Service)"),
        ("profileType" = Option<String>, Query, description = "cpu|memory|alloc|block|mutex|goroutine|threadcreate; detected when absent"),
        ("labels" = Option<String>, Query, description = "k=v,k2=v2 (at most 64)"),
        ("name" = Option<String>, Query, description = "file name"),
        ("expiresIn" = Option<String>, Query, description = "the link expires after this long: 12h, 7d (s, m, h or d; from --min-expires-in, default 1h, to --max-expires-in, default 365d); or X-Stacklens-Expires-In. Never without it. Uploads of the same bytes share one link, which expires at the latest time any of them asked for, and never once one asked for none"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant, for admin keys and servers without credentials"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the raw profile (pprof, gzipped or not; Go texts and dumps; Firefox Profiler JSON)"),
    responses(
        (status = 201, description = "stored; deleteToken revokes the link", body = SessionResponse),
        (status = 200, description = "these bytes were stored before: the existing session (expiresAt as extended by this upload), with a delete token of this upload's own", body = SessionResponse),
        (status = 400, description = "InvalidProfile (core cannot read it), InvalidParameter (expiresIn among them), InvalidProfileType, BadBody", body = ErrorBody),
        (status = 401, description = "Unauthorized: no or an invalid credential", body = ErrorBody),
        (status = 403, description = "Forbidden (another tenant's credential), InsufficientScope (read-only)", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge (above --max-upload), InflatesTooLarge (above the inflate cap), OverMemoryBudget", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch: profileType does not match the profile", body = ErrorBody),
        (status = 503, description = "Busy (memory budget full; Retry-After), StorageUnavailable", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub async fn upload(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    Params(query): Params<UploadParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let service = param(query.service, &headers, "service").unwrap_or_default();
    check_name("service", &service, 128)?;
    let name = param(query.name, &headers, "name").unwrap_or_default();
    check_text("name", &name, 256)?;
    let labels = parse_labels(&param(query.labels, &headers, "labels").unwrap_or_default())?;
    let claimed = param(query.profile_type, &headers, "profileType").map(|t| parse_kind(&t)).transpose()?;
    let expires = expires_at(&state, query.expires_in, &headers)?;
    let (bytes, held) = read_held_body(&state, body).await?;
    let Stored { created, record, delete_token } = file_profile_held(
        &state,
        &tenant,
        bytes,
        held,
        Intake { service, name, labels, claimed, filed_by: Some(FiledBy::Upload), at: None, expires },
        &Holder::Upload,
    )
    .await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let response = SessionResponse { delete_token, ..respond(&state, &headers, &tenant, record) };
    Ok((status, Json(response)).into_response())
}

/// A session's record.
#[utoipa::path(get, path = "/api/v1/profiles/{id}", tag = "profiles", operation_id = "GetProfile",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "session id")),
    responses((status = 200, body = SessionResponse), (status = 404, description = "ProfileNotFound: unknown or deleted id", body = ErrorBody),
        (status = 410, description = "Expired: the link's expiresIn has passed", body = ErrorBody),
        (status = 422, description = "EncryptedBlob: the id of an encrypted blob (GET /api/v1/blobs/{id})", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn record(
    AxumState(state): AxumState<State>,
    Open(tenant): Open,
    PathParam(id): PathParam,
    headers: HeaderMap,
) -> Result<Json<SessionResponse>, ApiError> {
    let record = sessions::find(&state.store, &tenant, &id).await?;
    Ok(Json(respond(&state, &headers, &tenant, record)))
}

/// The exact bytes uploaded (`go tool pprof <this URL>` works).
#[utoipa::path(get, path = "/api/v1/profiles/{id}/raw", tag = "profiles", operation_id = "GetProfileRaw",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"), ("id" = String, Path, description = "session id")),
    responses((status = 200, description = "the raw profile", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "ProfileNotFound: unknown or deleted id", body = ErrorBody),
        (status = 410, description = "Expired: the link's expiresIn has passed", body = ErrorBody),
        (status = 422, description = "EncryptedBlob: the id of an encrypted blob (GET /api/v1/blobs/{id})", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn raw(
    AxumState(state): AxumState<State>,
    Open(tenant): Open,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let record = sessions::find(&state.store, &tenant, &id).await?;
    let bytes = sessions::raw(&state.store, &tenant, &record).await?;
    let file = if record.name.is_empty() {
        format!("{}.pb.gz", record.id)
    } else {
        // The last path component only, in printable ASCII without quotes.
        let base = record.name.rsplit(['/', '\\']).next().unwrap_or_default();
        base.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' { c } else { '_' }).collect()
    };
    Ok((
        [
            (header::CONTENT_TYPE, record.content_type.clone()),
            (header::ETAG, format!("\"{}\"", record.sha256)),
            // A session's bytes never change; private: a link is a capability.
            (header::CACHE_CONTROL, "private, max-age=31536000, immutable".to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{file}\"")),
        ],
        bytes,
    )
        .into_response())
}

/// Deletes a session: its link answers 404 at once; its bytes go once no baseline or
/// capture holds them. Authorized by a write credential or, without one, by the delete
/// token of any upload of the session's bytes (they share the link, so any of them
/// revokes it for everyone: see `UploadProfile`).
#[utoipa::path(delete, path = "/api/v1/profiles/{id}", tag = "profiles", operation_id = "DeleteProfile",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"),
        ("id" = String, Path, description = "session id"),
        ("X-Stacklens-Delete-Token" = Option<String>, Header, description = "an upload's deleteToken, in place of a credential (on a request without Authorization)"),
        ("deleteToken" = Option<String>, Query, description = "the same, as a query parameter")),
    responses((status = 204, description = "deleted"),
        (status = 401, description = "Unauthorized: neither a credential nor a delete token", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope, InvalidDeleteToken (not a delete token of this session)", body = ErrorBody),
        (status = 404, description = "ProfileNotFound", body = ErrorBody),
        (status = 410, description = "Expired: the link has expired already (retention removes it)", body = ErrorBody),
        (status = 422, description = "EncryptedBlob: the id of an encrypted blob (DELETE /api/v1/blobs/{id})", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn delete(
    AxumState(state): AxumState<State>,
    deleter: Deleter,
    PathParam(id): PathParam,
) -> Result<StatusCode, ApiError> {
    let tenant = deleter.tenant();
    let record = sessions::find(&state.store, tenant, &id).await?;
    match deleter.token() {
        Some(token) if !sessions::revocable_by(&state.store, tenant, &record.id, token).await? => {
            return Err(wrong_token())
        }
        Some(_) => index::revoke(&state.store, tenant, &record).await?,
        None => index::delete(&state.store, tenant, &record).await?,
    }
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileList {
    profiles: Vec<SessionResponse>,
    next_cursor: Option<String>,
}

/// `list`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    limit: Option<String>,
    profile_type: Option<String>,
    cursor: Option<String>,
    service: Option<String>,
}

/// Sessions, newest first.
#[utoipa::path(get, path = "/api/v1/profiles", tag = "profiles", operation_id = "ListProfiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = Option<String>, Query), ("profileType" = Option<String>, Query),
        ("limit" = Option<usize>, Query, description = "1..1000, default 50"),
        ("cursor" = Option<String>, Query, description = "nextCursor of the previous page")),
    responses((status = 200, body = ProfileList),
        (status = 400, description = "InvalidParameter, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn list(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    Params(query): Params<ListParams>,
    headers: HeaderMap,
) -> Result<Json<ProfileList>, ApiError> {
    let limit = match query.limit.map(|l| l.parse::<usize>()) {
        None => 50,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => return Err(ApiError::invalid("limit", "limit must be a number from 1 to 1000")),
    };
    let kind = query.profile_type.map(|t| parse_kind(&t)).transpose()?;
    let cursor = query.cursor.as_ref().filter(|c| !c.is_empty());
    if cursor.is_some_and(|c| !sessions::valid_cursor(c)) {
        return Err(ApiError::invalid("cursor", "cursor is not one this API returned"));
    }
    let service = query.service.as_deref();
    if let Some(service) = service {
        check_name("service", service, 128)?;
    }
    let (page, next_cursor) =
        sessions::list(&state.store, &tenant, service, kind, limit, cursor.map(String::as_str)).await?;
    let profiles = page.into_iter().map(|r| respond(&state, &headers, &tenant, r)).collect();
    Ok(Json(ProfileList { profiles, next_cursor }))
}
