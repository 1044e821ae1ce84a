//! Analysis of stored sessions, computed natively by the same core code as the page
//! and the CLI: diffs between two sessions and goroutine analysis of one.

use std::collections::BTreeMap;

use axum::extract::{Request, State as AxumState};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::analysis::diff::{diff, movers, DiffOptions, FunctionDelta};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineGroup, GoroutineOptions};
use stacklens_core::analysis::Query as ProfileQuery;
use stacklens_core::ids::RecordId;
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::access::{Reader, WritesCaches};
use super::ranges::{range_echo, spec_query};
use super::request::{off_thread, read_json, required, Params, PathParam};
use super::{ApiError, ErrorBody};
use crate::budget::{ParseFailure, Parsed};
use crate::merging::{merge_range, RangeQuery};
use crate::records::sessions::{self, SessionRecord};
use crate::records::{baselines, captures, now_millis, now_rfc3339, Tenant};
use crate::state::AppState;
use crate::state::State;
use crate::store::counting_reads;
use crate::symbols;
use stacklens_core::api::{DiffRequest, DiffResponse, NewStack};

/// Stacks an analysis returns, largest first.
const TOP_STACKS: usize = 20;

/// The noise threshold in % of the base total: 1 unless given, within 0..100.
fn noise_threshold(given: Option<f64>) -> Result<f64, ApiError> {
    match given {
        None => Ok(1.0),
        Some(n) if (0.0..=100.0).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::bad_request("InvalidParameter", "noiseThresholdPct must be a number within 0..100")
            .details(json!({ "field": "noiseThresholdPct" }))),
    }
}

/// A session id, or a baseline or capture id standing for the session it holds.
async fn session_of(state: &AppState, tenant: &Tenant, id: &str) -> Result<SessionRecord, ApiError> {
    let store = &state.store;
    let record = match RecordId::parse(id) {
        Some(RecordId::Baseline(_)) => {
            let baseline = baselines::find(store, tenant, id).await?;
            sessions::find_held(store, tenant, &baseline.session_id).await?
        }
        Some(RecordId::Capture(_)) => {
            let (_, done) = captures::find(store, tenant, id).await?;
            let done = done.ok_or_else(|| {
                ApiError::new(StatusCode::CONFLICT, "CaptureNotCompleted", format!("capture '{id}' is still running"))
                    .details(json!({ "id": id }))
            })?;
            let session = done.session_id.ok_or_else(|| {
                ApiError::unprocessable(
                    "CaptureFailed",
                    format!("capture '{id}' failed: {}", done.error.clone().unwrap_or_default()),
                )
                .details(json!({ "id": id }))
            })?;
            sessions::find_held(store, tenant, &session).await?
        }
        _ => sessions::find(store, tenant, id).await?,
    };
    Ok(record)
}

/// Stored sessions parsed by core within the memory budget.
pub(super) async fn stored_profiles(
    state: &AppState,
    tenant: &Tenant,
    records: &[SessionRecord],
) -> Result<Parsed, ApiError> {
    // The bytes are counted before they are read, and while they wait for the parse.
    let held = state.budget.hold(records.iter().map(|r| r.size).fold(0, u64::saturating_add)).await?;
    let mut raw = Vec::with_capacity(records.len());
    for record in records {
        raw.push(sessions::raw(&state.store, tenant, record).await?);
    }
    let mut parsed = state.budget.parse_held(raw, held).await.map_err(|e| match e {
        // The bytes were read by core when they were stored.
        ParseFailure::Core(e) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "CorruptProfile", format!("a stored profile: {e}"))
        }
        other => other.into(),
    })?;
    let profiles = std::mem::take(&mut parsed.profiles);
    parsed.profiles = symbols::symbolize(state, tenant, profiles, parsed.reserved()).await?;
    Ok(parsed)
}

pub(super) fn analysis_failed(e: stacklens_core::Error) -> ApiError {
    ApiError::unprocessable("AnalysisFailed", e.to_string()).details(json!({ "coreError": e.code() }))
}

fn mismatch(record: &SessionRecord, wanted: ProfileKind) -> ApiError {
    ApiError::unprocessable(
        "ProfileTypeMismatch",
        format!("session {} is a {} profile, not {wanted}", record.id, record.profile_type),
    )
    .details(json!({ "sessionId": record.id, "sessionProfileType": record.profile_type, "type": wanted }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisResponse {
    session_id: String,
    goroutine_count: u64,
    by_state: BTreeMap<String, u64>,
    /// The largest groups of identical stacks (at most 20).
    top_stacks: Vec<GoroutineGroup>,
    /// Groups in a blocking wait (channel, select, lock, I/O, sleep …).
    blocked_goroutines: Vec<GoroutineGroup>,
    blocked_count: u64,
    /// This session's goroutine count divided by that of the latest goroutine baseline
    /// of the same service; 1.0 when the service has no goroutine baseline.
    goroutine_growth_rate: f64,
    /// The baseline the growth rate is measured against.
    growth_baseline_id: Option<String>,
    analyzed_at: String,
}

/// How many top movers a range diff lists.
const MOVERS: usize = 10;

/// The two sides of a diff: stored sessions, or merged ranges.
enum Sides {
    Sessions,
    Ranges(Box<(RangeQuery, RangeQuery)>),
}

impl Sides {
    fn of(request: &DiffRequest, tenant: &Tenant) -> Result<Sides, ApiError> {
        let invalid = |m: &str| ApiError::bad_request("InvalidRequest", format!("not a diff request: {m}"));
        match (&request.base_id, &request.compare_id, &request.base, &request.compare) {
            (Some(_), Some(_), None, None) => Ok(Sides::Sessions),
            (None, None, Some(base), Some(compare)) => Ok(Sides::Ranges(Box::new((
                spec_query(base, tenant.clone(), "base")?,
                spec_query(compare, tenant.clone(), "compare")?,
            )))),
            _ => Err(invalid("a diff takes baseId and compareId, or base and compare ranges")),
        }
    }
}

/// The diff of two sessions, computed by core as the CLI's `diff` (or, for goroutine
/// profiles, `goroutines --compare`).
#[utoipa::path(post, path = "/api/v1/profiling/diff", tag = "analysis", operation_id = "DiffSessions",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = DiffRequest,
    responses((status = 200, body = DiffResponse),
        (status = 400, description = "InvalidRequest, InvalidProfileType, InvalidParameter", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "ProfileNotFound, BaselineNotFound, CaptureNotFound; NoProfiles (a range holds none)", body = ErrorBody),
        (status = 409, description = "CaptureNotCompleted", body = ErrorBody),
        (status = 410, description = "Expired: a session whose link has expired", body = ErrorBody),
        (status = 413, description = "PayloadTooLarge, OverMemoryBudget", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch, CaptureFailed, AnalysisFailed, IncompatibleProfiles, EncryptedBlob (the id of an encrypted blob, which the server cannot read)", body = ErrorBody),
        (status = 415, description = "UnsupportedMediaType: the body is not sent as application/json", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn diff_sessions(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    WritesCaches(writes): WritesCaches,
    request: Request,
) -> Result<Json<DiffResponse>, ApiError> {
    let request: DiffRequest = read_json(request, "a diff request").await?;
    let noise = noise_threshold(request.noise_threshold_pct)?;
    let normalize = request.normalize;
    let (parsed, envelope, kind) = match Sides::of(&request, &tenant)? {
        Sides::Sessions => {
            let kind = request.kind.ok_or_else(|| {
                ApiError::bad_request("InvalidRequest", "not a diff request: a diff of ids needs `type`")
                    .details(json!({ "field": "type" }))
            })?;
            let base = session_of(&state, &tenant, request.base_id.as_deref().unwrap_or_default()).await?;
            let later = session_of(&state, &tenant, request.compare_id.as_deref().unwrap_or_default()).await?;
            for record in [&base, &later] {
                if !record.profile_type.accepts(kind) {
                    return Err(mismatch(record, kind));
                }
            }
            let parsed = stored_profiles(&state, &tenant, &[base.clone(), later.clone()]).await?;
            let envelope = DiffResponse {
                base_session_id: base.id.to_string(),
                compare_session_id: later.id.to_string(),
                kind: kind.to_string(),
                ..DiffResponse::default()
            };
            (Compared::Parsed(parsed), envelope, kind)
        }
        Sides::Ranges(ranges) => {
            let (base, later) = *ranges;
            let (base, later) =
                (RangeQuery { write_caches: writes, ..base }, RangeQuery { write_caches: writes, ..later });
            let kind = request.kind.unwrap_or(base.series.kind);
            let now = now_millis();
            // Each side's reads counted apart; the first error stops both.
            let state = &state;
            let counted = |range| async move {
                let (merged, reads) = counting_reads(merge_range(state, range, now)).await;
                merged.map(|merged| (merged, reads))
            };
            let ((merged_base, base_reads), (merged_later, later_reads)) =
                futures::try_join!(counted(&base), counted(&later))?;
            let (Some(b), Some(l)) = (merged_base.profile, merged_later.profile) else {
                let empty = if merged_base.profile_count == 0 { "base" } else { "compare" };
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "NoProfiles",
                    format!("no stored profile matches the {empty} range"),
                )
                .details(json!({ "side": empty })));
            };
            let envelope = DiffResponse {
                kind: kind.to_string(),
                base_range: Some(range_echo(&base, merged_base.profile_count, base_reads)),
                compare_range: Some(range_echo(&later, merged_later.profile_count, later_reads)),
                ..DiffResponse::default()
            };
            (Compared::Merged(Box::new((b, l))), envelope, kind)
        }
    };
    let ranges = envelope.base_range.is_some();
    let response = off_thread(move || -> Result<DiffResponse, stacklens_core::Error> {
        let (base_profile, later_profile) = parsed.pair();
        // A goroutine comparison groups stacks; any other type is a diff, which names stacks.
        if kind == ProfileKind::Goroutine {
            let c = compare(base_profile, later_profile)?;
            return Ok(DiffResponse {
                new_stacks: Some(c.new_stacks.iter().map(NewStack::from).collect()),
                growth_count: Some(c.growth_count),
                goroutine_growth_rate: c.goroutine_growth_rate,
                ..envelope
            });
        }
        let query = ProfileQuery::of_sample(kind.sample_type(later_profile));
        let (base, later) = query.prepare_pair(base_profile, later_profile)?;
        let options = DiffOptions {
            normalize,
            noise_threshold_pct: noise,
            // The answer names functions, not stacks.
            max_stacks: 0,
        };
        let report = diff(&base, &later, &options)?;
        let top_movers = if ranges { Some(movers(&base, &later, MOVERS)?) } else { None };
        Ok(DiffResponse {
            sample_type: Some(report.sample_type),
            unit: Some(report.unit),
            regressions: Some(report.regressions),
            improvements: Some(report.improvements),
            unchanged: Some(report.unchanged),
            overall_delta: Some(report.overall_delta_pct),
            top_movers,
            ..envelope
        })
    })
    .await?
    .map_err(analysis_failed)?;
    Ok(Json(response))
}

/// The two profiles a diff compares.
enum Compared {
    Parsed(Parsed),
    Merged(Box<(stacklens_core::Profile, stacklens_core::Profile)>),
}

impl Compared {
    fn pair(&self) -> (&stacklens_core::Profile, &stacklens_core::Profile) {
        match self {
            Compared::Parsed(p) => (&p.profiles[0], &p.profiles[1]),
            Compared::Merged(m) => (&m.0, &m.1),
        }
    }
}

/// Goroutine analysis of a session (a debug=2 dump, a debug=1 text or a goroutine pprof).
#[utoipa::path(get, path = "/api/v1/profiling/sessions/{id}/analysis", tag = "analysis", operation_id = "GetGoroutineAnalysis",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("id" = String, Path, description = "session id")),
    responses((status = 200, body = AnalysisResponse),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "ProfileNotFound", body = ErrorBody),
        (status = 410, description = "Expired: the session's link has expired", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch: not a goroutine profile; AnalysisFailed; EncryptedBlob (the id of an encrypted blob, which the server cannot read)", body = ErrorBody),
        (status = 413, description = "OverMemoryBudget: the profiles need more than the whole memory budget", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn goroutine_analysis(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    PathParam(id): PathParam,
) -> Result<Json<AnalysisResponse>, ApiError> {
    let record = sessions::find(&state.store, &tenant, &id).await?;
    if record.profile_type != ProfileKind::Goroutine {
        return Err(mismatch(&record, ProfileKind::Goroutine));
    }
    // Growth is measured against the latest goroutine baseline of the same service.
    let baseline = match baselines::latest_id(&state.store, &tenant, ProfileKind::Goroutine, &record.service).await? {
        Some(id) => {
            let b = baselines::find(&state.store, &tenant, &id).await?;
            Some((b.baseline_id, sessions::find_held(&state.store, &tenant, &b.session_id).await?))
        }
        None => None,
    };
    let mut records = vec![record.clone()];
    records.extend(baseline.iter().map(|(_, s)| s.clone()));
    let parsed = stored_profiles(&state, &tenant, &records).await?;
    let baseline_id = baseline.map(|(id, _)| id);
    let (report, growth) = off_thread(move || -> Result<_, stacklens_core::Error> {
        let profile = &parsed.profiles[0];
        let report = analyze(profile, &GoroutineOptions { filter: None, max_stacks: Some(TOP_STACKS) })?;
        let growth = match (baseline_id, parsed.profiles.get(1)) {
            (Some(id), Some(base)) => Some((id, compare(base, profile)?.goroutine_growth_rate.unwrap_or(1.0))),
            _ => None,
        };
        Ok((report, growth))
    })
    .await?
    .map_err(analysis_failed)?;
    Ok(Json(AnalysisResponse {
        session_id: record.id.into(),
        goroutine_count: report.goroutine_count,
        by_state: report.by_state,
        top_stacks: report.top_stacks,
        blocked_goroutines: report.blocked_goroutines,
        blocked_count: report.blocked_count,
        goroutine_growth_rate: growth.as_ref().map_or(1.0, |g| g.1),
        growth_baseline_id: growth.map(|g| g.0.into()),
        analyzed_at: now_rfc3339(),
    }))
}

/// One side of a comparison.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProfileRef {
    /// The id as given (capture, session or baseline).
    id: String,
    session_id: String,
    service: String,
    #[schema(value_type = String)]
    profile_type: ProfileKind,
    created_at: String,
    sample_count: i64,
}

impl ProfileRef {
    fn new(id: &str, r: &SessionRecord) -> Self {
        ProfileRef {
            id: id.to_owned(),
            session_id: r.id.to_string(),
            service: r.service.clone(),
            profile_type: r.profile_type,
            created_at: r.created_at.to_string(),
            sample_count: r.sample_count,
        }
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompareResponse {
    base_profile: ProfileRef,
    comparison_profile: ProfileRef,
    sample_type: String,
    unit: String,
    /// Functions that shrank beyond the noise threshold: before (base*), after (compare*) and deltas.
    improvements: Vec<FunctionDelta>,
    regressions: Vec<FunctionDelta>,
    /// Functions whose change stayed within the threshold.
    unchanged: usize,
    /// (after − before) / before × 100 of the totals.
    overall_delta: f64,
    noise_threshold_pct: f64,
}

/// `compare_profiles`' query parameters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompareParams {
    base_profile_id: Option<String>,
    comparison_profile_id: Option<String>,
    noise_threshold_pct: Option<String>,
}

/// Compares two captured profiles (or sessions, or baselines) function by function.
#[utoipa::path(get, path = "/api/v1/observability/profiling/compare", tag = "capture", operation_id = "CompareProfiles",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("baseProfileId" = String, Query), ("comparisonProfileId" = String, Query),
        ("noiseThresholdPct" = Option<f64>, Query, description = "changes below this % of the base total are unchanged (default 1)")),
    responses((status = 200, body = CompareResponse),
        (status = 400, description = "InvalidParameter", body = ErrorBody),
        (status = 401, description = "Unauthorized", body = ErrorBody), (status = 403, description = "Forbidden", body = ErrorBody),
        (status = 404, description = "ProfileNotFound, BaselineNotFound, CaptureNotFound", body = ErrorBody),
        (status = 409, description = "CaptureNotCompleted: a capture is still running", body = ErrorBody),
        (status = 410, description = "Expired: a session whose link has expired", body = ErrorBody),
        (status = 422, description = "ProfileTypeMismatch, CaptureFailed, AnalysisFailed, EncryptedBlob (the id of an encrypted blob, which the server cannot read)", body = ErrorBody),
        (status = 413, description = "OverMemoryBudget: the profiles need more than the whole memory budget", body = ErrorBody),
        (status = 503, description = "Busy, StorageUnavailable", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn compare_profiles(
    AxumState(state): AxumState<State>,
    Reader(tenant): Reader,
    Params(query): Params<CompareParams>,
) -> Result<Json<CompareResponse>, ApiError> {
    let base_id = required(&query.base_profile_id, "baseProfileId")?;
    let later_id = required(&query.comparison_profile_id, "comparisonProfileId")?;
    let noise = noise_threshold(query.noise_threshold_pct.map(|v| v.parse::<f64>().unwrap_or(f64::NAN)))?;
    let base = session_of(&state, &tenant, base_id).await?;
    let later = session_of(&state, &tenant, later_id).await?;
    let kind = later.profile_type;
    if !base.profile_type.accepts(kind) {
        return Err(mismatch(&base, kind));
    }
    let parsed = stored_profiles(&state, &tenant, &[base.clone(), later.clone()]).await?;
    let report = off_thread(move || {
        let (base_profile, later_profile) = (&parsed.profiles[0], &parsed.profiles[1]);
        let query = ProfileQuery::of_sample(kind.sample_type(later_profile));
        let (base, later) = query.prepare_pair(base_profile, later_profile)?;
        // The answer names functions, not stacks.
        diff(&base, &later, &DiffOptions { noise_threshold_pct: noise, max_stacks: 0, ..DiffOptions::default() })
    })
    .await?
    .map_err(analysis_failed)?;
    Ok(Json(CompareResponse {
        base_profile: ProfileRef::new(base_id, &base),
        comparison_profile: ProfileRef::new(later_id, &later),
        sample_type: report.sample_type,
        unit: report.unit,
        improvements: report.improvements,
        regressions: report.regressions,
        unchanged: report.unchanged,
        overall_delta: report.overall_delta_pct,
        noise_threshold_pct: noise,
    }))
}
