//! Who a request acts for. With credentials configured, the tenant comes from the
//! bearer credential (`X-Tenant-ID`, Pyroscope's `X-Scope-OrgID` or `?tenant=` only choose among the tenants an
//! admin key may act for); without any (the local default), from `X-Tenant-ID`, a
//! `tenant` query parameter, or "default".
//!
//! - [`Open`]: reads by an unguessable id (share links); no credential needed.
//! - [`Reader`]: listings, history, comparisons, analyses, capture status.
//! - [`Writer`]: everything that stores or deletes.
//! - [`Deleter`]: deleting an upload or a blob: a write credential, or the delete token
//!   the upload was given.
//! - [`WritesCaches`]: whether a read may write caches (only where it could write).
//!
//! The credential is `Authorization: Bearer <token>`, or `Basic` with the token as the
//! password (Pyroscope's Python and Rust agents send only basic auth).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde_json::json;

use super::ApiError;
use crate::auth::{Grant, Scope};
use crate::records::{valid_name, Tenant, DEFAULT_TENANT};
use crate::state::State;

pub struct Open(pub Tenant);
pub struct Reader(pub Tenant);
pub struct Writer(pub Tenant);

/// Who deletes an uploaded session or a blob: a write credential as for [`Writer`], or,
/// on a request without `Authorization`, the delete token its upload was given
/// (`X-Stacklens-Delete-Token` or `?deleteToken=`), for the tenant the request names.
/// The handler checks the token against the record ([`wrong_token`] when it does not match).
pub enum Deleter {
    Credential(Tenant),
    Token { tenant: Tenant, token: String },
}

impl Deleter {
    pub fn tenant(&self) -> &Tenant {
        match self {
            Deleter::Credential(tenant) | Deleter::Token { tenant, .. } => tenant,
        }
    }

    /// The delete token to check, if the request is authorized by one.
    pub fn token(&self) -> Option<&str> {
        match self {
            Deleter::Credential(_) => None,
            Deleter::Token { token, .. } => Some(token),
        }
    }
}

/// A delete token that is not the one of the record it was sent for.
pub fn wrong_token() -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "InvalidDeleteToken", "this is not the delete token of that link")
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Need {
    Nothing,
    Read,
    Write,
}

fn tenant_name_error(tenant: &str) -> ApiError {
    ApiError::bad_request("InvalidTenant", "a tenant is 1-64 letters, digits, '-' or '_'")
        .details(json!({ "tenant": tenant }))
}

/// The query parameter `name`, if the request has it.
fn query_param(parts: &Parts, name: &str) -> Option<String> {
    let query = parts.uri.query()?;
    url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

/// The tenant the request names, if any.
fn requested_tenant(parts: &Parts) -> Result<Option<String>, ApiError> {
    // X-Scope-OrgID: what Pyroscope's agents send for a tenant.
    let header = parts.headers.get("x-tenant-id").or_else(|| parts.headers.get("x-scope-orgid"));
    let tenant = match header {
        Some(value) => value.to_str().unwrap_or("").to_owned(),
        None => match query_param(parts, "tenant") {
            Some(t) => t,
            None => return Ok(None),
        },
    };
    if valid_name(&tenant, 64) {
        Ok(Some(tenant))
    } else {
        Err(tenant_name_error(&tenant))
    }
}

fn unauthorized(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
}

/// The credential of an `Authorization` header: `Bearer <token>`, or `Basic` with the
/// token as the password (any user name), which is how the Pyroscope agents that take
/// no bearer token (pyroscope-io, the Rust crate) send one.
fn credential(header: &str) -> Result<String, ApiError> {
    use base64::Engine;
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header, ""));
    let token = if scheme.eq_ignore_ascii_case("bearer") {
        Some(rest.trim().to_owned())
    } else if scheme.eq_ignore_ascii_case("basic") {
        base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()
            .and_then(|pair| String::from_utf8(pair).ok())
            .and_then(|pair| pair.split_once(':').map(|(_user, password)| password.to_owned()))
    } else {
        None
    };
    token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthorized("Authorization must be 'Bearer <token>' or 'Basic' with the token as the password"))
}

fn resolve(state: &State, parts: &Parts, need: Need) -> Result<Tenant, ApiError> {
    let requested = requested_tenant(parts)?;
    let or_default = |t: Option<String>| Tenant(t.unwrap_or_else(|| DEFAULT_TENANT.to_owned()));
    if !state.auth.configured() {
        return Ok(or_default(requested));
    }
    let bearer = match parts.headers.get("authorization") {
        None => None,
        Some(value) => Some(credential(value.to_str().unwrap_or(""))?),
    };
    let Some(bearer) = bearer else {
        return match need {
            Need::Nothing => Ok(or_default(requested)),
            _ => Err(unauthorized("this call needs 'Authorization: Bearer <token>' for its tenant")),
        };
    };
    let Grant { tenant, scope } = state.auth.verify(&bearer).map_err(|e| unauthorized(e.to_string()))?;
    let tenant = match tenant {
        None => or_default(requested),
        Some(own) => {
            if let Some(other) = requested.filter(|r| *r != own) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    format!("this credential acts for tenant '{own}', not '{other}'"),
                )
                .details(json!({ "tenant": other })));
            }
            Tenant(own)
        }
    };
    if need == Need::Write && scope < Scope::Write {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "InsufficientScope", "this credential may only read"));
    }
    Ok(tenant)
}

macro_rules! extractor {
    ($name:ident, $need:expr) => {
        impl FromRequestParts<State> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, ApiError> {
                resolve(state, parts, $need).map($name)
            }
        }
    };
}

extractor!(Open, Need::Nothing);
extractor!(Reader, Need::Read);
extractor!(Writer, Need::Write);

/// Whether a read may leave derived objects (caches) in the store: only a request that
/// could write anyway, so a read-only credential costs the store nothing.
pub struct WritesCaches(pub bool);

impl FromRequestParts<State> for WritesCaches {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, ApiError> {
        Ok(WritesCaches(resolve(state, parts, Need::Write).is_ok()))
    }
}

impl FromRequestParts<State> for Deleter {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Self, ApiError> {
        let header =
            parts.headers.get("x-stacklens-delete-token").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let token = header.or_else(|| query_param(parts, "deleteToken")).filter(|t| !t.is_empty());
        match token {
            Some(token) if !parts.headers.contains_key("authorization") => {
                Ok(Deleter::Token { tenant: resolve(state, parts, Need::Nothing)?, token })
            }
            _ => Ok(Deleter::Credential(resolve(state, parts, Need::Write)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_carry_the_token() {
        assert_eq!(credential("Bearer abc").unwrap(), "abc");
        assert_eq!(credential("bearer  abc ").unwrap(), "abc");
        // base64("stacklens:s3cret:with:colons") and base64(":s3cret").
        assert_eq!(credential("Basic c3RhY2tsZW5zOnMzY3JldDp3aXRoOmNvbG9ucw==").unwrap(), "s3cret:with:colons");
        assert_eq!(credential("basic OnMzY3JldA==").unwrap(), "s3cret");
        for bad in ["", "Bearer", "Bearer  ", "Token abc", "Basic", "Basic !!!", "Basic dXNlcg==", "Basic dXNlcjo="] {
            assert_eq!(credential(bad).unwrap_err().code, "Unauthorized", "{bad:?}");
        }
    }
}
