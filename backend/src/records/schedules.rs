//! Continuous-capture schedules: create-only versions per tenant and service; the
//! newest wins, so every replica — a restarted one too — runs the same schedules. Each
//! interval of each profile type is a slot, taken by the replica that creates the
//! slot's lease object first.

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

pub async fn save(store: &Store, tenant: &Tenant, schedule: &Schedule) -> Result<()> {
    let key = format!(
        "{PREFIX}/{}/{:016x}-{}.json",
        group(tenant, &schedule.service),
        now_millis(),
        uuid::Uuid::now_v7().simple()
    );
    create(store, &key, schedule).await?;
    Ok(())
}

/// The newest schedule of every tenant and service.
pub async fn current(store: &Store) -> Result<Vec<(Tenant, Schedule)>> {
    let mut newest: BTreeMap<String, String> = BTreeMap::new();
    for key in store.list(PREFIX, None).await? {
        if let Some((group, _)) = key.rsplit_once('/') {
            newest.insert(group.to_owned(), key);
        }
    }
    let mut schedules = Vec::new();
    for (group, key) in newest {
        let Some((tenant, _)) = group.split_once('/') else { continue };
        if let Some(schedule) = load::<Schedule>(store, &format!("{PREFIX}/{key}")).await? {
            schedules.push((Tenant(tenant.to_owned()), schedule));
        }
    }
    Ok(schedules)
}

fn slot_folder(tenant: &Tenant, schedule: &Schedule, kind: ProfileKind) -> String {
    format!("system/leases/{}/{kind}", group(tenant, &schedule.service))
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
