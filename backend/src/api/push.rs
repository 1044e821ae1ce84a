//! Pyroscope's push API, `POST /push.v1.PusherService/Push` (Connect, protobuf), which
//! the agents built on pyroscope-rs (pyroscope-io for Python, the `pyroscope` crate)
//! send to, as Grafana Alloy's `pyroscope.write` does: series of pprof profiles, each
//! with its labels (`service_name`, `__name__` for the profile type, the agent's tags).
//! Every profile is filed as `/ingest` files one: held by its entry in its service's
//! time index, at the profile's own time.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;
use serde_json::json;
use stacklens_core::ProfileKind;

use super::access::Writer;
use super::ingest::{file_pushed, kind_of_suffix};
use super::request::{check_name, check_text, read_encoded_body, unsupported, MAX_LABELS};
use super::{ApiError, ErrorBody};
use crate::budget::Reservation;
use crate::intake::Intake;
use crate::records::series::FiledBy;
use crate::state::{AppState, State};

/// `push.v1` of Pyroscope's `api/push/v1/push.proto` (with `types.v1.LabelPair`).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PushResponse {}

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PushRequest {
        #[prost(message, repeated, tag = "1")]
        pub series: Vec<RawProfileSeries>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawProfileSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<LabelPair>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<RawSample>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LabelPair {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawSample {
        /// pprof, gzipped or not.
        #[prost(bytes = "bytes", tag = "1")]
        pub raw_profile: bytes::Bytes,
        #[prost(string, tag = "2")]
        pub id: String,
    }
}

/// The profile type a `__name__` names: Pyroscope's (`process_cpu`, `memory`, `wall`, …)
/// or an `/ingest` type suffix; `None` leaves it to the profile.
fn kind_of_name(name: &str) -> Option<ProfileKind> {
    match name {
        "process_cpu" => Some(ProfileKind::Cpu),
        "memory" => Some(ProfileKind::Memory),
        other => kind_of_suffix(other),
    }
}

/// What one series' labels say: its service, profile type and the labels it is filed with.
#[derive(Debug, PartialEq)]
struct SeriesLabels {
    service: String,
    kind: Option<ProfileKind>,
    labels: BTreeMap<String, String>,
}

/// `service_name` names the service and `__name__` the type; other labels that start
/// with `__` are Pyroscope's own (`__session_id__`, `__delta__`) and are not kept.
fn series_labels(pairs: Vec<proto::LabelPair>) -> Result<SeriesLabels, ApiError> {
    let (mut service, mut kind, mut labels) = (None, None, BTreeMap::new());
    for proto::LabelPair { name, value } in pairs {
        check_text("labels", &name, 128)?;
        check_text("labels", &value, 512)?;
        match name.as_str() {
            "service_name" => service = Some(value),
            "__name__" => kind = kind_of_name(&value),
            _ if name.starts_with("__") => {}
            "" => return Err(ApiError::invalid("labels", "a label has no name")),
            _ => {
                labels.insert(name, value);
            }
        }
    }
    if labels.len() > MAX_LABELS {
        return Err(ApiError::invalid("labels", format!("at most {MAX_LABELS} labels")));
    }
    let service = service.filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::invalid("labels", "a series needs a service_name label (the agent's application name)")
    })?;
    check_name("service_name", &service, 128)?;
    Ok(SeriesLabels { service, kind, labels })
}

/// Most series one push may carry (an agent sends one per profile type it collects).
pub const MAX_SERIES: u64 = 10_000;

/// Memory a decoded series, label or sample takes beyond the bytes it was decoded from
/// (its struct, its vector's spare room, a string's allocation).
const DECODED_ITEM_BYTES: u64 = 128;

/// How many series, labels and samples a `PushRequest`'s bytes hold, read on the wire
/// without decoding them; a malformed message ends the count (the decode names the
/// error, having built no more than what was counted).
#[derive(Debug, Default, PartialEq)]
struct Items {
    series: u64,
    /// Labels and samples of all series.
    inner: u64,
}

impl Items {
    fn count(bytes: &[u8]) -> Items {
        let mut items = Items::default();
        each_message(bytes, |field, series| {
            items.series += u64::from(field == 1);
            if field == 1 {
                each_message(series, |inner, _| items.inner += u64::from(inner == 1 || inner == 2));
            }
        });
        items
    }

    /// What decoding them takes beyond the request's bytes.
    fn decoded_bytes(&self) -> u64 {
        self.series.saturating_add(self.inner).saturating_mul(DECODED_ITEM_BYTES)
    }
}

/// Calls `each` with the field number and bytes of every length-delimited field of a
/// protobuf message, skipping the others, until the end or a malformed field.
fn each_message(mut bytes: &[u8], mut each: impl FnMut(u64, &[u8])) {
    use prost::encoding::decode_varint;
    while !bytes.is_empty() {
        let Ok(key) = decode_varint(&mut bytes) else { return };
        let skip = match key & 7 {
            0 => decode_varint(&mut bytes).map(|_| 0).ok(),
            1 => Some(8),
            5 => Some(4),
            2 => match decode_varint(&mut bytes).ok().filter(|&len| len <= bytes.len() as u64) {
                Some(len) => {
                    each(key >> 3, &bytes[..len as usize]);
                    Some(len as usize)
                }
                None => None,
            },
            _ => None,
        };
        match skip.filter(|&n| n <= bytes.len()) {
            Some(n) => bytes = &bytes[n..],
            None => return,
        }
    }
}

/// The `PushRequest` of a request, Connect's unary protobuf (`application/proto`),
/// gzipped (`Content-Encoding: gzip`) or not; with the memory that holds it (its
/// profiles are slices of the decoded bytes).
async fn push_request(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(proto::PushRequest, Reservation), ApiError> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").trim().to_ascii_lowercase();
    let content_type = text(header::CONTENT_TYPE);
    let media = content_type.split(';').next().unwrap_or("").trim();
    if !["application/proto", "application/protobuf", "application/x-protobuf"].contains(&media) {
        return Err(unsupported(format!(
            "Content-Type '{content_type}' is not application/proto (Connect's protobuf, as the agents send it)"
        )));
    }
    let (bytes, mut held) = read_encoded_body(state, headers, body).await?;
    // Decoded within the budget: the series are counted on the wire first.
    let items = Items::count(&bytes);
    if items.series > MAX_SERIES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "TooManySeries",
            format!("the push has {} series, more than the {MAX_SERIES} one push may carry", items.series),
        )
        .details(json!({ "series": items.series, "maxSeries": MAX_SERIES })));
    }
    state.budget.hold_to(&mut held, (bytes.len() as u64).saturating_add(items.decoded_bytes())).await?;
    let request = proto::PushRequest::decode(bytes)
        .map_err(|e| ApiError::bad_request("BadBody", format!("not a push.v1.PushRequest: {e}")))?;
    Ok((request, held))
}

/// Stores the profiles an agent pushes (Pyroscope's push API, as pyroscope-io and the
/// Rust agent send them); 200 with Connect's empty `PushResponse`.
#[utoipa::path(post, path = "/push.v1.PusherService/Push", tag = "ranges", operation_id = "Push",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant (X-Scope-OrgID too)"),
        ("Content-Encoding" = Option<String>, Header, description = "gzip or none")),
    request_body(content = Vec<u8>, content_type = "application/proto",
        description = "push.v1.PushRequest: series of pprof profiles with their labels; service_name names the service, __name__ the type (process_cpu, wall, memory, …)"),
    responses((status = 200, description = "stored (an empty PushResponse)"),
        (status = 400, description = "InvalidParameter (no service_name, bad labels), InvalidProfile, BadBody", body = ErrorBody),
        (status = 401, description = "Unauthorized: no or an invalid credential (Bearer, or Basic with the token as the password)", body = ErrorBody),
        (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 408, description = "BodyTooSlow: the body arrived slower than the minimum rate", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge, InflatesTooLarge, OverMemoryBudget, TooManySeries", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: not application/proto, or an encoding other than gzip", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch: __name__ does not match the profile", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn push(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (request, mut held) = push_request(&state, &headers, body).await?;
    // Every series' labels are checked before anything is stored.
    let series = request
        .series
        .into_iter()
        .map(|s| Ok((series_labels(s.labels)?, s.samples)))
        .collect::<Result<Vec<_>, ApiError>>()?;
    for (SeriesLabels { service, kind, labels }, samples) in series {
        for sample in samples {
            let intake = Intake {
                name: format!("{service}.pprof"),
                service: service.clone(),
                labels: labels.clone(),
                claimed: kind,
                filed_by: Some(FiledBy::Push),
                at: None,
                expires: None,
            };
            // Its bytes are the request's: parsed within the request's reservation (a
            // second one for them could wait for the first forever).
            let held = held.split(sample.raw_profile.len() as u64);
            file_pushed(&state, &tenant, sample.raw_profile, held, intake).await?;
        }
    }
    Ok(([(header::CONTENT_TYPE, "application/proto")], proto::PushResponse::default().encode_to_vec()).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str, value: &str) -> proto::LabelPair {
        proto::LabelPair { name: name.into(), value: value.into() }
    }

    #[test]
    fn labels_give_service_type_and_tags() {
        // As pyroscope-io 1.4.0 sends them.
        let got = series_labels(vec![
            pair("__name__", "process_cpu"),
            pair("team", "lens"),
            pair("service_name", "checkout"),
            pair("otel.scope.name", "com.grafana.pyroscope/python"),
            pair("__session_id__", "4b1d"),
        ])
        .unwrap();
        assert_eq!(
            got,
            SeriesLabels {
                service: "checkout".into(),
                kind: Some(ProfileKind::Cpu),
                labels: BTreeMap::from([
                    ("otel.scope.name".into(), "com.grafana.pyroscope/python".into()),
                    ("team".into(), "lens".into())
                ]),
            }
        );
        for (name, kind) in [("memory", Some(ProfileKind::Memory)), ("wall", Some(ProfileKind::Cpu)), ("gpu", None)] {
            let got = series_labels(vec![pair("service_name", "a"), pair("__name__", name)]).unwrap();
            assert_eq!(got.kind, kind, "{name}");
        }
        for bad in [
            vec![pair("team", "lens")],
            vec![pair("service_name", "")],
            vec![pair("service_name", "a/b")],
            vec![pair("service_name", "a"), pair("", "x")],
            vec![pair("service_name", "a"), pair("k", "line\nbreak")],
        ] {
            assert_eq!(series_labels(bad.clone()).unwrap_err().code, "InvalidParameter", "{bad:?}");
        }
    }
}
