//! Encrypted blobs: the page encrypts a profile (AES-256-GCM, WebCrypto) and uploads
//! only the ciphertext; its link, `/#/e/{id}/{key}`, keeps the key in the fragment, which
//! browsers never send. The server stores the bytes as they came, within `--max-upload`,
//! and never reads them: no parse, no inflate, and no analysis (a blob's id given to one
//! answers 422 EncryptedBlob). Uploads follow the rules of profile uploads (a write
//! credential for the tenant), reads those of share links (the id is the capability).

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use stacklens_core::api::BlobResponse;

use super::access::{wrong_token, Deleter, Open, Writer};
use super::request::{blob_url, expires_at, read_held_body, Params, PathParam};
use super::{ApiError, ErrorBody};
use crate::records::blobs;
use crate::state::State;
use serde::Deserialize;

/// `upload`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadParams {
    expires_in: Option<String>,
}

/// Stores an encrypted blob exactly as sent, never reading it; each upload is a new blob
/// with its own id and delete token.
#[utoipa::path(post, path = "/api/v1/blobs", tag = "blobs", operation_id = "UploadBlob",
    params(
        ("expiresIn" = Option<String>, Query, description = "the link expires after this long: 12h, 7d (s, m, h or d; from --min-expires-in, default 1h, to --max-expires-in, default 365d); or X-Stacklens-Expires-In. Never without it"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant, for admin keys and servers without credentials"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the encrypted bytes (at most --max-upload), kept as sent"),
    responses(
        (status = 201, description = "stored; deleteToken revokes the link", body = BlobResponse),
        (status = 400, description = "InvalidParameter (expiresIn), BadBody", body = ErrorBody),
        (status = 401, description = "Unauthorized: no or an invalid credential", body = ErrorBody),
        (status = 403, description = "Forbidden (another tenant's credential), InsufficientScope (read-only)", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge (above --max-upload), OverMemoryBudget", body = ErrorBody),
        (status = 503, description = "Busy (memory budget full; Retry-After), StorageUnavailable", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub async fn upload(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    Params(query): Params<UploadParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<BlobResponse>), ApiError> {
    let expires = expires_at(&state, query.expires_in, &headers)?;
    // Counted in the memory budget while held: its size is all that is measured.
    let (bytes, _held) = read_held_body(&state, body).await?;
    let (record, delete_token) = blobs::store(&state.store, &tenant, bytes, expires).await?;
    let response = BlobResponse {
        url: blob_url(&state, &headers, &tenant, &record.id),
        id: record.id,
        delete_token,
        size: record.size,
        created_at: record.created_at,
        expires_at: record.expires_at,
    };
    Ok((StatusCode::CREATED, Json(response)))
}

/// A blob's bytes, exactly as uploaded (the page decrypts them with the key in its link).
#[utoipa::path(get, path = "/api/v1/blobs/{id}", tag = "blobs", operation_id = "GetBlob",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"),
        ("id" = String, Path, description = "blob id")),
    responses((status = 200, description = "the encrypted bytes (Cache-Control: private, X-Content-Type-Options: nosniff)", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "BlobNotFound: unknown or deleted id", body = ErrorBody),
        (status = 410, description = "Expired: the link's expiresIn has passed", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn get(
    AxumState(state): AxumState<State>,
    Open(tenant): Open,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let record = blobs::find(&state.store, &tenant, &id).await?;
    let bytes = blobs::bytes(&state.store, &tenant, &record).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            // A link is a capability, and it can be revoked or expire: no shared caches.
            (header::CACHE_CONTROL, "private".to_owned()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}.bin\"", record.id)),
        ],
        bytes,
    )
        .into_response())
}

/// Deletes a blob: its link answers 404 at once and its bytes go. Authorized by a write
/// credential or, without one, by the blob's delete token.
#[utoipa::path(delete, path = "/api/v1/blobs/{id}", tag = "blobs", operation_id = "DeleteBlob",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\"); or a `tenant` query parameter"),
        ("id" = String, Path, description = "blob id"),
        ("X-Stacklens-Delete-Token" = Option<String>, Header, description = "the upload's deleteToken, in place of a credential (on a request without Authorization)"),
        ("deleteToken" = Option<String>, Query, description = "the same, as a query parameter")),
    responses((status = 204, description = "deleted"),
        (status = 401, description = "Unauthorized: neither a credential nor a delete token", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope, InvalidDeleteToken (not this blob's delete token)", body = ErrorBody),
        (status = 404, description = "BlobNotFound", body = ErrorBody),
        (status = 410, description = "Expired: the link has expired already (retention removes it)", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn delete(
    AxumState(state): AxumState<State>,
    deleter: Deleter,
    PathParam(id): PathParam,
) -> Result<StatusCode, ApiError> {
    let tenant = deleter.tenant();
    let record = blobs::find(&state.store, tenant, &id).await?;
    if deleter.token().is_some_and(|token| !blobs::revocable_by(&record, token)) {
        return Err(wrong_token());
    }
    blobs::delete(&state.store, tenant, &record).await?;
    Ok(StatusCode::NO_CONTENT)
}
