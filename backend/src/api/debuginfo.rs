//! Debug files: uploads by build id (`PUT /api/v1/debuginfo/{buildId}`), and the
//! debuginfod protocol over the same store (`GET /buildid/{id}/debuginfo` and
//! `/executable`), so `debuginfod-find`, gdb and perf can use stacklens as their
//! debuginfod, and stacklens can use upstream ones (`serve --debuginfod`).

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use stacklens_core::symbols::ObjectFile;
use utoipa::ToSchema;

use super::access::{Reader, Writer};
use super::request::{off_thread, read_held_body_within, PathParam};
use super::{ApiError, ErrorBody};
use crate::budget::Reservation;
use crate::records::debuginfo::{self, Artifact, BuildId};
use crate::state::State;
use crate::symbols::{self, LookupError};

/// What an upload stored.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DebuginfoStored {
    build_id: String,
    /// `executable` (the file has loaded code), `debuginfo` (it has DWARF), or both.
    artifacts: Vec<String>,
    size: u64,
}

impl From<LookupError> for ApiError {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Record(e) => e.into(),
            LookupError::Budget(e) => e.into(),
            LookupError::Stopped(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", e),
        }
    }
}

fn build_id(text: &str) -> Result<BuildId, ApiError> {
    BuildId::parse(text).ok_or_else(|| {
        ApiError::invalid("buildId", format!("'{text}' is not a build id (2 to 128 hex digits, whole bytes)"))
    })
}

/// Stores an ELF or Mach-O binary or debug file under its build id, which must be the
/// file's own. The server then symbolizes stored profiles that name it, and serves it
/// over the debuginfod protocol.
#[utoipa::path(put, path = "/api/v1/debuginfo/{buildId}", tag = "debuginfo", operation_id = "UploadDebuginfo",
    params(("buildId" = String, Path, description = "the file's GNU build id (Mach-O: its UUID), in hex"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant, for admin keys and servers without credentials")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "the binary or debug file (at most --max-debuginfo)"),
    responses((status = 201, description = "stored (a build id's first file stays: a second upload of it stores nothing new)", body = DebuginfoStored),
        (status = 400, description = "InvalidParameter (buildId), NotAnObjectFile (not ELF or Mach-O, or corrupt)", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge (above --max-debuginfo), OverMemoryBudget", body = ErrorBody),
        (status = 422, description = "BuildIdMismatch: the file's build id is not the path's", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn upload(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    PathParam(id): PathParam,
    body: Body,
) -> Result<(StatusCode, Json<DebuginfoStored>), ApiError> {
    let id = build_id(&id)?;
    let (bytes, mut held) = read_held_body_within(&state, body, state.max_debuginfo).await?;
    // Reading the DWARF copies its sections: count them as much again as the file.
    state.budget.hold_to(&mut held, 2 * bytes.len() as u64).await?;
    let file = bytes.clone();
    let parsed = off_thread(move || ObjectFile::parse(&*file)).await?;
    let file = parsed.map_err(|e| {
        ApiError::bad_request("NotAnObjectFile", format!("the upload is not a readable binary or debug file: {e}"))
    })?;
    let found = file.build_id_hex();
    if found.as_deref() != Some(id.as_str()) {
        let found = found.unwrap_or_else(|| "none".to_owned());
        return Err(ApiError::unprocessable(
            "BuildIdMismatch",
            format!("the file's build id is {found}, not the {id} of the path"),
        )
        .details(json!({ "buildId": id.as_str(), "fileBuildId": found })));
    }
    let mut artifacts = Vec::new();
    if file.has_code() {
        artifacts.push(Artifact::Executable);
    }
    if file.has_dwarf() || (file.has_symbols() && !file.has_code()) {
        artifacts.push(Artifact::Debuginfo);
    }
    let breakpad_id = file.breakpad_id();
    for &artifact in &artifacts {
        debuginfo::put(&state.store, &tenant, (&id, breakpad_id.as_deref()), artifact, bytes.clone()).await?;
    }
    let stored = DebuginfoStored {
        build_id: id.to_string(),
        artifacts: artifacts.iter().map(|a| a.name().to_owned()).collect(),
        size: bytes.len() as u64,
    };
    Ok((StatusCode::CREATED, Json(stored)))
}

/// debuginfod's `GET /buildid/{id}/{artifact}`: the stored file, else an upstream's.
#[utoipa::path(get, path = "/buildid/{buildId}/{artifact}", tag = "debuginfo", operation_id = "Debuginfod",
    params(("buildId" = String, Path, description = "GNU build id in hex"),
        ("artifact" = String, Path, description = "executable or debuginfo"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant (default: \"default\")")),
    responses((status = 200, description = "the file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, description = "InvalidParameter (buildId)", body = ErrorBody),
        (status = 404, description = "DebuginfoNotFound: neither stored nor at an upstream (source and section artifacts are not served)", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn artifact(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    PathParam((id, artifact)): PathParam<(String, String)>,
) -> Result<Response, ApiError> {
    let id = build_id(&id)?;
    let not_found =
        || ApiError::new(StatusCode::NOT_FOUND, "DebuginfoNotFound", format!("no {artifact} for build id {id}"));
    let Some(kind) = Artifact::parse(&artifact) else { return Err(not_found()) };
    let mut held = Reservation::default();
    let bytes = symbols::find(&state, &tenant, &id, kind, &mut held).await?.ok_or_else(not_found)?;
    let size = bytes.len().to_string();
    let headers = [
        (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
        (header::HeaderName::from_static("x-debuginfod-size"), size),
    ];
    Ok((headers, bytes).into_response())
}
