//! The REST API: raw profiles and baselines in object storage, analysed with
//! stacklens-core. Handlers are thin: validate, call core or the store, answer JSON.
//! Every error is `{"message", "error_code", "details"}` with a fitting status.

mod analysis;
mod baselines;
mod capture;
mod profiles;
mod samply;
pub mod schedule;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::{json, Value};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::store::{Store, StoreError};

pub struct AppState {
    pub store: Store,
    /// With `--token-file`: the bearer token every write needs.
    pub token: Option<String>,
    pub max_upload: usize,
    /// Where share links point (`--public-url`); else the request's Host.
    pub public_url: Option<String>,
    /// Services captures may be taken from (`--targets`).
    pub targets: crate::targets::Targets,
    /// (tenant, service, type) of captures running on this replica.
    pub captures_running: std::sync::Mutex<std::collections::HashSet<(String, String, stacklens_core::ProfileKind)>>,
    /// (tenant, pipeline) of samply recordings running on this replica.
    pub samply_running: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
    pub http: reqwest::Client,
}

pub type State = Arc<AppState>;

/// The API's routes and, from the same annotations, its OpenAPI document: a route
/// cannot exist without being documented.
pub fn router(state: State) -> (Router, utoipa::openapi::OpenApi) {
    let (router, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(profiles::list, profiles::upload))
        .routes(routes!(profiles::record, profiles::delete))
        .routes(routes!(profiles::raw))
        .routes(routes!(baselines::list, baselines::create))
        .routes(routes!(baselines::record))
        .routes(routes!(analysis::diff_sessions))
        .routes(routes!(analysis::goroutine_analysis))
        .routes(routes!(capture::start))
        .routes(routes!(capture::status))
        .routes(routes!(capture::history))
        .routes(routes!(schedule::set))
        .routes(routes!(samply::start, samply::latest))
        .routes(routes!(analysis::compare_profiles))
        .with_state(state)
        .split_for_parts();
    let published = doc.clone();
    let router = router
        .route("/api/openapi.json", get(move || async move { Json(published) }))
        .route("/api/{*rest}", any(|| async { ApiError::new(StatusCode::NOT_FOUND, "NotFound", "no such API route") }));
    (router, doc)
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "stacklens", description = "Profiles, baselines and their analysis; every error is {message, error_code, details}."),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// Writes take `Authorization: Bearer <token>` when the server has `--token-file`.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "server", responses((status = 200, description = "{\"status\": \"ok\"}")))]
async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    message: String,
    error_code: String,
    #[schema(value_type = Object)]
    details: Value,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Value,
}

impl ApiError {
    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: json!({}) }
    }

    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        let code = match what {
            "baseline" => "BaselineNotFound",
            _ => "ProfileNotFound",
        };
        ApiError::new(StatusCode::NOT_FOUND, code, format!("unknown {what} id '{id}'")).details(json!({ "id": id }))
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, "{}", self.message);
        }
        let body = json!({ "message": self.message, "error_code": self.code, "details": self.details });
        (self.status, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "StorageUnavailable", e.to_string())
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "CorruptRecord", format!("a stored record is unreadable: {e}"))
    }
}

/// The tenant a request acts for (`X-Tenant-ID`, else a `tenant` query parameter so
/// plain links such as `…/raw?tenant=acme` work; "default" without either). Every
/// object key starts with it, so one tenant can neither read nor list another's objects.
pub struct Tenant(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let from_query = || {
            let query = parts.uri.query()?;
            url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "tenant").map(|(_, v)| v.into_owned())
        };
        let tenant = match parts.headers.get("x-tenant-id") {
            Some(value) => value.to_str().unwrap_or("").to_owned(),
            None => match from_query() {
                Some(t) => t,
                None => return Ok(Tenant("default".into())),
            },
        };
        let tenant = tenant.as_str();
        if valid_name(tenant, 64) {
            Ok(Tenant(tenant.to_owned()))
        } else {
            Err(ApiError::bad_request("InvalidTenant", "X-Tenant-ID must be 1-64 letters, digits, '-' or '_'")
                .details(json!({ "tenant": tenant })))
        }
    }
}

impl Tenant {
    /// The object key of `rest` for this tenant.
    pub fn key(&self, rest: &str) -> String {
        format!("tenants/{}/{rest}", self.0)
    }
}

/// A query parameter that must be present and non-empty.
pub fn required<'a>(query: &'a std::collections::HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    query.get(name).map(String::as_str).filter(|v| !v.is_empty()).ok_or_else(|| {
        ApiError::bad_request("InvalidParameter", format!("{name} is required")).details(json!({ "field": name }))
    })
}

/// Letters, digits, '-' and '_' only: safe inside object keys (no '/', no '..').
pub fn valid_name(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An id of the form `{prefix}-{32 lowercase hex}`; anything else cannot name an object.
pub fn valid_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// Writes need the bearer token when the server has one.
pub fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &state.token else { return Ok(()) };
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant time, so the token cannot be guessed byte by byte.
    let same =
        given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if same {
        Ok(())
    } else {
        Err(ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", "this write needs 'Authorization: Bearer <token>'"))
    }
}

/// The page's address for share links.
pub fn public_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("127.0.0.1:8080");
    format!("http://{host}")
}

/// A share link to a page route, carrying the tenant when it is not the default one.
pub fn share_url(state: &AppState, headers: &HeaderMap, tenant: &Tenant, route: &str) -> String {
    let base = public_base(state, headers);
    if tenant.0 == "default" {
        format!("{base}/#/{route}")
    } else {
        format!("{base}/#/{route}?tenant={}", tenant.0)
    }
}

/// Now, as RFC 3339 with milliseconds (what records store).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Reads a stored JSON record.
pub async fn load<T: serde::de::DeserializeOwned>(store: &Store, key: &str) -> Result<Option<T>, ApiError> {
    match store.get(key).await? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        None => Ok(None),
    }
}

/// Runs CPU-heavy core work off the async threads.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", format!("analysis failed: {e}")))
}
