//! Sessions: raw profiles as uploaded, captured or recorded, with a small record each.
//! Ids are random (a share link is a capability); the same bytes in the same tenant
//! still map to one session through a claim keyed by their sha256, so bytes are
//! stored once. A deleted session is hidden at once (tombstone) and its bytes go when
//! no baseline or capture refers to it any more (see [`super::refs`]).
//!
//! An upload stores four objects (five with a service): the bytes, the record, and
//! copies of the record (the claim, found by content, and the index entries, listed by
//! time, all of them and the service's), which on file:// are hard links and cost no
//! file. The indexes are bucketed by time (see [`super::buckets`]) and their entries'
//! names end with the profile type, so a page of a listing reads that page only. The
//! upload that creates a session holds it without a reference object, until the
//! session is deleted (see [`holds_its_upload`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::Deserialize;
use sha2::{Digest, Sha256};
pub use stacklens_core::api::SessionRecord;
use stacklens_core::ProfileKind;

use super::{buckets, load, millis_of, now_rfc3339, random_id, refs, valid_id, Kind, RecordError, Result, Tenant};
use crate::store::Store;

/// A new session's description; core has read the bytes already.
pub struct NewSession {
    pub service: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub profile_type: ProfileKind,
    pub sample_types: Vec<String>,
    pub sample_count: i64,
    pub duration_seconds: f64,
}

/// Who holds an uploaded session (its uploader).
pub const UPLOAD: &str = "upload";

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.json"))
}

fn raw_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.raw"))
}

fn tombstone_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.deleted"))
}

fn claim_key(tenant: &Tenant, sha256: &str) -> String {
    tenant.key(&format!("by-sha256/{sha256}"))
}

fn index_prefix(tenant: &Tenant) -> String {
    tenant.key("sessions-by-time")
}

fn service_index_prefix(tenant: &Tenant, service: &str) -> String {
    tenant.key(&format!("sessions-by-service/s{}", hex::encode(service)))
}

/// Index entries sort newest first: the name starts with the inverted creation time,
/// and ends with the profile type (listings filter by it without reading records).
fn index_name(record: &SessionRecord) -> String {
    format!("{}.{}", legacy_name(record), record.profile_type)
}

/// An entry's name before entries had buckets and types: `sessions-by-time/{name}`.
fn legacy_name(record: &SessionRecord) -> String {
    format!("{:016x}-{}", u64::MAX - millis_of(&record.created_at), record.id)
}

/// The index entries a session is listed by: among all, and among its service's.
fn index_keys(tenant: &Tenant, record: &SessionRecord) -> Vec<String> {
    let name = index_name(record);
    let mut keys = vec![buckets::key(&index_prefix(tenant), &name)];
    if !record.service.is_empty() {
        keys.push(buckets::key(&service_index_prefix(tenant, &record.service), &name));
    }
    keys
}

/// Lists a session: its index entries, copies of its record (stored at `record_at`).
async fn file_entries(store: &Store, tenant: &Tenant, record: &SessionRecord, described: Bytes) -> Result<()> {
    let record_at = record_key(tenant, &record.id);
    let filed = index_keys(tenant, record).into_iter().map(|key| {
        let (described, record_at) = (described.clone(), &record_at);
        async move { store.create_copy(&key, described, record_at).await }
    });
    futures::future::try_join_all(filed).await?;
    Ok(())
}

/// Stops listing a session (also under the index layout before buckets).
async fn forget_entries(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<()> {
    let legacy = format!("{}/{}", index_prefix(tenant), legacy_name(record));
    for key in index_keys(tenant, record).into_iter().chain([legacy]) {
        store.delete(&key).await?;
    }
    Ok(())
}

/// Stores `bytes` as a session held by `holder`, or finds the session these bytes
/// already are (then `false`). Returns after the store acknowledged every object.
pub async fn store(
    store: &Store,
    tenant: &Tenant,
    bytes: Bytes,
    new: NewSession,
    holder: &str,
) -> Result<(bool, SessionRecord)> {
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let claim = claim_key(tenant, &sha256);
    // A few rounds: another replica may be storing or removing the same bytes.
    for _ in 0..4 {
        if let Some(claimed) = store.get(&claim).await? {
            let id = claimed_id(&claimed);
            if let Some(record) = visible(store, tenant, &id).await? {
                // A visible session an upload created is held by that upload already.
                let upload_holds = holder == UPLOAD && record.created_by_upload;
                if upload_holds || refs::hold(store, tenant, &id, holder).await? {
                    // Written again in case the run that stored it stopped before its index entry.
                    let described = Bytes::from(serde_json::to_vec(&record)?);
                    file_entries(store, tenant, &record, described).await?;
                    return Ok((false, record));
                }
            }
            // The claimed session was deleted or is being removed: new bytes take its place.
            release_claim(store, tenant, &sha256, &id).await?;
            continue;
        }
        let text = !bytes.starts_with(&[0x1f, 0x8b]) && std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_ok();
        let record = SessionRecord {
            id: random_id("sess"),
            service: new.service.clone(),
            profile_type: new.profile_type,
            name: new.name.clone(),
            labels: new.labels.clone(),
            sample_types: new.sample_types.clone(),
            sample_count: new.sample_count,
            duration_seconds: new.duration_seconds,
            created_at: now_rfc3339(),
            size: bytes.len() as u64,
            sha256: sha256.clone(),
            content_type: if text { "text/plain; charset=utf-8" } else { "application/octet-stream" }.to_owned(),
            created_by_upload: holder == UPLOAD,
        };
        // Bytes, record and reference (other holders than the upload need one) first,
        // together (each waits for its own sync), so nothing is listed that cannot be
        // read; then the claim, which makes it findable by content, and the index entry,
        // which lists it (together too: a listing shows only sessions whose record is
        // there, and a lost claim removes both). Both are copies of the record.
        let (raw, record_at) = (raw_key(tenant, &record.id), record_key(tenant, &record.id));
        let described = Bytes::from(serde_json::to_vec(&record)?);
        futures::try_join!(
            async { Ok::<_, RecordError>(store.create(&raw, bytes.clone()).await?) },
            async { Ok(store.create(&record_at, described.clone()).await?) },
            async {
                if record.created_by_upload {
                    return Ok(());
                }
                refs::hold_new(store, tenant, &record.id, holder).await
            },
        )?;
        let (claimed, _) = futures::try_join!(
            async { Ok::<_, RecordError>(store.create_copy(&claim, described.clone(), &record_at).await?) },
            file_entries(store, tenant, &record, described.clone())
        )?;
        if claimed {
            return Ok((true, record));
        }
        // Another replica stored the same bytes meanwhile: theirs wins, ours goes.
        refs::withdraw(store, tenant, &record.id, holder).await?;
        remove(store, tenant, &record.id).await?;
    }
    Err(RecordError::Store(crate::store::StoreError::Contention(format!("storing the profile with sha256 {sha256}"))))
}

/// The session a claim names: it is a copy of the session's record (or, written by
/// earlier versions, the bare id).
fn claimed_id(claim: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Claim {
        id: String,
    }
    match serde_json::from_slice::<Claim>(claim) {
        Ok(claim) => claim.id,
        Err(_) => String::from_utf8_lossy(claim).into_owned(),
    }
}

async fn release_claim(store: &Store, tenant: &Tenant, sha256: &str, id: &str) -> Result<()> {
    let claim = claim_key(tenant, sha256);
    if store.get(&claim).await?.is_some_and(|claimed| claimed_id(&claimed) == id) {
        store.delete(&claim).await?;
    }
    Ok(())
}

/// A session that was not deleted.
async fn visible(store: &Store, tenant: &Tenant, id: &str) -> Result<Option<SessionRecord>> {
    if store.get(&tombstone_key(tenant, id)).await?.is_some() {
        return Ok(None);
    }
    load(store, &record_key(tenant, id)).await
}

/// Whether the upload that created the session still holds it: until it is deleted.
pub(super) async fn holds_its_upload(store: &Store, tenant: &Tenant, id: &str) -> Result<bool> {
    Ok(visible(store, tenant, id).await?.is_some_and(|record| record.created_by_upload))
}

/// Whether the session's record is still stored (deleted ones too, while pinned).
pub async fn exists(store: &Store, tenant: &Tenant, id: &str) -> Result<bool> {
    Ok(store.get(&record_key(tenant, id)).await?.is_some())
}

/// A session as its own link finds it: 404 once deleted.
pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord> {
    if !valid_id(id, "sess") {
        return Err(RecordError::not_found(Kind::Session, id));
    }
    visible(store, tenant, id).await?.ok_or_else(|| RecordError::not_found(Kind::Session, id))
}

/// A session as a baseline or capture that holds it finds it, deleted or not.
pub async fn find_held(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord> {
    if !valid_id(id, "sess") {
        return Err(RecordError::not_found(Kind::Session, id));
    }
    load(store, &record_key(tenant, id)).await?.ok_or_else(|| RecordError::not_found(Kind::Session, id))
}

/// A session's raw bytes.
pub async fn raw(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<Bytes> {
    store.get(&raw_key(tenant, &record.id)).await?.ok_or_else(|| RecordError::not_found(Kind::Session, &record.id))
}

/// Deletes a session for its owner: its link answers 404 at once and listings drop it;
/// its bytes stay while a baseline or capture still holds them. The time index does
/// not keep what its owner deleted: its entries go.
pub async fn delete(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<()> {
    store.create(&tombstone_key(tenant, &record.id), Bytes::new()).await?;
    forget_entries(store, tenant, record).await?;
    release_claim(store, tenant, &record.sha256, &record.id).await?;
    super::series::forget_session(store, tenant, &record.id).await?;
    refs::release(store, tenant, &record.id, UPLOAD).await
}

/// Removes everything of a session that nothing refers to (called by [`refs`]).
pub(super) async fn remove(store: &Store, tenant: &Tenant, id: &str) -> Result<()> {
    if let Some(record) = load::<SessionRecord>(store, &record_key(tenant, id)).await? {
        forget_entries(store, tenant, &record).await?;
        release_claim(store, tenant, &record.sha256, id).await?;
    }
    store.delete(&record_key(tenant, id)).await?;
    store.delete(&raw_key(tenant, id)).await?;
    store.delete(&tombstone_key(tenant, id)).await?;
    Ok(())
}

/// One page of a tenant's sessions, newest first, and the cursor of the next page.
/// Reads the page's entries only: a service's own index, the type from entry names.
pub async fn list(
    store: &Store,
    tenant: &Tenant,
    service: Option<&str>,
    kind: Option<ProfileKind>,
    limit: usize,
    cursor: Option<&str>,
) -> Result<(Vec<SessionRecord>, Option<String>)> {
    let prefix = service.map_or_else(|| index_prefix(tenant), |s| service_index_prefix(tenant, s));
    let bucketed = store.list_folders(&prefix).await?;
    let suffix = kind.map(|k| format!(".{k}"));
    let names = buckets::page(store, &prefix, &bucketed, cursor, limit, |name| {
        suffix.as_ref().is_none_or(|s| name.ends_with(s.as_str()))
    })
    .await?;
    let keys: Vec<String> = names.iter().map(|name| buckets::key(&prefix, name)).collect();
    let records: Vec<Option<SessionRecord>> = futures::stream::iter(keys)
        .map(|key| async move { load::<SessionRecord>(store, &key).await })
        .buffered(16)
        .try_collect()
        .await?;
    // An entry gone since the listing is a session deleted meanwhile.
    let page = records.into_iter().flatten().collect();
    let next_cursor = if names.len() == limit { names.last().cloned() } else { None };
    Ok((page, next_cursor))
}

/// Whether `cursor` is one [`list`] returned (or, without the type, returned before
/// entry names carried it).
pub fn valid_cursor(cursor: &str) -> bool {
    let (entry, kind) = cursor.split_at(cursor.len().min(16 + 1 + 37));
    entry.len() == 16 + 1 + 37
        && entry[..16].bytes().all(|b| b.is_ascii_hexdigit())
        && entry.as_bytes()[16] == b'-'
        && valid_id(&entry[17..], "sess")
        && (kind.is_empty() || kind.strip_prefix('.').is_some_and(|k| ProfileKind::ALL.iter().any(|p| p.as_str() == k)))
}

/// Files the index entries written before indexes had buckets (`sessions-by-time/{name}`)
/// into their buckets, with their service's entries; run once as a server starts.
pub async fn refile_legacy_entries(store: &Store, tenant: &Tenant) -> Result<usize> {
    let legacy = store.list_level(&index_prefix(tenant)).await?.objects;
    for name in &legacy {
        let key = format!("{}/{name}", index_prefix(tenant));
        if let Some(record) = load::<SessionRecord>(store, &key).await? {
            let described = Bytes::from(serde_json::to_vec(&record)?);
            file_entries(store, tenant, &record, described).await?;
        }
        store.delete(&key).await?;
    }
    Ok(legacy.len())
}
