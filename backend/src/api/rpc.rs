//! The status codes of gRPC and Connect, for the routes that speak them (the OTLP gRPC
//! export, Pyroscope's Connect query API): each API error maps to one, and a Connect
//! error is `{"code", "message"}` with the HTTP status Connect gives its code.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::ApiError;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RpcCode {
    InvalidArgument = 3,
    NotFound = 5,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

impl RpcCode {
    /// The code of an API error, from its HTTP status.
    pub fn of(e: &ApiError) -> RpcCode {
        match e.status() {
            StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE | StatusCode::UNPROCESSABLE_ENTITY => {
                RpcCode::InvalidArgument
            }
            StatusCode::NOT_FOUND => RpcCode::NotFound,
            StatusCode::UNAUTHORIZED => RpcCode::Unauthenticated,
            StatusCode::FORBIDDEN => RpcCode::PermissionDenied,
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => RpcCode::ResourceExhausted,
            StatusCode::NOT_IMPLEMENTED => RpcCode::Unimplemented,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::REQUEST_TIMEOUT => RpcCode::Unavailable,
            _ => RpcCode::Internal,
        }
    }

    /// gRPC's number for the code.
    pub fn number(self) -> u32 {
        self as u32
    }

    /// Connect's name for the code.
    fn connect_name(self) -> &'static str {
        match self {
            RpcCode::InvalidArgument => "invalid_argument",
            RpcCode::NotFound => "not_found",
            RpcCode::PermissionDenied => "permission_denied",
            RpcCode::ResourceExhausted => "resource_exhausted",
            RpcCode::Unimplemented => "unimplemented",
            RpcCode::Internal => "internal",
            RpcCode::Unavailable => "unavailable",
            RpcCode::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status Connect answers the code with.
    fn connect_status(self) -> StatusCode {
        match self {
            RpcCode::InvalidArgument => StatusCode::BAD_REQUEST,
            RpcCode::NotFound => StatusCode::NOT_FOUND,
            RpcCode::PermissionDenied => StatusCode::FORBIDDEN,
            RpcCode::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            RpcCode::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            RpcCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            RpcCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            RpcCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

/// An API error answered as Connect answers errors: the code's HTTP status and
/// `{"code", "message", "error_code"}` (stacklens' own code beside Connect's).
pub struct ConnectError(pub ApiError);

impl From<ApiError> for ConnectError {
    fn from(e: ApiError) -> Self {
        ConnectError(e)
    }
}

impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        let code = RpcCode::of(&self.0);
        if code == RpcCode::Internal {
            tracing::error!(code = self.0.code, "{}", self.0.message());
        }
        let body = json!({ "code": code.connect_name(), "message": self.0.message(), "error_code": self.0.code });
        // Connect answers a body it cannot read with 415, whatever the code.
        let status = match self.0.status() {
            StatusCode::UNSUPPORTED_MEDIA_TYPE => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => code.connect_status(),
        };
        let mut response = (status, Json(body)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}
