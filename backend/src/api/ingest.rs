//! Pyroscope's HTTP ingest, so that Pyroscope agents and SDKs (and Grafana Alloy) push
//! to stacklens unchanged but for the address: `POST /ingest?name=app.cpu{k=v}&from=&until=`
//! with folded or lines text, pprof (raw or multipart, as the SDKs send it) or JFR.
//! A pushed profile is stored as a session that its entry in the service's time index
//! (at `from`) holds, so retention removes it.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{header, HeaderMap, StatusCode};
use bytes::Bytes;
use stacklens_core::ProfileKind;

use super::access::Writer;
use super::request::{check_name, check_text, parse_labels, read_held_body, Params};
use super::{ApiError, ErrorBody};
use crate::budget::Reservation;
use crate::intake::{file_profile_held, Intake};
use crate::records::refs::Holder;
use crate::records::series::FiledBy;
use crate::records::{index, now_millis, ordered_id, Tenant};
use crate::state::{AppState, State};
use serde::Deserialize;

/// Pyroscope's type suffixes of an application name (`app.cpu`, `app.inuse_space`, …).
pub(super) fn kind_of_suffix(suffix: &str) -> Option<ProfileKind> {
    Some(match suffix {
        "cpu" | "itimer" | "wall" => ProfileKind::Cpu,
        "inuse_objects" | "inuse_space" => ProfileKind::Memory,
        "alloc_objects" | "alloc_space" => ProfileKind::Alloc,
        "goroutines" | "goroutine" => ProfileKind::Goroutine,
        "mutex_count" | "mutex_duration" => ProfileKind::Mutex,
        "block_count" | "block_duration" => ProfileKind::Block,
        _ => return None,
    })
}

/// What an application name says: `app.cpu{k=v,k2=v2}`.
struct AppName {
    service: String,
    /// The type its suffix names.
    kind: Option<ProfileKind>,
    labels: BTreeMap<String, String>,
}

fn parse_name(name: &str) -> Result<AppName, ApiError> {
    let (base, labels) = match name.split_once('{') {
        None => (name, BTreeMap::new()),
        Some((base, rest)) => {
            let inner =
                rest.strip_suffix('}').ok_or_else(|| ApiError::invalid("name", "name's labels end with '}'"))?;
            (base, parse_labels(inner)?)
        }
    };
    let (service, kind) = match base.rsplit_once('.') {
        Some((service, suffix)) if kind_of_suffix(suffix).is_some() => (service, kind_of_suffix(suffix)),
        _ => (base, None),
    };
    check_name("name", service, 128)?;
    if service.is_empty() {
        return Err(ApiError::invalid("name", "name is required: the application, e.g. checkout.cpu{region=eu}"));
    }
    Ok(AppName { service: service.to_owned(), kind, labels })
}

/// The profile inside a multipart body: the `profile` part (pprof, as the Go, Node and
/// Python SDKs and Alloy send it) or the `jfr` part.
async fn multipart_profile(bytes: Bytes, boundary: String) -> Result<Bytes, ApiError> {
    let bad = |e: multer::Error| ApiError::bad_request("BadBody", format!("cannot read the multipart body: {e}"));
    let stream = futures::stream::once(async move { Ok::<_, std::convert::Infallible>(bytes) });
    let mut parts = multer::Multipart::new(stream, boundary);
    while let Some(part) = parts.next_field().await.map_err(bad)? {
        if matches!(part.name(), Some("profile" | "jfr")) {
            return part.bytes().await.map_err(bad);
        }
    }
    Err(ApiError::bad_request("BadBody", "the multipart body has no 'profile' (or 'jfr') part"))
}

/// `lines` (one stack per line, one sample each) as folded text.
fn lines_to_folded(text: &[u8]) -> Result<Bytes, ApiError> {
    let text =
        std::str::from_utf8(text).map_err(|_| ApiError::bad_request("InvalidProfile", "lines must be UTF-8 text"))?;
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        *counts.entry(line).or_default() += 1;
    }
    Ok(Bytes::from(counts.into_iter().map(|(stack, n)| format!("{stack} {n}\n")).collect::<String>()))
}

/// `ingest`'s query parameters, as Pyroscope's agents send them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestParams {
    name: Option<String>,
    from: Option<String>,
    format: Option<String>,
    spy_name: Option<String>,
    units: Option<String>,
    aggregation_type: Option<String>,
    sample_rate: Option<String>,
    until: Option<String>,
}

/// Stores a profile an agent pushes (Pyroscope's ingest API); 200 with an empty body,
/// as Pyroscope answers.
#[utoipa::path(post, path = "/ingest", tag = "ranges", operation_id = "Ingest",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("name" = String, Query, description = "application, with Pyroscope's type suffix and labels: checkout.cpu{region=eu}"),
        ("from" = Option<u64>, Query, description = "when profiling started (UNIX seconds; default now)"),
        ("until" = Option<u64>, Query, description = "when it stopped (UNIX seconds)"),
        ("format" = Option<String>, Query, description = "folded (default), lines, pprof or jfr; a multipart body holds pprof or JFR"),
        ("sampleRate" = Option<u64>, Query), ("spyName" = Option<String>, Query), ("units" = Option<String>, Query),
        ("aggregationType" = Option<String>, Query)),
    request_body(content = Vec<u8>, description = "the profile: text, pprof (gzipped or not) or JFR; or multipart/form-data with a 'profile' or 'jfr' part"),
    responses((status = 200, description = "stored"),
        (status = 400, description = "InvalidParameter, InvalidProfile, BadBody", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden, InsufficientScope", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge, InflatesTooLarge, OverMemoryBudget", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch: the name's type suffix does not match the profile", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn ingest(
    AxumState(state): AxumState<State>,
    Writer(tenant): Writer,
    Params(query): Params<IngestParams>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let AppName { service, kind: claimed, labels } = parse_name(query.name.as_deref().unwrap_or_default())?;
    let at = match query.from.filter(|v| !v.is_empty()) {
        None => now_millis(),
        Some(from) => from
            .parse::<u64>()
            .map(|seconds| seconds.saturating_mul(1000))
            .map_err(|_| ApiError::invalid("from", "from is UNIX seconds"))?,
    };
    let format = query.format.as_deref().unwrap_or("folded");
    if !["folded", "collapsed", "lines", "pprof", "jfr"].contains(&format) {
        return Err(ApiError::invalid("format", format!("format '{format}' is not folded, lines, pprof or jfr")));
    }
    let unused = [
        ("spyName", &query.spy_name),
        ("units", &query.units),
        ("aggregationType", &query.aggregation_type),
        ("sampleRate", &query.sample_rate),
        ("until", &query.until),
    ];
    for (field, value) in unused {
        check_text(field, value.as_deref().unwrap_or_default(), 128)?;
    }
    let (mut bytes, held) = read_held_body(&state, body).await?;
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if let Ok(boundary) = multer::parse_boundary(content_type) {
        bytes = multipart_profile(bytes, boundary).await?;
    } else if format == "lines" {
        bytes = lines_to_folded(&bytes)?;
    }
    let intake = Intake {
        name: format!("{service}.{format}"),
        service,
        labels,
        claimed,
        filed_by: Some(FiledBy::Push),
        at: Some(at),
        expires: None,
    };
    file_pushed(&state, &tenant, bytes, held, intake).await?;
    Ok(StatusCode::OK)
}

/// Files a pushed profile (of `/ingest` or the push API), its bytes counted by `held`.
/// Only the index holds a pushed profile, so retention removes it with its entry: the
/// push holds it while it is filed, then lets go.
pub(super) async fn file_pushed(
    state: &AppState,
    tenant: &Tenant,
    bytes: Bytes,
    held: Reservation,
    intake: Intake,
) -> Result<(), ApiError> {
    let holder = Holder::Record(ordered_id("push"));
    let stored = file_profile_held(state, tenant, bytes, held, intake, &holder).await?;
    index::release(&state.store, tenant, &stored.record.id, &holder).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pyroscope_name_gives_service_type_and_labels() {
        let name = parse_name("my.awesome.app.cpu{env=staging,region=us-west-1}").unwrap();
        assert_eq!((name.service.as_str(), name.kind), ("my.awesome.app", Some(ProfileKind::Cpu)));
        assert_eq!(
            name.labels,
            BTreeMap::from([("env".into(), "staging".into()), ("region".into(), "us-west-1".into())])
        );
        let name = parse_name("checkout").unwrap();
        assert_eq!((name.service.as_str(), name.kind, name.labels.len()), ("checkout", None, 0));
        assert!(parse_name("app.cpu{env=x").is_err());
        assert!(parse_name(".cpu").is_err());
        assert!(parse_name("a/b.cpu").is_err());
    }

    #[test]
    fn lines_count_repeated_stacks() {
        assert_eq!(&lines_to_folded(b"a;b\na;c\na;b\n\n").unwrap()[..], b"a;b 2\na;c 1\n");
    }
}
