//! References that pin a session's bytes. Each live record that needs a session holds
//! one (its upload, a capture, a baseline, a samply run, a time index entry); a session's
//! record and bytes are removed only when its last reference goes, so retention or a
//! delete never takes bytes a baseline still needs. The upload that created a session
//! holds it without an object of its own, until the session's tombstone (see
//! [`super::index`], which decides what holds a session and collects it).
//!
//! Collection races safely with new references without locks: each side first writes
//! its own object (a reference, or the `collecting` marker) and then looks for the
//! other's. With a store that reads its own writes, at least one of them sees the other
//! and backs off.

use std::future::Future;

use bytes::Bytes;

use super::{ordered_id, Result, Tenant};
use crate::store::Store;

/// Not a holder name (holders are "upload" or record ids); no characters object_store encodes.
const MARKER: &str = "collecting";

/// What a time index entry's holder name starts with (then a time-ordered id).
const ENTRY_PREFIX: &str = "ser";

/// Who holds a session; its reference object is named by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// The upload that created the session, or another upload of its bytes.
    Upload,
    /// A time index entry, by its own name (`ser-{time-ordered id}`).
    Entry(String),
    /// A record that needs the session (a baseline, a capture, a samply run, a push
    /// while it is filed), by the record's id.
    Record(String),
}

impl Holder {
    /// A new time index entry's holder.
    pub fn new_entry() -> Holder {
        Holder::Entry(ordered_id(ENTRY_PREFIX))
    }

    /// The name its reference object has (stored as before holders were typed).
    pub fn name(&self) -> &str {
        match self {
            Holder::Upload => "upload",
            Holder::Entry(name) | Holder::Record(name) => name,
        }
    }

    /// The holder a reference object's name says.
    fn parse(name: String) -> Holder {
        match name.as_str() {
            "upload" => Holder::Upload,
            _ if name.strip_prefix(ENTRY_PREFIX).is_some_and(|rest| rest.starts_with('-')) => Holder::Entry(name),
            _ => Holder::Record(name),
        }
    }
}

fn prefix(tenant: &Tenant, session: &str) -> String {
    tenant.key(&format!("refs/{session}"))
}

fn reference(tenant: &Tenant, session: &str, holder: &Holder) -> String {
    format!("{}/{}", prefix(tenant, session), holder.name())
}

/// Adds `holder`'s reference to a session, with a note that [`note`] reads back (where
/// the holder is); false when the session is being removed or `exists` (looked at after
/// the reference is written) finds it gone: the caller treats it as not found.
pub async fn hold(
    store: &Store,
    tenant: &Tenant,
    session: &str,
    holder: &Holder,
    note: Bytes,
    exists: impl Future<Output = Result<bool>>,
) -> Result<bool> {
    let reference = reference(tenant, session, holder);
    store.create(&reference, note).await?;
    let collecting = store.get(&format!("{}/{MARKER}", prefix(tenant, session))).await?.is_some();
    if collecting || !exists.await? {
        store.delete(&reference).await?;
        return Ok(false);
    }
    Ok(true)
}

/// Adds the first reference to a session this call is creating: its id is new and not
/// yet findable (no claim, no index entry), so nobody can be collecting it.
pub async fn hold_new(store: &Store, tenant: &Tenant, session: &str, holder: &Holder) -> Result<()> {
    store.create(&reference(tenant, session, holder), Bytes::new()).await?;
    Ok(())
}

/// The note a holder's reference carries, if it is there.
pub async fn note(store: &Store, tenant: &Tenant, session: &str, holder: &Holder) -> Result<Option<Bytes>> {
    Ok(store.get(&reference(tenant, session, holder)).await?)
}

/// Drops `holder`'s reference and nothing else.
pub async fn withdraw(store: &Store, tenant: &Tenant, session: &str, holder: &Holder) -> Result<()> {
    Ok(store.delete(&reference(tenant, session, holder)).await?)
}

/// The holders with a reference object (not an upload that holds without one).
pub async fn referenced(store: &Store, tenant: &Tenant, session: &str) -> Result<Vec<Holder>> {
    let names = store.list(&prefix(tenant, session), None).await?;
    Ok(names.into_iter().filter(|h| h != MARKER).map(Holder::parse).collect())
}

/// Marks a session as being collected; false when someone else is collecting it.
pub async fn start_collecting(store: &Store, tenant: &Tenant, session: &str) -> Result<bool> {
    Ok(store.create(&format!("{}/{MARKER}", prefix(tenant, session)), Bytes::new()).await?)
}

/// Removes the mark [`start_collecting`] made.
pub async fn stop_collecting(store: &Store, tenant: &Tenant, session: &str) -> Result<()> {
    Ok(store.delete(&format!("{}/{MARKER}", prefix(tenant, session))).await?)
}
