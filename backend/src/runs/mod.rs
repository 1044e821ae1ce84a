//! Background work: captures from services, samply recordings, the continuous
//! schedule, the compaction of closed hours into blocks, and the sweep of expired links
//! and of the time index (retention). Every
//! run is started through [`launch`], which holds the run's lease and always writes an
//! outcome and gives the lease back, whether the work finished, failed or panicked.

pub mod capture;
pub mod compact;
pub mod progress;
pub mod retention;
pub mod samply;
pub mod schedule;

use std::future::Future;

use crate::records::captures::Done;
use crate::records::leases::Lease;
use crate::records::{self, RecordError};
use crate::state::State;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Record(#[from] RecordError),
    /// The lease is held: the same work is running (on this replica or another).
    #[error("already running")]
    Running,
}

/// Runs `work` in the background under `lease`; its outcome goes to `done_key`.
pub fn launch<F>(state: State, lease: Lease, done_key: String, what: String, work: F)
where
    F: Future<Output = Done> + Send + 'static,
{
    tokio::spawn(async move {
        let done = match tokio::spawn(work).await {
            Ok(done) => done,
            Err(e) if e.is_panic() => {
                tracing::error!("{what} panicked");
                Done::failed(format!("{what} stopped: an internal error (panic); see the server log"))
            }
            Err(_) => Done::failed(format!("{what} was cancelled")),
        };
        // The lease goes first: once the outcome reads completed or failed, the same
        // work may start again at once (a 409 after "completed" would contradict it).
        // Stopped between the two, the run reads failed once its deadline passed.
        if let Err(e) = lease.release(&state.store).await {
            tracing::warn!("{what}: cannot release its lease (it expires by itself): {e}");
        }
        if let Err(e) = records::create(&state.store, &done_key, &done).await {
            tracing::error!("{what}: cannot store its outcome: {e}");
        }
    });
}
