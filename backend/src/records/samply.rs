//! samply runs of a pipeline: create-only `started`, then `done` (a capture's [`Done`]),
//! in time order under the pipeline's folder.

use serde::{Deserialize, Serialize};

use super::captures::Done;
use super::{create, load, Result, Tenant};
use crate::store::Store;

#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Run {
    pub id: String,
    pub pid: u32,
    pub ordinal: usize,
    pub duration_secs: u64,
    pub started_at: String,
}

fn runs_prefix(tenant: &Tenant, pipeline: &str) -> String {
    tenant.key(&format!("samply/p{}", hex::encode(pipeline)))
}

fn folder(tenant: &Tenant, pipeline: &str, run: &Run) -> String {
    format!("{}/{:016x}-{}", runs_prefix(tenant, pipeline), super::millis_of(&run.started_at), run.id)
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
    let run: Run = load(store, &format!("{prefix}/{newest}/started.json")).await?.unwrap_or_default();
    let done = load(store, &format!("{prefix}/{newest}/done.json")).await?;
    Ok(Some((run, done)))
}
