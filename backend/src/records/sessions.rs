//! Sessions: raw profiles as uploaded, captured or recorded, with a small record each.
//! Ids are random (a share link is a capability); the same bytes in the same tenant
//! still map to one session through a claim keyed by their sha256, so bytes are
//! stored once. A deleted session is hidden at once (tombstone) and its bytes go when
//! no baseline or capture refers to it any more (see [`super::refs`] and [`super::index`]).
//!
//! An upload stores four objects (five with a service): the bytes, the record, and
//! copies of the record (the claim, found by content, and the index entries, listed by
//! time, all of them and the service's), which on file:// are hard links and cost no
//! file. The indexes are bucketed by time (see [`super::buckets`]) and their entries'
//! names end with the profile type, so a page of a listing reads that page only. The
//! upload that creates a session holds it without a reference object, until the
//! session is deleted or its link expires (see [`holds_its_upload`]). What spans
//! sessions, the time index and references (deleting, expiring) is in [`super::index`].
//!
//! Links that expire, and delete tokens: the upload that creates a session keeps its
//! expiry and the sha256 of the delete token it was given in the record (the hash is in
//! no answer); each later upload of the same bytes leaves an empty object whose name
//! says the same of it. Uploads of the same bytes share one session, so they share its
//! link:
//! - it expires at the latest time any of them asked for, and never once one of them
//!   asked for none (an upload can extend a link's life, never shorten it, so nobody
//!   loses a link that does not expire to someone else's upload of the same bytes);
//! - each one's token revokes the link, for everyone: a revocation never leaves the link
//!   open behind its uploader's back. Another uploader had the bytes and the tenant's
//!   write access, which deletes any session anyway.
//!
//! Only a session created with an expiry has these objects read when it is opened; one
//! created without never expires, whatever later uploads ask.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
pub use stacklens_core::api::SessionRecord;
use stacklens_core::ids::SessionId;
use stacklens_core::import::is_gzip;
use stacklens_core::timestamp::Timestamp;
use stacklens_core::ProfileKind;

use super::refs::{self, Holder};
use super::{
    blobs, buckets, expiring, load, now, now_millis, random_id, rfc3339, token_matches, Kind, RecordError, Result,
    Tenant,
};
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
    /// When the session's link expires (milliseconds since the epoch); never when `None`.
    pub expires: Option<u64>,
}

/// A stored profile: whether this call created its session, the session (its
/// `expiresAt` when its link expires), and for uploads the delete token they were given.
pub struct Stored {
    pub created: bool,
    pub record: SessionRecord,
    pub delete_token: Option<String>,
}

/// A session's record as stored: the record, and the sha256 (hex) of the delete token
/// the upload that created it was given, which no answer shows.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Described {
    #[serde(flatten)]
    record: SessionRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delete_token_sha256: Option<String>,
}

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.json"))
}

fn raw_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.raw"))
}

fn tombstone_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.deleted"))
}

/// Made by the sweep before it ends an expired link (see [`expire`]).
fn expiring_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("sessions/{id}.expiring"))
}

fn uploads_prefix(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("uploads/{id}"))
}

/// A later upload's object: `{expiry}-{sha256 of its delete token}`, the expiry as 16
/// hex digits of milliseconds since the epoch, or `never`.
fn upload_key(tenant: &Tenant, id: &str, expires: Option<u64>, token_sha256: &[u8; 32]) -> String {
    let until = expires.map_or_else(|| "never".to_owned(), |at| format!("{at:016x}"));
    format!("{}/{until}-{}", uploads_prefix(tenant, id), hex::encode(token_sha256))
}

/// An upload object's expiry (`None`: never) and token digest.
fn parse_upload(name: &str) -> Option<(Option<u64>, &str)> {
    let (until, digest) = name.split_once('-')?;
    let expires = match until {
        "never" => None,
        at => Some(u64::from_str_radix(at, 16).ok()?),
    };
    Some((expires, digest))
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
    format!("{:016x}-{}", u64::MAX - record.created_at.millis(), record.id)
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
/// already are (then `created` is false). An upload also gets a delete token, and may
/// extend the found session's expiry. Returns after the store acknowledged every object.
pub async fn store(store: &Store, tenant: &Tenant, bytes: Bytes, new: NewSession, holder: &Holder) -> Result<Stored> {
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let claim = claim_key(tenant, &sha256);
    // A few rounds: another replica may be storing or removing the same bytes.
    for _ in 0..4 {
        if let Some(claimed) = store.get(&claim).await? {
            let id = claimed_id(&claimed);
            if let Some(found) = visible(store, tenant, &id).await? {
                // A visible session an upload created is held by that upload already.
                let upload_holds = *holder == Holder::Upload && found.stored.record.created_by_upload;
                if upload_holds
                    || refs::hold(store, tenant, &id, holder, Bytes::new(), exists(store, tenant, &id)).await?
                {
                    let (delete_token, until) = if *holder == Holder::Upload {
                        match add_upload(store, tenant, &found, new.expires).await? {
                            Some((token, until)) => (Some(token), until),
                            // The sweep is ending this link: look again.
                            None => continue,
                        }
                    } else {
                        (None, found.until)
                    };
                    // Written again in case the run that stored it stopped before its index entry.
                    let described = Bytes::from(serde_json::to_vec(&found.stored)?);
                    file_entries(store, tenant, &found.stored.record, described).await?;
                    let record = Found { until, ..found }.shown();
                    return Ok(Stored { created: false, record, delete_token });
                }
            }
            // The claimed session was deleted, expired or is being removed: new bytes take its place.
            release_claim(store, tenant, &sha256, &id).await?;
            continue;
        }
        let text = !is_gzip(&bytes) && std::str::from_utf8(&bytes[..bytes.len().min(4096)]).is_ok();
        let record = SessionRecord {
            id: random_id(),
            service: new.service.clone(),
            profile_type: new.profile_type,
            name: new.name.clone(),
            labels: new.labels.clone(),
            sample_types: new.sample_types.clone(),
            sample_count: new.sample_count,
            duration_seconds: new.duration_seconds,
            created_at: now(),
            size: bytes.len() as u64,
            sha256: sha256.clone(),
            content_type: if text { "text/plain; charset=utf-8" } else { "application/octet-stream" }.to_owned(),
            created_by_upload: *holder == Holder::Upload,
            expires_at: new.expires.map(Timestamp::from_millis),
        };
        let token = (*holder == Holder::Upload).then(super::delete_token);
        let stored = Described { record, delete_token_sha256: token.as_ref().map(|(_, digest)| hex::encode(digest)) };
        let record = &stored.record;
        // Bytes, record, reference (other holders than the upload need one) and the
        // expiring index's entry first, together (each waits for its own sync), so nothing
        // is listed that cannot be read, and nothing expires unswept; then the claim,
        // which makes it findable by content, and the index entry, which lists it
        // (together too: a listing shows only sessions whose record is there, and a lost
        // claim removes both). Both are copies of the record.
        let (raw, record_at) = (raw_key(tenant, &record.id), record_key(tenant, &record.id));
        let described = Bytes::from(serde_json::to_vec(&stored)?);
        futures::try_join!(
            async { Ok::<_, RecordError>(store.create(&raw, bytes.clone()).await?) },
            async { Ok(store.create(&record_at, described.clone()).await?) },
            async {
                if record.created_by_upload {
                    return Ok(());
                }
                refs::hold_new(store, tenant, &record.id, holder).await
            },
            async {
                match new.expires {
                    Some(at) => expiring::file(store, tenant, at, &record.id).await,
                    None => Ok(()),
                }
            },
        )?;
        let (claimed, _) = futures::try_join!(
            async { Ok::<_, RecordError>(store.create_copy(&claim, described.clone(), &record_at).await?) },
            file_entries(store, tenant, record, described.clone())
        )?;
        if claimed {
            return Ok(Stored { created: true, record: stored.record, delete_token: token.map(|(token, _)| token) });
        }
        // Another replica stored the same bytes meanwhile: theirs wins, ours goes.
        refs::withdraw(store, tenant, &record.id, holder).await?;
        remove(store, tenant, &record.id).await?;
    }
    Err(RecordError::Store(crate::store::StoreError::Contention(format!("storing the profile with sha256 {sha256}"))))
}

/// Records another upload of a stored session's bytes: the sha256 of the delete token it
/// is given and, when it extends the link's life, its expiry (filed in the expiring index
/// first). Returns the token and the link's expiry then, or `None` when the sweep is
/// ending the link meanwhile: each side writes its own object before it looks for the
/// other's (the sweep's marker here, this upload in the sweep's second look), so at least
/// one of them sees the other; and the marker goes only after the record, so a marker
/// already gone leaves the record gone too.
async fn add_upload(
    store: &Store,
    tenant: &Tenant,
    found: &Found,
    expires: Option<u64>,
) -> Result<Option<(String, Option<u64>)>> {
    let id = &found.stored.record.id;
    let extends = match (found.until, expires) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(until), Some(at)) => at > until,
    };
    if let (true, Some(at)) = (extends, expires) {
        expiring::file(store, tenant, at, id).await?;
    }
    let (token, digest) = super::delete_token();
    store.create(&upload_key(tenant, id, expires, &digest), Bytes::new()).await?;
    if !extends {
        return Ok(Some((token, found.until)));
    }
    if store.get(&expiring_key(tenant, id)).await?.is_some() || !exists(store, tenant, id).await? {
        return Ok(None);
    }
    Ok(Some((token, expires)))
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

/// A session as stored, and when its link expires (`None`: never).
struct Found {
    stored: Described,
    until: Option<u64>,
}

impl Found {
    /// The record as its link shows it: with the link's expiry.
    fn shown(self) -> SessionRecord {
        SessionRecord { expires_at: self.until.map(Timestamp::from_millis), ..self.stored.record }
    }
}

/// When a session's link expires: the latest expiry its uploads asked for, or never when
/// it was created without one or one of them asked for none. Only a session created with
/// an expiry has its uploads read.
async fn link_expiry(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<Option<u64>> {
    let Some(created) = &record.expires_at else { return Ok(None) };
    let mut latest = created.millis();
    for name in store.list(&uploads_prefix(tenant, &record.id), None).await? {
        match parse_upload(&name) {
            Some((None, _)) => return Ok(None),
            Some((Some(at), _)) => latest = latest.max(at),
            None => {}
        }
    }
    Ok(Some(latest))
}

/// A session that was not deleted, and when its link expires (if ever).
async fn stored(store: &Store, tenant: &Tenant, id: &str) -> Result<Option<Found>> {
    if store.get(&tombstone_key(tenant, id)).await?.is_some() {
        return Ok(None);
    }
    let Some(stored) = load::<Described>(store, &record_key(tenant, id)).await? else { return Ok(None) };
    let until = link_expiry(store, tenant, &stored.record).await?;
    Ok(Some(Found { stored, until }))
}

/// A session that was not deleted and whose link has not expired.
async fn visible(store: &Store, tenant: &Tenant, id: &str) -> Result<Option<Found>> {
    let now = now_millis();
    Ok(stored(store, tenant, id).await?.filter(|found| found.until.is_none_or(|at| at > now)))
}

/// Whether the upload that created the session still holds it: until it is deleted or
/// its link expires.
pub(super) async fn holds_its_upload(store: &Store, tenant: &Tenant, id: &str) -> Result<bool> {
    Ok(visible(store, tenant, id).await?.is_some_and(|found| found.stored.record.created_by_upload))
}

/// Whether the session's record is still stored (deleted ones too, while pinned).
pub async fn exists(store: &Store, tenant: &Tenant, id: &str) -> Result<bool> {
    Ok(store.get(&record_key(tenant, id)).await?.is_some())
}

/// A session as its own link finds it: NotFound once deleted, Expired once its time is
/// up, and EncryptedBlob for the id of a blob (which no analysis can read).
pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord> {
    if SessionId::parse(id).is_err() {
        if blobs::exists(store, tenant, id).await? {
            return Err(RecordError::EncryptedBlob { id: id.to_owned() });
        }
        return Err(RecordError::not_found(Kind::Session, id));
    }
    let found = stored(store, tenant, id).await?.ok_or_else(|| RecordError::not_found(Kind::Session, id))?;
    match found.until {
        Some(at) if at <= now_millis() => {
            Err(RecordError::Expired { what: Kind::Session, id: id.to_owned(), at: rfc3339(at) })
        }
        _ => Ok(found.shown()),
    }
}

/// Whether `token` is the delete token of one of the uploads of a session's bytes (each
/// is compared in full, so timing says nothing about which matched).
pub async fn revocable_by(store: &Store, tenant: &Tenant, id: &str, token: &str) -> Result<bool> {
    let Some(stored) = load::<Described>(store, &record_key(tenant, id)).await? else { return Ok(false) };
    let later = store.list(&uploads_prefix(tenant, id), None).await?;
    let digests = stored.delete_token_sha256.iter().map(String::as_str);
    let digests = digests.chain(later.iter().filter_map(|name| parse_upload(name)).map(|(_, digest)| digest));
    Ok(digests.fold(false, |found, digest| token_matches(digest, token) | found))
}

/// A session as a baseline or capture that holds it finds it, deleted or not.
pub async fn find_held(store: &Store, tenant: &Tenant, id: &str) -> Result<SessionRecord> {
    if SessionId::parse(id).is_err() {
        return Err(RecordError::not_found(Kind::Session, id));
    }
    load(store, &record_key(tenant, id)).await?.ok_or_else(|| RecordError::not_found(Kind::Session, id))
}

/// A session's raw bytes.
pub async fn raw(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<Bytes> {
    store.get(&raw_key(tenant, &record.id)).await?.ok_or_else(|| RecordError::not_found(Kind::Session, &record.id))
}

/// Hides a session at once: its link answers 404 and listings drop it (see
/// [`super::index::delete`] for what else ending its link takes).
pub async fn mark_deleted(store: &Store, tenant: &Tenant, id: &str) -> Result<()> {
    store.create(&tombstone_key(tenant, id), Bytes::new()).await?;
    Ok(())
}

/// Stops listing a session and finding it by content (new uploads of the bytes make a
/// new session): its listing entries and its claim.
pub async fn unlist(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<()> {
    forget_entries(store, tenant, record).await?;
    release_claim(store, tenant, &record.sha256, &record.id).await
}

/// The record of a session whose link is due to end at `now`, once the sweep's marker
/// is made; `None` when it is not due (also when it was extended or deleted meanwhile).
/// A later upload's extension that the sweep had not seen is looked for again after the
/// marker is made (see [`add_upload`]).
pub async fn expiring(store: &Store, tenant: &Tenant, id: &str, now: u64) -> Result<Option<SessionRecord>> {
    let due = |found: Option<Found>| found.filter(|f| f.until.is_some_and(|at| at <= now));
    if SessionId::parse(id).is_err() || due(stored(store, tenant, id).await?).is_none() {
        return Ok(None);
    }
    let marker = expiring_key(tenant, id);
    store.create(&marker, Bytes::new()).await?;
    let Some(found) = due(stored(store, tenant, id).await?) else {
        // Extended (or deleted) meanwhile.
        store.delete(&marker).await?;
        return Ok(None);
    };
    Ok(Some(found.stored.record))
}

/// Removes everything of a session that nothing refers to (called by [`super::index`]): its
/// listing entries and claim, its later uploads' objects and expiring index entries,
/// then its record, its bytes, and the marks of its deletion and expiry.
pub(super) async fn remove(store: &Store, tenant: &Tenant, id: &str) -> Result<()> {
    if let Some(record) = load::<SessionRecord>(store, &record_key(tenant, id)).await? {
        forget_entries(store, tenant, &record).await?;
        release_claim(store, tenant, &record.sha256, id).await?;
        if let Some(at) = &record.expires_at {
            expiring::forget(store, tenant, at.millis(), id).await?;
        }
    }
    let uploads = uploads_prefix(tenant, id);
    for name in store.list(&uploads, None).await? {
        if let Some((Some(at), _)) = parse_upload(&name) {
            expiring::forget(store, tenant, at, id).await?;
        }
        store.delete(&format!("{uploads}/{name}")).await?;
    }
    store.delete(&record_key(tenant, id)).await?;
    store.delete(&raw_key(tenant, id)).await?;
    store.delete(&tombstone_key(tenant, id)).await?;
    store.delete(&expiring_key(tenant, id)).await?;
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
    let now = now_millis();
    let records: Vec<Option<SessionRecord>> = futures::stream::iter(keys)
        .map(|key| async move {
            let Some(record) = load::<SessionRecord>(store, &key).await? else { return Ok(None) };
            let until = link_expiry(store, tenant, &record).await?;
            let shown = SessionRecord { expires_at: until.map(Timestamp::from_millis), ..record };
            Ok::<_, RecordError>(until.is_none_or(|at| at > now).then_some(shown))
        })
        .buffered(16)
        .try_collect()
        .await?;
    // An entry gone since the listing is a session deleted meanwhile; an expired link
    // waits for the sweep to remove its entries.
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
        && SessionId::parse(&entry[17..]).is_ok()
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
