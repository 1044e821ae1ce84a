//! Analysis of stored sessions, computed natively by the same core code as the page
//! and the CLI: diffs between two sessions and goroutine analysis of one.

use axum::body::Body;
use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use stacklens_core::analysis::diff::{diff, DiffOptions};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineGroup, GoroutineOptions};
use stacklens_core::{Profile, ProfileKind};

use super::baselines::{find_baseline, latest_id};
use super::profiles::{find, parse_kind, raw_bytes, read_body, SessionRecord};
use super::{blocking, now_rfc3339, ApiError, State, Tenant};
use crate::store::Store;

/// Stacks an analysis returns, largest first.
const TOP_STACKS: usize = 20;

/// A session id, or a baseline id standing for its session.
async fn session_of(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord, ApiError> {
    if id.starts_with("base-") {
        let baseline = find_baseline(store, tenant, id).await?;
        find(store, tenant, &baseline.session_id).await
    } else {
        find(store, tenant, id).await
    }
}

async fn profile_of(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<Profile, ApiError> {
    let bytes = raw_bytes(store, tenant, record).await?;
    blocking(move || stacklens_core::parse(&bytes)).await?.map_err(|e| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "CorruptProfile", format!("stored profile {}: {e}", record.id))
    })
}

fn analysis_failed(e: stacklens_core::Error) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "AnalysisFailed", e.to_string())
        .details(json!({ "coreError": e.code() }))
}

fn mismatch(record: &SessionRecord, wanted: ProfileKind) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "ProfileTypeMismatch",
        format!("session {} is a {} profile, not {wanted}", record.id, record.profile_type),
    )
    .details(json!({ "sessionId": record.id, "sessionProfileType": record.profile_type, "type": wanted }))
}

/// A goroutine group as the diff endpoint lists new stacks.
fn new_stack(g: &GoroutineGroup) -> Value {
    json!({ "count": g.count, "state": g.state, "waitReason": g.wait_reason, "frames": g.frames, "createdBy": g.created_by })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DiffRequest {
    base_id: String,
    compare_id: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    normalize: bool,
    /// Changes below this % of the base total are "unchanged" (default 1).
    noise_threshold_pct: Option<f64>,
}

pub async fn diff_sessions(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let body = read_body(body, 1 << 16).await?;
    let request: DiffRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("InvalidRequest", format!("not a diff request: {e}")))?;
    let kind = parse_kind(&request.kind)?;
    let noise = request.noise_threshold_pct.unwrap_or(1.0);
    if !(0.0..=100.0).contains(&noise) {
        return Err(ApiError::bad_request("InvalidRequest", "noiseThresholdPct must be within 0..100")
            .details(json!({ "field": "noiseThresholdPct" })));
    }
    let base = session_of(&state.store, &tenant, &request.base_id).await?;
    let later = session_of(&state.store, &tenant, &request.compare_id).await?;
    for record in [&base, &later] {
        if !record.profile_type.accepts(kind) {
            return Err(mismatch(record, kind));
        }
    }
    let (base_profile, later_profile) =
        (profile_of(&state.store, &tenant, &base).await?, profile_of(&state.store, &tenant, &later).await?);
    let envelope = json!({ "baseSessionId": base.id, "compareSessionId": later.id, "type": kind });
    let result = blocking(move || -> Result<Value, stacklens_core::Error> {
        if kind == ProfileKind::Goroutine {
            let c = compare(&base_profile, &later_profile)?;
            return Ok(json!({
                "newStacks": c.new_stacks.iter().map(new_stack).collect::<Vec<_>>(),
                "growthCount": c.growth_count,
                "goroutineGrowthRate": c.goroutine_growth_rate,
            }));
        }
        let options = DiffOptions {
            sample_index: kind.sample_type(&later_profile).to_owned(),
            normalize: request.normalize,
            noise_threshold_pct: noise,
            ..DiffOptions::default()
        };
        let report = diff(&base_profile, &later_profile, &options)?;
        Ok(json!({
            "sampleType": report.sample_type,
            "unit": report.unit,
            "regressions": report.regressions,
            "improvements": report.improvements,
            "unchanged": report.unchanged,
            "overallDelta": report.overall_delta_pct,
        }))
    })
    .await?
    .map_err(analysis_failed)?;
    let mut body = envelope;
    if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), result) {
        b.extend(extra);
    }
    Ok(Json(body))
}

pub async fn goroutine_analysis(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = find(&state.store, &tenant, &id).await?;
    if record.profile_type != ProfileKind::Goroutine {
        return Err(mismatch(&record, ProfileKind::Goroutine));
    }
    let profile = profile_of(&state.store, &tenant, &record).await?;
    // Growth is measured against the latest goroutine baseline of the same service.
    let baseline = match latest_id(&state.store, &tenant, ProfileKind::Goroutine, &record.service).await? {
        Some(id) => {
            let b = find_baseline(&state.store, &tenant, &id).await?;
            let session = find(&state.store, &tenant, &b.session_id).await?;
            Some((b.baseline_id, profile_of(&state.store, &tenant, &session).await?))
        }
        None => None,
    };
    let (report, growth) = blocking(move || -> Result<_, stacklens_core::Error> {
        let report = analyze(&profile, &GoroutineOptions { filter: None, max_stacks: Some(TOP_STACKS) })?;
        let growth = match &baseline {
            Some((id, base)) => Some((id.clone(), compare(base, &profile)?.goroutine_growth_rate.unwrap_or(1.0))),
            None => None,
        };
        Ok((report, growth))
    })
    .await?
    .map_err(analysis_failed)?;
    Ok(Json(json!({
        "sessionId": record.id,
        "goroutineCount": report.goroutine_count,
        "byState": report.by_state,
        "topStacks": report.top_stacks,
        "blockedGoroutines": report.blocked_goroutines,
        "blockedCount": report.blocked_count,
        "goroutineGrowthRate": growth.as_ref().map_or(1.0, |g| g.1),
        "growthBaselineId": growth.map(|g| g.0),
        "analyzedAt": now_rfc3339(),
    })))
}
