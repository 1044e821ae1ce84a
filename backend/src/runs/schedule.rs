//! Continuous capture: every replica looks at the stored schedules each tick; the
//! replica that takes a slot's lease captures it, so two replicas never capture the
//! same slot. Captures older than the schedule's retention are deleted; their sessions
//! go only when nothing else (a baseline, an upload) holds them.
//!
//! A tick costs one listing of the schedules: a replica asks for each slot once and
//! applies a schedule's retention every [`RETENTION_EVERY`] ticks, so an idle server's
//! work follows its schedules, not how often they were saved or how many are disabled.

use std::collections::HashMap;

use stacklens_core::ProfileKind;

use crate::records::schedules::{self, Schedule};
use crate::records::series::{FiledBy, Series};
use crate::records::{captures, index, now_millis, RecordError, Tenant};
use crate::state::State;

/// Ticks between two passes of a schedule's retention (a minute at the default tick).
const RETENTION_EVERY: u64 = 60;

/// Runs the stored schedules every tick, for as long as the server runs.
pub async fn run_forever(state: State) {
    let mut ticks = tokio::time::interval(state.schedule_tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut runner = Runner::default();
    loop {
        ticks.tick().await;
        if let Err(e) = runner.tick(&state).await {
            tracing::warn!("continuous capture: {e}");
        }
    }
}

/// What this replica remembers between ticks.
#[derive(Default)]
struct Runner {
    schedules: schedules::Current,
    /// The last slot asked for, per tenant, service and type: each is asked for once.
    slots: HashMap<(String, String, ProfileKind), u64>,
    /// When each schedule's retention was last applied (milliseconds since the epoch).
    retention_at: HashMap<(String, String), u64>,
}

impl Runner {
    async fn tick(&mut self, state: &State) -> Result<(), RecordError> {
        let now = now_millis();
        let current = self.schedules.read(&state.store).await?;
        let live = |tenant: &str, service: &str| current.iter().any(|(t, s)| t.0 == tenant && s.service == service);
        self.slots.retain(|(tenant, service, _), _| live(tenant, service));
        self.retention_at.retain(|(tenant, service), _| live(tenant, service));
        let every = (state.schedule_tick.as_millis() as u64).saturating_mul(RETENTION_EVERY);
        for (tenant, schedule) in &current {
            if schedule.enabled {
                self.start_slots(state, tenant, schedule, now).await?;
            }
            let last = self.retention_at.entry((tenant.0.clone(), schedule.service.clone())).or_insert(0);
            if now.saturating_sub(*last) >= every {
                *last = now;
                expire(state, tenant, schedule, now).await?;
            }
        }
        Ok(())
    }

    /// Starts the captures of the schedule's current slot that this replica takes.
    async fn start_slots(
        &mut self,
        state: &State,
        tenant: &Tenant,
        schedule: &Schedule,
        now: u64,
    ) -> Result<(), RecordError> {
        let slot = now / 1000 / schedule.interval_seconds;
        for &kind in &schedule.profile_types {
            let asked = self.slots.insert((tenant.0.clone(), schedule.service.clone(), kind), slot);
            if asked == Some(slot) {
                continue;
            }
            if schedules::take_slot(&state.store, tenant, schedule, kind, slot).await? {
                let started = super::capture::begin(
                    state,
                    tenant,
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
        Ok(())
    }
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
        // The time index's entries its captures filed go by the same retention, per hour;
        // what agents pushed or users uploaded for the service keeps the server's retention.
        let series = Series { tenant: tenant.clone(), service: schedule.service.clone(), kind };
        index::expire_entries(&state.store, &series, cutoff, Some(FiledBy::Capture)).await?;
        let oldest_slot = cutoff / 1000 / schedule.interval_seconds;
        schedules::forget_slots(&state.store, tenant, schedule, kind, oldest_slot).await?;
    }
    Ok(())
}
