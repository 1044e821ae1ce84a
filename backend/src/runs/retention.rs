//! The sweep: every replica, every tick, ends the links whose time is up (sessions and
//! blobs uploaded with `expiresIn`, listed by the expiring index up to now only) and,
//! with `--retention-days`, removes the index entries older than the retention from
//! every tenant's series, with the profiles only they hold. Hours are listed only up to
//! the cutoff; a baseline or capture still pins its bytes. Two replicas doing it at once
//! only delete the same objects twice.

use std::time::Duration;

use stacklens_core::ids::RecordId;

use crate::records::series::{self, Series};
use crate::records::{blobs, expiring, index, now_millis, RecordError, Tenant};
use crate::store::Store;

/// Runs for as long as the server runs.
pub async fn run_forever(store: Store, retention: Option<Duration>, tick: Duration) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let now = now_millis();
        let cutoff = retention.map(|r| now.saturating_sub(r.as_millis() as u64));
        if let Err(e) = sweep(&store, now, cutoff).await {
            tracing::warn!("retention: {e}");
        }
    }
}

/// Ends every tenant's links due at `now`, and removes the index entries taken before
/// `cutoff` if given.
async fn sweep(store: &Store, now: u64, cutoff: Option<u64>) -> Result<(), RecordError> {
    for tenant in store.list_folders("tenants").await? {
        let tenant = Tenant(tenant);
        let mut ended = 0;
        for (at, id) in expiring::due(store, &tenant, now).await? {
            match RecordId::parse(&id) {
                Some(RecordId::Blob(_)) => blobs::expire(store, &tenant, &id, now).await?,
                _ => index::expire(store, &tenant, &id, now).await?,
            }
            // The entry goes last: a pass stopped before this point is done again.
            expiring::forget(store, &tenant, at, &id).await?;
            ended += 1;
        }
        if ended > 0 {
            tracing::info!("retention: looked at {ended} expired links of tenant {}", tenant.0);
        }
        let Some(cutoff) = cutoff else { continue };
        for (service, kind) in series::list(store, &tenant).await? {
            let series = Series { tenant: tenant.clone(), service, kind };
            let removed = index::expire_entries(store, &series, cutoff, None).await?;
            if removed > 0 {
                tracing::info!("retention: removed {removed} profiles of tenant {}", tenant.0);
            }
        }
    }
    Ok(())
}
