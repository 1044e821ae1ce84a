//! Continuous capture: every replica looks at the stored schedules each tick; the
//! replica that takes a slot's lease captures it, so two replicas never capture the
//! same slot. Captures older than the schedule's retention are deleted; their sessions
//! go only when nothing else (a baseline, an upload) holds them.

use crate::records::schedules::{self, Schedule};
use crate::records::series::Series;
use crate::records::{captures, now_millis, RecordError, Tenant};
use crate::state::State;

/// Runs the stored schedules every tick, for as long as the server runs.
pub async fn run_forever(state: State) {
    let mut ticks = tokio::time::interval(state.schedule_tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        if let Err(e) = tick(&state).await {
            tracing::warn!("continuous capture: {e}");
        }
    }
}

async fn tick(state: &State) -> Result<(), RecordError> {
    let now = now_millis();
    for (tenant, schedule) in schedules::current(&state.store).await? {
        if schedule.enabled {
            let slot = now / 1000 / schedule.interval_seconds;
            for &kind in &schedule.profile_types {
                if schedules::take_slot(&state.store, &tenant, &schedule, kind, slot).await? {
                    let started = super::capture::begin(
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
                        tracing::warn!("continuous {kind} capture of {}: {e}", schedule.service);
                    }
                }
            }
        }
        expire(state, &tenant, &schedule, now).await?;
    }
    Ok(())
}

/// Deletes captures, time-index entries and slot leases older than the schedule's retention.
async fn expire(state: &State, tenant: &Tenant, schedule: &Schedule, now: u64) -> Result<(), RecordError> {
    let cutoff = now.saturating_sub((schedule.retention_days * 86_400_000.0) as u64);
    for &kind in &schedule.profile_types {
        // Only what expired is read (this runs every tick): the index's buckets up to the cutoff.
        let expired = captures::history(&state.store, tenant, &schedule.service, kind, 0, cutoff.saturating_sub(1));
        for capture in expired.await? {
            // A capture still running keeps its records until its deadline passed.
            let settled = capture.done.is_some()
                || capture.millis + super::capture::deadline_seconds(state, capture.started.duration_seconds) * 1000
                    < now;
            if settled {
                captures::forget(&state.store, tenant, &capture).await?;
            }
        }
        // The time index's entries of the service go by the same retention, per hour.
        let series = Series { tenant: tenant.clone(), service: schedule.service.clone(), kind };
        series.expire(&state.store, cutoff).await?;
        let oldest_slot = cutoff / 1000 / schedule.interval_seconds;
        schedules::forget_slots(&state.store, tenant, schedule, kind, oldest_slot).await?;
    }
    Ok(())
}
