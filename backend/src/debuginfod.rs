//! debuginfod as a client: fetching a build id's executable or debuginfo from a
//! server (elfutils' protocol, `GET {url}/buildid/{id}/{artifact}`), bounded in time
//! and size, checked to be the file of that build id. The CLI's `--debuginfod` and the
//! server's upstreams (`serve --debuginfod`, looked up in `symbols.rs`) both use it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use stacklens_core::symbols::ObjectFile;

use crate::budget::{Budget, BudgetError, Reservation};
use crate::records::debuginfo::{Artifact, BuildId};

/// Why an upstream could not answer. A 404 is not one: it is an answer (no file).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: no answer within {seconds} s")]
    Timeout { url: String, seconds: u64 },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: the file is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("{url}: {reason}")]
    Transport { url: String, reason: String },
    #[error("{url}: the file's build id is {found}, not the {wanted} asked for")]
    WrongFile { url: String, wanted: String, found: String },
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// How long one request may take and how much it may bring.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// For one whole request, body included.
    pub timeout: Duration,
    /// Largest file accepted.
    pub limit: usize,
}

/// The debuginfod servers the server asks (`serve --debuginfod`), and within what.
#[derive(Clone, Debug)]
pub struct Upstreams {
    pub urls: Vec<String>,
    pub bounds: Bounds,
}

/// `artifact` of `id` from the debuginfod at `base`, with its Breakpad id: `None` when
/// it has none (404). On the server, `held` grows in its budget with the body, so the
/// memory budget counts a file while it arrives.
pub async fn fetch(
    http: &reqwest::Client,
    base: &str,
    (id, artifact): (&BuildId, Artifact),
    bounds: Bounds,
    mut held: Option<(&Budget, &mut Reservation)>,
) -> Result<Option<(Bytes, Option<String>)>, FetchError> {
    let url = format!("{}/buildid/{id}/{artifact}", base.trim_end_matches('/'));
    let timeout = || FetchError::Timeout { url: url.clone(), seconds: bounds.timeout.as_secs() };
    let transport = |e: reqwest::Error| FetchError::Transport { url: url.clone(), reason: e.to_string() };
    let deadline = tokio::time::Instant::now() + bounds.timeout;
    let mut response =
        tokio::time::timeout_at(deadline, http.get(&url).send()).await.map_err(|_| timeout())?.map_err(transport)?;
    match response.status().as_u16() {
        200 => {}
        404 => return Ok(None),
        status => return Err(FetchError::Status { url, status }),
    }
    let too_large = || FetchError::TooLarge { url: url.clone(), limit: bounds.limit };
    if response.content_length().is_some_and(|n| n > bounds.limit as u64) {
        return Err(too_large());
    }
    let mut body = BytesMut::new();
    while let Some(chunk) =
        tokio::time::timeout_at(deadline, response.chunk()).await.map_err(|_| timeout())?.map_err(transport)?
    {
        if body.len() + chunk.len() > bounds.limit {
            return Err(too_large());
        }
        if let Some((budget, held)) = held.as_mut() {
            budget.hold_to(held, (body.len() + chunk.len()) as u64).await?;
        }
        body.extend_from_slice(&chunk);
    }
    let bytes = body.freeze();
    let file = ObjectFile::parse(&*bytes).ok();
    match file.as_ref().and_then(ObjectFile::build_id_hex) {
        Some(found) if found == id.as_str() => Ok(Some((bytes, file.and_then(|f| f.breakpad_id())))),
        found => Err(FetchError::WrongFile {
            url,
            wanted: id.to_string(),
            found: found.unwrap_or_else(|| "absent".to_owned()),
        }),
    }
}
