//! Pyroscope's query API, `querier.v1.QuerierService` over Connect (unary, JSON or
//! protobuf, gzip-encoded or not), so that Grafana's Pyroscope data source and Perses'
//! Pyroscope plugin read stacklens unchanged: profile types, label names and values,
//! series, a range merged as a flame graph, DOT or pprof, totals per step, and diffs.
//! Each answer is made by [`crate::querying`] from the time index and core's analyses.
//! Here: the routes and what their requests ask; `call` is Connect's unary protocol,
//! `shown` the shapes a merge is answered in (also for [`super::render`]), `proto` the
//! messages.

mod call;
mod proto;
mod shown;

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use stacklens_core::layout::flamebearer::Flamebearer;

use super::rpc::ConnectError;
use super::ApiError;
use crate::querying::{QueryError, Selection};
use crate::records::profile_types::ProfileTypeId;
use crate::records::selector::Selector;
use crate::records::series::{HOUR_MS, MAX_RANGE_MS};
use crate::records::{now_millis, Tenant};
use crate::state::AppState;
use call::{Call, ConnectErrors};
use proto::{FlameGraph, FlameGraphDiff, Level};
pub use shown::{diff_graph, dot_graph, flame_graph, Shown};
use shown::{ids_focus, pprof_message};

/// Flame graph nodes unless `max_nodes` says otherwise, and the most it may say
/// (Pyroscope's defaults).
pub const DEFAULT_MAX_NODES: i64 = 8192;
pub const MAX_MAX_NODES: i64 = 1 << 20;

/// Most points one SelectSeries answer may hold, over all its series.
const MAX_POINTS: u64 = super::ranges::MAX_SERIES_POINTS;

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Record(e) => e.into(),
            QueryError::Merge(e) => e.into(),
            QueryError::Invalid(message) => ApiError::bad_request("InvalidQuery", message),
        }
    }
}

impl<M> Call<M> {
    /// What a merge request asks, checked (see [`merge_ask`]).
    fn ask(&self, r: &proto::SelectMergeStacktracesRequest) -> Result<MergeAsk, ApiError> {
        answered(&[
            ("stack_trace_selector", r.stack_trace_selector.is_some()),
            ("profile_id_selector", !r.profile_id_selector.is_empty()),
            ("trace_id_selector with span_selector", !r.trace_id_selector.is_empty() && !r.span_selector.is_empty()),
        ])?;
        let range = (r.start, r.end);
        let (tenant, writes) = (self.tenant.clone(), self.writes);
        let mut ask = merge_ask(tenant, writes, &r.profile_type_id, &r.label_selector, range, r.max_nodes)?;
        ask.shown.tag_focus = match (&r.span_selector[..], &r.trace_id_selector[..]) {
            ([], []) => None,
            (spans, []) => Some(ids_focus("span_selector", "span_id", spans, 16)?),
            (_, traces) => Some(ids_focus("trace_id_selector", "trace_id", traces, 32)?),
        };
        Ok(ask)
    }

    /// The selections of a listing (see [`selections`]).
    fn selections(&self, matchers: &[String], range: (i64, i64)) -> Result<Vec<Selection>, ApiError> {
        selections(&self.tenant, self.writes, matchers, range)
    }
}

/// `[from, to)` from a request's `start` and `end` (milliseconds; 0 when not given):
/// the hour before `end`, which is now by default.
pub fn time_range(start: i64, end: i64) -> Result<(u64, u64), ApiError> {
    let now = now_millis();
    let to = if end > 0 { end as u64 } else { now };
    let from = if start > 0 { start as u64 } else { to.saturating_sub(HOUR_MS) };
    if from >= to {
        return Err(ApiError::invalid("start", "start must be before end"));
    }
    if to - from > MAX_RANGE_MS {
        return Err(ApiError::invalid("end", format!("a range covers at most {} days", MAX_RANGE_MS / 86_400_000)));
    }
    Ok((from, to))
}

/// A selector as Pyroscope's requests give one: `{…}`, or nothing for all.
fn selector(field: &str, text: &str) -> Result<Selector, ApiError> {
    if text.trim().is_empty() {
        return Ok(Selector::default());
    }
    match Selector::parse(text) {
        Ok((None, selector)) => Ok(selector),
        Ok((Some(metric), _)) => Err(ApiError::invalid(
            field,
            format!("{field} is a label selector ({{k=\"v\"}}), without '{metric}' before it"),
        )),
        Err(e) => Err(ApiError::invalid(field, e.to_string())),
    }
}

/// The profile type a request names.
pub fn profile_type(field: &str, id: &str) -> Result<ProfileTypeId, ApiError> {
    ProfileTypeId::parse(id).map_err(|e| ApiError::invalid(field, e.to_string()))
}

/// The selections of a listing: one per selector in `matchers` (their answers are
/// joined, as Prometheus joins them), or one of everything.
fn selections(
    tenant: &Tenant,
    writes: bool,
    matchers: &[String],
    (start, end): (i64, i64),
) -> Result<Vec<Selection>, ApiError> {
    let (from, to) = time_range(start, end)?;
    let one =
        |selector| Selection { tenant: tenant.clone(), profile_type: None, selector, from, to, write_caches: writes };
    if matchers.is_empty() {
        return Ok(vec![one(Selector::default())]);
    }
    matchers.iter().map(|m| selector("matchers", m).map(one)).collect()
}

/// What a merge request asks for, checked: its selection, and how its merge is shown.
pub struct MergeAsk {
    pub selection: Selection,
    pub shown: Shown,
}

/// Refuses a request that sets a selector stacklens does not answer (`unanswered`:
/// each field and whether it is set), rather than answering it unfiltered.
fn answered(unanswered: &[(&str, bool)]) -> Result<(), ApiError> {
    match unanswered.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            format!("{field} is not answered by stacklens: select by labels instead"),
        )),
        None => Ok(()),
    }
}

/// A merge request's selection and how it is shown, checked.
fn merge_ask(
    tenant: Tenant,
    writes: bool,
    profile_type_id: &str,
    label_selector: &str,
    (start, end): (i64, i64),
    max_nodes: Option<i64>,
) -> Result<MergeAsk, ApiError> {
    let max_nodes = match max_nodes {
        None | Some(..=0) => DEFAULT_MAX_NODES,
        Some(n) if n > MAX_MAX_NODES => {
            return Err(ApiError::invalid("maxNodes", format!("max_nodes is at most {MAX_MAX_NODES}")));
        }
        Some(n) => n,
    };
    let (from, to) = time_range(start, end)?;
    let t = profile_type("profileTypeID", profile_type_id)?;
    let selector = selector("labelSelector", label_selector)?;
    let selection = Selection { tenant, profile_type: Some(t.clone()), selector, from, to, write_caches: writes };
    Ok(MergeAsk { selection, shown: Shown::new(t, max_nodes as usize) })
}

fn levels(levels: Vec<Vec<i64>>) -> Vec<Level> {
    levels.into_iter().map(|values| Level { values }).collect()
}

impl From<Flamebearer> for FlameGraph {
    fn from(f: Flamebearer) -> Self {
        FlameGraph { names: f.names, levels: levels(f.levels), total: f.num_ticks, max_self: f.max_self }
    }
}

impl From<Flamebearer> for FlameGraphDiff {
    fn from(f: Flamebearer) -> Self {
        let (left_ticks, right_ticks) = f.ticks.unwrap_or_default();
        FlameGraphDiff {
            names: f.names,
            levels: levels(f.levels),
            total: f.num_ticks,
            max_self: f.max_self,
            left_ticks,
            right_ticks,
        }
    }
}

fn pairs(labels: BTreeMap<String, String>) -> Vec<proto::LabelPair> {
    labels.into_iter().map(|(name, value)| proto::LabelPair { name, value }).collect()
}

/// The profile types stored.
#[utoipa::path(post, path = "/querier.v1.QuerierService/ProfileTypes", tag = "pyroscope", operation_id = "QuerierProfileTypes",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.ProfileTypesRequest {start, end} (application/proto too)"),
    responses((status = 200, description = "querier.v1.ProfileTypesResponse: the types of each series' newest profile"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn profile_types(call: Call<proto::ProfileTypesRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    let mut types = Vec::new();
    for selection in call.selections(&[], (m.start, m.end))? {
        types.extend(selection.profile_types(&call.state).await?);
    }
    let profile_types = types
        .into_iter()
        .map(|t| proto::ProfileType {
            id: t.to_string(),
            name: t.name,
            sample_type: t.sample_type,
            sample_unit: t.sample_unit,
            period_type: t.period_type,
            period_unit: t.period_unit,
        })
        .collect();
    call.reply(proto::ProfileTypesResponse { profile_types })
}

/// The label names of the series that match.
#[utoipa::path(post, path = "/querier.v1.QuerierService/LabelNames", tag = "pyroscope", operation_id = "QuerierLabelNames",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "types.v1.LabelNamesRequest {matchers, start, end} (application/proto too)"),
    responses((status = 200, description = "types.v1.LabelNamesResponse {names}"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn label_names(call: Call<proto::LabelNamesRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    let mut names = std::collections::BTreeSet::new();
    for selection in call.selections(&m.matchers, (m.start, m.end))? {
        names.extend(selection.label_names(&call.state).await?);
    }
    call.reply(proto::Names { names: names.into_iter().collect() })
}

/// The values of one label in the series that match.
#[utoipa::path(post, path = "/querier.v1.QuerierService/LabelValues", tag = "pyroscope", operation_id = "QuerierLabelValues",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "types.v1.LabelValuesRequest {name, matchers, start, end} (application/proto too)"),
    responses((status = 200, description = "types.v1.LabelValuesResponse {names}"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn label_values(call: Call<proto::LabelValuesRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    if m.name.is_empty() {
        return Err(ApiError::invalid("name", "name (the label) is required").into());
    }
    let mut values = std::collections::BTreeSet::new();
    for selection in call.selections(&m.matchers, (m.start, m.end))? {
        values.extend(selection.label_values(&call.state, &m.name).await?);
    }
    call.reply(proto::Names { names: values.into_iter().collect() })
}

/// The label sets of the series that match.
#[utoipa::path(post, path = "/querier.v1.QuerierService/Series", tag = "pyroscope", operation_id = "QuerierSeries",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.SeriesRequest {matchers, labelNames, start, end} (application/proto too)"),
    responses((status = 200, description = "querier.v1.SeriesResponse {labelsSet}"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn series(call: Call<proto::SeriesRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    let mut sets = std::collections::BTreeSet::new();
    for selection in call.selections(&m.matchers, (m.start, m.end))? {
        sets.extend(selection.label_sets(&call.state, &m.label_names).await?);
    }
    call.reply(proto::SeriesResponse {
        labels_set: sets.into_iter().map(|set| proto::Labels { labels: pairs(set) }).collect(),
    })
}

/// A range's profiles of one type merged: a flame graph (by function name), DOT or pprof.
#[utoipa::path(post, path = "/querier.v1.QuerierService/SelectMergeStacktraces", tag = "pyroscope", operation_id = "QuerierSelectMergeStacktraces",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.SelectMergeStacktracesRequest {profileTypeID, labelSelector, start, end, maxNodes, format} (application/proto too)"),
    responses((status = 200, description = "querier.v1.SelectMergeStacktracesResponse: flamegraph (format FLAMEGRAPH or unset), dot (DOT) or pprof (PPROF)"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn select_merge_stacktraces(
    call: Call<proto::SelectMergeStacktracesRequest>,
) -> Result<Response, ConnectError> {
    let m = &call.message;
    let format = proto::ProfileFormat::try_from(m.format).unwrap_or(proto::ProfileFormat::Tree);
    answered(&[("format TREE (or an unknown format)", format == proto::ProfileFormat::Tree)])?;
    let ask = call.ask(m)?;
    // Bound until the answer is made: it holds the merge's memory reservation.
    let merged = ask.selection.merge(&call.state).await?;
    let mut out = proto::SelectMergeStacktracesResponse::default();
    match format {
        proto::ProfileFormat::Dot => out.dot = dot_graph(merged.profile, &ask.shown).await?,
        proto::ProfileFormat::Pprof => {
            out.pprof = Some(proto::PprofProfile { profile: Some(pprof_message(merged.profile, &ask.shown).await?) })
        }
        _ => out.flamegraph = Some(flame_graph(merged.profile, &ask.shown).await?.into()),
    }
    call.reply(out)
}

/// A range's profiles of one type merged, as a pprof profile.
#[utoipa::path(post, path = "/querier.v1.QuerierService/SelectMergeProfile", tag = "pyroscope", operation_id = "QuerierSelectMergeProfile",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.SelectMergeProfileRequest {profileTypeID, labelSelector, start, end} (application/proto too)"),
    responses((status = 200, description = "google.v1.Profile (pprof), whole: maxNodes bounds flame graphs only"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn select_merge_profile(call: Call<proto::SelectMergeProfileRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    // The same question as SelectMergeStacktraces asks for pprof.
    let ask = call.ask(&proto::SelectMergeStacktracesRequest {
        profile_type_id: m.profile_type_id.clone(),
        label_selector: m.label_selector.clone(),
        start: m.start,
        end: m.end,
        max_nodes: m.max_nodes,
        format: proto::ProfileFormat::Pprof as i32,
        stack_trace_selector: m.stack_trace_selector.clone(),
        profile_id_selector: m.profile_id_selector.clone(),
        trace_id_selector: m.trace_id_selector.clone(),
        span_selector: Vec::new(),
    })?;
    let merged = ask.selection.merge(&call.state).await?;
    call.reply(pprof_message(merged.profile, &ask.shown).await?)
}

/// A range's profiles of one type merged, only the samples of the spans asked for (the
/// `span_id` label of OTLP profiles' links and of Pyroscope's span profiles): what
/// Grafana's traces-to-profiles link asks.
#[utoipa::path(post, path = "/querier.v1.QuerierService/SelectMergeSpanProfile", tag = "pyroscope", operation_id = "QuerierSelectMergeSpanProfile",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.SelectMergeSpanProfileRequest {profileTypeID, labelSelector, spanSelector, start, end, maxNodes} (application/proto too)"),
    responses((status = 200, description = "querier.v1.SelectMergeSpanProfileResponse {flamegraph}"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn select_merge_span_profile(
    call: Call<proto::SelectMergeSpanProfileRequest>,
) -> Result<Response, ConnectError> {
    let m = &call.message;
    let format = proto::ProfileFormat::try_from(m.format).unwrap_or(proto::ProfileFormat::Tree);
    answered(&[(
        "format other than FLAMEGRAPH",
        !matches!(format, proto::ProfileFormat::Unspecified | proto::ProfileFormat::Flamegraph),
    )])?;
    let ask = call.ask(&proto::SelectMergeStacktracesRequest {
        profile_type_id: m.profile_type_id.clone(),
        label_selector: m.label_selector.clone(),
        start: m.start,
        end: m.end,
        max_nodes: m.max_nodes,
        span_selector: m.span_selector.clone(),
        ..Default::default()
    })?;
    let merged = ask.selection.merge(&call.state).await?;
    call.reply(proto::SelectMergeSpanProfileResponse {
        flamegraph: Some(flame_graph(merged.profile, &ask.shown).await?.into()),
    })
}

/// Totals per step of the type asked for, per value of the `groupBy` labels.
#[allow(clippy::too_many_arguments)]
pub async fn step_sums(
    state: &AppState,
    tenant: Tenant,
    writes: bool,
    profile_type_id: &str,
    label_selector: &str,
    range: (i64, i64),
    step_seconds: f64,
    group_by: &[String],
) -> Result<Vec<crate::querying::Line>, ApiError> {
    let ask = merge_ask(tenant, writes, profile_type_id, label_selector, range, None)?;
    if !(step_seconds.is_finite() && step_seconds >= 0.001) {
        return Err(ApiError::invalid("step", "step is a number of seconds, at least 0.001"));
    }
    let step_ms = ((step_seconds * 1000.0).round() as u64).max(1);
    let span = ask.selection.to - ask.selection.from;
    if span / step_ms > MAX_POINTS {
        return Err(ApiError::invalid("step", format!("the step gives more than {MAX_POINTS} points")));
    }
    Ok(ask.selection.sums(state, step_ms, group_by, MAX_POINTS).await?)
}

/// Totals per step: a time series per value of the `groupBy` labels.
#[utoipa::path(post, path = "/querier.v1.QuerierService/SelectSeries", tag = "pyroscope", operation_id = "QuerierSelectSeries",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.SelectSeriesRequest {profileTypeID, labelSelector, start, end, step (s), groupBy, aggregation, limit} (application/proto too)"),
    responses((status = 200, description = "querier.v1.SelectSeriesResponse: points at each step's start, steps without profiles left out"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn select_series(call: Call<proto::SelectSeriesRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    answered(&[("stack_trace_selector", m.stack_trace_selector.is_some())])?;
    let average = m.aggregation == Some(proto::Aggregation::Average as i32);
    let range = (m.start, m.end);
    let lines = step_sums(
        &call.state,
        call.tenant.clone(),
        call.writes,
        &m.profile_type_id,
        &m.label_selector,
        range,
        m.step,
        &m.group_by,
    )
    .await?;
    let mut series: Vec<proto::Series> = lines
        .into_iter()
        .map(|line| proto::Series {
            labels: pairs(line.labels),
            points: line
                .points
                .iter()
                .map(|p| proto::Point { value: p.value(average), timestamp: p.t as i64 })
                .collect(),
        })
        .collect();
    if let Some(limit) = m.limit.filter(|&l| l > 0) {
        let sum = |s: &proto::Series| s.points.iter().map(|p| p.value).sum::<f64>();
        series.sort_by(|a, b| sum(b).total_cmp(&sum(a)));
        series.truncate(limit as usize);
    }
    call.reply(proto::SelectSeriesResponse { series })
}

/// Two merged ranges of one type compared: a diff flame graph, left the base.
#[utoipa::path(post, path = "/querier.v1.QuerierService/Diff", tag = "pyroscope", operation_id = "QuerierDiff",
    params(("X-Scope-OrgID" = Option<String>, Header, description = "tenant (X-Tenant-ID too)")),
    request_body(content = Object, content_type = "application/json", description = "querier.v1.DiffRequest {left, right}: two SelectMergeStacktracesRequest of one type (application/proto too)"),
    responses((status = 200, description = "querier.v1.DiffResponse: a FlameGraphDiff (7 numbers per frame: left x, total, self, right x, total, self, name)"), ConnectErrors),
    security((), ("bearer" = [])))]
pub async fn diff(call: Call<proto::DiffRequest>) -> Result<Response, ConnectError> {
    let m = &call.message;
    let side = |side: Option<&proto::SelectMergeStacktracesRequest>, name: &str| {
        call.ask(side.ok_or_else(|| ApiError::invalid(name, format!("{name} is required")))?)
    };
    let (left, right) = (side(m.left.as_ref(), "left")?, side(m.right.as_ref(), "right")?);
    if right.shown.profile_type != left.shown.profile_type || right.shown.tag_focus != left.shown.tag_focus {
        return Err(
            ApiError::invalid("right", "the two sides are of one profile type, and select the same spans").into()
        );
    }
    let shown = Shown { max_nodes: left.shown.max_nodes.max(right.shown.max_nodes), ..left.shown };
    let (l, r) = (left.selection.merge(&call.state).await?, right.selection.merge(&call.state).await?);
    call.reply(proto::DiffResponse { flamegraph: Some(diff_graph(l.profile, r.profile, &shown).await?.into()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_json_reads_proto_and_json_names() {
        let m: proto::SelectMergeStacktracesRequest = serde_json::from_str(
            r#"{"profileTypeID":"process_cpu:cpu:nanoseconds:cpu:nanoseconds","label_selector":"{}","start":"1","end":2,"maxNodes":"16","format":"PROFILE_FORMAT_DOT"}"#,
        )
        .unwrap();
        assert_eq!(m.profile_type_id, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        assert_eq!((m.label_selector.as_str(), m.start, m.end, m.max_nodes), ("{}", 1, 2, Some(16)));
        assert_eq!(m.format, proto::ProfileFormat::Dot as i32);
        let written = serde_json::to_value(proto::FlameGraph {
            names: vec!["total".into()],
            levels: vec![Level { values: vec![0, 5, 0, 0] }],
            total: 5,
            max_self: 0,
        })
        .unwrap();
        assert_eq!(
            written,
            serde_json::json!({"names":["total"],"levels":[{"values":["0","5","0","0"]}],"total":"5","maxSelf":"0"})
        );
        let t: proto::ProfileType = serde_json::from_str(r#"{"ID":"a:b:c:d:e","sampleType":"b"}"#).unwrap();
        assert_eq!((t.id.as_str(), t.sample_type.as_str()), ("a:b:c:d:e", "b"));
    }

    #[test]
    fn ranges_default_to_the_last_hour_and_are_bounded() {
        let (from, to) = time_range(0, 7_200_000).unwrap();
        assert_eq!((from, to), (3_600_000, 7_200_000));
        assert!(time_range(5, 5).is_err());
        assert!(time_range(1, MAX_RANGE_MS as i64 + 2).is_err());
    }
}
