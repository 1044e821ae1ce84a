//! The server's symbols: a build id's executable or debug file from its store, else
//! from its upstream debuginfods (kept once fetched, a miss remembered for a while);
//! and names for stored profiles' addresses: when an analysis, a merge or a range reads
//! profiles whose mappings carry build ids but whose locations have no names, core
//! symbolizes them in memory from those files. The stored bytes stay as uploaded.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use stacklens_core::symbols::{Found, Role, SymbolFile, SymbolFiles, Wanted};
use stacklens_core::Profile;

use crate::budget::{BudgetError, Reservation};
use crate::debuginfod::{fetch, FetchError};
use crate::records::debuginfo::{self, Artifact, BuildId};
use crate::records::{RecordError, Tenant};
use crate::state::AppState;

/// The build ids of `profile`'s mappings that have locations without names.
fn wanted_build_ids(profile: &Profile) -> BTreeSet<BuildId> {
    let unnamed = profile.unnamed_locations();
    unnamed.iter().filter_map(|&(m, _)| BuildId::parse(profile.str(profile.mapping(m).build_id))).collect()
}

/// The files found for some build ids, answering core by build id.
struct StoredFiles(HashMap<(BuildId, Artifact), Bytes>);

impl SymbolFiles for StoredFiles {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        let id = BuildId::parse(wanted.build_id.as_deref()?)?;
        // A binary is asked for first; a debug file stands in when only it was stored.
        // The kernel is named from kallsyms, which has no build id to store it by.
        let order = match wanted.role {
            Role::Binary => [Artifact::Executable, Artifact::Debuginfo],
            Role::DebugFile => [Artifact::Debuginfo, Artifact::Executable],
            Role::Kernel => return None,
        };
        let (artifact, bytes) = order.into_iter().find_map(|a| Some((a, self.0.get(&(id.clone(), a))?)))?;
        Some(Found { path: format!("buildid/{id}/{artifact}"), file: SymbolFile::parse(&**bytes) })
    }
}

/// Symbolizes `profiles` from the files the server has or its upstreams give for
/// their build ids. The files are held in `held` while they are read; profiles that
/// need none are returned untouched without a look at the store.
pub async fn symbolize(
    state: &AppState,
    tenant: &Tenant,
    profiles: Vec<Profile>,
    held: &mut Reservation,
) -> Result<Vec<Profile>, LookupError> {
    let wanted: BTreeSet<BuildId> = profiles.iter().flat_map(wanted_build_ids).collect();
    let mut files = HashMap::new();
    for id in wanted {
        for artifact in Artifact::ALL {
            if let Some(bytes) = find(state, tenant, &id, artifact, held).await? {
                files.insert((id.clone(), artifact), bytes);
            }
        }
    }
    if files.is_empty() {
        return Ok(profiles);
    }
    // Reading DWARF copies its sections: count them as much again as the files.
    let bytes: u64 = files.values().map(|b| b.len() as u64).sum();
    state.budget.hold_to(held, held.bytes() + bytes).await?;
    let named = tokio::task::spawn_blocking(move || {
        let mut files = StoredFiles(files);
        profiles
            .into_iter()
            .map(|mut profile| {
                for report in profile.symbolize(&mut files) {
                    tracing::debug!("symbolized {}: {:?}", report.file_name, report.outcome);
                }
                profile
            })
            .collect()
    })
    .await;
    named.map_err(|e| LookupError::Stopped(e.to_string()))
}

/// Why the server could not look a file up.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("symbolization stopped: {0}")]
    Stopped(String),
}

/// `artifact` of `id` for `tenant`: stored, or fetched from the first upstream that has
/// it (then stored). Upstreams that fail are logged and skipped; when none has it, the
/// miss is remembered for a while. The returned bytes are held in `held`.
pub async fn find(
    state: &AppState,
    tenant: &Tenant,
    id: &BuildId,
    artifact: Artifact,
    held: &mut Reservation,
) -> Result<Option<Bytes>, LookupError> {
    if let Some(bytes) = debuginfo::get(&state.store, tenant, id, artifact).await? {
        state.budget.hold_to(held, bytes.len() as u64).await?;
        return Ok(Some(bytes));
    }
    let upstreams = &state.debuginfod;
    if upstreams.urls.is_empty() || debuginfo::recently_missed(&state.store, tenant, id, artifact).await? {
        return Ok(None);
    }
    for base in &upstreams.urls {
        match fetch(&state.http, base, (id, artifact), upstreams.bounds, Some((&state.budget, &mut *held))).await {
            Ok(Some((bytes, breakpad_id))) => {
                debuginfo::put(&state.store, tenant, (id, breakpad_id.as_deref()), artifact, bytes.clone()).await?;
                return Ok(Some(bytes));
            }
            Ok(None) => {}
            Err(FetchError::Budget(e)) => return Err(e.into()),
            Err(e) => tracing::warn!("debuginfod upstream: {e}"),
        }
    }
    debuginfo::note_miss(&state.store, tenant, id, artifact).await?;
    Ok(None)
}
