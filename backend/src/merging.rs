//! Merging what a service stored over a time range into one profile, as
//! `go tool pprof a b c` does: one stored profile at a time into core's [`Merger`],
//! each read within the memory budget, so a range of a thousand profiles never holds
//! a thousand models. A closed hour the range covers whole is merged once and cached
//! (see [`crate::records::series`]); repeating the query reads its cached profile.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use stacklens_core::analysis::merge::Merger;
use stacklens_core::export::pprof;
use stacklens_core::Profile;

use crate::budget::{Budget, ParseFailure, Reservation};
use crate::records::blocks::{self, BlockEntry, Footer, Read, Tag, Window, DAY_HOURS};
use crate::records::selector::Selector;
use crate::records::series::{self, Entry, Hour, Series};
use crate::records::{self, load, sessions, RecordError, Tenant};
use crate::state::AppState;
use crate::store::Store;
use crate::symbols::LookupError;

/// Stored profiles fetched ahead of the one being merged.
const PREFETCH: usize = 8;

/// A service's profiles of one type over `[from, to)` whose labels match.
#[derive(Clone, Debug)]
pub struct RangeQuery {
    pub series: Series,
    pub from: u64,
    pub to: u64,
    pub labels: Selector,
    /// Whether closed hours' merges and listings may be cached (written) for later
    /// queries: not for a read-only credential's.
    pub write_caches: bool,
}

/// A merged range: the profile (none when nothing matched) and how many stored
/// profiles went into it.
pub struct Merged {
    pub profile: Option<Profile>,
    pub profile_count: usize,
    /// The memory held for the merged profile, until the answer made from it is sent
    /// (held, never read).
    pub _reserved: Reservation,
}

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("{0}")]
    Parse(#[from] ParseFailure),
    /// Two stored profiles core cannot merge (other sample types).
    #[error("the range's profiles cannot be merged: {0}")]
    Incompatible(stacklens_core::Error),
    #[error("merging stopped: {0}")]
    Stopped(String),
    /// The merged model would outgrow the share of the memory budget a merge may take.
    #[error(
        "the merged profile needs about {need} bytes, more than the {limit} bytes a merge may take \
         (half the server's memory budget): ask for a shorter range or fewer labels"
    )]
    TooLarge { need: u64, limit: u64 },
}

impl From<LookupError> for MergeError {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Record(e) => MergeError::Record(e),
            LookupError::Budget(e) => MergeError::Parse(ParseFailure::Budget(e)),
            LookupError::Stopped(e) => MergeError::Stopped(e),
        }
    }
}

/// What a merge holds: its merged model, grown within the budget before each profile
/// goes in (by at most twice what that profile's samples count for), up to half the
/// budget (the other half is for parsing what is merged).
pub struct Merging {
    merger: Merger,
    reserved: Reservation,
}

impl Merging {
    fn new() -> Self {
        Merging { merger: Merger::default(), reserved: Reservation::default() }
    }

    /// Reserves room for `profile` in the merged model, then adds it.
    async fn add(mut self, budget: &Budget, profile: Profile) -> Result<Self, MergeError> {
        self.reserve_for(budget, &profile, 1).await?;
        let Merging { merger, reserved } = self;
        Ok(Merging { merger: add(merger, profile).await?, reserved })
    }

    /// Reserves room for `profile` to be added `adds` times.
    async fn reserve_for(&mut self, budget: &Budget, profile: &Profile, adds: u64) -> Result<(), MergeError> {
        let grows = 2 * adds * stacklens_core::import::profile_bytes(profile);
        let need = self.merger.model_bytes().saturating_add(grows);
        let limit = budget.total() / 2;
        if need > limit {
            return Err(MergeError::TooLarge { need, limit });
        }
        budget.reserve_to(&mut self.reserved, need).await.map_err(ParseFailure::from)?;
        Ok(())
    }
}

/// What a cached hour says besides its merged profile.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedHour {
    profile_count: usize,
}

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, MergeError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| MergeError::Stopped(e.to_string()))
}

/// Adds `profile` into `merger` on the blocking pool.
async fn add(merger: Merger, profile: Profile) -> Result<Merger, MergeError> {
    blocking(move || {
        let mut merger = merger;
        merger.add(&profile).map_err(MergeError::Incompatible)?;
        Ok(merger)
    })
    .await?
}

/// Adds `profile` (tagged as its entry's) into `merger` on the blocking pool, then again
/// as its label set's (see [`blocks::Tag`]); its room was reserved for both.
async fn add_tagged(merger: Merger, mut profile: Profile, set: usize) -> Result<Merger, MergeError> {
    blocking(move || {
        let mut merger = merger;
        merger.add(&profile).map_err(MergeError::Incompatible)?;
        blocks::tag(&mut profile, Tag::Set(set));
        merger.add(&profile).map_err(MergeError::Incompatible)?;
        Ok(merger)
    })
    .await?
}

/// Parses stored bytes within the budget.
async fn parse(budget: &Budget, bytes: Bytes) -> Result<Profile, MergeError> {
    let mut parsed = budget.parse(vec![bytes]).await?;
    Ok(parsed.profiles.swap_remove(0))
}

/// The stored profile of each entry with the entry, parsed one at a time within the
/// budget, reading a few ahead; entries whose session went since they were listed are
/// skipped.
fn parsed<'a>(
    (store, budget): (&'a Store, &'a Budget),
    tenant: &'a Tenant,
    entries: &[Entry],
) -> impl futures::Stream<Item = Result<(Entry, Profile), MergeError>> + Send + 'a {
    futures::stream::iter(entries.to_vec())
        .map(move |entry| async move {
            // The entry holds its session: it reads the bytes even when the session's
            // link (an upload of the same bytes) has expired or was revoked since.
            match sessions::find_held(store, tenant, &entry.session_id).await {
                Ok(record) => Ok(Some((entry, sessions::raw(store, tenant, &record).await?))),
                Err(RecordError::NotFound { .. } | RecordError::Expired { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffered(PREFETCH)
        .map_err(MergeError::from)
        .try_filter_map(move |found| async move {
            match found {
                Some((entry, bytes)) => Ok(Some((entry, parse(budget, bytes).await?))),
                None => Ok(None),
            }
        })
}

/// Hands the stored profile of each entry to `visit` with the entry, one at a time on
/// the blocking pool (see [`parsed`]). Returns the accumulator and how many profiles it saw.
pub async fn visit_entries<A, F>(
    state: &AppState,
    tenant: &Tenant,
    entries: &[Entry],
    mut acc: A,
    visit: F,
) -> Result<(A, usize), MergeError>
where
    A: Send + 'static,
    F: Fn(&mut A, &Entry, Profile) -> Result<(), MergeError> + Send + Sync + 'static,
{
    let visit = Arc::new(visit);
    let mut parsed = std::pin::pin!(parsed((&state.store, &state.budget), tenant, entries));
    let mut count = 0;
    while let Some((entry, profile)) = parsed.try_next().await? {
        let visit = visit.clone();
        acc = blocking(move || visit(&mut acc, &entry, profile).map(|()| acc)).await??;
        count += 1;
    }
    Ok((acc, count))
}

/// Merges `entries` into `merging`. Returns how many went in.
async fn merge_entries(
    state: &AppState,
    query: &RangeQuery,
    entries: &[Entry],
    mut merging: Merging,
) -> Result<(Merging, usize), MergeError> {
    let mut parsed = std::pin::pin!(parsed((&state.store, &state.budget), &query.series.tenant, entries));
    let mut count = 0;
    while let Some((_, profile)) = parsed.try_next().await? {
        merging = merging.add(&state.budget, profile).await?;
        count += 1;
    }
    Ok((merging, count))
}

/// Merges a closed hour the range covers whole, from its cache or into it.
async fn merge_hour(
    state: &AppState,
    query: &RangeQuery,
    hour: &Hour,
    merging: Merging,
) -> Result<(Merging, usize), MergeError> {
    let store = &state.store;
    let key = query.series.merged_key(hour, &query.labels);
    let counted = format!("{key}.json");
    if let Some(cached) = load::<CachedHour>(store, &counted).await? {
        if cached.profile_count == 0 {
            return Ok((merging, 0));
        }
        let Some(bytes) = store.get(&key).await.map_err(RecordError::from)? else {
            return Err(MergeError::Stopped(format!("the cached merge {key} is missing")));
        };
        return Ok((merging.add(&state.budget, parse(&state.budget, bytes).await?).await?, cached.profile_count));
    }
    let entries: Vec<Entry> = query
        .series
        .entries(store, hour, query.write_caches)
        .await?
        .into_iter()
        .filter(|e| e.matches(&query.labels))
        .collect();
    if !query.write_caches {
        return merge_entries(state, query, &entries, merging).await;
    }
    let (own, profile_count) = merge_entries(state, query, &entries, Merging::new()).await?;
    let mut merging = merging;
    if profile_count > 0 {
        let profile = own.merger.finish().map_err(MergeError::Incompatible)?;
        let encoded = blocking(move || (pprof::write(&profile), profile)).await?;
        store.create(&key, Bytes::from(encoded.0)).await.map_err(RecordError::from)?;
        merging = merging.add(&state.budget, encoded.1).await?;
    }
    crate::records::create(store, &counted, &CachedHour { profile_count }).await?;
    Ok((merging, profile_count))
}

/// One hour of a range as it is read: its block (a closed hour that has one), or its
/// listing.
enum HourRead {
    Block(Footer, Bytes),
    Raw(Hour),
}

/// Reads hour `number` of the range: its block if it has a valid one, else its listing.
/// A damaged block is logged, and cleared for the compactor to make again.
async fn read_hour(state: &AppState, query: &RangeQuery, number: u64, now: u64) -> Result<HourRead, MergeError> {
    let store = &state.store;
    if series::is_closed(number, now) {
        match blocks::read(store, &query.series.block_key(number)).await? {
            Read::Valid((footer, payload)) => return Ok(HourRead::Block(footer, payload)),
            Read::Damaged(damaged) => {
                tracing::warn!("{damaged}; the hour is merged from its raw profiles");
                if query.write_caches {
                    blocks::changed(store, &query.series, number, &records::ordered_id("damaged")).await?;
                }
            }
            Read::Missing => {}
        }
    }
    Ok(HourRead::Raw(query.series.hour(store, number, now).await?))
}

/// Reads window `window` of the range: a day's block if it has a valid one, else its
/// hours (see [`read_hour`]). A damaged day block is logged, and cleared with its first
/// hour's for the compactor to make again.
async fn read_window(
    state: &AppState,
    query: &RangeQuery,
    window: Window,
    now: u64,
) -> Result<Vec<HourRead>, MergeError> {
    if let Window::Day(day) = window {
        match blocks::read(&state.store, &query.series.day_block_key(day)).await? {
            Read::Valid((footer, payload)) => return Ok(vec![HourRead::Block(footer, payload)]),
            Read::Damaged(damaged) => {
                tracing::warn!("{damaged}; the day is merged hour by hour");
                if query.write_caches {
                    let mark = records::ordered_id("damaged");
                    blocks::changed(&state.store, &query.series, day * DAY_HOURS, &mark).await?;
                }
            }
            Read::Missing => {}
        }
    }
    futures::stream::iter(window.hours())
        .map(|number| read_hour(state, query, number, now))
        .buffered(BLOCKS_AHEAD)
        .try_collect()
        .await
}

/// Merges the profiles of `footer`'s entries the range selects, from their block.
async fn merge_block(
    state: &AppState,
    query: &RangeQuery,
    footer: Footer,
    payload: Bytes,
    merging: Merging,
) -> Result<(Merging, usize), MergeError> {
    let (from, to, labels) = (query.from, query.to, query.labels.clone());
    let wanted = move |e: &BlockEntry| (from..to).contains(&e.entry.millis) && e.entry.matches(&labels);
    let count = footer.entries.iter().filter(|e| wanted(e)).count();
    if count == 0 {
        return Ok((merging, 0));
    }
    let whole = footer.within(query.from, query.to);
    let mut profile = parse(&state.budget, payload).await?;
    let profile = blocking(move || {
        blocks::select(&mut profile, &footer, whole, wanted);
        profile
    })
    .await?;
    Ok((merging.add(&state.budget, profile).await?, count))
}

/// Blocks read ahead of the one being merged (each may be megabytes).
const BLOCKS_AHEAD: usize = 2;

/// Merges the range's stored profiles: closed days and hours from their blocks, the
/// others from their raw profiles.
pub async fn merge_range(state: &AppState, query: &RangeQuery, now: u64) -> Result<Merged, MergeError> {
    let store = &state.store;
    let mut merging = Merging::new();
    let mut profile_count = 0;
    let reads = futures::stream::iter(blocks::windows(query.from, query.to, now))
        .map(|window| read_window(state, query, window, now))
        .buffered(BLOCKS_AHEAD)
        .map_ok(|reads| futures::stream::iter(reads.into_iter().map(Ok::<_, MergeError>)))
        .try_flatten();
    let mut reads = std::pin::pin!(reads);
    while let Some(read) = reads.try_next().await? {
        let count;
        let hour = match read {
            HourRead::Block(footer, payload) => {
                (merging, count) = merge_block(state, query, footer, payload, merging).await?;
                profile_count += count;
                continue;
            }
            HourRead::Raw(hour) => hour,
        };
        if hour.is_empty() {
            continue;
        }
        if hour.closed && query.from <= hour.start() && hour.end() <= query.to {
            (merging, count) = merge_hour(state, query, &hour, merging).await?;
            profile_count += count;
            continue;
        }
        let entries: Vec<Entry> = query
            .series
            .entries(store, &hour, query.write_caches)
            .await?
            .into_iter()
            .filter(|e| (query.from..query.to).contains(&e.millis) && e.matches(&query.labels))
            .collect();
        (merging, count) = merge_entries(state, query, &entries, merging).await?;
        profile_count += count;
    }
    let Merging { merger, mut reserved } = merging;
    let profile = match profile_count {
        0 => None,
        _ => {
            let merged = merger.finish().map_err(MergeError::Incompatible)?;
            crate::symbols::symbolize(state, &query.series.tenant, vec![merged], &mut reserved).await?.pop()
        }
    };
    Ok(Merged { profile, profile_count, _reserved: reserved })
}

/// What making an hour's block did.
#[derive(Debug, PartialEq, Eq)]
pub enum Compacted {
    /// The block was written, holding this many profiles in this many bytes.
    Written { profiles: usize, bytes: usize },
    /// The hour holds nothing (any block it had is gone).
    Empty,
    /// Another compactor wrote it first.
    Exists,
    /// The hour changed while its block was made: the block is gone, to be made again.
    Raced,
    /// A day's hour has no valid block yet: the day waits for it.
    Waiting,
}

/// The number of label set `labels` in `sets`, which it joins when new.
fn set_number(sets: &mut Vec<BTreeMap<String, String>>, labels: &BTreeMap<String, String>) -> usize {
    sets.iter().position(|known| known == labels).unwrap_or_else(|| {
        sets.push(labels.clone());
        sets.len() - 1
    })
}

/// Makes hour `number`'s block from its raw profiles, within the budget (see
/// [`blocks`] for why the hour is listed twice).
pub async fn compact_hour(
    (store, budget): (&Store, &Budget),
    series: &Series,
    number: u64,
    now: u64,
) -> Result<Compacted, MergeError> {
    let key = series.block_key(number);
    let hour = series.hour(store, number, now).await?;
    if hour.is_empty() {
        store.delete(&key).await.map_err(RecordError::from)?;
        return Ok(Compacted::Empty);
    }
    let entries = series.entries(store, &hour, false).await?;
    let mut merging = Merging::new();
    let mut kept: Vec<BlockEntry> = Vec::new();
    let mut sets = Vec::new();
    let mut parsed = std::pin::pin!(parsed((store, budget), &series.tenant, &entries));
    while let Some((entry, mut profile)) = parsed.try_next().await? {
        let set = set_number(&mut sets, &entry.labels);
        let (time_nanos, duration_nanos, period) = (profile.time_nanos, profile.duration_nanos, profile.period);
        kept.push(BlockEntry { entry, set, time_nanos, duration_nanos, period });
        blocks::tag(&mut profile, Tag::Entry(kept.len() - 1));
        merging.reserve_for(budget, &profile, 2).await?;
        merging.merger = add_tagged(merging.merger, profile, set).await?;
    }
    let profiles = kept.len();
    let block = blocking(move || -> Result<Vec<u8>, MergeError> {
        let payload = match profiles {
            0 => Vec::new(),
            _ => pprof::write(&merging.merger.finish().map_err(MergeError::Incompatible)?),
        };
        Ok(blocks::encode(&payload, (number, 1), kept)?)
    })
    .await??;
    let bytes = block.len();
    if !store.create(&key, Bytes::from(block)).await.map_err(RecordError::from)? {
        return Ok(Compacted::Exists);
    }
    if !series.hour(store, number, now).await?.holds_the_same_as(&hour) {
        store.delete(&key).await.map_err(RecordError::from)?;
        return Ok(Compacted::Raced);
    }
    Ok(Compacted::Written { profiles, bytes })
}

/// Makes day `day`'s block from the blocks of its hours that hold profiles (`hours`, as
/// the series' listing names them), within the budget: their label sets' samples,
/// numbered by the day's sets, and their entries. Like an hour's, it is checked after
/// it is written: the hours' blocks still the same and no hour come meanwhile, else it
/// goes.
pub async fn compact_day(
    (store, budget): (&Store, &Budget),
    series: &Series,
    day: u64,
    hours: &[u64],
    now: u64,
) -> Result<Compacted, MergeError> {
    let key = series.day_block_key(day);
    let mut merging = Merging::new();
    let (mut kept, mut sets, mut made_of) = (Vec::<BlockEntry>::new(), Vec::new(), Vec::new());
    for &number in hours {
        let (footer, payload) = match blocks::read(store, &series.block_key(number)).await? {
            Read::Valid(block) => block,
            // An hour emptied since the listing has nothing to give.
            Read::Missing if series.hour(store, number, now).await?.is_empty() => continue,
            Read::Missing | Read::Damaged(_) => return Ok(Compacted::Waiting),
        };
        let mut numbered = Vec::new();
        for entry in &footer.entries {
            let set = set_number(&mut sets, &entry.entry.labels);
            if numbered.len() <= entry.set {
                numbered.resize(entry.set + 1, usize::MAX);
            }
            numbered[entry.set] = set;
            kept.push(BlockEntry { set, ..entry.clone() });
        }
        made_of.push((number, footer.payload_sha256));
        if payload.is_empty() {
            continue;
        }
        let mut profile = parse(budget, payload).await?;
        profile = blocking(move || {
            blocks::renumber_sets(&mut profile, &numbered);
            profile
        })
        .await?;
        merging.reserve_for(budget, &profile, 1).await?;
        merging.merger = add(merging.merger, profile).await?;
    }
    if kept.is_empty() {
        store.delete(&key).await.map_err(RecordError::from)?;
        return Ok(Compacted::Empty);
    }
    let profiles = kept.len();
    let block = blocking(move || -> Result<Vec<u8>, MergeError> {
        let payload = pprof::write(&merging.merger.finish().map_err(MergeError::Incompatible)?);
        Ok(blocks::encode(&payload, (day * DAY_HOURS, DAY_HOURS), kept)?)
    })
    .await??;
    let bytes = block.len();
    if !store.create(&key, Bytes::from(block)).await.map_err(RecordError::from)? {
        return Ok(Compacted::Exists);
    }
    let listed: Vec<u64> = series.hours_before(store, (day + 1) * DAY_HOURS * series::HOUR_MS).await?;
    let mut same = listed.iter().filter(|&&n| n >= day * DAY_HOURS).all(|n| hours.contains(n));
    for (number, sha256) in &made_of {
        same &= matches!(blocks::read_footer(store, &series.block_key(*number)).await?,
            Read::Valid(footer) if footer.payload_sha256 == *sha256);
    }
    if !same {
        store.delete(&key).await.map_err(RecordError::from)?;
        return Ok(Compacted::Raced);
    }
    Ok(Compacted::Written { profiles, bytes })
}
