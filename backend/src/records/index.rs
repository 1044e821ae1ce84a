//! The stored index's one door for handlers and runs: filing a profile (its session and
//! its time index entry), holding and releasing a session, and ending sessions (delete,
//! revoke, expire) and old time index entries. Sessions, the time index and references
//! know nothing of each other; what takes more than one of them is here, above them.

use bytes::Bytes;
use stacklens_core::ids::SessionId;

use super::blocks;
use super::refs::{self, Holder};
use super::series::{self, Entry, FiledBy, Series};
use super::sessions::{self, NewSession, SessionRecord, Stored};
use super::{Result, Tenant};
use crate::store::Store;

/// Stores `bytes` as a session held by `holder` (or finds the session they already are,
/// see [`sessions::store`]) and, for a profile of a service, files `entry` for it in
/// the service's time index (`entry` makes it, given the session).
pub async fn file(
    store: &Store,
    tenant: &Tenant,
    bytes: Bytes,
    new: NewSession,
    holder: &Holder,
    indexed: Option<(Series, impl FnOnce(SessionId) -> Entry)>,
) -> Result<Stored> {
    let stored = sessions::store(store, tenant, bytes, new, holder).await?;
    // Profiles of a service go into its time index, each time they are sent.
    if let Some((series, entry)) = indexed {
        file_entry(store, &series, &entry(stored.record.id.clone())).await?;
    }
    Ok(stored)
}

/// Files a stored session under `entry.millis`; the entry holds the session from now
/// on. False when the session went meanwhile (nothing is filed).
async fn file_entry(store: &Store, series: &Series, entry: &Entry) -> Result<bool> {
    let holder = Holder::new_entry();
    let key = series.entry_key(entry.millis, &holder);
    // The reference notes the entry, so deleting the session removes the entry too.
    if !hold_noting(store, &series.tenant, &entry.session_id, &holder, Bytes::from(key.clone())).await? {
        return Ok(false);
    }
    series::write(store, &key, entry).await?;
    let hour = entry.millis / series::HOUR_MS;
    if series::may_be_closed_anywhere(hour, super::now_millis()) {
        blocks::changed(store, series, hour, holder.name()).await?;
    }
    Ok(true)
}

/// Adds `holder`'s reference to a session; false when the session is gone or being
/// removed (the caller treats it as not found).
pub async fn hold(store: &Store, tenant: &Tenant, session: &str, holder: &Holder) -> Result<bool> {
    hold_noting(store, tenant, session, holder, Bytes::new()).await
}

async fn hold_noting(store: &Store, tenant: &Tenant, session: &str, holder: &Holder, note: Bytes) -> Result<bool> {
    refs::hold(store, tenant, session, holder, note, sessions::exists(store, tenant, session)).await
}

/// Drops `holder`'s reference, and removes the session when nothing refers to it any more.
pub async fn release(store: &Store, tenant: &Tenant, session: &str, holder: &Holder) -> Result<()> {
    refs::withdraw(store, tenant, session, holder).await?;
    collect(store, tenant, session).await
}

/// The holders of a session: its references, and the upload that created it while it
/// holds it without one.
async fn holders(store: &Store, tenant: &Tenant, session: &str) -> Result<Vec<Holder>> {
    let mut holders = refs::referenced(store, tenant, session).await?;
    if !holders.contains(&Holder::Upload) && sessions::holds_its_upload(store, tenant, session).await? {
        holders.push(Holder::Upload);
    }
    Ok(holders)
}

/// Removes an unreferenced session.
async fn collect(store: &Store, tenant: &Tenant, session: &str) -> Result<()> {
    if !holders(store, tenant, session).await?.is_empty() {
        return Ok(());
    }
    if !refs::start_collecting(store, tenant, session).await? {
        return Ok(()); // someone else is collecting it
    }
    if holders(store, tenant, session).await?.is_empty() {
        sessions::remove(store, tenant, session).await?;
    }
    refs::stop_collecting(store, tenant, session).await
}

/// Deletes a session for its owner (a credential of the tenant): its link answers 404 at
/// once and listings drop it; its bytes stay while a baseline or capture still holds
/// them. The time index does not keep what its owner deleted: all its entries go.
pub async fn delete(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<()> {
    sessions::mark_deleted(store, tenant, &record.id).await?;
    end_link(store, tenant, record, None).await
}

/// Revokes a session's link with an upload's delete token: the link answers 404 at once
/// and listings drop it, as [`delete`] does, but of the time index only the entries
/// uploads filed go. A token proves an upload of these bytes, not the tenant's
/// ownership: what an agent pushed or a capture stored of the same bytes stays.
pub async fn revoke(store: &Store, tenant: &Tenant, record: &SessionRecord) -> Result<()> {
    sessions::mark_deleted(store, tenant, &record.id).await?;
    end_link(store, tenant, record, Some(FiledBy::Upload)).await
}

/// Ends an expired session's link, for the sweep once an expiring index entry of it is
/// due, as a delete token would ([`revoke`]): it leaves the listings and the time index
/// entries uploads filed, and its upload stops holding it, so its bytes go unless a
/// baseline, capture or another sender's time index entry holds them (which keep
/// reading them; the link answers 410 meanwhile). Doing it twice does no harm.
pub async fn expire(store: &Store, tenant: &Tenant, id: &str, now: u64) -> Result<()> {
    match sessions::expiring(store, tenant, id, now).await? {
        Some(record) => end_link(store, tenant, &record, Some(FiledBy::Upload)).await,
        None => Ok(()),
    }
}

/// What ending a session's link takes, after the mark that hides it: its listing entries,
/// its claim (new uploads of the bytes make a new session), its time index entries (those
/// `filed_by` filed, or all), and its upload's hold.
async fn end_link(store: &Store, tenant: &Tenant, record: &SessionRecord, filed_by: Option<FiledBy>) -> Result<()> {
    sessions::unlist(store, tenant, record).await?;
    forget_entries(store, tenant, &record.id, filed_by).await?;
    release(store, tenant, &record.id, &Holder::Upload).await
}

/// Removes a session's time index entries (which changes their hours' digests, so no
/// cache still counts them), and their references: all of them when its owner deletes
/// it, only those `filed_by` filed when one sender's hold on it ends.
async fn forget_entries(store: &Store, tenant: &Tenant, session: &str, filed_by: Option<FiledBy>) -> Result<()> {
    for holder in refs::referenced(store, tenant, session).await? {
        if !matches!(holder, Holder::Entry(_)) {
            continue;
        }
        let key = refs::note(store, tenant, session, &holder).await?.map(|k| String::from_utf8_lossy(&k).into_owned());
        if let (Some(by), Some(key)) = (filed_by, &key) {
            // An entry gone already has nothing left to keep.
            if series::entry_at(store, key).await?.is_some_and(|entry| entry.filed_by != Some(by)) {
                continue;
            }
        }
        if let Some(key) = key {
            series::remove(store, &key).await?;
            blocks::entry_changed(store, &key, holder.name(), super::now_millis()).await?;
        }
        refs::withdraw(store, tenant, session, &holder).await?;
    }
    Ok(())
}

/// Removes a series' entries taken before `cutoff` (only those `filed_by` filed, when
/// given), releasing their sessions (which go unless something else, such as a
/// baseline or another entry, holds them), and the caches of the hours that are then
/// empty. Lists only the hours up to the cutoff.
pub async fn expire_entries(store: &Store, series: &Series, cutoff: u64, filed_by: Option<FiledBy>) -> Result<usize> {
    let mut removed = 0;
    for hour in series.hours_before(store, cutoff).await? {
        let (due, mut left) = series.taken_before(store, hour, cutoff).await?;
        for filed in due {
            if let Some(entry) = filed.entry {
                if filed_by.is_some_and(|by| entry.filed_by != Some(by)) {
                    left += 1;
                    continue;
                }
                series::remove(store, &filed.key).await?;
                blocks::changed(store, series, hour, filed.holder.name()).await?;
                release(store, &series.tenant, &entry.session_id, &filed.holder).await?;
                removed += 1;
            }
        }
        if left == 0 {
            series.clear_cache(store, hour).await?;
        }
    }
    Ok(removed)
}
