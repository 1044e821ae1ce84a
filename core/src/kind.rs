//! What a profile measures, named as the API names profile types (cpu, memory, alloc,
//! block, mutex, goroutine, threadcreate), decided from its sample types like pprof's
//! own reports do.

use serde::{Deserialize, Serialize};

use crate::Profile;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ProfileKind {
    Cpu,
    /// A heap profile shown as in-use memory (Go's `heap`).
    Memory,
    /// A heap profile shown as allocations (Go's `allocs`).
    Alloc,
    Block,
    Mutex,
    Goroutine,
    Threadcreate,
    Other,
}

impl ProfileKind {
    pub const ALL: [ProfileKind; 8] = [
        ProfileKind::Cpu,
        ProfileKind::Memory,
        ProfileKind::Alloc,
        ProfileKind::Block,
        ProfileKind::Mutex,
        ProfileKind::Goroutine,
        ProfileKind::Threadcreate,
        ProfileKind::Other,
    ];

    /// The kinds a Go service's pprof endpoints serve: what captures, schedules and
    /// capture history cover (the first kinds of [`Self::ALL`]).
    pub const CAPTURED: &'static [ProfileKind] = Self::ALL.split_at(6).0;

    pub fn as_str(self) -> &'static str {
        match self {
            ProfileKind::Cpu => "cpu",
            ProfileKind::Memory => "memory",
            ProfileKind::Alloc => "alloc",
            ProfileKind::Block => "block",
            ProfileKind::Mutex => "mutex",
            ProfileKind::Goroutine => "goroutine",
            ProfileKind::Threadcreate => "threadcreate",
            ProfileKind::Other => "other",
        }
    }

    /// The sample type that shows this kind of a profile ("" for the default): a heap
    /// profile filed as alloc is read by its allocations.
    pub fn sample_type(self, profile: &Profile) -> &'static str {
        let has = |name: &str| (0..profile.sample_types.len()).any(|i| profile.sample_type_name(i) == name);
        match self {
            ProfileKind::Alloc if has("alloc_space") => "alloc_space",
            ProfileKind::Memory if has("inuse_space") => "inuse_space",
            _ => "",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        // Go's endpoint names are accepted too.
        let name = match name.as_str() {
            "heap" => "memory",
            "allocs" => "alloc",
            "profile" => "cpu",
            other => other,
        };
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether a profile detected as `self` may be filed as `claimed`: the same kind,
    /// or the other view of the same data (a heap profile holds both in-use and
    /// allocation values; block and mutex profiles share one shape).
    pub fn accepts(self, claimed: ProfileKind) -> bool {
        use ProfileKind::*;
        self == claimed
            || matches!((self, claimed), (Memory, Alloc) | (Alloc, Memory) | (Block, Mutex) | (Mutex, Block))
    }

    pub fn of(profile: &Profile) -> Self {
        let types: Vec<&str> = (0..profile.sample_types.len()).map(|i| profile.sample_type_name(i)).collect();
        let has = |name: &str| types.contains(&name);
        let period = profile.period_type.map(|t| profile.str(t.kind)).unwrap_or("");
        if !profile.goroutines.is_empty() || has("goroutine") {
            ProfileKind::Goroutine
        } else if has("threadcreate") {
            ProfileKind::Threadcreate
        } else if has("cpu") || period == "cpu" {
            ProfileKind::Cpu
        } else if has("inuse_space") || has("space") {
            let default = profile.str(profile.default_sample_type);
            if default.starts_with("alloc_") {
                ProfileKind::Alloc
            } else {
                ProfileKind::Memory
            }
        } else if has("alloc_space") || has("alloc_objects") {
            ProfileKind::Alloc
        } else if has("contentions") || has("delay") {
            // Same shape for both; Go records mutex contention where the lock is
            // released, so mutex profiles' stacks end in an Unlock.
            let unlocks = profile.samples.iter().filter_map(|s| s.locations.first()).any(|&l| {
                profile
                    .location(l)
                    .lines
                    .first()
                    .is_some_and(|line| profile.str(profile.function(line.function).name).ends_with("Unlock"))
            });
            if unlocks {
                ProfileKind::Mutex
            } else {
                ProfileKind::Block
            }
        } else if has("samples") {
            ProfileKind::Cpu
        } else {
            ProfileKind::Other
        }
    }
}

impl std::fmt::Display for ProfileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
