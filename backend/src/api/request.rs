//! Reading requests: bodies within limits, JSON, parameters from the query or
//! `X-Stacklens-…` headers, and the page links responses carry.

use std::collections::{BTreeMap, HashMap};

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use serde_json::json;
use stacklens_core::ProfileKind;

use super::ApiError;
use crate::records::Tenant;
use crate::state::AppState;

/// Largest JSON request body (JSON requests are small; profiles are raw bodies).
pub const MAX_JSON: usize = 1 << 20;
/// Most labels one profile may carry.
pub const MAX_LABELS: usize = 64;

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

/// Reads a JSON request body; 400 says it is not `what` (serde_json also refuses
/// nesting deeper than 128 and duplicate fields).
pub async fn read_json<T: serde::de::DeserializeOwned>(body: Body, what: &str) -> Result<T, ApiError> {
    let body = read_body(body, MAX_JSON).await?;
    serde_json::from_slice(&body).map_err(|e| ApiError::bad_request("InvalidRequest", format!("not {what}: {e}")))
}

/// A parameter from the query string, or else from an `X-Stacklens-…` header.
pub fn param(query: &HashMap<String, String>, headers: &HeaderMap, name: &str) -> Option<String> {
    query.get(name).cloned().or_else(|| {
        headers
            .get(format!("x-stacklens-{}", name.to_ascii_lowercase()))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    })
}

/// A query parameter that must be present and non-empty.
pub fn required<'a>(query: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    query.get(name).map(String::as_str).filter(|v| !v.is_empty()).ok_or_else(|| {
        ApiError::bad_request("InvalidParameter", format!("{name} is required")).details(json!({ "field": name }))
    })
}

/// Free text (service, name, label) must be short and printable.
pub fn check_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "InvalidParameter",
            format!("{field} must be at most {max} printable characters"),
        )
        .details(json!({ "field": field })));
    }
    Ok(())
}

/// `k=v,k2=v2`, at most [`MAX_LABELS`].
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, ApiError> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ApiError::bad_request("InvalidParameter", format!("label '{pair}' is not key=value"))
                .details(json!({ "field": "labels" })));
        };
        check_text("labels", k, 128)?;
        check_text("labels", v, 512)?;
        labels.insert(k.trim().to_owned(), v.trim().to_owned());
        if labels.len() > MAX_LABELS {
            return Err(ApiError::bad_request("InvalidParameter", format!("at most {MAX_LABELS} labels"))
                .details(json!({ "field": "labels" })));
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

/// The page's address for share links.
fn public_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1:8080");
    format!("http://{host}")
}

/// A share link to a page route, carrying the tenant when it is not the default one.
pub fn share_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, route: &str) -> String {
    let base = public_base(state, headers);
    if tenant.is_default() {
        format!("{base}/#/{route}")
    } else {
        format!("{base}/#/{route}?tenant={}", tenant.0)
    }
}

/// The share link of a session's flame graph.
pub fn session_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, session: &str) -> String {
    share_url(state, headers, tenant, &format!("s/{session}"))
}
