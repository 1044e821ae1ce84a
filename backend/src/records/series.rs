//! The time index of continuous profiling: one entry per stored profile of a service
//! (captures, pushes from agents, uploads that name a service), filed under its tenant,
//! service, profile type and hour, with its labels and its totals. A range query lists
//! only its hours' folders, so it costs what it returns, never the whole history; and
//! each entry holds its session (see [`super::refs`]) until retention removes it
//! (see [`super::index`], which files and removes entries with their holds).
//!
//! Why an hour: a one-hour query reads one or two folders, and at one profile every
//! 10 s a folder holds 360 entries, within one S3 listing page (1,000 names). Longer
//! ranges read one folder per hour, concurrently.
//!
//! A closed hour (ended more than [`SETTLED_MS`] ago) changes only by a late push or by
//! retention, so what it holds is cached in objects named by a hash of its listing: the
//! entries' descriptions, and merged profiles per label filter. Repeating a query over
//! old data then costs one listing and one read per hour, and any change to the hour
//! changes the hash, so a cache is never stale.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stacklens_core::ids::SessionId;
use stacklens_core::ProfileKind;

use super::refs::Holder;
use super::selector::Selector;
use super::{load, Result, Tenant};
use crate::store::Store;

pub const HOUR_MS: u64 = 3_600_000;

/// How long after its end an hour is taken as closed: pushes arrive a little late.
pub const SETTLED_MS: u64 = 5 * 60_000;

/// The longest range one query may cover (a listing per hour).
pub const MAX_RANGE_MS: u64 = 31 * 24 * HOUR_MS;

/// Reads in flight at once for one query.
const CONCURRENCY: usize = 16;

/// One stored profile in the index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// When the profile was taken (milliseconds since the epoch).
    pub millis: u64,
    pub session_id: SessionId,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The profile's sample types, their units, the total of each, and which one
    /// pprof shows by default.
    #[serde(default)]
    pub sample_types: Vec<String>,
    #[serde(default)]
    pub units: Vec<String>,
    #[serde(default)]
    pub totals: Vec<i64>,
    #[serde(default)]
    pub default_index: usize,
    /// Who filed the entry. Entries written before this was kept have none: only the
    /// server's retention and their session's deletion by a credential remove them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filed_by: Option<FiledBy>,
}

/// Who files an entry. The same bytes are one session whoever sends them, so when one
/// sender's hold ends (an upload's link expires or is revoked, a schedule's retention
/// passes), only the entries that sender filed go: another's acknowledged push stays.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FiledBy {
    /// An upload that names a service (its link may expire or be revoked).
    Upload,
    /// An agent's push (`/ingest`, the push API).
    Push,
    /// A capture from a target, on request or by a schedule.
    Capture,
    /// A samply recording.
    Samply,
}

impl Entry {
    /// Whether the entry's labels pass `wanted`.
    pub fn matches(&self, wanted: &Selector) -> bool {
        wanted.matches(&self.labels)
    }
}

/// Where one service and type's profiles are filed.
#[derive(Clone, Debug)]
pub struct Series {
    pub tenant: Tenant,
    pub service: String,
    pub kind: ProfileKind,
}

/// An hour's folder: its number (hours since the epoch) and what it listed.
pub struct Hour {
    pub number: u64,
    /// Entry names, sorted; they name the hour's caches.
    names: Vec<String>,
    /// Whether the hour is closed, so its caches may be written and read.
    pub closed: bool,
}

impl Hour {
    pub fn start(&self) -> u64 {
        self.number * HOUR_MS
    }

    pub fn end(&self) -> u64 {
        self.start() + HOUR_MS
    }

    /// A name for what the hour holds now.
    fn digest(&self) -> String {
        let mut hash = Sha256::new();
        for name in &self.names {
            hash.update(name.as_bytes());
            hash.update(b"\n");
        }
        hex::encode(&hash.finalize()[..16])
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether the two listings of an hour name the same entries.
    pub fn holds_the_same_as(&self, other: &Hour) -> bool {
        self.names == other.names
    }
}

/// The numbers of the hours `[from, to)` touches, oldest first.
pub fn hour_numbers(from: u64, to: u64) -> std::ops::Range<u64> {
    if to <= from {
        0..0
    } else {
        from / HOUR_MS..(to - 1) / HOUR_MS + 1
    }
}

/// Whether hour `number` is closed at `now` (see [`SETTLED_MS`]).
pub fn is_closed(number: u64, now: u64) -> bool {
    (number + 1) * HOUR_MS + SETTLED_MS <= now
}

/// How far apart two replicas' clocks may be: one whose clock is ahead may take an hour
/// as closed (and compact it) that is not closed yet on this one's.
const CLOCK_SKEW_MS: u64 = 2 * SETTLED_MS;

/// Whether some replica may take hour `number` as closed at `now` on this one's clock.
pub fn may_be_closed_anywhere(number: u64, now: u64) -> bool {
    is_closed(number, now + CLOCK_SKEW_MS)
}

impl Series {
    pub(super) fn folder(&self, under: &str) -> String {
        self.tenant.key(&format!("{under}/s{}/{}", hex::encode(&self.service), self.kind))
    }

    fn hour_prefix(&self, hour: u64) -> String {
        format!("{}/h{hour}", self.folder("series"))
    }

    fn cache_prefix(&self, hour: u64) -> String {
        format!("{}/h{hour}", self.folder("series-cache"))
    }

    /// Where an entry taken at `millis` is filed, named by the holder it holds its
    /// session by (whose reference notes this key, so deleting the session finds it).
    pub fn entry_key(&self, millis: u64, holder: &Holder) -> String {
        format!("{}/{millis:016x}-{}", self.hour_prefix(millis / HOUR_MS), holder.name())
    }

    /// The series and hour an [`Series::entry_key`] is filed under; `None` for any other
    /// key.
    pub fn of_entry_key(key: &str) -> Option<(Series, u64)> {
        let mut parts = key.split('/');
        let (Some("tenants"), Some(tenant), Some("series"), Some(service), Some(kind), Some(hour), Some(_), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let service = String::from_utf8(hex::decode(service.strip_prefix('s')?).ok()?).ok()?;
        let series = Series { tenant: Tenant(tenant.to_owned()), service, kind: ProfileKind::parse(kind)? };
        Some((series, hour.strip_prefix('h')?.parse().ok()?))
    }

    /// Hour `number`, with what it holds now.
    pub async fn hour(&self, store: &Store, number: u64, now: u64) -> Result<Hour> {
        let names = store.list(&self.hour_prefix(number), None).await?;
        Ok(Hour { number, names, closed: is_closed(number, now) })
    }

    /// What an hour holds, oldest first: from its cache when closed (written on the
    /// first read when `write_cache`), else entry by entry.
    pub async fn entries(&self, store: &Store, hour: &Hour, write_cache: bool) -> Result<Vec<Entry>> {
        if hour.is_empty() {
            return Ok(Vec::new());
        }
        let cache = format!("{}/{}.json", self.cache_prefix(hour.number), hour.digest());
        if hour.closed {
            if let Some(entries) = load::<Vec<Entry>>(store, &cache).await? {
                return Ok(entries);
            }
        }
        let prefix = self.hour_prefix(hour.number);
        // Owned keys: a stream over borrowed ones is not Send for every lifetime.
        let keys: Vec<String> = hour.names.iter().map(|name| format!("{prefix}/{name}")).collect();
        let read: Vec<Option<Entry>> = futures::stream::iter(keys)
            .map(|key| async move { load::<Entry>(store, &key).await })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        // An entry removed since the listing is skipped.
        let entries: Vec<Entry> = read.into_iter().flatten().collect();
        if write_cache && hour.closed && entries.len() == hour.names.len() {
            store.create(&cache, Bytes::from(serde_json::to_vec(&entries)?)).await?;
        }
        Ok(entries)
    }

    /// Where a closed hour's merged profile for a label filter is cached.
    pub fn merged_key(&self, hour: &Hour, labels: &Selector) -> String {
        let filter = hex::encode(&Sha256::digest(labels.cache_key())[..8]);
        format!("{}/{}-{filter}.pb.gz", self.cache_prefix(hour.number), hour.digest())
    }

    /// The numbers of the hours that start before `cutoff` (lists the series' hours only).
    pub async fn hours_before(&self, store: &Store, cutoff: u64) -> Result<Vec<u64>> {
        let hours = store.list_folders(&self.folder("series")).await?;
        let numbers = hours.iter().filter_map(|hour| hour.strip_prefix('h').and_then(|n| n.parse::<u64>().ok()));
        Ok(numbers.filter(|number| number * HOUR_MS < cutoff).collect())
    }

    /// The newest entry taken before `before`, looking back through the series' last
    /// day of hours (what the series is, for listings of profile types).
    pub async fn newest_entry(&self, store: &Store, before: u64) -> Result<Option<Entry>> {
        let mut hours = self.hours_before(store, before).await?;
        hours.sort_unstable();
        for hour in hours.into_iter().rev().take(24) {
            let prefix = self.hour_prefix(hour);
            for name in store.list(&prefix, None).await?.iter().rev() {
                let taken = name.split_once('-').and_then(|(millis, _)| u64::from_str_radix(millis, 16).ok());
                if taken.is_none_or(|millis| millis >= before) {
                    continue;
                }
                // An entry removed since the listing is passed over.
                if let Some(entry) = load::<Entry>(store, &format!("{prefix}/{name}")).await? {
                    return Ok(Some(entry));
                }
            }
        }
        Ok(None)
    }

    /// The entries of an hour taken before `cutoff` (`entry` is `None` for one removed
    /// since the listing), and how many of its entries were taken later.
    pub async fn taken_before(&self, store: &Store, hour: u64, cutoff: u64) -> Result<(Vec<Filed>, usize)> {
        let prefix = self.hour_prefix(hour);
        let (mut due, mut later) = (Vec::new(), 0);
        for name in store.list(&prefix, None).await? {
            let Some((millis, holder)) = name.split_once('-') else {
                later += 1;
                continue;
            };
            if u64::from_str_radix(millis, 16).is_ok_and(|m| m >= cutoff) {
                later += 1;
                continue;
            }
            let key = format!("{prefix}/{name}");
            let entry = load::<Entry>(store, &key).await?;
            due.push(Filed { holder: Holder::Entry(holder.to_owned()), key, entry });
        }
        Ok((due, later))
    }

    /// Removes the caches of an hour (once it holds nothing).
    pub async fn clear_cache(&self, store: &Store, hour: u64) -> Result<()> {
        let cache = self.cache_prefix(hour);
        for name in store.list(&cache, None).await? {
            store.delete(&format!("{cache}/{name}")).await?;
        }
        Ok(())
    }
}

/// An entry as filed: its key, the holder it holds its session by, and the entry
/// (`None` when it is gone).
pub struct Filed {
    pub key: String,
    pub holder: Holder,
    pub entry: Option<Entry>,
}

/// Writes an entry at `key` (see [`Series::entry_key`]); its session is held already.
pub async fn write(store: &Store, key: &str, entry: &Entry) -> Result<()> {
    store.create(key, Bytes::from(serde_json::to_vec(entry)?)).await?;
    Ok(())
}

/// The entry filed at `key`, if it is still there.
pub async fn entry_at(store: &Store, key: &str) -> Result<Option<Entry>> {
    load::<Entry>(store, key).await
}

/// Removes the entry filed at `key`.
pub async fn remove(store: &Store, key: &str) -> Result<()> {
    Ok(store.delete(key).await?)
}

/// The series of a tenant that have entries: (service, type).
pub async fn list(store: &Store, tenant: &Tenant) -> Result<Vec<(String, ProfileKind)>> {
    let mut out = Vec::new();
    for service in store.list_folders(&tenant.key("series")).await? {
        let Some(name) =
            service.strip_prefix('s').and_then(|h| hex::decode(h).ok()).and_then(|b| String::from_utf8(b).ok())
        else {
            continue;
        };
        for kind in store.list_folders(&tenant.key(&format!("series/{service}"))).await? {
            if let Some(kind) = ProfileKind::parse(&kind) {
                out.push((name.clone(), kind));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_key_names_its_series_and_hour() {
        let series = Series { tenant: Tenant("acme".into()), service: "api/v2 eu".into(), kind: ProfileKind::Memory };
        let key = series.entry_key(5 * HOUR_MS + 7, &Holder::new_entry());
        let (found, hour) = Series::of_entry_key(&key).expect("an entry key");
        assert_eq!(
            (found.tenant.0.as_str(), found.service.as_str(), found.kind, hour),
            ("acme", "api/v2 eu", ProfileKind::Memory, 5)
        );
        for other in [
            "tenants/acme/sessions/sess-1.json",
            &format!("{}/h5", series.folder("series")),
            &format!("{}/h5/a/b", series.folder("series")),
            &key.replacen("/series/", "/blocks/", 1),
            &key.replacen("/h5/", "/hx/", 1),
        ] {
            assert!(Series::of_entry_key(other).is_none(), "{other}");
        }
    }

    #[test]
    fn an_hour_may_be_closed_on_a_replica_whose_clock_is_ahead() {
        let end = 3 * HOUR_MS;
        assert!(!is_closed(2, end + SETTLED_MS - 1) && is_closed(2, end + SETTLED_MS));
        assert!(!may_be_closed_anywhere(2, end + SETTLED_MS - CLOCK_SKEW_MS - 1));
        assert!(may_be_closed_anywhere(2, end + SETTLED_MS - CLOCK_SKEW_MS));
    }
}
