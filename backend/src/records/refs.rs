//! References that pin a session's bytes. Each live record that needs a session holds
//! one (its upload, a capture, a baseline, a samply run); a session's record and bytes
//! are removed only when its last reference goes, so retention or a delete never takes
//! bytes a baseline still needs. The upload that created a session holds it without an
//! object of its own, until the session's tombstone (see [`sessions::holds_its_upload`]).
//!
//! Collection races safely with new references without locks: each side first writes
//! its own object (a reference, or the `collecting` marker) and then looks for the
//! other's. With a store that reads its own writes, at least one of them sees the other
//! and backs off.

use bytes::Bytes;

use super::{sessions, Result, Tenant};
use crate::store::Store;

/// Not a holder name (holders are "upload" or record ids); no characters object_store encodes.
const MARKER: &str = "collecting";

fn prefix(tenant: &Tenant, session: &str) -> String {
    tenant.key(&format!("refs/{session}"))
}

/// Adds `holder`'s reference to a session; false when the session is gone or being
/// removed (the caller treats it as not found).
pub async fn hold(store: &Store, tenant: &Tenant, session: &str, holder: &str) -> Result<bool> {
    hold_noting(store, tenant, session, holder, Bytes::new()).await
}

/// [`hold`], with a note in the reference that [`note`] reads back (where the holder is).
pub async fn hold_noting(store: &Store, tenant: &Tenant, session: &str, holder: &str, note: Bytes) -> Result<bool> {
    let dir = prefix(tenant, session);
    let reference = format!("{dir}/{holder}");
    store.create(&reference, note).await?;
    let collecting = store.get(&format!("{dir}/{MARKER}")).await?.is_some();
    if collecting || !sessions::exists(store, tenant, session).await? {
        store.delete(&reference).await?;
        return Ok(false);
    }
    Ok(true)
}

/// Adds the first reference to a session this call is creating: its id is new and not
/// yet findable (no claim, no index entry), so nobody can be collecting it.
pub async fn hold_new(store: &Store, tenant: &Tenant, session: &str, holder: &str) -> Result<()> {
    store.create(&format!("{}/{holder}", prefix(tenant, session)), Bytes::new()).await?;
    Ok(())
}

/// The note a holder's reference carries, if it is there.
pub async fn note(store: &Store, tenant: &Tenant, session: &str, holder: &str) -> Result<Option<Bytes>> {
    Ok(store.get(&format!("{}/{holder}", prefix(tenant, session))).await?)
}

/// Drops `holder`'s reference and nothing else.
pub async fn withdraw(store: &Store, tenant: &Tenant, session: &str, holder: &str) -> Result<()> {
    Ok(store.delete(&format!("{}/{holder}", prefix(tenant, session))).await?)
}

/// Drops `holder`'s reference, and removes the session when nothing refers to it any more.
pub async fn release(store: &Store, tenant: &Tenant, session: &str, holder: &str) -> Result<()> {
    withdraw(store, tenant, session, holder).await?;
    collect(store, tenant, session).await
}

/// The holders of a session.
pub async fn holders(store: &Store, tenant: &Tenant, session: &str) -> Result<Vec<String>> {
    let mut holders: Vec<String> =
        store.list(&prefix(tenant, session), None).await?.into_iter().filter(|h| h != MARKER).collect();
    if !holders.iter().any(|h| h == sessions::UPLOAD) && sessions::holds_its_upload(store, tenant, session).await? {
        holders.push(sessions::UPLOAD.to_owned());
    }
    Ok(holders)
}

/// Removes an unreferenced session.
async fn collect(store: &Store, tenant: &Tenant, session: &str) -> Result<()> {
    if !holders(store, tenant, session).await?.is_empty() {
        return Ok(());
    }
    let marker = format!("{}/{MARKER}", prefix(tenant, session));
    if !store.create(&marker, Bytes::new()).await? {
        return Ok(()); // someone else is collecting it
    }
    if holders(store, tenant, session).await?.is_empty() {
        sessions::remove(store, tenant, session).await?;
    }
    store.delete(&marker).await?;
    Ok(())
}
