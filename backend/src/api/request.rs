//! Reading requests: bodies within limits, JSON, parameters from the query or
//! `X-Stacklens-…` headers, and the page links responses carry.

use std::collections::BTreeMap;
use std::io::Read;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use bytes::Bytes;
use serde_json::json;
use stacklens_core::ProfileKind;

use super::ApiError;
use crate::budget::{Budget, Reservation};
use crate::lifetime;
use crate::records::{now_millis, Tenant};
use crate::state::AppState;

/// Largest JSON request body (JSON requests are small; profiles are raw bodies).
pub const MAX_JSON: usize = 1 << 20;
/// Most labels one profile may carry.
pub const MAX_LABELS: usize = 64;

/// How much of a refused body is still read (and dropped) before the 413 is sent: a
/// client answered while it is still sending would otherwise see its connection reset
/// instead of the answer.
const DRAIN: u64 = 16 << 20;

/// Room taken for a body before its first bytes arrive (at most its announced
/// length): the body's buffer, and what it holds in the memory budget, then double as
/// it fills, so a body announced large but sent slowly holds only what has arrived.
const READ_AHEAD: usize = 1 << 20;

/// A body must arrive at this rate on average (bytes per second), after
/// [`BODY_GRACE`]: a slower one is answered 408, so it holds neither a connection nor
/// memory for long (`--request-timeout-secs` bounds the whole request as well).
pub const MIN_BODY_RATE: u64 = 64 << 10;
/// How long a body may take before [`MIN_BODY_RATE`] applies.
pub const BODY_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A profile's body, counted against the memory budget as it is read (its buffer, a
/// read-ahead of at most [`READ_AHEAD`] past what has arrived, up to `--max-upload`);
/// it stays counted by the reservation while it waits for its parse and until it is
/// stored.
pub async fn read_held_body(state: &AppState, body: Body) -> Result<(Bytes, Reservation), ApiError> {
    read_held_body_within(state, body, state.max_upload).await
}

/// [`read_held_body`] with another limit than `--max-upload` (debug files).
pub async fn read_held_body_within(
    state: &AppState,
    body: Body,
    limit: usize,
) -> Result<(Bytes, Reservation), ApiError> {
    let mut held = Reservation::default();
    let bytes = read_within(body, limit, Some((&state.budget, &mut held))).await?;
    Ok((bytes, held))
}

/// 415 for a body whose media type or encoding a route does not take.
pub fn unsupported(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", message)
}

/// A request body read within `--max-upload` and the memory budget, inflated when
/// `Content-Encoding: gzip` says so (held at the size its trailer gives, and refused
/// past it or past `--max-inflated`); with the memory that holds it.
pub async fn read_encoded_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Bytes, Reservation), ApiError> {
    let encoding = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("");
    let gzip = match encoding.trim().to_ascii_lowercase().as_str() {
        "" | "identity" => false,
        "gzip" => true,
        other => return Err(unsupported(format!("Content-Encoding '{other}' is not gzip or identity"))),
    };
    let (bytes, held) = read_held_body(state, body).await?;
    if !gzip {
        return Ok((bytes, held));
    }
    inflate_held(state, bytes).await
}

/// gzip `bytes` inflated within the memory budget, held instead of them.
pub async fn inflate_held(state: &AppState, bytes: Bytes) -> Result<(Bytes, Reservation), ApiError> {
    if !stacklens_core::import::is_gzip(&bytes) {
        return Err(ApiError::bad_request("BadBody", "the body is said to be gzip, but it is not"));
    }
    let cap = state.budget.inflate_cap;
    let size = gzip_size(&bytes);
    if size > cap {
        return Err(crate::budget::BudgetError::InflatesTooLarge { cap }.into());
    }
    // The inflated bytes are held instead of the compressed ones; the trailer's size
    // bounds the inflation, so it cannot understate them.
    let held = state.budget.hold(size).await?;
    let inflated = off_thread(move || inflate(&bytes, size)).await??;
    let bytes = inflated.ok_or_else(|| {
        ApiError::bad_request("BadBody", format!("the gzip body inflates past the {size} bytes its trailer gives"))
    })?;
    Ok((bytes, held))
}

/// A gzip body inflated, or `None` when it inflates past `limit` bytes.
fn inflate(bytes: &[u8], limit: u64) -> Result<Option<Bytes>, ApiError> {
    let mut inflated = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(limit.saturating_add(1))
        .read_to_end(&mut inflated)
        .map_err(|e| ApiError::bad_request("BadBody", format!("cannot inflate the gzip body: {e}")))?;
    Ok((inflated.len() as u64 <= limit).then(|| inflated.into()))
}

/// The size a gzip body gives in its trailer (of its last member, modulo 2^32): what
/// is held in the memory budget for it before it is inflated, and the most it may
/// inflate to.
fn gzip_size(bytes: &[u8]) -> u64 {
    bytes.len().checked_sub(4).map_or(0, |at| u32::from_le_bytes(bytes[at..].try_into().unwrap()) as u64)
}

/// Runs CPU-heavy core work off the async threads.
pub async fn off_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", format!("analysis failed: {e}")))
}

/// Reads a request body, refusing more than `limit` bytes with 413, and a body slower
/// than [`MIN_BODY_RATE`] with 408. A body announced over `limit` is refused without
/// being kept.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    read_within(body, limit, None).await
}

/// [`read_body`], growing `held` (if any) to the buffer's size before the buffer grows.
async fn read_within(
    body: Body,
    limit: usize,
    mut held: Option<(&Budget, &mut Reservation)>,
) -> Result<Bytes, ApiError> {
    use axum::body::HttpBody;
    let announced = HttpBody::size_hint(&body).exact();
    let mut stream = Paced::new(body);
    let mut bytes = bytes::BytesMut::new();
    if announced.is_none_or(|n| n <= limit as u64) {
        // Never past the announced length: a body that keeps to it is not copied once
        // it has grown to it.
        let most = announced.map_or(limit, |n| n as usize).max(1);
        loop {
            match stream.next().await? {
                None => return Ok(bytes.freeze()),
                Some(chunk) => {
                    let len = bytes.len() + chunk.len();
                    if len > limit {
                        break;
                    }
                    if len > bytes.capacity() {
                        let grown = len.max(bytes.capacity() * 2).max(READ_AHEAD).min(most.max(len));
                        if let Some((budget, held)) = &mut held {
                            // Time waiting for memory is the server's, not the client's.
                            let waiting = tokio::time::Instant::now();
                            budget.hold_to(held, grown as u64).await?;
                            stream.started += waiting.elapsed();
                        }
                        bytes.reserve(grown - bytes.len());
                    }
                    bytes.extend_from_slice(&chunk);
                }
            }
        }
    }
    drop(bytes);
    let mut drained = 0u64;
    while drained < DRAIN {
        match stream.next().await {
            Ok(Some(chunk)) => drained += chunk.len() as u64,
            _ => break,
        }
    }
    Err(ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "PayloadTooLarge",
        format!("the body is larger than {limit} bytes"),
    )
    .details(json!({ "limit": limit })))
}

/// A body's pieces as they arrive, each awaited until the body's minimum-rate deadline.
struct Paced {
    stream: axum::body::BodyDataStream,
    started: tokio::time::Instant,
    received: u64,
}

impl Paced {
    fn new(body: Body) -> Self {
        Paced { stream: body.into_data_stream(), started: tokio::time::Instant::now(), received: 0 }
    }

    async fn next(&mut self) -> Result<Option<Bytes>, ApiError> {
        use futures::StreamExt;
        let due = BODY_GRACE + std::time::Duration::from_secs_f64(self.received as f64 / MIN_BODY_RATE as f64);
        match tokio::time::timeout_at(self.started + due, self.stream.next()).await {
            Err(_) => Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "BodyTooSlow",
                format!(
                    "the body arrived slower than {MIN_BODY_RATE} bytes a second after the first {} s ({} bytes in {} s)",
                    BODY_GRACE.as_secs(),
                    self.received,
                    due.as_secs()
                ),
            )
            .details(json!({ "minBytesPerSecond": MIN_BODY_RATE, "graceSeconds": BODY_GRACE.as_secs(), "received": self.received }))),
            Ok(None) => Ok(None),
            Ok(Some(chunk)) => {
                let chunk =
                    chunk.map_err(|e| ApiError::bad_request("BadBody", format!("cannot read the request body: {e}")))?;
                self.received += chunk.len() as u64;
                Ok(Some(chunk))
            }
        }
    }
}

/// Reads a JSON request's body; 415 unless it says it is JSON (a page on another site can
/// send `text/plain` without asking first, never `application/json`), 400 when it is not
/// `what` (serde_json also refuses nesting deeper than 128 and duplicate fields).
pub async fn read_json<T: serde::de::DeserializeOwned>(request: Request, what: &str) -> Result<T, ApiError> {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if essence != "application/json" && !(essence.starts_with("application/") && essence.ends_with("+json")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("{what} is JSON: send it with Content-Type: application/json"),
        )
        .details(json!({ "contentType": content_type })));
    }
    let body = read_body(request.into_body(), MAX_JSON).await?;
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("InvalidRequest", format!("not {what}: {e}")))
}

/// A parameter from the query string, or else from an `X-Stacklens-…` header, named as
/// the parameter or with its words split by dashes: `expiresIn` is `X-Stacklens-ExpiresIn`
/// or `X-Stacklens-Expires-In`. A header that is not UTF-8 reads with replacement
/// characters, for the parameter's own check to refuse (never as if it were absent).
pub fn param(given: Option<String>, headers: &HeaderMap, name: &str) -> Option<String> {
    given.or_else(|| {
        let dashed: String = name
            .chars()
            .flat_map(|c| if c.is_ascii_uppercase() { vec!['-', c.to_ascii_lowercase()] } else { vec![c] })
            .collect();
        [name.to_ascii_lowercase(), dashed]
            .iter()
            .find_map(|header| headers.get(format!("x-stacklens-{header}")))
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    })
}

/// When a link given `expiresIn` (`12h`, `7d`; the query or `X-Stacklens-Expires-In`)
/// expires, in milliseconds since the epoch; `None` without one (it never does).
pub fn expires_at(state: &AppState, given: Option<String>, headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(text) = param(given, headers, "expiresIn") else { return Ok(None) };
    let limits = state.lifetimes;
    let lifetime = limits.check(&text).map_err(|reason| {
        ApiError::bad_request("InvalidParameter", format!("expiresIn: {reason}")).details(json!({
            "field": "expiresIn",
            "min": lifetime::format(limits.min),
            "max": lifetime::format(limits.max),
        }))
    })?;
    Ok(Some(now_millis().saturating_add(lifetime.as_millis() as u64)))
}

/// A query parameter that must be present and non-empty.
pub fn required<'a>(value: &'a Option<String>, name: &str) -> Result<&'a str, ApiError> {
    value.as_deref().filter(|v| !v.is_empty()).ok_or_else(|| ApiError::invalid(name, format!("{name} is required")))
}

/// Free text (service, name, label) must be short and printable.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(ApiError::invalid(field, format!("{field} must be at most {max} printable characters")));
    }
    Ok(())
}

/// `value` with the characters that Unicode normalisation (NFKC) turns into full stops
/// replaced by them, so `\u{2024}\u{2024}` cannot pass for something other than `..`.
fn dots_normalised(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\u{2024}' | '\u{FE52}' | '\u{FF0E}' => out.push('.'),
            '\u{2025}' => out.push_str(".."),
            c => out.push(c),
        }
    }
    out
}

/// A name that stands for a thing, such as a service: free text, but nothing that
/// could be read as a path (no `/` or `\`, not `.` or `..`, Unicode look-alikes of
/// the dot included).
pub fn check_name(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    check_text(field, value, max)?;
    let dots = dots_normalised(value);
    if value.contains(['/', '\\', '\u{FF0F}', '\u{FF3C}']) || dots == "." || dots == ".." {
        return Err(ApiError::invalid(field, format!("{field} must not contain '/' or '\\' or be '.' or '..'")));
    }
    Ok(())
}

/// A handler's query parameters, read into `T`: a struct of `Option<String>` fields
/// (camelCase on the wire) that the handler parses itself, so a bad value is answered
/// with the API's JSON error naming the field. A repeated parameter counts its last
/// value, and parameters `T` does not name (such as `tenant`) are ignored.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let pairs: serde_json::Map<String, serde_json::Value> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
            .collect();
        serde_json::from_value(serde_json::Value::Object(pairs))
            .map(Params)
            .map_err(|e| ApiError::bad_request("InvalidParameter", e.to_string()))
    }
}

/// Path parameters (an id or a name; a tuple for several); one that is not UTF-8, or
/// not of its type, is refused with the API's own 400, not axum's plain-text one.
pub struct PathParam<T = String>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for PathParam<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParam(value)),
            Err(e) => Err(ApiError::bad_request("InvalidParameter", e.body_text())),
        }
    }
}

/// `k=v,k2=v2`, at most [`MAX_LABELS`].
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ApiError::invalid("labels", format!("label '{pair}' is not key=value")));
        };
        check_text("labels", k, 128)?;
        check_text("labels", v, 512)?;
        labels.insert(k.trim().to_owned(), v.trim().to_owned());
        if labels.len() > MAX_LABELS {
            return Err(ApiError::invalid("labels", format!("at most {MAX_LABELS} labels")));
        }
    }
    Ok(labels)
}

pub fn parse_kind(text: &str) -> Result<ProfileKind, ApiError> {
    ProfileKind::parse(text).ok_or_else(|| {
        ApiError::bad_request("InvalidProfileType", format!("unknown profileType '{text}'"))
            .details(json!({ "profileType": text, "known": ProfileKind::ALL.map(|k| k.as_str()) }))
    })
}

/// The page's address for share links: `--public-url`, else the request's Host when
/// it is a plain `host[:port]` (a Host carrying anything else, such as `"`, `<`, `@`
/// or a path, must not end up in a link), else 127.0.0.1:8080.
fn public_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers.get("host").and_then(|h| h.to_str().ok()).and_then(plain_authority);
    format!("http://{}", host.as_deref().unwrap_or("127.0.0.1:8080"))
}

/// `name`, `name:port`, `1.2.3.4:port` or `[v6]:port` in its normal form (lower case,
/// no default port), or `None` for anything else.
fn plain_authority(host: &str) -> Option<String> {
    let url = url::Url::parse(&format!("http://{host}/")).ok()?;
    let name = url.host_str()?;
    let with_port = format!("{name}:{}", url.port_or_known_default()?);
    let plain = url.username().is_empty() && (host.eq_ignore_ascii_case(name) || host.eq_ignore_ascii_case(&with_port));
    plain.then(|| url.port().map_or_else(|| name.to_owned(), |port| format!("{name}:{port}")))
}

/// `url`, carrying the tenant when it is not the default one.
fn for_tenant(url: String, tenant: &Tenant) -> String {
    if tenant.is_default() {
        url
    } else {
        format!("{url}?tenant={}", tenant.0)
    }
}

/// A share link to a page route, carrying the tenant when it is not the default one.
pub fn share_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, route: &str) -> String {
    for_tenant(format!("{}/#/{route}", public_base(state, headers)), tenant)
}

/// Where a blob's bytes are read, carrying the tenant when it is not the default one.
pub fn blob_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, blob: &str) -> String {
    for_tenant(format!("{}/api/v1/blobs/{blob}", public_base(state, headers)), tenant)
}

/// The share link of a session's flame graph.
pub fn session_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, session: &str) -> String {
    share_url(state, headers, tenant, &format!("s/{session}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_inflate_within_the_size_their_trailer_gives() {
        use std::io::Write;
        let plain = b"a body of some length, a body of some length".repeat(10);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        let gzipped = Bytes::from(gz.finish().unwrap());
        assert_eq!(gzip_size(&gzipped), plain.len() as u64);
        assert_eq!(inflate(&gzipped, plain.len() as u64).unwrap().unwrap(), plain);
        // A trailer that understates the size: refused once the inflation passes it.
        assert_eq!(inflate(&gzipped, 4).unwrap(), None);
        assert_eq!(inflate(b"not gzip", 100).unwrap_err().code, "BadBody");
        assert_eq!(gzip_size(b"ab"), 0);
    }
}
