//! "Already running" across replicas: a lease is an object created with
//! `PutMode::Create` under a per-activity folder, numbered so that a new holder can
//! take over an expired one (its replica died) without overwriting anything.

use serde::{Deserialize, Serialize};

use super::{create, load, now_millis, Result};
use crate::store::Store;

#[derive(Serialize, Deserialize)]
struct Term {
    /// Milliseconds since the epoch after which the lease is void.
    until: u64,
}

/// A held lease; [`Lease::release`] gives it back.
#[derive(Debug)]
pub struct Lease {
    key: String,
}

/// Takes the lease of `folder` for `seconds`, or `None` while someone holds it.
pub async fn acquire(store: &Store, folder: &str, seconds: u64) -> Result<Option<Lease>> {
    let names = store.list(folder, None).await?;
    let newest = names.iter().filter_map(|n| u64::from_str_radix(n, 16).ok()).max();
    if let Some(n) = newest {
        let key = format!("{folder}/{n:016x}");
        let term: Option<Term> = load(store, &key).await?;
        if term.is_some_and(|t| t.until > now_millis()) {
            return Ok(None);
        }
        // Expired or released meanwhile: older terms are of no use to anyone.
        store.delete(&key).await?;
    }
    let next = newest.map_or(0, |n| n + 1);
    let key = format!("{folder}/{next:016x}");
    let term = Term { until: now_millis() + seconds * 1000 };
    Ok(create(store, &key, &term).await?.then_some(Lease { key }))
}

impl Lease {
    pub async fn release(self, store: &Store) -> Result<()> {
        Ok(store.delete(&self.key).await?)
    }
}
