//! Baselines, field for field as the seed's CreateBaseline: a labelled session whose
//! top functions later profiles are compared with. A baseline holds its session (see
//! [`super::refs`]), so its bytes outlive retention and the session's own deletion.
//! "Latest" is not stored (it would need an overwrite): it is the newest entry of a
//! per-type-and-service index whose names are time-ordered.

use futures::{StreamExt, TryStreamExt};
use stacklens_core::analysis::summary::FunctionShare;
pub use stacklens_core::api::BaselineRecord;
use stacklens_core::ids::BaselineId;
use stacklens_core::ProfileKind;

use super::index;
use super::refs::Holder;
use super::sessions::SessionRecord;
use super::{create, load, now, random_id, Kind, RecordError, Result, Tenant};
use crate::store::Store;

/// What a new baseline says about its session.
pub struct NewBaseline {
    pub label: String,
    pub profile_type: ProfileKind,
    pub description: String,
    pub top_functions: Vec<FunctionShare>,
    pub tags: Vec<String>,
}

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("baselines/by-id/{id}.json"))
}

fn time_prefix(tenant: &Tenant) -> String {
    tenant.key("baselines/by-time")
}

/// The folder of one type and service's baselines; the service is hex-encoded so any
/// text is a safe key.
fn group_prefix(tenant: &Tenant, kind: ProfileKind, service: &str) -> String {
    tenant.key(&format!("baselines/latest/{kind}/s{}", hex::encode(service)))
}

/// Index names: the creation time, then the (random) baseline id.
fn index_name(record: &BaselineRecord) -> String {
    format!("{:016x}-{}", record.created_at.millis(), record.baseline_id)
}

fn id_of(index_name: &str) -> Option<&str> {
    index_name.split_once('-').map(|(_, id)| id)
}

/// Saves a baseline of `session`; NotFound when the session went meanwhile.
pub async fn create_baseline(
    store: &Store,
    tenant: &Tenant,
    session: &SessionRecord,
    new: NewBaseline,
) -> Result<BaselineRecord> {
    let record = BaselineRecord {
        baseline_id: random_id(),
        baseline_label: new.label,
        profile_type: new.profile_type,
        session_id: session.id.clone(),
        service: session.service.clone(),
        description: new.description,
        top_functions: new.top_functions,
        created_at: now(),
        tags: new.tags,
    };
    // The pin first, then the record, then the indexes: "latest" moves only to a
    // stored baseline, and no baseline exists whose bytes could be collected.
    if !index::hold(store, tenant, &session.id, &Holder::Record(record.baseline_id.to_string())).await? {
        return Err(RecordError::not_found(Kind::Session, &session.id));
    }
    create(store, &record_key(tenant, &record.baseline_id), &record).await?;
    let name = index_name(&record);
    store.create(&format!("{}/{name}", time_prefix(tenant)), bytes::Bytes::new()).await?;
    let group = group_prefix(tenant, record.profile_type, &record.service);
    store.create(&format!("{group}/{name}"), bytes::Bytes::new()).await?;
    Ok(record)
}

/// The newest baseline of a type and service.
pub async fn latest_id(store: &Store, tenant: &Tenant, kind: ProfileKind, service: &str) -> Result<Option<String>> {
    let names = store.list(&group_prefix(tenant, kind, service), None).await?;
    Ok(names.last().and_then(|n| id_of(n)).map(str::to_owned))
}

pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<BaselineRecord> {
    if BaselineId::parse(id).is_err() {
        return Err(RecordError::not_found(Kind::Baseline, id));
    }
    load(store, &record_key(tenant, id)).await?.ok_or_else(|| RecordError::not_found(Kind::Baseline, id))
}

/// A tenant's baselines, newest first.
pub async fn list(store: &Store, tenant: &Tenant) -> Result<Vec<BaselineRecord>> {
    let names = store.list(&time_prefix(tenant), None).await?;
    let keys: Vec<String> = names.iter().rev().filter_map(|name| Some(record_key(tenant, id_of(name)?))).collect();
    let records = futures::stream::iter(keys).map(|key| async move { load(store, &key).await }).buffered(16);
    Ok(records.try_collect::<Vec<_>>().await?.into_iter().flatten().collect())
}

/// Deletes a baseline: out of the indexes, then its record, then its pin (which
/// removes the session's bytes if nothing else holds them).
pub async fn delete(store: &Store, tenant: &Tenant, record: &BaselineRecord) -> Result<()> {
    let id = &record.baseline_id;
    let name = index_name(record);
    store.delete(&format!("{}/{name}", group_prefix(tenant, record.profile_type, &record.service))).await?;
    store.delete(&format!("{}/{name}", time_prefix(tenant))).await?;
    store.delete(&record_key(tenant, id)).await?;
    index::release(store, tenant, &record.session_id, &Holder::Record(id.to_string())).await
}
