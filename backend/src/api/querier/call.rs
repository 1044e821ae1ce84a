//! Connect's unary protocol as the query API speaks it: a request's message read in its
//! codec (JSON or protobuf, gzip or not) within the upload limits, with who asks, and
//! the answer written in the same codec; errors as [`ConnectError`]s.

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use prost::Message;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::access::{Reader, WritesCaches};
use crate::api::request::{read_encoded_body, unsupported};
use crate::api::rpc::ConnectError;
use crate::api::ApiError;
use crate::querying::QueryError;
use crate::records::Tenant;
use crate::state::{AppState, State};

/// The errors every Connect route answers, as Connect answers them: the code's HTTP
/// status and `{"code", "message", "error_code"}` (Connect's code, then stacklens').
/// Only documents the routes (they answer [`ConnectError`]).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
pub enum ConnectErrors {
    /// invalid_argument: InvalidParameter (a bad profile type id, selector, range, step or
    /// maxNodes), InvalidRequest (a body that is not the message), InvalidQuery,
    /// InvalidProfileType, IncompatibleProfiles
    #[response(status = 400)]
    InvalidArgument,
    /// unauthenticated: Unauthorized
    #[response(status = 401)]
    Unauthenticated,
    /// permission_denied: Forbidden
    #[response(status = 403)]
    PermissionDenied,
    /// UnsupportedMediaType: not application/json or application/proto, or an encoding
    /// other than gzip
    #[response(status = 415)]
    UnsupportedMediaType,
    /// resource_exhausted: MergeTooLarge (the merge needs more than half the memory
    /// budget), PayloadTooLarge, OverMemoryBudget
    #[response(status = 429)]
    ResourceExhausted,
    /// unimplemented: NotImplemented (format TREE; stack trace and profile id selectors;
    /// span and trace selectors together)
    #[response(status = 501)]
    Unimplemented,
    /// unavailable: Busy, StorageUnavailable
    #[response(status = 503)]
    Unavailable,
}

/// How a request's message is written, and so its answer's.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Codec {
    Json,
    Proto,
}

impl Codec {
    fn of(headers: &HeaderMap) -> Result<Codec, ApiError> {
        let given = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let media = given.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match media.as_str() {
            "application/json" => Ok(Codec::Json),
            "application/proto" | "application/protobuf" | "application/x-protobuf" => Ok(Codec::Proto),
            _ => Err(unsupported(format!(
                "Content-Type '{given}' is not a Connect unary codec: application/json or application/proto"
            ))),
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            Codec::Json => "application/json",
            Codec::Proto => "application/proto",
        }
    }
}

/// A Connect unary request's message, read within the upload limits.
async fn read<M: Message + Default + DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(M, Codec), ApiError> {
    let codec = Codec::of(headers)?;
    let (bytes, _held) = read_encoded_body(state, headers, body).await?;
    let name = std::any::type_name::<M>().rsplit("::").next().unwrap_or("message");
    let message = match codec {
        Codec::Json if bytes.iter().all(u8::is_ascii_whitespace) => M::default(),
        Codec::Json => serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request("InvalidRequest", format!("the body is not a {name} in JSON: {e}")))?,
        Codec::Proto => M::decode(bytes)
            .map_err(|e| ApiError::bad_request("InvalidRequest", format!("the body is not a {name} message: {e}")))?,
    };
    Ok((message, codec))
}

/// A Connect unary answer in the request's codec.
fn answer<M: Message + Serialize>(codec: Codec, message: &M) -> Response {
    let body = match codec {
        Codec::Json => serde_json::to_vec(message).expect("messages serialize"),
        Codec::Proto => message.encode_to_vec(),
    };
    ([(header::CONTENT_TYPE, HeaderValue::from_static(codec.media_type()))], body).into_response()
}

/// One Connect call: who asks (its tenant, and whether it may write caches), its
/// message, and the codec its answer is written in.
pub struct Call<M> {
    pub state: State,
    pub tenant: Tenant,
    pub writes: bool,
    codec: Codec,
    pub message: M,
}

impl<M: Message + Default + DeserializeOwned> FromRequest<State> for Call<M> {
    type Rejection = ConnectError;

    async fn from_request(request: Request, state: &State) -> Result<Self, ConnectError> {
        let (mut parts, body) = request.into_parts();
        let Reader(tenant) = Reader::from_request_parts(&mut parts, state).await?;
        let WritesCaches(writes) = WritesCaches::from_request_parts(&mut parts, state).await?;
        let (message, codec) = read::<M>(state, &parts.headers, body).await?;
        Ok(Call { state: state.clone(), tenant, writes, codec, message })
    }
}

impl<M> Call<M> {
    /// The answer in the request's codec.
    pub fn reply<A: Message + Serialize>(&self, message: A) -> Result<Response, ConnectError> {
        Ok(answer(self.codec, &message))
    }
}

impl From<QueryError> for ConnectError {
    fn from(e: QueryError) -> Self {
        ConnectError(e.into())
    }
}
