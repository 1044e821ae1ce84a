//! Captures from running services. Records are create-only: `started.json`, then
//! `done.json` with the outcome; a per-service-and-type index in start order, bucketed
//! by time (see [`super::buckets`]), serves history for a time range. A capture
//! holds the sessions it stored (see [`super::refs`]).

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use stacklens_core::analysis::summary::FunctionShare;
use stacklens_core::ids::{CaptureId, SessionId};
use stacklens_core::timestamp::Timestamp;
use stacklens_core::ProfileKind;

use super::refs::Holder;
use super::{buckets, create, index, load, now, Kind, RecordError, Result, Tenant};
use crate::store::Store;

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub id: CaptureId,
    pub service: String,
    pub profile_type: ProfileKind,
    pub started_at: Timestamp,
    pub duration_seconds: u64,
    pub sample_rate: Option<u64>,
    /// For scheduled captures: the schedule's interval number this capture fills.
    #[serde(default)]
    pub slot: Option<u64>,
}

/// The outcome of a background run (a capture, or a samply recording).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Done {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    pub session_id: Option<SessionId>,
    pub sample_count: Option<i64>,
    /// For goroutine captures: the `debug=0` pprof form, stored beside the dump.
    pub pprof_session_id: Option<SessionId>,
    /// The captured profile's total in its sample type (for trend charts).
    pub total: Option<i64>,
    pub unit: Option<String>,
    pub top_functions: Vec<FunctionShare>,
    pub error: Option<String>,
}

impl Done {
    /// A run that failed, and why.
    pub fn failed(error: String) -> Self {
        Done { completed_at: Some(now()), error: Some(error), ..Done::default() }
    }

    /// A run that stored this session.
    pub fn stored(session_id: SessionId) -> Self {
        Done { completed_at: Some(now()), session_id: Some(session_id), ..Done::default() }
    }

    /// running until there is an outcome; then failed or completed.
    pub fn status(done: Option<&Done>) -> &'static str {
        match done {
            None => "running",
            Some(d) if d.error.is_some() => "failed",
            Some(_) => "completed",
        }
    }

    /// The sessions the run stored.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionId> {
        self.session_id.iter().chain(&self.pprof_session_id)
    }
}

/// Captures by service and type in time order (for history).
fn history_prefix(tenant: &Tenant, service: &str, kind: ProfileKind) -> String {
    format!("{}/s{}/{kind}", histories(tenant), hex::encode(service))
}

fn histories(tenant: &Tenant) -> String {
    tenant.key("captures-by")
}

fn key(tenant: &Tenant, id: &str, part: &str) -> String {
    tenant.key(&format!("captures/{id}/{part}.json"))
}

/// Files a new capture: its record, then its history entry.
pub async fn start(store: &Store, tenant: &Tenant, started: &Started) -> Result<()> {
    create(store, &key(tenant, &started.id, "started"), started).await?;
    let millis = started.started_at.millis();
    let prefix = history_prefix(tenant, &started.service, started.profile_type);
    store.create(&buckets::key(&prefix, &format!("{millis:016x}-{}", started.id)), bytes::Bytes::new()).await?;
    Ok(())
}

/// The outcome key of a capture (written once by the run's guard).
pub fn done_key(tenant: &Tenant, id: &str) -> String {
    key(tenant, id, "done")
}

/// A capture and its outcome, if it has one.
pub async fn find(store: &Store, tenant: &Tenant, id: &str) -> Result<(Started, Option<Done>)> {
    if CaptureId::parse(id).is_err() {
        return Err(RecordError::not_found(Kind::Capture, id));
    }
    let started: Started =
        load(store, &key(tenant, id, "started")).await?.ok_or_else(|| RecordError::not_found(Kind::Capture, id))?;
    let done = load(store, &key(tenant, id, "done")).await?;
    Ok((started, done))
}

/// A capture in a service and type's history.
pub struct CaptureEntry {
    /// When it started (milliseconds since the epoch).
    pub millis: u64,
    index: String,
    pub started: Started,
    pub done: Option<Done>,
}

/// A service and type's captures that started from `from` to `to` (milliseconds since
/// the epoch, inclusive), oldest first: only the index's buckets of that time are listed.
pub async fn history(
    store: &Store,
    tenant: &Tenant,
    service: &str,
    kind: ProfileKind,
    from: u64,
    to: u64,
) -> Result<Vec<CaptureEntry>> {
    let prefix = history_prefix(tenant, service, kind);
    let bucketed = store.list_folders(&prefix).await?;
    let names = buckets::range(store, &prefix, &bucketed, &format!("{from:016x}"), &format!("{to:016x}")).await?;
    let entries = futures::stream::iter(names).map(|name| {
        let prefix = &prefix;
        async move {
            let Some((millis, id)) = name.split_once('-') else { return Ok(None) };
            let (Ok(millis), true) = (u64::from_str_radix(millis, 16), CaptureId::parse(id).is_ok()) else {
                return Ok(None);
            };
            let (started_at, done_at) = (key(tenant, id, "started"), key(tenant, id, "done"));
            let (started, done) =
                futures::try_join!(load::<Started>(store, &started_at), load::<Done>(store, &done_at))?;
            Ok::<_, RecordError>(started.map(|started| CaptureEntry {
                millis,
                index: buckets::key(prefix, &name),
                started,
                done,
            }))
        }
    });
    Ok(entries.buffered(16).try_collect::<Vec<_>>().await?.into_iter().flatten().collect())
}

/// Deletes a capture, and releases its sessions (removed unless something else holds them).
pub async fn forget(store: &Store, tenant: &Tenant, entry: &CaptureEntry) -> Result<()> {
    store.delete(&entry.index).await?;
    let id = &entry.started.id;
    for session in entry.done.iter().flat_map(Done::sessions) {
        index::release(store, tenant, session, &Holder::Record(id.to_string())).await?;
    }
    store.delete(&key(tenant, id, "done")).await?;
    store.delete(&key(tenant, id, "started")).await?;
    Ok(())
}

/// Files the history entries written before indexes had buckets
/// (`captures-by/{service}/{type}/{name}`) into their buckets; run once as a server starts.
pub async fn refile_legacy_entries(store: &Store, tenant: &Tenant) -> Result<usize> {
    let mut refiled = 0;
    for service in store.list_folders(&histories(tenant)).await? {
        for kind in store.list_folders(&format!("{}/{service}", histories(tenant))).await? {
            let prefix = format!("{}/{service}/{kind}", histories(tenant));
            for name in store.list_level(&prefix).await?.objects.iter().filter(|name| buckets::timed(name)) {
                store.create(&buckets::key(&prefix, name), bytes::Bytes::new()).await?;
                store.delete(&format!("{prefix}/{name}")).await?;
                refiled += 1;
            }
        }
    }
    Ok(refiled)
}
