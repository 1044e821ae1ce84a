//! Merging profiles with pprof's semantics (`go tool pprof a b c`, `profile.Merge`):
//! the same sample types in the same order, values of equal samples summed, mappings,
//! functions and locations unified, labels kept. A [`Merger`] takes one profile at a
//! time, so merging N profiles holds the result and one input, never N models.

use std::collections::hash_map::Entry;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::model::{
    CreatedBy, Function, FunctionId, Goroutine, Label, LabelValue, Line, Location, LocationId, Mapping, MappingId,
    Profile, Sample, SourceFormat, StrId, ValueType,
};
use crate::{Error, Result};

impl Profile {
    /// Merges `profiles` in order.
    pub fn merge<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> Result<Profile> {
        let mut merger = Merger::default();
        for profile in profiles {
            merger.add(profile)?;
        }
        merger.finish()
    }
}

/// An accumulator of profiles.
#[derive(Default)]
pub struct Merger {
    out: Option<Profile>,
    mappings: HashMap<MappingKey, MappingId>,
    functions: HashMap<(StrId, StrId, StrId, i64), FunctionId>,
    locations: HashMap<LocationKey, LocationId>,
    samples: HashMap<SampleKey, usize>,
    comments: HashSet<StrId>,
    /// The merged samples, as [`crate::import::model_bytes`] counts them.
    counted: u64,
}

/// pprof's `mappingKey`: size rounded up to 4 KiB, file offset, and build id (or file).
#[derive(PartialEq, Eq, Hash)]
struct MappingKey {
    size: u64,
    offset: u64,
    build_id_or_file: StrId,
}

/// pprof's `locationKey`: mapping, address relative to it, lines, folded flag.
#[derive(PartialEq, Eq, Hash)]
struct LocationKey {
    mapping: Option<MappingId>,
    address: u64,
    lines: Vec<(FunctionId, i64, i64)>,
    is_folded: bool,
}

/// Stack and labels (sorted), as pprof's `sampleKey`.
#[derive(PartialEq, Eq, Hash)]
struct SampleKey {
    locations: Vec<LocationId>,
    labels: Vec<(StrId, StrId, i64, StrId)>,
}

impl Merger {
    /// Adds one profile. The first one sets the sample and period types; a profile
    /// with other types is refused (and nothing of it is added).
    pub fn add(&mut self, profile: &Profile) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            self.out = Some(Self::empty_like(profile));
            return self.add(profile);
        };
        Self::check_compatible(out, profile)?;
        let strings: Vec<StrId> = profile.strings.iter().map(|s| out.strings.intern(s)).collect();
        let s = |id: StrId| strings.get(id.0 as usize).copied().unwrap_or_default();

        // Header, as pprof's combineHeaders: earliest time, summed durations, largest
        // period, comments once each, the first default sample type.
        if out.time_nanos == 0 || (profile.time_nanos != 0 && profile.time_nanos < out.time_nanos) {
            out.time_nanos = profile.time_nanos;
        }
        out.duration_nanos = out.duration_nanos.saturating_add(profile.duration_nanos);
        out.period = out.period.max(profile.period);
        for &comment in &profile.comments {
            if self.comments.insert(s(comment)) {
                out.comments.push(s(comment));
            }
        }
        if out.default_sample_type == StrId(0) {
            out.default_sample_type = s(profile.default_sample_type);
        }

        // Each mapping as the merged one that stands for it, and how far its addresses move.
        let mappings: Vec<(MappingId, i64)> = profile
            .mappings
            .iter()
            .map(|m| {
                let size = (m.memory_limit.saturating_sub(m.memory_start)).div_ceil(0x1000).saturating_mul(0x1000);
                let build_id_or_file = if m.build_id != StrId(0) { s(m.build_id) } else { s(m.filename) };
                let key = MappingKey { size, offset: m.file_offset, build_id_or_file };
                let id = *self.mappings.entry(key).or_insert_with(|| {
                    let id = MappingId(out.mappings.len() as u32);
                    out.mappings.push(Mapping {
                        id: u64::from(id.0) + 1,
                        filename: s(m.filename),
                        build_id: s(m.build_id),
                        ..m.clone()
                    });
                    id
                });
                (id, (out.mappings[id.0 as usize].memory_start as i64).wrapping_sub(m.memory_start as i64))
            })
            .collect();
        let functions: Vec<FunctionId> = profile
            .functions
            .iter()
            .map(|f| {
                let key = (s(f.name), s(f.system_name), s(f.filename), f.start_line);
                *self.functions.entry(key).or_insert_with(|| {
                    let id = FunctionId(out.functions.len() as u32);
                    out.functions.push(Function {
                        id: u64::from(id.0) + 1,
                        name: key.0,
                        system_name: key.1,
                        filename: key.2,
                        start_line: f.start_line,
                    });
                    id
                })
            })
            .collect();
        let locations: Vec<LocationId> = profile
            .locations
            .iter()
            .map(|l| {
                let (mapping, shift) = match l.mapping {
                    Some(m) => (Some(mappings[m.0 as usize].0), mappings[m.0 as usize].1),
                    None => (None, 0),
                };
                let lines: Vec<Line> = l
                    .lines
                    .iter()
                    .map(|line| Line { function: functions[line.function.0 as usize], ..*line })
                    .collect();
                let key = LocationKey {
                    mapping,
                    // Relative to the mapping's start, as pprof keys them.
                    address: l.address.wrapping_sub(l.mapping.map_or(0, |m| profile.mapping(m).memory_start)),
                    lines: lines.iter().map(|line| (line.function, line.line, line.column)).collect(),
                    is_folded: l.is_folded,
                };
                *self.locations.entry(key).or_insert_with(|| {
                    let id = LocationId(out.locations.len() as u32);
                    out.locations.push(Location {
                        id: u64::from(id.0) + 1,
                        mapping,
                        address: l.address.wrapping_add(shift as u64),
                        lines,
                        is_folded: l.is_folded,
                    });
                    id
                })
            })
            .collect();

        for sample in &profile.samples {
            let stack: Vec<LocationId> = sample.locations.iter().map(|l| locations[l.0 as usize]).collect();
            let labels: Vec<Label> = sample.labels.iter().map(|label| Self::label(label, &s)).collect();
            let mut key_labels: Vec<(StrId, StrId, i64, StrId)> = labels
                .iter()
                .map(|l| match l.value {
                    LabelValue::Str(v) => (l.key, v, 0, StrId(0)),
                    LabelValue::Num { value, unit } => (l.key, StrId(0), value, unit),
                })
                .collect();
            key_labels.sort_unstable();
            match self.samples.entry(SampleKey { locations: stack, labels: key_labels }) {
                Entry::Occupied(merged) => {
                    for (sum, value) in out.samples.values_mut(*merged.get()).iter_mut().zip(sample.values) {
                        *sum = sum.saturating_add(*value);
                    }
                }
                Entry::Vacant(new) => {
                    let locations = new.key().locations.clone();
                    // Held twice: as the sample and as its key.
                    let counted = 2 * crate::import::model_bytes(1, locations.len() as u64);
                    self.counted = self.counted.saturating_add(counted);
                    new.insert(out.samples.len());
                    out.samples.push(Sample { locations, values: sample.values.to_vec(), labels });
                }
            }
        }
        // Per-goroutine records (of dumps) stand for the merged profile only while every
        // profile added has them: once one without them comes, the goroutine analysis of the
        // merged profile counts its samples instead (with states inferred from frames).
        if out.source == SourceFormat::GoGoroutineDump && profile.source != SourceFormat::GoGoroutineDump {
            out.source = profile.source;
            out.goroutines = Vec::new();
        }
        if out.source != SourceFormat::GoGoroutineDump {
            return Ok(());
        }
        out.goroutines.extend(profile.goroutines.iter().map(|g| Goroutine {
            state: s(g.state),
            stack: g.stack.iter().map(|l| locations[l.0 as usize]).collect(),
            created_by:
                g.created_by.as_ref().map(|c| CreatedBy { location: locations[c.location.0 as usize], ..c.clone() }),
            ..g.clone()
        }));
        Ok(())
    }

    /// What the merged samples count for so far (as importers count them,
    /// [`crate::import::Room`]): adding a profile grows it by at most twice what the
    /// profile's own samples count for ([`crate::import::profile_bytes`]).
    pub fn model_bytes(&self) -> u64 {
        self.counted
    }

    /// The merged profile; an error when nothing was added.
    pub fn finish(self) -> Result<Profile> {
        self.out.ok_or_else(|| Error::Invalid("there is no profile to merge".into()))
    }

    /// A profile with `profile`'s types and header strings and nothing else yet.
    fn empty_like(profile: &Profile) -> Profile {
        let mut out = Profile::new(profile.source);
        let mut value_type = |t: &ValueType| out.value_type(profile.str(t.kind), profile.str(t.unit));
        let sample_types: Vec<ValueType> = profile.sample_types.iter().map(&mut value_type).collect();
        let period_type = profile.period_type.as_ref().map(&mut value_type);
        out.sample_types = sample_types;
        out.period_type = period_type;
        out.drop_frames = out.strings.intern(profile.str(profile.drop_frames));
        out.keep_frames = out.strings.intern(profile.str(profile.keep_frames));
        out.doc_url = out.strings.intern(profile.str(profile.doc_url));
        out
    }

    /// pprof's `compatible`: the same period type and the same sample types, in order.
    fn check_compatible(out: &Profile, profile: &Profile) -> Result<()> {
        let names = |p: &Profile, types: &mut dyn Iterator<Item = &ValueType>| {
            types.map(|t| format!("{}/{}", p.str(t.kind), p.str(t.unit))).collect::<Vec<_>>()
        };
        let (want, got) = (names(out, &mut out.sample_types.iter()), names(profile, &mut profile.sample_types.iter()));
        if want != got {
            return Err(Error::Incompatible(format!(
                "cannot merge profiles whose sample types differ: [{}] and [{}]",
                want.join(", "),
                got.join(", ")
            )));
        }
        let (want, got) = (names(out, &mut out.period_type.iter()), names(profile, &mut profile.period_type.iter()));
        if want != got && !want.is_empty() && !got.is_empty() {
            return Err(Error::Incompatible(format!(
                "cannot merge profiles whose period types differ: {} and {}",
                want[0], got[0]
            )));
        }
        Ok(())
    }

    fn label(label: &Label, s: &impl Fn(StrId) -> StrId) -> Label {
        Label {
            key: s(label.key),
            value: match label.value {
                LabelValue::Str(v) => LabelValue::Str(s(v)),
                LabelValue::Num { value, unit } => LabelValue::Num { value, unit: s(unit) },
            },
        }
    }
}
