//! Pyroscope's HTTP query routes, which its own UI, Perses' Pyroscope plugin and
//! scripts call: `/pyroscope/render` (a flame graph in flamebearer JSON with its
//! timeline, or DOT), `/pyroscope/render-diff` and `/pyroscope/label-values`. A query is
//! `<profile type id>{<label matchers>}`, times as Pyroscope takes them (`now-1h`, epoch
//! seconds or milliseconds, RFC 3339).

use std::collections::BTreeMap;

use axum::extract::State as AxumState;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use stacklens_core::layout::flamebearer::Flamebearer;
use utoipa::ToSchema;

use super::access::{Reader, WritesCaches};
use super::querier::{
    diff_graph, dot_graph, flame_graph, profile_type, step_sums, time_range, Shown, DEFAULT_MAX_NODES,
};
use super::ranges::parse_time;
use super::request::Params;
use super::{ApiError, ErrorBody};
use crate::querying::{Selection, StepSum};
use crate::records::now_millis;
use crate::records::profile_types::ProfileTypeId;
use crate::records::selector::Selector;
use crate::records::Tenant;
use crate::state::State;

/// Frames of a DOT graph unless `maxNodes` says otherwise (Pyroscope's default).
const DEFAULT_DOT_NODES: usize = 100;

/// A query's profile type and selector: `process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api"}`.
fn parse_query(field: &str, text: Option<&str>) -> Result<(ProfileTypeId, Selector), ApiError> {
    let text = text
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::invalid(field, format!("{field} is required")))?;
    let (metric, selector) = Selector::parse(text).map_err(|e| ApiError::invalid(field, e.to_string()))?;
    let metric = metric.ok_or_else(|| {
        ApiError::invalid(
            field,
            format!("{field} starts with a profile type id, as process_cpu:cpu:nanoseconds:cpu:nanoseconds{{…}}"),
        )
    })?;
    Ok((profile_type(field, &metric)?, selector))
}

/// `[from, until)` in milliseconds from Pyroscope's time parameters (the last hour by default).
fn range_of(from: Option<&str>, until: Option<&str>, fields: (&str, &str)) -> Result<(i64, i64), ApiError> {
    let now = now_millis();
    let time = |field: &str, text: Option<&str>| match text.filter(|t| !t.is_empty()) {
        Some(text) => parse_time(field, text, now).map(|ms| ms as i64),
        None => Ok(0),
    };
    let (from, until) = (time(fields.0, from)?, time(fields.1, until)?);
    let (from, to) = time_range(from, until)?;
    Ok((from as i64, to as i64))
}

/// `maxNodes` (or `max-nodes`) of a request.
fn max_nodes(given: Option<&str>, default: usize) -> Result<usize, ApiError> {
    match given.filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(text) => match text.parse::<i64>() {
            Ok(n) if n <= 0 => Ok(default),
            Ok(n) if n <= super::querier::MAX_MAX_NODES => Ok(n as usize),
            _ => Err(ApiError::invalid(
                "maxNodes",
                format!("maxNodes is a number up to {}", super::querier::MAX_MAX_NODES),
            )),
        },
    }
}

/// A flame graph in Pyroscope's flamebearer JSON.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlamebearerProfile {
    version: u32,
    flamebearer: FlamebearerBody,
    metadata: FlamebearerMetadata,
    /// Totals per step over the range (null for a diff).
    timeline: Option<Timeline>,
    /// With `groupBy`: a timeline per value of the label.
    groups: Option<BTreeMap<String, Timeline>>,
    #[schema(value_type = Option<Object>)]
    heatmap: Option<()>,
    #[serde(skip_serializing_if = "Option::is_none")]
    left_ticks: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    right_ticks: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct FlamebearerBody {
    names: Vec<String>,
    /// Per depth, 4 numbers per frame (x after the previous frame, total, self, name
    /// index); 7 for a diff (left x, total, self, right x, total, self, name).
    levels: Vec<Vec<i64>>,
    num_ticks: i64,
    max_self: i64,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct FlamebearerMetadata {
    /// `single`, or `double` for a diff.
    format: &'static str,
    spy_name: String,
    /// Ticks per second for CPU time (nanoseconds), else 100.
    sample_rate: u32,
    /// samples, objects, bytes, …
    units: String,
    /// The sample type.
    name: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// The first step's start, in seconds since the epoch.
    start_time: u64,
    samples: Vec<u64>,
    /// The step, in seconds.
    duration_delta: u64,
    #[schema(value_type = Option<Object>)]
    watermarks: Option<()>,
}

impl FlamebearerProfile {
    fn new(f: Flamebearer, t: &ProfileTypeId) -> Self {
        // As Pyroscope labels its flame graphs' units.
        let (units, sample_rate) = match t.sample_type.as_str() {
            "cpu" => ("samples".to_owned(), 1_000_000_000),
            "inuse_objects" | "alloc_objects" | "goroutine" | "samples" => ("objects".to_owned(), 100),
            _ => (t.sample_unit.clone(), 100),
        };
        let (left_ticks, right_ticks) = f.ticks.unzip();
        FlamebearerProfile {
            version: 1,
            flamebearer: FlamebearerBody {
                names: f.names,
                levels: f.levels,
                num_ticks: f.num_ticks,
                max_self: f.max_self,
            },
            metadata: FlamebearerMetadata {
                format: if f.ticks.is_some() { "double" } else { "single" },
                spy_name: String::new(),
                sample_rate,
                units,
                name: t.sample_type.clone(),
            },
            timeline: None,
            groups: None,
            heatmap: None,
            left_ticks,
            right_ticks,
        }
    }
}

/// The step of a render's timeline for a range (Grafana's rule, as Pyroscope takes
/// it: about 1,500 points, at least 15 s, rounded to a usual step), in milliseconds.
fn timeline_step(span_ms: u64) -> u64 {
    const STEPS_S: [u64; 20] = [
        15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 86400, 604_800,
        2_592_000, 31_536_000,
    ];
    // The upper bound of each step's band, in ms (a raw interval up to it rounds to it).
    const BANDS_MS: [u64; 20] = [
        17_500,
        25_000,
        45_000,
        90_000,
        210_000,
        450_000,
        750_000,
        1_050_000,
        1_500_000,
        2_700_000,
        5_400_000,
        9_000_000,
        16_200_000,
        32_400_000,
        86_400_000,
        172_800_000,
        604_800_000,
        1_814_400_000,
        3_628_800_000 - 1,
        u64::MAX,
    ];
    let raw = span_ms / 1500;
    if raw < 15_000 {
        return 15_000;
    }
    let band = BANDS_MS.iter().position(|&b| raw <= b).unwrap_or(BANDS_MS.len() - 1);
    STEPS_S[band] * 1000
}

/// `render`'s query parameters.
#[derive(Deserialize)]
pub struct RenderParams {
    query: Option<String>,
    from: Option<String>,
    until: Option<String>,
    format: Option<String>,
    #[serde(rename = "maxNodes")]
    max_nodes: Option<String>,
    #[serde(rename = "max-nodes")]
    max_nodes_dashed: Option<String>,
    #[serde(rename = "groupBy")]
    group_by: Option<String>,
    aggregation: Option<String>,
}

/// A range's profiles of one type merged, as Pyroscope's UI and Perses read them: a
/// flame graph with its timeline (`format=json`, the default) or DOT (`format=dot`).
#[utoipa::path(get, path = "/pyroscope/render", tag = "pyroscope", operation_id = "PyroscopeRender",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)"),
        ("query" = String, Query, description = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\",region=~\"eu.*\"}"),
        ("from" = Option<String>, Query, description = "now-1h (default), epoch seconds or ms, RFC 3339"),
        ("until" = Option<String>, Query, description = "as from (default: now)"),
        ("format" = Option<String>, Query, description = "json (default) or dot"),
        ("maxNodes" = Option<usize>, Query, description = "frames of the flame graph (default 8192) or nodes of the DOT graph (default 100); max-nodes too"),
        ("groupBy" = Option<String>, Query, description = "a label: a timeline per value in groups"),
        ("aggregation" = Option<String>, Query, description = "sum (default) or avg: a timeline step's profiles summed or averaged")),
    responses((status = 200, body = FlamebearerProfile, description = "flamebearer JSON; text/plain DOT for format=dot"),
        (status = 400, description = "InvalidParameter: a bad query, time or maxNodes; InvalidQuery, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 413, description = "MergeTooLarge", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn render(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    WritesCaches(writes): WritesCaches,
    Params(p): Params<RenderParams>,
) -> Result<Response, ApiError> {
    let (t, selector) = parse_query("query", p.query.as_deref())?;
    let (from, to) = range_of(p.from.as_deref(), p.until.as_deref(), ("from", "until"))?;
    let given_nodes = p.max_nodes.as_deref().or(p.max_nodes_dashed.as_deref());
    let average = match p.aggregation.as_deref().unwrap_or("sum") {
        "sum" | "" => false,
        "avg" => true,
        _ => return Err(ApiError::invalid("aggregation", "aggregation is sum or avg")),
    };
    let selection = Selection {
        tenant: tenant.clone(),
        profile_type: Some(t.clone()),
        selector: selector.clone(),
        from: from as u64,
        to: to as u64,
        write_caches: writes,
    };
    match p.format.as_deref().unwrap_or("json") {
        "json" | "" => {}
        "dot" => {
            let nodes = max_nodes(given_nodes, DEFAULT_DOT_NODES)?;
            let merged = selection.merge(&state).await?;
            let text = dot_graph(merged.profile, &Shown::new(t, nodes)).await?;
            return Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response());
        }
        _ => return Err(ApiError::invalid("format", "format is json or dot")),
    }
    let nodes = max_nodes(given_nodes, DEFAULT_MAX_NODES as usize)?;
    // Bound until the answer is made: it holds the merge's memory reservation.
    let merged = selection.merge(&state).await?;
    let graph = flame_graph(merged.profile, &Shown::new(t.clone(), nodes)).await?;
    let mut out = FlamebearerProfile::new(graph, &t);
    let group_by: Vec<String> = p.group_by.into_iter().filter(|g| !g.is_empty()).collect();
    let (timeline, groups) = timelines(&state, tenant, writes, &t, &selector, (from, to), &group_by, average).await?;
    out.timeline = Some(timeline);
    out.groups = (!group_by.is_empty()).then_some(groups);
    Ok(Json(out).into_response())
}

/// The render's timeline over `[from, to)` (steps aligned to multiples of the step,
/// empty steps zero), and one per value of `group_by`'s label.
#[allow(clippy::too_many_arguments)]
async fn timelines(
    state: &State,
    tenant: Tenant,
    writes: bool,
    t: &ProfileTypeId,
    selector: &Selector,
    (from, to): (i64, i64),
    group_by: &[String],
    average: bool,
) -> Result<(Timeline, BTreeMap<String, Timeline>), ApiError> {
    let step_ms = timeline_step((to - from) as u64);
    let start = from as u64 / step_ms * step_ms;
    let steps = (to as u64 - start).div_ceil(step_ms) as usize;
    // One read of the range: the groups' steps, added up for the whole timeline.
    let label: Vec<String> = group_by.first().cloned().into_iter().collect();
    let range = (start as i64, to);
    let step_s = (step_ms / 1000) as f64;
    let lines = step_sums(state, tenant, writes, &t.to_string(), &selector.to_string(), range, step_s, &label).await?;
    let timeline = |points: &mut dyn Iterator<Item = &StepSum>| {
        let mut steps = vec![(0i64, 0u32); steps];
        for p in points {
            if let Some(slot) = steps.get_mut(((p.t - start) / step_ms) as usize) {
                *slot = (slot.0.saturating_add(p.sum), slot.1 + p.profiles);
            }
        }
        let samples = (0u64..)
            .zip(steps)
            .map(|(i, (sum, profiles))| {
                StepSum { t: start + i * step_ms, sum, profiles }.value(average).max(0.0) as u64
            })
            .collect();
        Timeline { start_time: start / 1000, samples, duration_delta: step_ms / 1000, watermarks: None }
    };
    let whole = timeline(&mut lines.iter().flat_map(|l| &l.points));
    let mut groups = BTreeMap::new();
    if let Some(label) = group_by.first() {
        for line in &lines {
            let key = line.labels.get(label).filter(|v| !v.is_empty()).cloned().unwrap_or_else(|| "*".into());
            groups.insert(key, timeline(&mut line.points.iter()));
        }
    }
    Ok((whole, groups))
}

/// `render-diff`'s query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderDiffParams {
    left_query: Option<String>,
    left_from: Option<String>,
    left_until: Option<String>,
    right_query: Option<String>,
    right_from: Option<String>,
    right_until: Option<String>,
    max_nodes: Option<String>,
}

/// Two ranges of one type compared: a diff flame graph (`format: double`), left the base.
#[utoipa::path(get, path = "/pyroscope/render-diff", tag = "pyroscope", operation_id = "PyroscopeRenderDiff",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)"),
        ("leftQuery" = String, Query), ("leftFrom" = Option<String>, Query), ("leftUntil" = Option<String>, Query),
        ("rightQuery" = String, Query), ("rightFrom" = Option<String>, Query), ("rightUntil" = Option<String>, Query),
        ("maxNodes" = Option<usize>, Query, description = "frames of the flame graph (default 8192)")),
    responses((status = 200, body = FlamebearerProfile, description = "flamebearer JSON, format double, with leftTicks and rightTicks"),
        (status = 400, description = "InvalidParameter: a bad query or time, or queries of two types; InvalidQuery, InvalidProfileType", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 413, description = "MergeTooLarge", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn render_diff(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    WritesCaches(writes): WritesCaches,
    Params(p): Params<RenderDiffParams>,
) -> Result<Json<FlamebearerProfile>, ApiError> {
    let side = |query: Option<&str>, from: Option<&str>, until: Option<&str>, prefix: &str| {
        let (t, selector) = parse_query(&format!("{prefix}Query"), query)?;
        let (from, to) = range_of(from, until, (&format!("{prefix}From"), &format!("{prefix}Until")))?;
        let selection = Selection {
            tenant: tenant.clone(),
            profile_type: Some(t),
            selector,
            from: from as u64,
            to: to as u64,
            write_caches: writes,
        };
        Ok::<_, ApiError>(selection)
    };
    let left = side(p.left_query.as_deref(), p.left_from.as_deref(), p.left_until.as_deref(), "left")?;
    let right = side(p.right_query.as_deref(), p.right_from.as_deref(), p.right_until.as_deref(), "right")?;
    let t = left.profile_type.clone().expect("a side names its type");
    if right.profile_type.as_ref() != Some(&t) {
        return Err(ApiError::invalid("rightQuery", "the two queries are of one profile type"));
    }
    let nodes = max_nodes(p.max_nodes.as_deref(), DEFAULT_MAX_NODES as usize)?;
    let (l, r) = (left.merge(&state).await?, right.merge(&state).await?);
    let graph = diff_graph(l.profile, r.profile, &Shown::new(t.clone(), nodes)).await?;
    Ok(Json(FlamebearerProfile::new(graph, &t)))
}

/// `label-values`' query parameters.
#[derive(Deserialize)]
pub struct LabelValuesParams {
    label: Option<String>,
    from: Option<String>,
    until: Option<String>,
}

/// The values of one label over the tenant's series (the last hour by default);
/// `label=__name__` gives the profile type ids.
#[utoipa::path(get, path = "/pyroscope/label-values", tag = "pyroscope", operation_id = "PyroscopeLabelValues",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)"),
        ("label" = String, Query, description = "a label name, or __name__ for the profile type ids"),
        ("from" = Option<String>, Query), ("until" = Option<String>, Query)),
    responses((status = 200, body = Vec<String>, description = "the values, sorted"),
        (status = 400, description = "InvalidParameter", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn label_values(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    WritesCaches(writes): WritesCaches,
    Params(p): Params<LabelValuesParams>,
) -> Result<Json<Vec<String>>, ApiError> {
    let label = p.label.filter(|l| !l.is_empty()).ok_or_else(|| ApiError::invalid("label", "label is required"))?;
    let (from, to) = range_of(p.from.as_deref(), p.until.as_deref(), ("from", "until"))?;
    let selection = Selection {
        tenant,
        profile_type: None,
        selector: Selector::default(),
        from: from as u64,
        to: to as u64,
        write_caches: writes,
    };
    if label == "__name__" {
        let types = selection.profile_types(&state).await?;
        return Ok(Json(types.into_iter().map(|t| t.to_string()).collect()));
    }
    Ok(Json(selection.label_values(&state, &label).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_steps_follow_pyroscope() {
        // Grafana's intervals: an hour gives the 15 s minimum, a day 1 min, a week 5 min, 30 days 30 min.
        assert_eq!(timeline_step(3_600_000), 15_000);
        assert_eq!(timeline_step(86_400_000), 60_000);
        assert_eq!(timeline_step(7 * 86_400_000), 300_000);
        assert_eq!(timeline_step(30 * 86_400_000), 1_800_000);
    }

    #[test]
    fn queries_need_a_profile_type() {
        let (t, selector) =
            parse_query("query", Some(r#"memory:inuse_space:bytes:space:bytes{service_name="a"}"#)).unwrap();
        assert_eq!((t.sample_type.as_str(), selector.to_string().as_str()), ("inuse_space", r#"{service_name="a"}"#));
        for bad in [None, Some(""), Some(r#"{service_name="a"}"#), Some("cpu{}"), Some("a:b:c:d:e{")] {
            assert!(parse_query("query", bad).is_err(), "{bad:?}");
        }
    }
}
