//! The REST API: handlers and their request and response types. Handlers are thin:
//! check access and input, call `records`, `runs` or core within the memory budget,
//! answer JSON. Every error is `{"message", "error_code", "details"}` with a fitting
//! status, 404 and 405 included.

mod access;
mod analysis;
mod baselines;
mod blobs;
mod capture;
mod debuginfo;
mod docs;
mod ingest;
mod opened;
mod otlp;
mod profiles;
mod push;
mod querier;
mod ranges;
mod render;
mod request;
mod rpc;
mod same_origin;
mod samply;
mod schedule;
mod symbolicate;

pub use same_origin::{check as check_origin, Policy};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use serde_json::{json, Value};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::budget::{BudgetError, ParseFailure};
use crate::intake::IntakeError;
use crate::records::{Kind, RecordError};
use crate::state::State;
use crate::store::StoreError;

/// The API's routes and, from the same annotations, its OpenAPI document: a route
/// cannot exist without being documented.
pub fn router(state: State) -> (Router, utoipa::openapi::OpenApi) {
    let (router, doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health))
        .routes(routes!(metrics))
        .routes(routes!(profiles::list, profiles::upload))
        .routes(routes!(profiles::record, profiles::delete))
        .routes(routes!(profiles::raw))
        .routes(routes!(blobs::upload))
        .routes(routes!(blobs::get, blobs::delete))
        .routes(routes!(opened::raw))
        .routes(routes!(baselines::list, baselines::create))
        .routes(routes!(baselines::record, baselines::delete))
        .routes(routes!(analysis::diff_sessions))
        .routes(routes!(analysis::goroutine_analysis))
        .routes(routes!(capture::start))
        .routes(routes!(capture::status))
        .routes(routes!(capture::history))
        .routes(routes!(schedule::set, schedule::list))
        .routes(routes!(schedule::delete))
        .routes(routes!(samply::start, samply::latest))
        .routes(routes!(analysis::compare_profiles))
        .routes(routes!(ranges::merge))
        .routes(routes!(ranges::series))
        .routes(routes!(ranges::labels))
        .routes(routes!(ranges::label_values))
        .routes(routes!(ranges::services))
        .routes(routes!(ranges::function_history))
        .routes(routes!(ingest::ingest))
        .routes(routes!(push::push))
        .routes(routes!(otlp::http_export))
        .routes(routes!(otlp::grpc_export))
        .routes(routes!(querier::profile_types))
        .routes(routes!(querier::label_names))
        .routes(routes!(querier::label_values))
        .routes(routes!(querier::series))
        .routes(routes!(querier::select_merge_stacktraces))
        .routes(routes!(querier::select_merge_profile))
        .routes(routes!(querier::select_merge_span_profile))
        .routes(routes!(querier::select_series))
        .routes(routes!(querier::diff))
        .routes(routes!(render::render))
        .routes(routes!(render::render_diff))
        .routes(routes!(render::label_values))
        .routes(routes!(debuginfo::upload))
        .routes(routes!(debuginfo::artifact))
        .routes(routes!(symbolicate::symbolicate))
        .with_state(state)
        .split_for_parts();
    let router = docs::routes(router, doc.clone())
        .route("/api", any(no_route))
        .route("/api/", any(no_route))
        .route("/api/{*rest}", any(no_route))
        .route("/v0", any(no_route))
        .route("/v0/", any(no_route))
        .route("/v0/{*rest}", any(no_route))
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "this route does not take that method")
        });
    (router, doc)
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "stacklens", description = "Profiles, encrypted blobs, baselines and their analysis. Every error is {message, error_code, details}; \
        any route may also answer 400 InvalidTenant, InvalidParameter (a path parameter that is not UTF-8) or BadRequest (not valid HTTP/1.1), 414 UriTooLong, 401 Unauthorized, 403 Forbidden, 405 MethodNotAllowed, 408 RequestTimeout, \
        431 RequestHeaderFieldsTooLarge, 503 StorageUnavailable or Busy (with Retry-After) and 504 StorageTimeout."),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// Credentials: `Authorization: Bearer <API key or JWT>`.
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

async fn no_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "NotFound", "no such API route")
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "server", operation_id = "Health",
    responses((status = 200, description = "{\"status\": \"ok\"}")))]
async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// This replica's counters in Prometheus' text format: its compaction passes so far.
#[utoipa::path(get, path = "/metrics", tag = "server", operation_id = "Metrics",
    responses((status = 200, description = "Prometheus text format (version 0.0.4)", content_type = "text/plain")))]
async fn metrics(axum::extract::State(state): axum::extract::State<State>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.compaction.prometheus())
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
    retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: json!({}), retry_after: None }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// A query parameter (or header) refused: 400 InvalidParameter naming `field`.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ApiError::bad_request("InvalidParameter", message).details(json!({ "field": field }))
    }

    /// A field of a JSON request body refused: 400 InvalidRequest naming `field`.
    pub fn invalid_request(field: &str, message: impl Into<String>) -> Self {
        ApiError::bad_request("InvalidRequest", message).details(json!({ "field": field }))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, "{}", self.message);
        }
        let body = json!({ "message": self.message, "error_code": self.code, "details": self.details });
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

impl From<RecordError> for ApiError {
    fn from(e: RecordError) -> Self {
        match e {
            RecordError::NotFound { what, id } => {
                let code = match what {
                    Kind::Session => "ProfileNotFound",
                    Kind::Baseline => "BaselineNotFound",
                    Kind::Capture => "CaptureNotFound",
                    Kind::Blob => "BlobNotFound",
                };
                ApiError::new(StatusCode::NOT_FOUND, code, format!("unknown {what} id '{id}'"))
                    .details(json!({ "id": id }))
            }
            RecordError::Expired { what, id, at } => {
                ApiError::new(StatusCode::GONE, "Expired", format!("the link to {what} '{id}' expired at {at}"))
                    .details(json!({ "id": id, "expiresAt": at }))
            }
            RecordError::EncryptedBlob { id } => ApiError::unprocessable(
                "EncryptedBlob",
                format!(
                    "'{id}' is an encrypted blob: the server never has its key, so it cannot read or analyse it; \
                     the page decrypts it with the key in its link (its bytes: /api/v1/blobs/{id})"
                ),
            )
            .details(json!({ "id": id })),
            RecordError::Store(e @ StoreError::Timeout(limit)) => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, "StorageTimeout", e.to_string())
                    .details(json!({ "timeoutSeconds": limit.as_secs_f64() }))
            }
            RecordError::Store(e) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "StorageUnavailable", e.to_string())
            }
            RecordError::Corrupt(e) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "CorruptRecord",
                format!("a stored record is unreadable: {e}"),
            ),
        }
    }
}

impl From<BudgetError> for ApiError {
    fn from(e: BudgetError) -> Self {
        let message = e.to_string();
        match e {
            BudgetError::InflatesTooLarge { cap } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "InflatesTooLarge", message)
                    .details(json!({ "inflateCap": cap }))
            }
            BudgetError::OverBudget { need, budget } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "OverMemoryBudget", message)
                    .details(json!({ "needBytes": need, "budgetBytes": budget }))
            }
            BudgetError::Busy { retry_after_secs } => {
                let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "Busy", message)
                    .details(json!({ "retryAfterSeconds": retry_after_secs }));
                e.retry_after = Some(retry_after_secs);
                e
            }
        }
    }
}

impl From<ParseFailure> for ApiError {
    /// For profiles a client sends: core's complaint is the client's error.
    fn from(e: ParseFailure) -> Self {
        match e {
            ParseFailure::Budget(b) => b.into(),
            ParseFailure::Core(core) => {
                ApiError::bad_request("InvalidProfile", format!("not a profile stacklens can read: {core}"))
                    .details(json!({ "coreError": core.code() }))
            }
            ParseFailure::Stopped(why) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", why),
        }
    }
}

impl From<IntakeError> for ApiError {
    fn from(e: IntakeError) -> Self {
        match e {
            IntakeError::Parse(p) => p.into(),
            IntakeError::TypeMismatch { claimed, detected } => ApiError::unprocessable(
                "ProfileTypeMismatch",
                format!("profileType '{claimed}' does not match the profile, which is {detected}"),
            )
            .details(json!({ "profileType": claimed, "detected": detected })),
            IntakeError::Record(r) => r.into(),
        }
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        RecordError::Corrupt(e).into()
    }
}
