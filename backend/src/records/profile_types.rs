//! Profile types as Pyroscope names them: `<name>:<sample type>:<sample unit>:<period
//! type>:<period unit>` (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`,
//! `memory:inuse_space:bytes:space:bytes`), mapped to stacklens' series (one per
//! service and [`ProfileKind`], each stored profile keeping all its sample types) and
//! back. Pyroscope keeps one series per sample type; here one stored profile answers
//! for each of its sample types.

use std::fmt;

use stacklens_core::ProfileKind;

use super::series::Entry;

/// A Pyroscope profile type id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProfileTypeId {
    pub name: String,
    pub sample_type: String,
    pub sample_unit: String,
    pub period_type: String,
    pub period_unit: String,
}

#[derive(Debug, PartialEq, thiserror::Error)]
#[error(
    "'{0}' is not a profile type id: <name>:<sample type>:<sample unit>:<period type>:<period unit>, \
     as process_cpu:cpu:nanoseconds:cpu:nanoseconds"
)]
pub struct BadProfileTypeId(pub String);

impl ProfileTypeId {
    pub fn parse(id: &str) -> Result<Self, BadProfileTypeId> {
        let parts: Vec<&str> = id.split(':').collect();
        let [name, sample_type, sample_unit, period_type, period_unit] = parts[..] else {
            return Err(BadProfileTypeId(id.to_owned()));
        };
        if name.is_empty() || sample_type.is_empty() {
            return Err(BadProfileTypeId(id.to_owned()));
        }
        let own = str::to_owned;
        Ok(ProfileTypeId {
            name: own(name),
            sample_type: own(sample_type),
            sample_unit: own(sample_unit),
            period_type: own(period_type),
            period_unit: own(period_unit),
        })
    }

    /// The series kinds that may hold this type, the one to read first: Go's heap and
    /// allocs profiles hold the same four sample types, which Pyroscope files both as
    /// `memory`.
    pub fn kinds(&self) -> &'static [ProfileKind] {
        use ProfileKind::*;
        match self.name.as_str() {
            "process_cpu" | "cpu" | "wall" | "itimer" => &[Cpu],
            "memory" => &[Memory, Alloc],
            "goroutine" | "goroutines" => &[Goroutine],
            "block" => &[Block],
            "mutex" => &[Mutex],
            "threadcreate" => &[Threadcreate],
            _ => &[Other],
        }
    }

    /// The index of this type among a stored profile's sample types, if it has it (a
    /// unit left empty matches any).
    pub fn sample_index(&self, entry: &Entry) -> Option<usize> {
        (0..entry.sample_types.len()).find(|&i| {
            entry.sample_types[i] == self.sample_type
                && (self.sample_unit.is_empty() || entry.units.get(i).is_some_and(|u| *u == self.sample_unit))
        })
    }

    /// The ids of a stored profile of `kind`, one per sample type.
    pub fn of_entry(kind: ProfileKind, entry: &Entry) -> Vec<ProfileTypeId> {
        let (period_type, period_unit) = period_of(kind);
        entry
            .sample_types
            .iter()
            .zip(&entry.units)
            .map(|(sample_type, unit)| ProfileTypeId {
                name: name_of(kind).to_owned(),
                sample_type: sample_type.clone(),
                sample_unit: unit.clone(),
                period_type: period_type.to_owned(),
                period_unit: period_unit.to_owned(),
            })
            .collect()
    }
}

impl fmt::Display for ProfileTypeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ProfileTypeId { name, sample_type, sample_unit, period_type, period_unit } = self;
        write!(f, "{name}:{sample_type}:{sample_unit}:{period_type}:{period_unit}")
    }
}

/// Pyroscope's `__name__` of a kind.
pub fn name_of(kind: ProfileKind) -> &'static str {
    match kind {
        ProfileKind::Cpu => "process_cpu",
        ProfileKind::Memory | ProfileKind::Alloc => "memory",
        ProfileKind::Goroutine => "goroutine",
        other => other.as_str(),
    }
}

/// The period a kind's profiles are taken with, as Go writes it (stored entries keep
/// their sample types but not their period).
fn period_of(kind: ProfileKind) -> (&'static str, &'static str) {
    match kind {
        ProfileKind::Cpu => ("cpu", "nanoseconds"),
        ProfileKind::Memory | ProfileKind::Alloc => ("space", "bytes"),
        ProfileKind::Goroutine => ("goroutine", "count"),
        ProfileKind::Block | ProfileKind::Mutex => ("contentions", "count"),
        ProfileKind::Threadcreate => ("threadcreate", "count"),
        ProfileKind::Other => ("", ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_find_their_kinds() {
        let id = ProfileTypeId::parse("memory:alloc_space:bytes:space:bytes").unwrap();
        assert_eq!(id.to_string(), "memory:alloc_space:bytes:space:bytes");
        assert_eq!(id.kinds(), &[ProfileKind::Memory, ProfileKind::Alloc]);
        assert_eq!(ProfileTypeId::parse("process_cpu:cpu:nanoseconds::").unwrap().kinds(), &[ProfileKind::Cpu]);
        for bad in ["", "process_cpu", "a:b:c:d", "a:b:c:d:e:f", ":cpu:nanoseconds:cpu:nanoseconds"] {
            assert_eq!(ProfileTypeId::parse(bad), Err(BadProfileTypeId(bad.to_owned())));
        }
    }

    #[test]
    fn a_stored_cpu_profile_has_two_ids() {
        let entry = Entry {
            millis: 0,
            session_id: stacklens_core::ids::SessionId::parse("sess-0123456789abcdef0123456789abcdef").unwrap(),
            labels: Default::default(),
            sample_types: vec!["samples".into(), "cpu".into()],
            units: vec!["count".into(), "nanoseconds".into()],
            totals: vec![1, 10],
            default_index: 1,
            filed_by: None,
        };
        let ids: Vec<String> =
            ProfileTypeId::of_entry(ProfileKind::Cpu, &entry).iter().map(|i| i.to_string()).collect();
        assert_eq!(ids, ["process_cpu:samples:count:cpu:nanoseconds", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"]);
        let cpu = ProfileTypeId::parse(&ids[1]).unwrap();
        assert_eq!(cpu.sample_index(&entry), Some(1));
        let other_unit = ProfileTypeId::parse("process_cpu:cpu:microseconds:cpu:nanoseconds").unwrap();
        assert_eq!(other_unit.sample_index(&entry), None);
    }
}
