//! The page's side of the backend: sharing a profile, baselines, and opening share
//! links (`#/s/{session}`, `#/b/{baseline}`, `#/diff/{a}/{b}`, `#/e/{blob}/{key}`, with
//! `?tenant=` for a tenant other than the default). Nothing here runs unless the user
//! asks for it.
//!
//! A server with credentials answers 401 to listings and writes: the page then asks
//! for an API key or token once and keeps it in this tab's sessionStorage (never in a
//! URL or a link). Share links open by their unguessable id and send no credential.

use gloo::net::http::{Request, RequestBuilder};
use serde::de::DeserializeOwned;
use stacklens_core::api::{
    BaselineList, BaselineResponse, BlobResponse, CreateBaseline, ProfileTypeName, SessionResponse,
};
use stacklens_core::ids::{BlobId, RecordId, SessionId};

use super::api_urls;

/// What a share link opens: one session or baseline, or a diff of two, or one
/// encrypted blob and its key.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub targets: Vec<String>,
    pub diff: bool,
    pub tenant: Option<String>,
    /// An encrypted link's key (its one target is the blob).
    pub key: Option<String>,
}

/// The share link in a URL hash, if it is one.
pub fn route(hash: &str) -> Option<Route> {
    let rest = hash.strip_prefix("#/")?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let tenant = query.split('&').find_map(|p| p.strip_prefix("tenant=")).filter(|t| !t.is_empty()).map(str::to_owned);
    let parts: Vec<&str> = path.split('/').collect();
    let (targets, diff, key) = match parts.as_slice() {
        ["s" | "b", id] => (vec![(*id).to_owned()], false, None),
        ["diff", a, b] => (vec![(*a).to_owned(), (*b).to_owned()], true, None),
        ["e", blob, key] => (vec![(*blob).to_owned()], false, Some((*key).to_owned())),
        _ => return None,
    };
    Some(Route { targets, diff, tenant, key })
}

/// Where this tab keeps the credential the user entered.
const TOKEN_KEY: &str = "stacklens-token";

fn session_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

fn stored_token() -> Option<String> {
    session_storage()?.get_item(TOKEN_KEY).ok()?.filter(|t| !t.is_empty())
}

fn forget_token() {
    if let Some(storage) = session_storage() {
        let _ = storage.remove_item(TOKEN_KEY);
    }
}

/// Asks for the server's API key or token; kept for this tab when given.
fn ask_token(why: &str) -> Option<String> {
    let question = format!(
        "{why}\n\nEnter an API key or token for this stacklens server (ask its operator for one). \
         It is kept in this tab only, never in a link."
    );
    let token = web_sys::window()?.prompt_with_message(&question).ok()??.trim().to_owned();
    if token.is_empty() {
        return None;
    }
    session_storage()?.set_item(TOKEN_KEY, &token).ok()?;
    Some(token)
}

/// A request for `tenant`, carrying `token` when there is one.
pub(crate) fn addressed(request: RequestBuilder, tenant: Option<&str>, token: Option<&str>) -> RequestBuilder {
    let request = match tenant {
        Some(t) => request.header("X-Tenant-ID", t),
        None => request,
    };
    match token {
        Some(t) => request.header("Authorization", &format!("Bearer {t}")),
        None => request,
    }
}

/// What the user should do about an error answer.
fn explain(status: u16, message: String) -> String {
    match status {
        401 => format!("{message}. This server needs an API key or token: click again and enter one"),
        403 => format!("{message}. The key or token entered does not allow this: click again to enter another"),
        _ => message,
    }
}

/// Sends the request `build` makes with the tab's token (`build` may leave it out); on
/// 401 asks for a token once and sends again. The answer's bytes, or the API's message
/// (or why the server was unreachable) with what to do about it.
pub(crate) async fn send(build: impl Fn(Option<&str>) -> Result<Request, gloo::net::Error>) -> Result<Vec<u8>, String> {
    let mut token = stored_token();
    let mut asked = false;
    loop {
        let response = build(token.as_deref()).map_err(unreachable)?.send().await.map_err(unreachable)?;
        let status = response.status();
        let bytes = response.binary().await.map_err(unreachable)?;
        if (200..300).contains(&status) {
            return Ok(bytes);
        }
        let message = api_message(status, &bytes);
        if status == 401 || status == 403 {
            // A rejected token is of no more use; the next click asks again.
            forget_token();
        }
        if status == 401 && !asked {
            asked = true;
            if let Some(t) = ask_token(&message) {
                token = Some(t);
                continue;
            }
        }
        return Err(explain(status, message));
    }
}

fn unreachable(e: gloo::net::Error) -> String {
    format!("the stacklens server cannot be reached ({e}); this needs `stacklens serve`")
}

/// The API's message in an error answer, or its status.
fn api_message(status: u16, bytes: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("the server answered {status}"))
}

/// [`send`], reading the answer as JSON.
pub(crate) async fn call<T: DeserializeOwned>(
    build: impl Fn(Option<&str>) -> Result<Request, gloo::net::Error>,
) -> Result<T, String> {
    let bytes = send(build).await?;
    serde_json::from_slice(&bytes).map_err(|e| format!("unexpected answer from the server: {e}"))
}

/// Uploads a profile's bytes; the same bytes always give the same session. With
/// `expires_in` (`1h`, `7d`) the link stops working after that long.
pub async fn upload(
    source: &web_sys::Blob,
    name: &str,
    expires_in: Option<&str>,
    tenant: Option<&str>,
) -> Result<SessionResponse, String> {
    let url = api_urls::profile_upload(name, expires_in);
    call(|token| {
        addressed(Request::post(&url), tenant, token)
            .header("Content-Type", "application/octet-stream")
            .body(source.clone())
    })
    .await
}

/// Uploads sealed bytes, which the server keeps as they are and never reads.
pub async fn upload_blob(
    sealed: &web_sys::Blob,
    expires_in: Option<&str>,
    tenant: Option<&str>,
) -> Result<BlobResponse, String> {
    let url = api_urls::blob_upload(expires_in);
    call(|token| {
        addressed(Request::post(&url), tenant, token)
            .header("Content-Type", "application/octet-stream")
            .body(sealed.clone())
    })
    .await
}

/// A blob's bytes; the link is the capability, so no credential is sent.
pub async fn blob(id: &str, tenant: Option<&str>) -> Result<Vec<u8>, String> {
    let url = api_urls::blob(id);
    send(|_| addressed(Request::get(&url), tenant, None).build()).await
}

/// What a delete token revokes: an uploaded session's link or an encrypted blob.
#[derive(Clone, Debug, PartialEq)]
pub enum Shared {
    Session(SessionId),
    Blob(BlobId),
}

/// Revokes a shared link with the delete token its upload answered (no credential:
/// the token is the right to delete).
pub async fn delete(shared: &Shared, delete_token: &str, tenant: Option<&str>) -> Result<(), String> {
    let url = match shared {
        Shared::Session(id) => api_urls::profile(id),
        Shared::Blob(id) => api_urls::blob(id),
    };
    let response = addressed(Request::delete(&url), tenant, None)
        .header("X-Stacklens-Delete-Token", delete_token)
        .send()
        .await
        .map_err(unreachable)?;
    if response.ok() {
        return Ok(());
    }
    let bytes = response.binary().await.map_err(unreachable)?;
    Err(api_message(response.status(), &bytes))
}

pub async fn save_baseline(
    session: &SessionResponse,
    label: &str,
    description: &str,
    tags: Vec<String>,
    tenant: Option<&str>,
) -> Result<BaselineResponse, String> {
    let body = CreateBaseline {
        label: label.to_owned(),
        session_id: session.record.id.to_string(),
        profile_type: ProfileTypeName(session.record.profile_type.as_str().to_owned()),
        description: description.to_owned(),
        top_functions: Vec::new(),
        tags,
    };
    call(|token| addressed(Request::post(&api_urls::baselines(None, None)), tenant, token).json(&body)).await
}

/// Baselines, newest first; of one profile type and only the latest ones when asked.
pub async fn baselines(
    profile_type: Option<&str>,
    latest: bool,
    tenant: Option<&str>,
) -> Result<Vec<BaselineResponse>, String> {
    let url = api_urls::baselines(profile_type, Some(latest));
    call::<BaselineList>(|token| addressed(Request::get(&url), tenant, token).build()).await.map(|l| l.baselines)
}

/// A share link target (session or baseline id) as a tab name and its raw bytes' URL;
/// the link is the capability, so no credential is sent.
pub async fn resolve(target: &str, tenant: Option<&str>) -> Result<(String, String), String> {
    if let Some(RecordId::Baseline(_)) = RecordId::parse(target) {
        let url = api_urls::baseline(target);
        let b: BaselineResponse = call(|_| addressed(Request::get(&url), tenant, None).build()).await?;
        Ok((format!("baseline {}", b.record.baseline_label), api_urls::profile_raw(&b.record.session_id, tenant)))
    } else {
        let url = api_urls::profile(target);
        let s: SessionResponse = call(|_| addressed(Request::get(&url), tenant, None).build()).await?;
        let name = if s.record.name.is_empty() { s.record.id.to_string() } else { s.record.name };
        Ok((name, api_urls::profile_raw(&s.record.id, tenant)))
    }
}
