//! OpenTelemetry profiles in: OTLP/HTTP (`POST /v1development/profiles`, protobuf or
//! JSON, gzipped or not) and OTLP/gRPC (`ProfilesService/Export` over h2c, on the same
//! port). Each resource's profiles that join (one time and sample layout) become one
//! profile, filed as a push of the resource's service (`service.name`, else the
//! executable's name) with its other attributes as labels: the same series as pprof and
//! Pyroscope pushes, so merges, ranges and baselines read them unchanged. The message is
//! decoded and every profile built before anything is stored: a bad message stores
//! nothing.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::{Buf, Bytes};
use http_body::Frame;
use prost::Message;
use serde_json::json;
use stacklens_core::import::otlp::proto::{ExportProfilesPartialSuccess, ExportProfilesServiceResponse};
use stacklens_core::import::otlp::{self, build_parts, parts, resource_attributes};
use stacklens_core::import::ParseOptions;

use super::access::Writer;
use super::ingest::file_pushed;
use super::request::{check_name, check_text, inflate_held, off_thread, read_encoded_body, unsupported, MAX_LABELS};
use super::rpc::RpcCode;
use super::{ApiError, ErrorBody};
use crate::budget::{ParseFailure, Reservation};
use crate::intake::Intake;
use crate::records::series::FiledBy;
use crate::records::Tenant;
use crate::state::{AppState, State};

/// Memory a decoded message and the profiles built from it take, per byte of it: prost's
/// structs and strings, then the model (counted again when each profile is filed).
const DECODED_PER_BYTE: u64 = 6;

#[derive(Clone, Copy, PartialEq)]
enum Encoding {
    Protobuf,
    Json,
}

/// One profile to file, built from a part of the message.
struct Filing {
    intake: Intake,
    pprof: Vec<u8>,
}

/// What was built, and the profiles left out with why (OTLP's `partial_success`).
struct Prepared {
    filings: Vec<Filing>,
    rejected: i64,
    reasons: Vec<String>,
}

/// A resource's service: `service.name`, else the executable's name, else OTLP's
/// `unknown_service`; its other attributes are the labels (`.` as `_`, as Pyroscope
/// names them), as text, at most [`MAX_LABELS`] in key order.
fn service_and_labels(attributes: Vec<(String, Option<String>)>) -> (String, BTreeMap<String, String>) {
    let find = |key: &str| {
        attributes
            .iter()
            .find(|(k, v)| k == key && v.as_ref().is_some_and(|v| !v.is_empty()))
            .and_then(|(_, v)| v.clone())
    };
    let service = find("service.name").or_else(|| find("process.executable.name"));
    let labels = attributes
        .iter()
        .filter(|(k, _)| k != "service.name")
        .filter_map(|(k, v)| Some((k.replace('.', "_"), v.clone()?)))
        .filter(|(k, v)| check_text("labels", k, 128).is_ok() && check_text("labels", v, 512).is_ok())
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .take(MAX_LABELS)
        .collect();
    (service.unwrap_or_else(|| "unknown_service".into()), labels)
}

/// Decodes `bytes` and builds one profile per part, or the error that stores nothing.
fn prepare(bytes: &[u8], encoding: Encoding, max_model_bytes: u64) -> Result<Prepared, ApiError> {
    // Core's complaint is the client's error, as for every profile a client sends.
    let core = |e: stacklens_core::Error| ApiError::from(ParseFailure::Core(e));
    let data = match encoding {
        Encoding::Protobuf => otlp::decode(bytes),
        Encoding::Json => otlp::decode_json(bytes),
    }
    .map_err(core)?;
    let empty = Default::default();
    let dictionary = data.dictionary.as_ref().unwrap_or(&empty);
    let options = ParseOptions { max_model_bytes, ..ParseOptions::default() };
    let mut prepared = Prepared { filings: Vec::new(), rejected: 0, reasons: Vec::new() };
    for part in parts(&data) {
        let attributes = resource_attributes(dictionary, part.resource)
            .map_err(core)?
            .into_iter()
            .map(|(key, value)| Ok((key, otlp::text(dictionary, value)?)))
            .collect::<Result<Vec<_>, stacklens_core::Error>>()
            .map_err(core)?;
        let (service, labels) = service_and_labels(attributes);
        let profile = build_parts(&data, std::slice::from_ref(&part), &options).map_err(core)?;
        if let Err(e) = check_name("service.name", &service, 128) {
            prepared.rejected += part.profiles.len() as i64;
            prepared.reasons.push(format!("service '{service}': {}", e.message()));
            continue;
        }
        let at = u64::try_from(profile.time_nanos).ok().filter(|&t| t > 0).map(|t| t / 1_000_000);
        prepared.filings.push(Filing {
            intake: Intake {
                name: format!("{service}.otlp"),
                service,
                labels,
                claimed: None,
                filed_by: Some(FiledBy::Push),
                at,
                expires: None,
            },
            pprof: stacklens_core::export::pprof::write(&profile),
        });
    }
    Ok(prepared)
}

/// Decodes, builds and files a message whose bytes `held` counts.
async fn export(
    state: &AppState,
    tenant: &Tenant,
    bytes: Bytes,
    mut held: Reservation,
    encoding: Encoding,
) -> Result<ExportProfilesServiceResponse, ApiError> {
    let decoded = (bytes.len() as u64).saturating_mul(DECODED_PER_BYTE);
    state.budget.hold_to(&mut held, (bytes.len() as u64).saturating_add(decoded)).await?;
    let prepared = off_thread(move || prepare(&bytes, encoding, decoded)).await??;
    drop(held);
    for filing in prepared.filings {
        let held = state.budget.hold(filing.pprof.len() as u64).await?;
        file_pushed(state, tenant, filing.pprof.into(), held, filing.intake).await?;
    }
    let partial_success = (prepared.rejected > 0).then(|| ExportProfilesPartialSuccess {
        rejected_profiles: prepared.rejected,
        error_message: prepared.reasons.join("; "),
    });
    Ok(ExportProfilesServiceResponse { partial_success })
}

/// Stores OTLP profiles sent over HTTP, as the collector's `otlphttp` exporter and the
/// eBPF profiler send them; the answer is an `ExportProfilesServiceResponse` in the
/// request's encoding.
#[utoipa::path(post, path = "/v1development/profiles", tag = "ranges", operation_id = "OtlpExport",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (X-Scope-OrgID too)"),
        ("Content-Encoding" = Option<String>, Header, description = "gzip or none")),
    request_body(content = Vec<u8>, content_type = "application/x-protobuf",
        description = "ExportProfilesServiceRequest (opentelemetry.proto.collector.profiles.v1development), protobuf or OTLP/JSON (application/json)"),
    responses((status = 200, description = "stored; partialSuccess names the profiles left out and why"),
        (status = 400, description = "InvalidProfile (with coreError), BadBody", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge, InflatesTooLarge, OverMemoryBudget", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: not protobuf or JSON, or an encoding other than gzip", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn http_export(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let encoding = match content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
        "application/x-protobuf" | "application/protobuf" => Encoding::Protobuf,
        "application/json" => Encoding::Json,
        _ => {
            return Err(unsupported(format!(
                "Content-Type '{content_type}' is not application/x-protobuf or application/json (OTLP/HTTP)"
            )))
        }
    };
    let (bytes, held) = read_encoded_body(&state, &headers, body).await?;
    let response = export(&state, &tenant, bytes, held, encoding).await?;
    Ok(match encoding {
        Encoding::Protobuf => {
            ([(header::CONTENT_TYPE, "application/x-protobuf")], response.encode_to_vec()).into_response()
        }
        Encoding::Json => {
            let partial = response.partial_success.map(
                |p| json!({ "rejectedProfiles": p.rejected_profiles.to_string(), "errorMessage": p.error_message }),
            );
            axum::Json(match partial {
                Some(p) => json!({ "partialSuccess": p }),
                None => json!({}),
            })
            .into_response()
        }
    })
}

/// A gRPC answer: the message framed, then trailers with the status; an error is
/// "trailers only" (its status in the headers, no message).
fn grpc_response(result: Result<ExportProfilesServiceResponse, ApiError>) -> Response {
    let mut response = match result {
        Ok(message) => {
            let message = message.encode_to_vec();
            let mut frame = Vec::with_capacity(5 + message.len());
            frame.push(0);
            frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
            frame.extend_from_slice(&message);
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let frames =
                [Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(frame))), Ok(Frame::trailers(trailers))];
            Body::new(http_body_util::StreamBody::new(futures::stream::iter(frames))).into_response()
        }
        Err(e) => {
            let mut response = Response::new(Body::empty());
            let headers = response.headers_mut();
            headers.insert("grpc-status", RpcCode::of(&e).number().into());
            // grpc-message is percent-encoded; the message is ours, so ASCII is kept.
            let message: String =
                e.message().chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
            if let Ok(value) = HeaderValue::from_str(&message) {
                headers.insert("grpc-message", value);
            }
            response
        }
    };
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// The one message of a gRPC request body: its 5-byte prefix (compressed flag, length)
/// and bytes, inflated when the flag says so (`grpc-encoding: gzip`).
async fn grpc_message(state: &AppState, headers: &HeaderMap, body: Body) -> Result<(Bytes, Reservation), ApiError> {
    let (mut bytes, held) = super::request::read_held_body(state, body).await?;
    if bytes.len() < 5 {
        return Err(ApiError::bad_request("BadBody", "a gRPC message needs its 5-byte prefix"));
    }
    let compressed = bytes.get_u8();
    let length = bytes.get_u32() as usize;
    if length != bytes.len() {
        return Err(ApiError::bad_request(
            "BadBody",
            format!("one gRPC message of {length} bytes expected, the body holds {}", bytes.len()),
        ));
    }
    match compressed {
        0 => Ok((bytes, held)),
        1 => {
            let encoding = headers.get("grpc-encoding").and_then(|v| v.to_str().ok()).unwrap_or("");
            if encoding != "gzip" {
                return Err(unsupported(format!("grpc-encoding '{encoding}' is not gzip")));
            }
            inflate_held(state, bytes).await
        }
        _ => Err(ApiError::bad_request("BadBody", "the gRPC message's compressed flag is neither 0 nor 1")),
    }
}

/// OTLP/gRPC's `ProfilesService/Export`, as the collector's `otlp` exporter sends it
/// (h2c, the same credentials in its metadata).
#[utoipa::path(post, path = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
    tag = "ranges", operation_id = "OtlpGrpcExport",
    request_body(content = Vec<u8>, content_type = "application/grpc",
        description = "gRPC over HTTP/2 (h2c): one length-prefixed ExportProfilesServiceRequest, gzip with grpc-encoding"),
    responses((status = 200, description = "gRPC: an ExportProfilesServiceResponse and grpc-status 0; errors as grpc-status \
        (3 INVALID_ARGUMENT, 16 UNAUTHENTICATED, 7 PERMISSION_DENIED, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE) with grpc-message")),
    security((), ("bearer" = [])))]
pub async fn grpc_export(
    AxumState(state): AxumState<State>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        let Writer(tenant) = writer?;
        let (bytes, held) = grpc_message(&state, &headers, body).await?;
        export(&state, &tenant, bytes, held, Encoding::Protobuf).await
    };
    grpc_response(result.await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_service_name_else_the_executable_and_the_rest_are_labels() {
        let attrs =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned()))).collect();
        let (service, labels) = service_and_labels(attrs(&[("process.pid", "7"), ("service.name", "api")]));
        assert_eq!((service.as_str(), labels), ("api", BTreeMap::from([("process_pid".into(), "7".into())])));
        let (service, _) = service_and_labels(attrs(&[("process.executable.name", "ebpf-profiler")]));
        assert_eq!(service, "ebpf-profiler");
        assert_eq!(service_and_labels(Vec::new()).0, "unknown_service");
    }
}
