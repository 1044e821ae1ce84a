//! samply runs of a pipeline: create-only `started`, then `done` (a capture's [`Done`]),
//! in time order under the pipeline's folder.

use serde::{Deserialize, Serialize};
use stacklens_core::timestamp::Timestamp;

use super::captures::Done;
use super::{create, load, Result, Tenant};
use crate::store::Store;

/// A samply run; every run was stored with its start time, which must read as one.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub ordinal: usize,
    #[serde(default)]
    pub duration_secs: u64,
    pub started_at: Timestamp,
}

fn runs_prefix(tenant: &Tenant, pipeline: &str) -> String {
    tenant.key(&format!("samply/p{}", hex::encode(pipeline)))
}

fn folder(tenant: &Tenant, pipeline: &str, run: &Run) -> String {
    format!("{}/{:016x}-{}", runs_prefix(tenant, pipeline), run.started_at.millis(), run.id)
}

pub async fn start(store: &Store, tenant: &Tenant, pipeline: &str, run: &Run) -> Result<()> {
    create(store, &format!("{}/started.json", folder(tenant, pipeline, run)), run).await?;
    Ok(())
}

/// Where the run's guard writes its outcome.
pub fn done_key(tenant: &Tenant, pipeline: &str, run: &Run) -> String {
    format!("{}/done.json", folder(tenant, pipeline, run))
}

/// The newest run of a pipeline and its outcome.
pub async fn latest(store: &Store, tenant: &Tenant, pipeline: &str) -> Result<Option<(Run, Option<Done>)>> {
    let prefix = runs_prefix(tenant, pipeline);
    let keys = store.list(&prefix, None).await?;
    let Some(newest) = keys.iter().filter_map(|k| k.strip_suffix("/started.json")).next_back() else {
        return Ok(None);
    };
    // A run removed since the listing has nothing to show.
    let Some(run) = load::<Run>(store, &format!("{prefix}/{newest}/started.json")).await? else { return Ok(None) };
    let done = load(store, &format!("{prefix}/{newest}/done.json")).await?;
    Ok(Some((run, done)))
}
