//! Continuous capture. Schedules live in object storage (create-only versions; the
//! newest wins), so every replica — a restarted one too — runs the same schedules. Each
//! interval of each profile type is a slot; the replica that creates the slot's lease
//! object first (`PutMode::Create`) captures it, so two replicas never capture the same
//! slot. Captures older than the schedule's retention are deleted with their sessions.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::capture::{begin, capture_times, captured_history, forget_capture, now_millis};
use super::profiles::{parse_kind, read_json};
use super::{authorize, load, now_rfc3339, ApiError, ErrorBody, State, Tenant};

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleRequest {
    /// A service from `--targets`.
    service: String,
    /// Types captured each interval (cpu, memory, alloc, block, mutex, goroutine).
    profile_types: Vec<String>,
    sample_rate: Option<u64>,
    /// Captures older than this are deleted (fractions allowed).
    retention_days: f64,
    enabled: bool,
    /// Seconds between captures of each type (default 60).
    interval_seconds: Option<u64>,
    /// Length of cpu captures (default: the interval, at most 30).
    duration_seconds: Option<u64>,
}

#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    service: String,
    #[schema(value_type = Vec<String>)]
    profile_types: Vec<ProfileKind>,
    sample_rate: Option<u64>,
    retention_days: f64,
    enabled: bool,
    interval_seconds: u64,
    duration_seconds: u64,
    updated_at: String,
}

fn schedules_prefix() -> &'static str {
    "system/schedules"
}

fn group(tenant: &str, service: &str) -> String {
    format!("{tenant}/s{}", hex::encode(service))
}

/// Stores a schedule (it replaces the service's previous one).
#[utoipa::path(post, path = "/api/v1/observability/profiling/continuous", tag = "capture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = ScheduleRequest,
    responses((status = 201, body = Schedule), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "unknown service", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn set(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    authorize(&state, &headers)?;
    let request: ScheduleRequest = read_json(body, 1 << 16, "a schedule").await?;
    let invalid = |field: &str, message: &str| {
        ApiError::bad_request("InvalidRequest", message.to_owned()).details(json!({ "field": field }))
    };
    if state.targets.find(&request.service).is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "UnknownService",
            format!("no capture target named '{}'", request.service),
        )
        .details(json!({ "service": request.service })));
    }
    let mut types = Vec::new();
    for t in &request.profile_types {
        let kind = parse_kind(t)?;
        if matches!(kind, ProfileKind::Threadcreate | ProfileKind::Other) {
            return Err(invalid("profileTypes", "threadcreate and other profiles cannot be captured"));
        }
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    if types.is_empty() {
        return Err(invalid("profileTypes", "name at least one profile type"));
    }
    if !(request.retention_days > 0.0 && request.retention_days <= 3650.0) {
        return Err(invalid("retentionDays", "retentionDays must be within (0, 3650]"));
    }
    let interval = request.interval_seconds.unwrap_or(60);
    if !(1..=86_400).contains(&interval) {
        return Err(invalid("intervalSeconds", "intervalSeconds must be 1..86400"));
    }
    let duration = request.duration_seconds.unwrap_or(interval.min(30));
    if !(1..=interval.max(1)).contains(&duration) {
        return Err(invalid("durationSeconds", "durationSeconds must be 1..intervalSeconds"));
    }
    let schedule = Schedule {
        service: request.service,
        profile_types: types,
        sample_rate: request.sample_rate,
        retention_days: request.retention_days,
        enabled: request.enabled,
        interval_seconds: interval,
        duration_seconds: duration,
        updated_at: now_rfc3339(),
    };
    let key = format!(
        "{}/{}/{:016x}-{}.json",
        schedules_prefix(),
        group(&tenant.0, &schedule.service),
        now_millis(),
        uuid::Uuid::now_v7().simple()
    );
    state.store.create(&key, Bytes::from(serde_json::to_vec(&schedule)?)).await?;
    Ok((StatusCode::CREATED, Json(schedule)))
}

/// Runs the stored schedules every second, for as long as the server runs.
pub async fn run_forever(state: State) {
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        if let Err(e) = tick(&state).await {
            tracing::warn!("continuous capture: {}", e.message());
        }
    }
}

async fn tick(state: &State) -> Result<(), ApiError> {
    // The newest version of each (tenant, service) schedule.
    let mut newest: BTreeMap<String, String> = BTreeMap::new();
    for key in state.store.list(schedules_prefix(), None).await? {
        if let Some((group, _)) = key.rsplit_once('/') {
            newest.insert(group.to_owned(), key);
        }
    }
    let now = now_millis();
    for (group, key) in newest {
        let Some(schedule) = load::<Schedule>(&state.store, &format!("{}/{key}", schedules_prefix())).await? else {
            continue;
        };
        let Some((tenant, _)) = group.split_once('/') else { continue };
        let tenant = Tenant(tenant.to_owned());
        if schedule.enabled {
            let slot = now / 1000 / schedule.interval_seconds;
            for &kind in &schedule.profile_types {
                let lease = format!("system/leases/{group}/{kind}/{slot:016x}");
                if state.store.create(&lease, Bytes::new()).await? {
                    let started = begin(
                        state,
                        &tenant,
                        &schedule.service,
                        kind,
                        schedule.duration_seconds,
                        schedule.sample_rate,
                        Some(slot),
                    )
                    .await;
                    if let Err(e) = started {
                        tracing::warn!("continuous {kind} capture of {}: {}", schedule.service, e.message());
                    }
                }
            }
        }
        expire(state, &tenant, &group, &schedule, now).await?;
    }
    Ok(())
}

/// Deletes captures (with their sessions, unless a newer capture stored the same
/// bytes) and slot leases older than the schedule's retention.
async fn expire(state: &State, tenant: &Tenant, group: &str, schedule: &Schedule, now: u64) -> Result<(), ApiError> {
    let cutoff = now.saturating_sub((schedule.retention_days * 86_400_000.0) as u64);
    for &kind in &schedule.profile_types {
        // Records are read only when something expired (this runs every second).
        let times = capture_times(state, tenant, &schedule.service, kind).await?;
        if times.iter().any(|(millis, _)| *millis < cutoff) {
            let history = captured_history(state, tenant, &schedule.service, kind).await?;
            let (old, kept): (Vec<_>, Vec<_>) = history.into_iter().partition(|c| c.millis < cutoff);
            let in_use: HashSet<String> = kept.iter().flat_map(|c| c.sessions.iter().cloned()).collect();
            for capture in old {
                forget_capture(state, tenant, &capture, &in_use).await?;
            }
        }
        let leases = format!("system/leases/{group}/{kind}");
        let oldest_slot = cutoff / 1000 / schedule.interval_seconds;
        for lease in state.store.list(&leases, None).await? {
            if u64::from_str_radix(&lease, 16).is_ok_and(|slot| slot < oldest_slot) {
                state.store.delete(&format!("{leases}/{lease}")).await?;
            }
        }
    }
    Ok(())
}
