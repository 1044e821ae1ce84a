//! Merging what a service stored over a time range into one profile, as
//! `go tool pprof a b c` does: one stored profile at a time into core's [`Merger`],
//! each read within the memory budget, so a range of a thousand profiles never holds
//! a thousand models. A closed hour the range covers whole is merged once and cached
//! (see [`crate::records::series`]); repeating the query reads its cached profile.

use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use stacklens_core::analysis::merge::Merger;
use stacklens_core::export::pprof;
use stacklens_core::Profile;

use crate::budget::{ParseFailure, Reservation};
use crate::records::selector::Selector;
use crate::records::series::{Entry, Hour, Series};
use crate::records::{load, sessions, RecordError, Tenant};
use crate::state::AppState;
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
    async fn add(mut self, state: &AppState, profile: Profile) -> Result<Self, MergeError> {
        self.reserve_for(state, &profile).await?;
        let Merging { merger, reserved } = self;
        Ok(Merging { merger: add(merger, profile).await?, reserved })
    }

    async fn reserve_for(&mut self, state: &AppState, profile: &Profile) -> Result<(), MergeError> {
        let need = self.merger.model_bytes().saturating_add(2 * stacklens_core::import::profile_bytes(profile));
        let limit = state.budget.total() / 2;
        if need > limit {
            return Err(MergeError::TooLarge { need, limit });
        }
        state.budget.reserve_to(&mut self.reserved, need).await.map_err(ParseFailure::from)?;
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

/// Parses stored bytes within the budget.
async fn parse(state: &AppState, bytes: Bytes) -> Result<Profile, MergeError> {
    let mut parsed = state.budget.parse(vec![bytes]).await?;
    Ok(parsed.profiles.swap_remove(0))
}

/// The stored profile of each entry with the entry, parsed one at a time within the
/// budget, reading a few ahead; entries whose session went since they were listed are
/// skipped.
fn parsed<'a>(
    state: &'a AppState,
    tenant: &'a Tenant,
    entries: &[Entry],
) -> impl futures::Stream<Item = Result<(Entry, Profile), MergeError>> + Send + 'a {
    let store = &state.store;
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
                Some((entry, bytes)) => Ok(Some((entry, parse(state, bytes).await?))),
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
    let mut parsed = std::pin::pin!(parsed(state, tenant, entries));
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
    let mut parsed = std::pin::pin!(parsed(state, &query.series.tenant, entries));
    let mut count = 0;
    while let Some((_, profile)) = parsed.try_next().await? {
        merging = merging.add(state, profile).await?;
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
        return Ok((merging.add(state, parse(state, bytes).await?).await?, cached.profile_count));
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
        merging = merging.add(state, encoded.1).await?;
    }
    crate::records::create(store, &counted, &CachedHour { profile_count }).await?;
    Ok((merging, profile_count))
}

/// Merges the range's stored profiles.
pub async fn merge_range(state: &AppState, query: &RangeQuery, now: u64) -> Result<Merged, MergeError> {
    let store = &state.store;
    let mut merging = Merging::new();
    let mut profile_count = 0;
    for hour in query.series.hours(store, query.from, query.to, now).await? {
        if hour.is_empty() {
            continue;
        }
        if hour.closed && query.from <= hour.start() && hour.end() <= query.to {
            let count;
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
        let count;
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
