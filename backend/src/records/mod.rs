//! What the server stores and how it is found: tenants' keys, sessions (raw profiles),
//! baselines, captures, schedules, samply runs, references that pin bytes, leases, and
//! the time index of each service's profiles (series).
//! Everything here speaks object storage and [`RecordError`]; nothing knows HTTP.

pub mod baselines;
pub mod captures;
pub mod leases;
pub mod refs;
pub mod samply;
pub mod schedules;
pub mod series;
pub mod sessions;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("unknown {what} id '{id}'")]
    NotFound { what: Kind, id: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a stored record is unreadable: {0}")]
    Corrupt(#[from] serde_json::Error),
}

/// The kinds of record an id can name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Session,
    Baseline,
    Capture,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Session => "session",
            Kind::Baseline => "baseline",
            Kind::Capture => "capture",
        })
    }
}

impl RecordError {
    pub fn not_found(what: Kind, id: &str) -> Self {
        RecordError::NotFound { what, id: id.to_owned() }
    }
}

pub type Result<T, E = RecordError> = std::result::Result<T, E>;

/// The tenant a record belongs to. Every object key starts with it, so one tenant can
/// neither read nor list another's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant(pub String);

pub const DEFAULT_TENANT: &str = "default";

impl Tenant {
    /// The object key of `rest` for this tenant.
    pub fn key(&self, rest: &str) -> String {
        format!("tenants/{}/{rest}", self.0)
    }

    pub fn is_default(&self) -> bool {
        self.0 == DEFAULT_TENANT
    }
}

/// Letters, digits, '-' and '_' only: safe inside object keys (no '/', no '..').
pub fn valid_name(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An id of the form `{prefix}-{32 lowercase hex}`; anything else cannot name an object.
pub fn valid_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// `{prefix}-{128 random bits}`: ids that open records without a credential (share
/// links) must be unguessable, so they carry nothing derivable from the content.
pub fn random_id(prefix: &str) -> String {
    let mut bits = [0u8; 16];
    getrandom::getrandom(&mut bits).expect("the operating system's random source");
    format!("{prefix}-{}", hex::encode(bits))
}

/// `{prefix}-{time-ordered uuid}`: for records only credential holders can reach,
/// whose listing order is their creation order.
pub fn ordered_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7().simple())
}

/// Now, as RFC 3339 with milliseconds (what records store).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds since the epoch of an RFC 3339 time (0 when unreadable).
pub fn millis_of(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339(rfc3339)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Reads a stored JSON record.
pub async fn load<T: DeserializeOwned>(store: &Store, key: &str) -> Result<Option<T>> {
    match store.get(key).await? {
        Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        None => Ok(None),
    }
}

/// Creates a JSON record unless `key` exists; true when this call created it.
pub async fn create<T: Serialize>(store: &Store, key: &str, record: &T) -> Result<bool> {
    Ok(store.create(key, Bytes::from(serde_json::to_vec(record)?)).await?)
}
