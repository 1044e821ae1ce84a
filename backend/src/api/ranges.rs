//! Continuous profiling over time ranges, in Pyroscope's and Parca's shapes where they
//! fit: a range's profiles merged into one (JSON top, pprof, folded or OTLP), totals per
//! step for a timeline, and the label keys and values seen in a range.

use std::collections::BTreeMap;

use axum::extract::State as AxumState;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::analysis::details::details;
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::{Query as ProfileQuery, SampleType};
use stacklens_core::api::{
    FunctionHistory, FunctionPoint, LabelCount, LabelList, RangeEcho, RangeSpec, SeriesLine, SeriesList, SeriesName,
    SeriesPoint, SeriesResponse, TimeBound,
};
use stacklens_core::export::{export, ExportFormat};
use utoipa::ToSchema;

use super::access::{Reader, WritesCaches};
use super::request::{check_name, check_text, parse_kind, parse_labels, required, Params, PathParam};
use super::{ApiError, ErrorBody};
use crate::merging::{merge_range, visit_entries, MergeError, RangeQuery};
use crate::records::blocks;
use crate::records::selector::Selector;
use crate::records::series::{Entry, Series, MAX_RANGE_MS};
use crate::records::{now_millis, rfc3339};
use crate::state::State;
use crate::store::{counting_reads, Reads};

/// Rows of a merged top unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 100;

/// Points of a series unless `step` says otherwise.
const DEFAULT_POINTS: u64 = 120;

/// Most points one series answer may hold, over all its lines (about 40 bytes of JSON
/// each): 10,000 points per line are allowed, but not for a thousand `groupBy` values.
pub const MAX_SERIES_POINTS: u64 = 200_000;

impl From<MergeError> for ApiError {
    fn from(e: MergeError) -> Self {
        match e {
            MergeError::Record(r) => r.into(),
            MergeError::Parse(p) => match p {
                crate::budget::ParseFailure::Budget(b) => b.into(),
                // A stored profile core cannot read any more: the server's problem.
                other => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "UnreadableStoredProfile", other.to_string()),
            },
            MergeError::Incompatible(core) => ApiError::unprocessable(
                "IncompatibleProfiles",
                format!("the range's profiles cannot be merged: {core}"),
            )
            .details(json!({ "coreError": core.code() })),
            MergeError::Stopped(why) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", why),
            e @ MergeError::TooLarge { need, limit } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "MergeTooLarge", e.to_string())
                    .details(json!({ "needBytes": need, "limitBytes": limit }))
            }
        }
    }
}

/// A time as Pyroscope takes it: `now`, `now-1h` (any humantime duration), seconds or
/// milliseconds since the epoch, or RFC 3339. In milliseconds since the epoch.
pub fn parse_time(field: &str, text: &str, now: u64) -> Result<u64, ApiError> {
    let text = text.trim();
    if text == "now" {
        return Ok(now);
    }
    if let Some(ago) = text.strip_prefix("now-") {
        let ago = humantime::parse_duration(ago)
            .map_err(|e| ApiError::invalid(field, format!("{field}: '{text}' is not now-<duration> (now-1h): {e}")))?;
        return Ok(now.saturating_sub(ago.as_millis() as u64));
    }
    if let Ok(number) = text.parse::<u64>() {
        // Seconds until the year 5138; milliseconds after.
        return Ok(if number < 100_000_000_000 { number * 1000 } else { number });
    }
    humantime::parse_rfc3339_weak(text)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                format!("{field}: '{text}' is not a time (RFC 3339, epoch seconds or ms, now, now-1h)"),
            )
        })
}

/// The range a request names: service, profile type, `[from, to)` (the hour before
/// `to`, which is now by default) and labels that must match. `field` names where a
/// bad value came from.
fn build_range(
    tenant: crate::records::Tenant,
    service: &str,
    kind: &str,
    from: Option<&str>,
    to: Option<&str>,
    labels: BTreeMap<String, String>,
    field: impl Fn(&str) -> String,
) -> Result<RangeQuery, ApiError> {
    if service.is_empty() {
        return Err(ApiError::invalid(&field("service"), format!("{} is required", field("service"))));
    }
    check_name(&field("service"), service, 128)?;
    let kind = parse_kind(kind)?;
    let now = now_millis();
    let time = |name: &str, given: Option<&str>, default: u64| match given.filter(|v| !v.is_empty()) {
        Some(text) => parse_time(&field(name), text, now),
        None => Ok(default),
    };
    let to = time("to", to, now)?;
    let from = time("from", from, to.saturating_sub(crate::records::series::HOUR_MS))?;
    if from >= to {
        return Err(ApiError::invalid(&field("from"), "from must be before to"));
    }
    if to - from > MAX_RANGE_MS {
        return Err(ApiError::invalid(
            &field("to"),
            format!("a range covers at most {} days", MAX_RANGE_MS / 86_400_000),
        ));
    }
    let series = Series { tenant, service: service.to_owned(), kind };
    Ok(RangeQuery { series, from, to, labels: Selector::equal(&labels), write_caches: false })
}

/// The query parameters that name a range, which every range handler takes.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeParams {
    service: Option<String>,
    profile_type: Option<String>,
    from: Option<String>,
    to: Option<String>,
    labels: Option<String>,
}

impl RangeParams {
    /// The range these parameters name; what it reads is cached when `writes` says the
    /// request may write.
    fn query(
        &self,
        tenant: crate::records::Tenant,
        WritesCaches(writes): WritesCaches,
    ) -> Result<RangeQuery, ApiError> {
        let service = required(&self.service, "service")?;
        let kind = required(&self.profile_type, "profileType")?;
        let labels = parse_labels(self.labels.as_deref().unwrap_or_default())?;
        let (from, to) = (self.from.as_deref(), self.to.as_deref());
        let range = build_range(tenant, service, kind, from, to, labels, str::to_owned)?;
        Ok(RangeQuery { write_caches: writes, ..range })
    }
}

/// `merge`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeParams {
    #[serde(flatten)]
    range: RangeParams,
    format: Option<String>,
    sample_index: Option<String>,
    limit: Option<String>,
}

/// The query parameters of a range's timeline (`series`, `function_history`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepParams {
    #[serde(flatten)]
    range: RangeParams,
    step: Option<String>,
    sample_index: Option<String>,
    group_by: Option<String>,
}

/// The range one side of a range diff names; `side` prefixes the fields a bad value
/// is reported under.
pub fn spec_query(spec: &RangeSpec, tenant: crate::records::Tenant, side: &str) -> Result<RangeQuery, ApiError> {
    let (from, to) = (spec.from.as_ref().map(TimeBound::to_string), spec.to.as_ref().map(TimeBound::to_string));
    for (k, v) in &spec.labels {
        check_text(&format!("{side}.labels"), k, 128)?;
        check_text(&format!("{side}.labels"), v, 512)?;
    }
    build_range(tenant, &spec.service, &spec.profile_type.0, from.as_deref(), to.as_deref(), spec.labels.clone(), |f| {
        format!("{side}.{f}")
    })
}

/// A merged range, as a diff reports it.
pub fn range_echo(range: &RangeQuery, profile_count: usize, reads: Reads) -> RangeEcho {
    RangeEcho {
        service: range.series.service.clone(),
        profile_type: range.series.kind,
        from: rfc3339(range.from),
        to: rfc3339(range.to),
        labels: range.labels.equalities(),
        profile_count,
        objects_read: reads.objects,
        listings: reads.listings,
    }
}

/// The merged top of a range.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MergedTop {
    /// Stored profiles merged.
    profile_count: usize,
    /// Objects fetched from the store to merge them, and listings made (also the
    /// `Stacklens-Objects-Read` and `Stacklens-Listings` headers of every format).
    objects_read: u64,
    listings: u64,
    from: String,
    to: String,
    /// The top report of `stacklens top --format json` (sampleType, unit, total, functions…).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    top: TopReport,
}

/// Merges every stored profile of a service and type in a range, as `go tool pprof a b c`.
#[utoipa::path(get, path = "/api/v1/profiling/merge", tag = "ranges", operation_id = "MergeRange",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query, description = "RFC 3339, epoch seconds or ms, now, now-1h (default: to - 1h); inclusive"),
        ("to" = Option<String>, Query, description = "as from (default: now); exclusive"),
        ("labels" = Option<String>, Query, description = "k=v,k2=v2: profiles with all of them"),
        ("format" = Option<String>, Query, description = "json (default), pprof (gzipped, what go tool pprof reads), folded or otlp (OTLP profiles protobuf)"),
        ("sampleIndex" = Option<String>, Query, description = "sample type by name or index (default: pprof's)"),
        ("limit" = Option<usize>, Query, description = "JSON: rows of the top (default 100)")),
    responses((status = 200, body = MergedTop, description = "JSON; or the merged profile for format=pprof|folded|otlp"),
        (status = 400, description = "InvalidParameter, InvalidProfileType, InvalidSampleIndex", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "NoProfiles: nothing stored in the range (pprof, folded, otlp)", body = ErrorBody),
        (status = 413, description = "MergeTooLarge: the merged profile needs more than half the memory budget", body = ErrorBody),
        (status = 422, description = "IncompatibleProfiles: the range holds profiles of other sample types", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn merge(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    writes: WritesCaches,
    Params(query): Params<MergeParams>,
) -> Result<Response, ApiError> {
    let range = query.range.query(tenant, writes)?;
    let format = match query.format.as_deref().unwrap_or("json") {
        "json" => None,
        "pprof" => Some(ExportFormat::Pprof),
        "folded" => Some(ExportFormat::Folded),
        "otlp" => Some(ExportFormat::Otlp),
        _ => return Err(ApiError::invalid("format", "format is json, pprof, folded or otlp")),
    };
    let sample_index = query.sample_index.unwrap_or_default();
    check_text("sampleIndex", &sample_index, 128)?;
    let limit = match query.limit {
        None => DEFAULT_LIMIT,
        Some(n) => {
            n.parse().ok().filter(|&n| n > 0).ok_or_else(|| ApiError::invalid("limit", "limit is a positive number"))?
        }
    };
    let (merged, reads) = counting_reads(merge_range(&state, &range, now_millis())).await;
    let merged = merged?;
    let read_headers = [
        (HeaderName::from_static("stacklens-objects-read"), HeaderValue::from(reads.objects)),
        (HeaderName::from_static("stacklens-listings"), HeaderValue::from(reads.listings)),
    ];
    let Some(profile) = merged.profile else {
        if format.is_some() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "NoProfiles", "no stored profile matches the range")
                .details(json!({ "from": rfc3339(range.from), "to": rfc3339(range.to) })));
        }
        let top = TopReport {
            sample_type: String::new(),
            unit: String::new(),
            total: 0,
            node_total: 0,
            dropped_nodes: 0,
            node_cutoff: 0,
            functions: Vec::new(),
        };
        let (from, to) = (rfc3339(range.from), rfc3339(range.to));
        let (objects_read, listings) = (reads.objects, reads.listings);
        return Ok(
            (read_headers, Json(MergedTop { profile_count: 0, objects_read, listings, from, to, top })).into_response()
        );
    };
    let bad_index = |e: stacklens_core::Error| {
        ApiError::bad_request("InvalidSampleIndex", e.to_string()).details(json!({ "field": "sampleIndex" }))
    };
    let (from, to) = (rfc3339(range.from), rfc3339(range.to));
    let profile_count = merged.profile_count;
    let response = tokio::task::spawn_blocking(move || -> Result<Response, ApiError> {
        let prepared = ProfileQuery::of_sample(sample_index.as_str()).prepare(&profile);
        let prepared = prepared.map_err(bad_index)?;
        let file = |format| export(&prepared, format).map_err(bad_index);
        Ok(match format {
            Some(ExportFormat::Folded) => {
                ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], file(ExportFormat::Folded)?).into_response()
            }
            Some(ExportFormat::Otlp) => {
                ([(header::CONTENT_TYPE, ExportFormat::Otlp.media_type())], file(ExportFormat::Otlp)?).into_response()
            }
            Some(format) => ([(header::CONTENT_TYPE, "application/octet-stream")], file(format)?).into_response(),
            None => {
                let options = TopOptions { node_count: Some(limit), ..TopOptions::default() };
                let top = top(&prepared, &options).map_err(bad_index)?;
                let (objects_read, listings) = (reads.objects, reads.listings);
                Json(MergedTop { profile_count, objects_read, listings, from, to, top }).into_response()
            }
        })
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", e.to_string()))??;
    Ok((read_headers, response).into_response())
}

/// The range's stored entries whose labels match.
async fn entries(state: &State, range: &RangeQuery) -> Result<Vec<Entry>, ApiError> {
    let span = (range.from, range.to);
    Ok(blocks::range(&state.store, &range.series, span, &range.labels, now_millis(), range.write_caches).await?)
}

/// The sample type a series sums: by name or index as `sampleIndex`, else each
/// profile's default (pprof's rule, as every analysis resolves it).
fn value_of(entry: &Entry, sample_index: &str) -> Option<usize> {
    SampleType::parse(sample_index).resolve_in(&entry.sample_types, entry.default_index).ok()
}

/// Totals per step over a range, for a timeline: each step sums the totals of the
/// profiles taken in it; `groupBy` splits by one label's values.
#[utoipa::path(get, path = "/api/v1/profiling/series", tag = "ranges", operation_id = "RangeSeries",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query), ("labels" = Option<String>, Query),
        ("step" = Option<String>, Query, description = "seconds or a duration (30s, 5m); default: 120 points"),
        ("groupBy" = Option<String>, Query, description = "a label key: one line per value"),
        ("sampleIndex" = Option<String>, Query, description = "sample type by name or index (default: each profile's default)")),
    responses((status = 200, body = SeriesResponse),
        (status = 400, description = "InvalidParameter, InvalidProfileType, InvalidSampleIndex", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 413, description = "TooManyPoints: more than 200,000 points over all lines", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn series(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    writes: WritesCaches,
    Params(query): Params<StepParams>,
) -> Result<Json<SeriesResponse>, ApiError> {
    let range = query.range.query(tenant, writes)?;
    let span = range.to - range.from;
    let step_ms = step_of(query.step.as_deref(), span, DEFAULT_POINTS, 10_000)?;
    let group_by = query.group_by.as_ref().filter(|g| !g.is_empty());
    let sample_index = query.sample_index.as_deref().unwrap_or_default();
    let (entries, reads) = counting_reads(entries(&state, &range)).await;
    let entries = entries?;
    let steps = span.div_ceil(step_ms) as usize;
    let mut lines: BTreeMap<BTreeMap<String, String>, Vec<SeriesPoint>> = BTreeMap::new();
    let (mut sample_type, mut unit) = (String::new(), String::new());
    for entry in &entries {
        let Some(index) = value_of(entry, sample_index) else {
            return Err(ApiError::bad_request(
                "InvalidSampleIndex",
                format!("sampleIndex '{sample_index}' is not one of {}", entry.sample_types.join(", ")),
            )
            .details(json!({ "field": "sampleIndex" })));
        };
        if sample_type.is_empty() {
            sample_type = entry.sample_types.get(index).cloned().unwrap_or_default();
            unit = entry.units.get(index).cloned().unwrap_or_default();
        }
        let key: BTreeMap<String, String> = group_by
            .map(|k| [(k.clone(), entry.labels.get(k).cloned().unwrap_or_default())].into())
            .unwrap_or_default();
        let groups = lines.len() as u64 + 1;
        let points = match lines.entry(key) {
            std::collections::btree_map::Entry::Occupied(line) => line.into_mut(),
            std::collections::btree_map::Entry::Vacant(_) if groups * steps as u64 > MAX_SERIES_POINTS => {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "TooManyPoints",
                    format!(
                        "the answer would hold more than {MAX_SERIES_POINTS} points ({groups} lines or more of {steps}): \
                         ask for a longer step, a shorter range or fewer groups"
                    ),
                )
                .details(json!({ "maxPoints": MAX_SERIES_POINTS, "pointsPerLine": steps, "lines": groups })));
            }
            std::collections::btree_map::Entry::Vacant(line) => line.insert(
                (0..steps).map(|i| SeriesPoint { t: range.from + i as u64 * step_ms, value: 0, profiles: 0 }).collect(),
            ),
        };
        let point = &mut points[((entry.millis - range.from) / step_ms) as usize];
        point.value = point.value.saturating_add(entry.totals.get(index).copied().unwrap_or(0));
        point.profiles += 1;
    }
    Ok(Json(SeriesResponse {
        from: rfc3339(range.from),
        to: rfc3339(range.to),
        step_seconds: step_ms / 1000,
        sample_type,
        unit,
        series: lines.into_iter().map(|(labels, points)| SeriesLine { labels, points }).collect(),
        objects_read: reads.objects,
        listings: reads.listings,
    }))
}

fn counted(names: impl Iterator<Item = String>) -> Json<LabelList> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    Json(LabelList { labels: counts.into_iter().map(|(name, profiles)| LabelCount { name, profiles }).collect() })
}

/// The label keys of a range's profiles.
#[utoipa::path(get, path = "/api/v1/profiling/labels", tag = "ranges", operation_id = "RangeLabels",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query), ("labels" = Option<String>, Query)),
    responses((status = 200, body = LabelList),
        (status = 400, description = "InvalidParameter, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn labels(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    writes: WritesCaches,
    Params(range): Params<RangeParams>,
) -> Result<Json<LabelList>, ApiError> {
    let range = range.query(tenant, writes)?;
    let entries = entries(&state, &range).await?;
    Ok(counted(entries.into_iter().flat_map(|e| e.labels.into_keys())))
}

/// The values of one label key in a range's profiles.
#[utoipa::path(get, path = "/api/v1/profiling/labels/{key}/values", tag = "ranges", operation_id = "RangeLabelValues",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("key" = String, Path),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query), ("labels" = Option<String>, Query)),
    responses((status = 200, body = LabelList),
        (status = 400, description = "InvalidParameter, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn label_values(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    writes: WritesCaches,
    PathParam(key): PathParam,
    Params(range): Params<RangeParams>,
) -> Result<Json<LabelList>, ApiError> {
    let range = range.query(tenant, writes)?;
    let entries = entries(&state, &range).await?;
    Ok(counted(entries.into_iter().filter_map(|mut e| e.labels.remove(&key))))
}

/// The services and profile types the tenant's time index holds.
#[utoipa::path(get, path = "/api/v1/profiling/services", tag = "ranges", operation_id = "RangeServices",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 200, body = SeriesList),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn services(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
) -> Result<Json<SeriesList>, ApiError> {
    let found = crate::records::series::list(&state.store, &tenant).await?;
    Ok(Json(SeriesList {
        series: found.into_iter().map(|(service, profile_type)| SeriesName { service, profile_type }).collect(),
    }))
}

/// A step in milliseconds from `step` (seconds or a duration), or one that gives
/// `default_points` over `span`.
fn step_of(step: Option<&str>, span: u64, default_points: u64, max_points: u64) -> Result<u64, ApiError> {
    let Some(text) = step.filter(|s| !s.is_empty()) else {
        return Ok(span.div_ceil(default_points).div_ceil(1000).max(1) * 1000);
    };
    let ms = match text.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1000),
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| ApiError::invalid("step", format!("step: '{text}' is not seconds or a duration: {e}")))?
            .as_millis() as u64,
    };
    if ms < 1000 || span / ms > max_points {
        return Err(ApiError::invalid("step", format!("step is at least 1 s and gives at most {max_points} points")));
    }
    Ok(ms)
}

/// A function's self and cum share per step over a range: its trend line.
#[utoipa::path(get, path = "/api/v1/profiling/functions/{name}/history", tag = "ranges", operation_id = "FunctionHistory",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("name" = String, Path, description = "function name"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query), ("to" = Option<String>, Query), ("labels" = Option<String>, Query),
        ("step" = Option<String>, Query, description = "seconds or a duration (30s, 5m); default: 60 points, at most 1,000"),
        ("sampleIndex" = Option<String>, Query, description = "sample type by name or index (default: pprof's)")),
    responses((status = 200, body = FunctionHistory),
        (status = 400, description = "InvalidParameter, InvalidProfileType, InvalidSampleIndex", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn function_history(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    writes: WritesCaches,
    PathParam(name): PathParam,
    Params(query): Params<StepParams>,
) -> Result<Json<FunctionHistory>, ApiError> {
    check_text("name", &name, 4096)?;
    let range = query.range.query(tenant, writes)?;
    let step_ms = step_of(query.step.as_deref(), range.to - range.from, 60, 1000)?;
    let sample_index = query.sample_index.unwrap_or_default();
    check_text("sampleIndex", &sample_index, 128)?;
    let entries = entries(&state, &range).await?;
    let steps = (range.to - range.from).div_ceil(step_ms) as usize;
    let points: Vec<FunctionPoint> =
        (0..steps).map(|i| FunctionPoint { t: range.from + i as u64 * step_ms, ..FunctionPoint::default() }).collect();
    let (from, function) = (range.from, name.clone());
    let ((points, sample_type, unit), _) = visit_entries(
        &state,
        &range.series.tenant,
        &entries,
        (points, String::new(), String::new()),
        move |(points, sample_type, unit), entry, profile| {
            let query = ProfileQuery::of_sample(sample_index.as_str());
            let prepared = query.prepare(&profile).map_err(MergeError::Incompatible)?;
            let index = prepared.sample_index;
            let (flat, cum) = match details(&prepared, &function) {
                Ok(found) => found.values.get(index).map_or((0, 0), |v| (v.flat, v.cum)),
                Err(stacklens_core::Error::UnknownNode(_)) => (0, 0),
                Err(e) => return Err(MergeError::Incompatible(e)),
            };
            if sample_type.is_empty() {
                *sample_type = profile.sample_type_name(index).to_owned();
                *unit = profile.sample_type_unit(index).to_owned();
            }
            let point = &mut points[((entry.millis - from) / step_ms) as usize];
            point.flat += flat;
            point.cum += cum;
            point.total += profile.total(index);
            point.profiles += 1;
            Ok(())
        },
    )
    .await
    .map_err(|e| match e {
        MergeError::Incompatible(core) => {
            ApiError::bad_request("InvalidSampleIndex", core.to_string()).details(json!({ "field": "sampleIndex" }))
        }
        other => other.into(),
    })?;
    let share = |v: i64, total: i64| if total != 0 { v as f64 * 100.0 / total as f64 } else { 0.0 };
    let points = points
        .into_iter()
        .map(|p| FunctionPoint { self_share_pct: share(p.flat, p.total), cum_share_pct: share(p.cum, p.total), ..p })
        .collect();
    Ok(Json(FunctionHistory {
        function: name,
        from: rfc3339(range.from),
        to: rfc3339(range.to),
        step_seconds: step_ms / 1000,
        sample_type,
        unit,
        points,
    }))
}
