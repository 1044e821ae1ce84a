//! Encrypted blobs: bytes the page encrypted before uploading them (the key stays in
//! the link's fragment and never reaches the server), kept exactly as sent and never
//! read. Each has a small record beside it: its tenant, size, times, and the sha256 of
//! the delete token its uploader was given. Ids are random like sessions' (128 bits),
//! so a link is a capability; nothing deduplicates blobs (equal ciphertexts would mean
//! a reused key).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use stacklens_core::ids::BlobId;
use stacklens_core::timestamp::Timestamp;

use super::{create, expiring, load, now, now_millis, random_id, token_matches, Kind, RecordError, Result, Tenant};
use crate::store::Store;

/// What is stored beside a blob's bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobRecord {
    pub id: BlobId,
    pub tenant: String,
    pub size: u64,
    pub created_at: Timestamp,
    /// When its link expires (RFC 3339); never without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The sha256 (hex) of the delete token; the token itself is not kept.
    pub delete_token_sha256: String,
}

fn record_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("blobs/{id}.json"))
}

fn bytes_key(tenant: &Tenant, id: &str) -> String {
    tenant.key(&format!("blobs/{id}.bin"))
}

/// Stores `bytes` as a new blob whose link expires at `expires` (milliseconds since the
/// epoch) if given. Returns its record and its delete token. The bytes and the expiring
/// index's entry first, the record last: the link answers once everything is there.
pub async fn store(store: &Store, tenant: &Tenant, bytes: Bytes, expires: Option<u64>) -> Result<(BlobRecord, String)> {
    let (token, digest) = super::delete_token();
    let record = BlobRecord {
        id: random_id(),
        tenant: tenant.0.clone(),
        size: bytes.len() as u64,
        created_at: now(),
        expires_at: expires.map(Timestamp::from_millis),
        delete_token_sha256: hex::encode(digest),
    };
    futures::try_join!(
        async { Ok::<_, RecordError>(store.create(&bytes_key(tenant, &record.id), bytes).await?) },
        async {
            match expires {
                Some(at) => expiring::file(store, tenant, at, &record.id).await,
                None => Ok(()),
            }
        },
    )?;
    create(store, &record_key(tenant, &record.id), &record).await?;
    Ok((record, token))
}

/// Whether `id` names a stored blob (expired or not).
pub async fn exists(store: &Store, tenant: &Tenant, id: &str) -> Result<bool> {
    Ok(BlobId::parse(id).is_ok() && store.get(&record_key(tenant, id)).await?.is_some())
}

/// A blob as its link finds it: NotFound once deleted, Expired once its time is up.
pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<BlobRecord> {
    if BlobId::parse(id).is_err() {
        return Err(RecordError::not_found(Kind::Blob, id));
    }
    let record: BlobRecord =
        load(store, &record_key(tenant, id)).await?.ok_or_else(|| RecordError::not_found(Kind::Blob, id))?;
    match &record.expires_at {
        Some(at) if at.millis() <= now_millis() => {
            Err(RecordError::Expired { what: Kind::Blob, id: id.to_owned(), at: at.to_string() })
        }
        _ => Ok(record),
    }
}

/// A blob's bytes, exactly as they were sent.
pub async fn bytes(store: &Store, tenant: &Tenant, record: &BlobRecord) -> Result<Bytes> {
    store.get(&bytes_key(tenant, &record.id)).await?.ok_or_else(|| RecordError::not_found(Kind::Blob, &record.id))
}

/// Whether `token` is the blob's delete token.
pub fn revocable_by(record: &BlobRecord, token: &str) -> bool {
    token_matches(&record.delete_token_sha256, token)
}

/// Deletes a blob: its record (the link answers 404 at once), then its bytes, then its
/// entry in the expiring index, in the order the sweep removes sessions.
pub async fn delete(store: &Store, tenant: &Tenant, record: &BlobRecord) -> Result<()> {
    store.delete(&record_key(tenant, &record.id)).await?;
    store.delete(&bytes_key(tenant, &record.id)).await?;
    if let Some(at) = &record.expires_at {
        expiring::forget(store, tenant, at.millis(), &record.id).await?;
    }
    Ok(())
}

/// For the sweep, once an expiring index entry of `id` is due: removes the blob if its
/// time is up. Without a record (deleted, or an upload that stopped before its record)
/// the bytes go too: nothing can reach them.
pub async fn expire(store: &Store, tenant: &Tenant, id: &str, now: u64) -> Result<()> {
    match load::<BlobRecord>(store, &record_key(tenant, id)).await? {
        Some(record) if record.expires_at.as_ref().is_some_and(|at| at.millis() <= now) => {
            delete(store, tenant, &record).await
        }
        Some(_) => Ok(()),
        None => Ok(store.delete(&bytes_key(tenant, id)).await?),
    }
}
