//! Retention of the time index (`--retention-days`): every replica, every tick, removes
//! the index entries older than the retention from every tenant's series, with the
//! profiles only they hold. Hours are listed only up to the cutoff; a baseline still
//! pins its bytes. Two replicas doing it at once only delete the same objects twice.

use std::time::Duration;

use crate::records::series::{self, Series};
use crate::records::{now_millis, RecordError, Tenant};
use crate::store::Store;

/// Runs for as long as the server runs.
pub async fn run_forever(store: Store, retention: Duration, tick: Duration) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let cutoff = now_millis().saturating_sub(retention.as_millis() as u64);
        if let Err(e) = expire(&store, cutoff).await {
            tracing::warn!("retention: {e}");
        }
    }
}

/// Removes every tenant's index entries taken before `cutoff`.
async fn expire(store: &Store, cutoff: u64) -> Result<(), RecordError> {
    for tenant in store.list_folders("tenants").await? {
        let tenant = Tenant(tenant);
        for (service, kind) in series::list(store, &tenant).await? {
            let removed = Series { tenant: tenant.clone(), service, kind }.expire(store, cutoff).await?;
            if removed > 0 {
                tracing::info!("retention: removed {removed} profiles of tenant {}", tenant.0);
            }
        }
    }
    Ok(())
}
