//! What every request and background run shares: the store, credentials, the memory
//! budget and the configured targets. Replicas share nothing but the store.

use std::sync::Arc;

use crate::auth::Auth;
use crate::budget::Budget;
use crate::store::Store;
use crate::targets::Targets;

pub struct AppState {
    pub store: Store,
    pub auth: Auth,
    pub budget: Budget,
    pub max_upload: usize,
    /// Where share links point (`--public-url`); else the request's Host.
    pub public_url: Option<String>,
    /// Services captures may be taken from, and samply pipelines (`--targets`).
    pub targets: Targets,
    pub http: reqwest::Client,
    /// How often continuous capture looks at the schedules.
    pub schedule_tick: std::time::Duration,
    /// How long past its fetch a capture may go without an outcome (`--capture-grace-secs`).
    pub capture_grace: std::time::Duration,
    /// The profiles `stacklens open` serves (none for `serve`).
    pub opened: crate::open::Opened,
    /// The `expiresIn` an upload or blob may ask for (`--min-expires-in`, `--max-expires-in`).
    pub lifetimes: crate::lifetime::Limits,
    /// Upstream debuginfod servers (`--debuginfod`), asked for files the store lacks.
    pub debuginfod: crate::debuginfod::Upstreams,
    /// Largest binary or debug file accepted (`--max-debuginfo`).
    pub max_debuginfo: usize,
    /// What this replica's compaction passes have done (`/metrics`).
    pub compaction: Arc<crate::runs::progress::Progress>,
}

pub type State = Arc<AppState>;
