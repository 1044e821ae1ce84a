//! The index of links that expire: one empty entry per expiry a session or blob was
//! given, named by the time and the id, bucketed by time (see [`super::buckets`]), so
//! the sweep (`runs::retention`) lists only what is due. An entry is filed before the
//! record it expires becomes findable, and goes only after the sweep dealt with it, so
//! a server stopped half-way leaves the work to the next pass.

use bytes::Bytes;

use super::{buckets, Result, Tenant};
use crate::store::Store;

fn prefix(tenant: &Tenant) -> String {
    tenant.key("expiring")
}

fn key(tenant: &Tenant, at: u64, id: &str) -> String {
    buckets::key(&prefix(tenant), &format!("{at:016x}-{id}"))
}

/// Files `id` to be looked at once `at` (milliseconds since the epoch) has passed.
pub async fn file(store: &Store, tenant: &Tenant, at: u64, id: &str) -> Result<()> {
    store.create(&key(tenant, at, id), Bytes::new()).await?;
    Ok(())
}

/// Drops the entry of `id` at `at`.
pub async fn forget(store: &Store, tenant: &Tenant, at: u64, id: &str) -> Result<()> {
    Ok(store.delete(&key(tenant, at, id)).await?)
}

/// The entries due at `now`, oldest first: (time, id). Only the buckets up to `now` are read.
pub async fn due(store: &Store, tenant: &Tenant, now: u64) -> Result<Vec<(u64, String)>> {
    let bucketed = store.list_folders(&prefix(tenant)).await?;
    let names =
        buckets::range(store, &prefix(tenant), &bucketed, &format!("{:016x}", 0), &format!("{now:016x}")).await?;
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let (at, id) = name.split_once('-')?;
            Some((u64::from_str_radix(at, 16).ok()?, id.to_owned()))
        })
        .collect())
}
