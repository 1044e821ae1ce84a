//! The compactor: makes the blocks of closed hours (see [`crate::records::blocks`]) and
//! of closed days (from their hours' blocks), and makes again those that changed. Every
//! replica runs it; a lease per tenant makes one replica do a tenant's pass at a time, and blocks are created only
//! (`PutMode::Create`), so two passes at once write one block and lose nothing.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::budget::Budget;
use crate::merging::{compact_day, compact_hour, Compacted, MergeError};
use crate::records::blocks::DAY_HOURS;
use crate::records::series::{self, Series};
use crate::records::{leases, now_millis, RecordError, Tenant};
use crate::runs::progress::Progress;
use crate::state::State;
use crate::store::Store;

/// How long a tenant's pass may hold its lease before another replica may take over
/// (a replica killed mid-pass holds it that long).
pub const LEASE_SECS: u64 = 15 * 60;

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Hour blocks written, the profiles they hold and their bytes.
    pub blocks: usize,
    pub profiles: usize,
    pub bytes: usize,
    /// Day blocks written, and their bytes.
    pub day_blocks: usize,
    pub day_bytes: usize,
    /// Hours that changed while their block was made (made again next pass).
    pub raced: usize,
    /// Tenants another replica was compacting.
    pub tenants_busy: usize,
}

/// The hours and days this process knows are done (their block exists, or they hold
/// nothing), by block key, so that a pass asks the store only about the others (a
/// change to an hour leaves a mark, which a pass always looks at).
pub struct Compactor {
    known: Mutex<HashSet<String>>,
    lease_secs: u64,
    /// Make every closed hour's block again, changed or not (`stacklens reindex`).
    rebuild: bool,
    /// What this process's passes have done (`/metrics`).
    progress: Arc<Progress>,
}

impl Compactor {
    /// A compactor whose passes count what they do in `progress`.
    pub fn new(lease_secs: u64, progress: Arc<Progress>) -> Self {
        Compactor { known: Mutex::default(), lease_secs, rebuild: false, progress }
    }

    /// A compactor whose passes make every closed hour's block again.
    pub fn rebuilding(lease_secs: u64) -> Self {
        Compactor { rebuild: true, ..Self::new(lease_secs, Arc::default()) }
    }

    /// [`Compactor::pass`], timed and counted in [`Compactor::progress`].
    pub async fn counted_pass(&self, store: &Store, budget: &Budget, now: u64) -> Result<Pass, MergeError> {
        let started = std::time::Instant::now();
        self.progress.started();
        let pass = self.pass(store, budget, now).await;
        self.progress.finished(started.elapsed(), pass.is_ok());
        pass
    }

    /// One pass over every tenant's series.
    pub async fn pass(&self, store: &Store, budget: &Budget, now: u64) -> Result<Pass, MergeError> {
        let mut pass = Pass::default();
        for tenant in store.list_folders("tenants").await.map_err(RecordError::from)? {
            let tenant = Tenant(tenant);
            let Some(lease) = leases::acquire(store, &tenant.key("leases/compact"), self.lease_secs).await? else {
                pass.tenants_busy += 1;
                continue;
            };
            let done = self.tenant(store, budget, &tenant, now, &mut pass).await;
            lease.release(store).await?;
            done?;
        }
        Ok(pass)
    }

    async fn tenant(
        &self,
        store: &Store,
        budget: &Budget,
        tenant: &Tenant,
        now: u64,
        pass: &mut Pass,
    ) -> Result<(), MergeError> {
        for (service, kind) in series::list(store, tenant).await? {
            let series = Series { tenant: tenant.clone(), service, kind };
            self.series(store, budget, &series, now, pass).await?;
        }
        Ok(())
    }

    async fn series(
        &self,
        store: &Store,
        budget: &Budget,
        series: &Series,
        now: u64,
        pass: &mut Pass,
    ) -> Result<(), MergeError> {
        let changed_prefix = series.changed_prefix();
        let mut marks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for name in store.list(&changed_prefix, None).await.map_err(RecordError::from)? {
            if let Some(hour) = name.strip_prefix('h').and_then(|n| n.split('-').next()?.parse().ok()) {
                marks.entry(hour).or_default().push(name);
            }
        }
        let listed: Vec<u64> = series.hours_before(store, now).await?;
        let mut hours = listed.clone();
        hours.extend(marks.keys());
        hours.sort_unstable();
        hours.dedup();
        // Days whose block must be made again: an hour of theirs was.
        let mut remade_days = BTreeSet::new();
        for &number in hours.iter().filter(|&&n| series::is_closed(n, now)) {
            let key = series.block_key(number);
            let marked = marks.remove(&number);
            let remake = marked.is_some() || self.rebuild;
            if !self.to_make(store, &key, remake).await? {
                continue;
            }
            remade_days.insert(number / DAY_HOURS);
            match compact_hour((store, budget), series, number, now).await? {
                Compacted::Written { profiles, bytes } => {
                    self.progress.written(profiles, bytes);
                    (pass.blocks, pass.profiles, pass.bytes) =
                        (pass.blocks + 1, pass.profiles + profiles, pass.bytes + bytes);
                    self.known.lock().expect("not poisoned").insert(key);
                }
                // Nothing to do until the hour changes (which leaves a mark).
                Compacted::Exists | Compacted::Empty => {
                    self.known.lock().expect("not poisoned").insert(key);
                }
                // (An hour's block waits for nothing.)
                Compacted::Raced | Compacted::Waiting => {
                    self.progress.raced();
                    pass.raced += 1;
                    continue;
                }
            }
            // The marks seen before the hour was listed are answered; later ones stay.
            for name in marked.into_iter().flatten() {
                store.delete(&format!("{changed_prefix}/{name}")).await.map_err(RecordError::from)?;
            }
        }
        let closed_days: BTreeSet<u64> = hours
            .iter()
            .map(|n| n / DAY_HOURS)
            .filter(|day| series::is_closed((day + 1) * DAY_HOURS - 1, now))
            .collect();
        for day in closed_days {
            let of_day: Vec<u64> = listed.iter().copied().filter(|n| n / DAY_HOURS == day).collect();
            self.day((store, budget), series, (day, &of_day), remade_days.contains(&day), now, pass).await?;
        }
        Ok(())
    }

    /// Whether the block at `key` is to be made: when `remake` (then an old one goes
    /// first: a block made before a marked change may lack it, its maker having stopped
    /// before it looked again), or when it is neither known nor in the store.
    async fn to_make(&self, store: &Store, key: &str, remake: bool) -> Result<bool, MergeError> {
        if !remake
            && (self.known.lock().expect("not poisoned").contains(key)
                || store.exists(key).await.map_err(RecordError::from)?)
        {
            self.known.lock().expect("not poisoned").insert(key.to_owned());
            return Ok(false);
        }
        self.known.lock().expect("not poisoned").remove(key);
        if remake {
            store.delete(key).await.map_err(RecordError::from)?;
        }
        Ok(true)
    }

    /// Makes `day`'s block from the blocks of its hours that hold profiles, unless it is
    /// known (or `remake`, when one of those hours' blocks was made again).
    async fn day(
        &self,
        (store, budget): (&Store, &Budget),
        series: &Series,
        (day, hours): (u64, &[u64]),
        remake: bool,
        now: u64,
        pass: &mut Pass,
    ) -> Result<(), MergeError> {
        let key = series.day_block_key(day);
        if !self.to_make(store, &key, remake || self.rebuild).await? {
            return Ok(());
        }
        match compact_day((store, budget), series, day, hours, now).await? {
            Compacted::Written { bytes, .. } => {
                self.progress.day_written(bytes);
                (pass.day_blocks, pass.day_bytes) = (pass.day_blocks + 1, pass.day_bytes + bytes);
                self.known.lock().expect("not poisoned").insert(key);
            }
            Compacted::Exists | Compacted::Empty => {
                self.known.lock().expect("not poisoned").insert(key);
            }
            Compacted::Raced => {
                self.progress.raced();
                pass.raced += 1;
            }
            // Made on a later pass, once its hours' blocks are.
            Compacted::Waiting => {}
        }
        Ok(())
    }
}

/// Runs a pass every `tick` for as long as the server runs.
pub async fn run_forever(state: State, tick: Duration, lease_secs: u64) {
    let compactor = Compactor::new(lease_secs, state.compaction.clone());
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        match compactor.counted_pass(&state.store, &state.budget, now_millis()).await {
            Ok(pass) if pass.blocks > 0 || pass.day_blocks > 0 || pass.raced > 0 => tracing::info!(
                "compaction: {} blocks of {} profiles ({} bytes), {} day blocks ({} bytes), {} hours or days \
                 changed meanwhile",
                pass.blocks,
                pass.profiles,
                pass.bytes,
                pass.day_blocks,
                pass.day_bytes,
                pass.raced
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("compaction: {e}"),
        }
    }
}
