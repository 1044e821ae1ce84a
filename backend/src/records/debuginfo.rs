//! Debug files by GNU build id, as debuginfod names them: each build id may have an
//! executable and a debuginfo file (one file may be both), uploaded with a write
//! credential or fetched from an upstream debuginfod, and kept as they came. A build
//! id an upstream lacked is remembered for [`MISS_TTL_MILLIS`] as a small marker whose
//! name holds its time window, so a hanging or empty upstream is not asked on every
//! request and no marker is ever rewritten.

use std::fmt;

use bytes::Bytes;

use super::{now_millis, Result, Tenant};
use crate::store::Store;

/// How long an upstream's miss is believed: ten minutes.
pub const MISS_TTL_MILLIS: u64 = 10 * 60 * 1000;

/// Which file of a build id: debuginfod's two artifact names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Artifact {
    Executable,
    Debuginfo,
}

impl Artifact {
    pub const ALL: [Artifact; 2] = [Artifact::Executable, Artifact::Debuginfo];

    /// The name in debuginfod's paths (`/buildid/{id}/{name}`).
    pub fn name(self) -> &'static str {
        match self {
            Artifact::Executable => "executable",
            Artifact::Debuginfo => "debuginfo",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl fmt::Display for Artifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A build id as debuginfod writes it: lowercase hex, an even number of digits, from 2
/// to 128 (GNU build ids are 20 bytes; some linkers write 8 or 16, a few 32+).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BuildId(String);

impl BuildId {
    pub fn parse(text: &str) -> Option<Self> {
        let ok = (2..=128).contains(&text.len())
            && text.len().is_multiple_of(2)
            && text.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| BuildId(text.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn key(tenant: &Tenant, id: &BuildId, artifact: Artifact) -> String {
    tenant.key(&format!("debuginfo/{id}/{artifact}"))
}

/// The Breakpad debug id's entry: the build id it stands for (the Firefox Profiler's
/// symbol API names modules by Breakpad id, which keeps only 16 bytes of a build id).
fn breakpad_key(tenant: &Tenant, breakpad_id: &str) -> String {
    tenant.key(&format!("debuginfo/breakpad/{breakpad_id}"))
}

fn miss_key(tenant: &Tenant, id: &BuildId, artifact: Artifact, window: u64) -> String {
    tenant.key(&format!("debuginfo/{id}/miss-{artifact}-{window}"))
}

/// Keeps `bytes` as `artifact` of `id`, findable by its Breakpad id too. The first file
/// stored for a build id stays: one build id names one build, so a second upload is the
/// same file (true when this call stored it).
pub async fn put(
    store: &Store,
    tenant: &Tenant,
    (id, breakpad_id): (&BuildId, Option<&str>),
    artifact: Artifact,
    bytes: Bytes,
) -> Result<bool> {
    if let Some(breakpad_id) = breakpad_id.filter(|b| b.bytes().all(|c| c.is_ascii_alphanumeric())) {
        store.create(&breakpad_key(tenant, breakpad_id), Bytes::from(id.to_string())).await?;
    }
    Ok(store.create(&key(tenant, id, artifact), bytes).await?)
}

/// The build id a Breakpad debug id stands for, when a file of it was stored.
pub async fn by_breakpad_id(store: &Store, tenant: &Tenant, breakpad_id: &str) -> Result<Option<BuildId>> {
    if breakpad_id.is_empty() || !breakpad_id.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let stored = store.get(&breakpad_key(tenant, &breakpad_id.to_ascii_uppercase())).await?;
    Ok(stored.and_then(|b| BuildId::parse(std::str::from_utf8(&b).ok()?)))
}

pub async fn get(store: &Store, tenant: &Tenant, id: &BuildId, artifact: Artifact) -> Result<Option<Bytes>> {
    Ok(store.get(&key(tenant, id, artifact)).await?)
}

fn window(millis: u64) -> u64 {
    millis / MISS_TTL_MILLIS
}

/// Whether an upstream lacked `artifact` of `id` within the current window.
pub async fn recently_missed(store: &Store, tenant: &Tenant, id: &BuildId, artifact: Artifact) -> Result<bool> {
    Ok(store.get(&miss_key(tenant, id, artifact, window(now_millis()))).await?.is_some())
}

/// Remembers that no upstream had `artifact` of `id`, and forgets the previous
/// window's marker.
pub async fn note_miss(store: &Store, tenant: &Tenant, id: &BuildId, artifact: Artifact) -> Result<()> {
    let now = window(now_millis());
    store.create(&miss_key(tenant, id, artifact, now), Bytes::new()).await?;
    store.delete(&miss_key(tenant, id, artifact, now.saturating_sub(1))).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_are_lowercase_hex_of_whole_bytes() {
        assert_eq!(BuildId::parse("ABcd01").unwrap().as_str(), "abcd01");
        for bad in ["", "a", "abc", "zz", "../etc", &"ab".repeat(65)] {
            assert_eq!(BuildId::parse(bad), None, "{bad}");
        }
        assert!(BuildId::parse(&"ab".repeat(64)).is_some());
    }

    #[test]
    fn artifacts_read_as_debuginfod_names_them() {
        for a in Artifact::ALL {
            assert_eq!(Artifact::parse(a.name()), Some(a));
        }
        assert_eq!(Artifact::parse("source"), None);
    }
}
