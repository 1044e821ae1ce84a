//! Continuous-capture schedules: create-only versions per tenant and service; the
//! newest wins, so every replica — a restarted one too — runs the same schedules, and a
//! new version removes the older ones, so the listing every replica reads each tick
//! holds one entry per schedule. Each interval of each profile type is a slot, taken by
//! the replica that creates the slot's lease object first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::{create, load, now_millis, Result, Tenant};
use crate::store::Store;

#[derive(Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub service: String,
    #[schema(value_type = Vec<String>)]
    pub profile_types: Vec<ProfileKind>,
    pub sample_rate: Option<u64>,
    pub retention_days: f64,
    pub enabled: bool,
    pub interval_seconds: u64,
    pub duration_seconds: u64,
    pub updated_at: String,
}

const PREFIX: &str = "system/schedules";

/// One (tenant, service) pair's folder of schedule versions and slot leases.
fn group(tenant: &Tenant, service: &str) -> String {
    format!("{}/s{}", tenant.0, hex::encode(service))
}

fn versions_folder(tenant: &Tenant, service: &str) -> String {
    format!("{PREFIX}/{}", group(tenant, service))
}

/// Stores a new version of the service's schedule, then removes the older ones (a
/// version another replica saved meanwhile that sorts later stays: the newest wins).
pub async fn save(store: &Store, tenant: &Tenant, schedule: &Schedule) -> Result<()> {
    let folder = versions_folder(tenant, &schedule.service);
    let name = format!("{:016x}-{}.json", now_millis(), uuid::Uuid::now_v7().simple());
    create(store, &format!("{folder}/{name}"), schedule).await?;
    for older in store.list(&folder, None).await?.into_iter().filter(|v| *v < name) {
        store.delete(&format!("{folder}/{older}")).await?;
    }
    Ok(())
}

/// Removes the service's schedule and its slot leases; false when it had none. Its
/// captures stay until the server's retention or their deletion.
pub async fn remove(store: &Store, tenant: &Tenant, service: &str) -> Result<bool> {
    let folder = versions_folder(tenant, service);
    let versions = store.list(&folder, None).await?;
    for version in &versions {
        store.delete(&format!("{folder}/{version}")).await?;
    }
    let leases = leases_folder(tenant, service);
    for lease in store.list(&leases, None).await? {
        store.delete(&format!("{leases}/{lease}")).await?;
    }
    Ok(!versions.is_empty())
}

/// The schedules as one replica last read them: one listing per tick, and a version is
/// read once (its name changes with every save).
#[derive(Default)]
pub struct Current {
    loaded: BTreeMap<String, (Tenant, Schedule)>,
}

/// The newest version under `prefix` of each schedule: (its folder, its key under `prefix`).
async fn newest(store: &Store, prefix: &str) -> Result<BTreeMap<String, String>> {
    let mut newest = BTreeMap::new();
    for key in store.list(prefix, None).await? {
        if let Some((group, _)) = key.rsplit_once('/') {
            newest.insert(group.to_owned(), key);
        }
    }
    Ok(newest)
}

/// A tenant's schedules.
pub async fn of_tenant(store: &Store, tenant: &Tenant) -> Result<Vec<Schedule>> {
    let prefix = format!("{PREFIX}/{}", tenant.0);
    let mut schedules = Vec::new();
    for key in newest(store, &prefix).await?.into_values() {
        schedules.extend(load::<Schedule>(store, &format!("{prefix}/{key}")).await?);
    }
    Ok(schedules)
}

impl Current {
    /// The newest schedule of every tenant and service.
    pub async fn read(&mut self, store: &Store) -> Result<Vec<(Tenant, Schedule)>> {
        let mut loaded = BTreeMap::new();
        for (group, key) in newest(store, PREFIX).await? {
            let Some((tenant, _)) = group.split_once('/') else { continue };
            let schedule = match self.loaded.remove(&key) {
                Some((_, schedule)) => Some(schedule),
                None => load::<Schedule>(store, &format!("{PREFIX}/{key}")).await?,
            };
            if let Some(schedule) = schedule {
                loaded.insert(key, (Tenant(tenant.to_owned()), schedule));
            }
        }
        self.loaded = loaded;
        Ok(self.loaded.values().cloned().collect())
    }
}

fn leases_folder(tenant: &Tenant, service: &str) -> String {
    format!("system/leases/{}", group(tenant, service))
}

fn slot_folder(tenant: &Tenant, schedule: &Schedule, kind: ProfileKind) -> String {
    format!("{}/{kind}", leases_folder(tenant, &schedule.service))
}

/// Takes a slot of a schedule; true for the one replica that gets it.
pub async fn take_slot(
    store: &Store,
    tenant: &Tenant,
    schedule: &Schedule,
    kind: ProfileKind,
    slot: u64,
) -> Result<bool> {
    Ok(store.create(&format!("{}/{slot:016x}", slot_folder(tenant, schedule, kind)), bytes::Bytes::new()).await?)
}

/// Deletes slot leases before `oldest_slot`.
pub async fn forget_slots(
    store: &Store,
    tenant: &Tenant,
    schedule: &Schedule,
    kind: ProfileKind,
    oldest_slot: u64,
) -> Result<()> {
    let folder = slot_folder(tenant, schedule, kind);
    for lease in store.list(&folder, None).await? {
        if u64::from_str_radix(&lease, 16).is_ok_and(|slot| slot < oldest_slot) {
            store.delete(&format!("{folder}/{lease}")).await?;
        }
    }
    Ok(())
}
