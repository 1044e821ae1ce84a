//! The profiles `stacklens open` was given, as read at start; nothing is stored.

use axum::extract::State as AxumState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::access::Reader;
use super::request::PathParam;
use super::{ApiError, ErrorBody};
use crate::state::State;

/// A profile given to `stacklens open`, by its place and name.
///
/// The name is what the page's tab shows; a plain `serve` has no such profiles. They
/// belong to no tenant; a credential is checked as for any read (`open` has none).
#[utoipa::path(get, path = "/api/v1/opened/{index}/{name}", tag = "opened", operation_id = "GetOpenedProfile",
    params(("index" = usize, Path, description = "its place among the profiles given, from 0"),
        ("name" = String, Path, description = "its name, as in the address `stacklens open` prints")),
    responses((status = 200, description = "the raw profile", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "OpenedProfileNotFound: no profile with that index and name", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn raw(
    AxumState(state): AxumState<State>,
    Reader(_tenant): Reader,
    PathParam((index, name)): PathParam<(usize, String)>,
) -> Result<Response, ApiError> {
    let profile = state.opened.get(index, &name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "OpenedProfileNotFound",
            format!("no opened profile {index} named '{name}'"),
        )
        .details(json!({ "index": index, "name": name }))
    })?;
    // Another `open` on this port later may serve other bytes at the same address.
    let headers = [(header::CONTENT_TYPE, "application/octet-stream"), (header::CACHE_CONTROL, "no-store")];
    Ok((headers, profile.bytes.clone()).into_response())
}
