//! OpenTelemetry profiles (OTLP, `profiles.v1development`): `ProfilesData` or the
//! collector's `ExportProfilesServiceRequest`, as protobuf or OTLP/JSON. Every resource,
//! scope and profile becomes part of one profile: a column per sample type; profiles of
//! one resource that share a time and a sample layout (pprof's CPU profile converted by
//! the collector: samples and cpu) are joined into samples with several values.
//! Resource, profile and sample attributes and trace links become labels; timestamps
//! become sample times; mappings keep their build ids for symbolization.

pub mod proto;

use std::collections::HashMap;

use prost::Message;
use serde::Deserialize;

use proto::{any_value::Value as Any, AnyValue, ProfilesData, ProfilesDictionary};

use super::{ParseOptions, Room};
use crate::model::{
    FunctionId, Label, LabelValue, Line, LocationId, Mapping, MappingId, Sample, SampleTime, SourceFormat, StrId,
};
use crate::{Error, Profile, Result};

/// Frames a stack may have: deeper ones come from a corrupt or hostile message.
pub const MAX_STACK_DEPTH: usize = 1 << 16;

/// Mapping attributes that hold the binary's build id, most useful first (the GNU id
/// is what debug files are found by).
const BUILD_ID_KEYS: [&str; 2] = ["process.executable.build_id.gnu", "process.executable.build_id.go"];

/// Protobuf tag of field 1, wire type 2 (length-delimited).
const FIELD_1_BYTES: u8 = 0x0a;

/// Whether protobuf `bytes` begin like `ProfilesData`: field 1 (`resource_profiles`)
/// whose message starts with field 1 (`resource`) or 2 (`scope_profiles`), messages
/// too. A pprof `Profile` starting with field 1 (`sample_type`) holds a `ValueType`,
/// whose fields are varints, so its first inner tag is never one of those.
pub fn looks_like_otlp(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&FIELD_1_BYTES) {
        return false;
    }
    // The length varint: at most 10 bytes, each but the last with its high bit set.
    let Some(length_bytes) = bytes[1..].iter().take(10).position(|b| b & 0x80 == 0) else { return false };
    matches!(bytes.get(2 + length_bytes), Some(0x0a | 0x12))
}

/// Whether a JSON document is OTLP/JSON profiles.
pub fn is_otlp_json(json: &serde_json::Value) -> bool {
    json.get("resourceProfiles").is_some_and(serde_json::Value::is_array)
}

pub fn parse(bytes: &[u8], options: &ParseOptions) -> Result<Profile> {
    build(&decode(bytes)?, options)
}

/// The message in protobuf `bytes`, not yet checked (see [`build`]).
pub fn decode(bytes: &[u8]) -> Result<ProfilesData> {
    ProfilesData::decode(bytes).map_err(|e| invalid(format!("not a ProfilesData message: {e}")))
}

/// The message in OTLP/JSON `bytes`, not yet checked (see [`build`]).
pub fn decode_json(bytes: &[u8]) -> Result<ProfilesData> {
    serde_json::from_slice(bytes).map_err(|e| invalid(format!("not OTLP/JSON profiles: {e}")))
}

pub fn parse_json(json: &serde_json::Value, options: &ParseOptions) -> Result<Profile> {
    let data = ProfilesData::deserialize(json).map_err(|e| invalid(format!("not OTLP/JSON profiles: {e}")))?;
    build(&data, options)
}

fn invalid(reason: String) -> Error {
    Error::Invalid(format!("OTLP profiles: {reason}"))
}

/// The model of `data`: every part of it in one profile.
pub fn build(data: &ProfilesData, options: &ParseOptions) -> Result<Profile> {
    build_parts(data, &parts(data), options)
}

/// What one stored profile of a message holds: a resource and those of its profiles
/// that join (one time and sample layout), e.g. a CPU profile's samples and cpu.
pub struct Part<'a> {
    pub resource: &'a proto::ResourceProfiles,
    pub profiles: Vec<&'a proto::Profile>,
}

/// The parts of `data`, resource by resource; profiles without samples are left out.
pub fn parts(data: &ProfilesData) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    for resource in &data.resource_profiles {
        let profiles: Vec<&proto::Profile> =
            resource.scope_profiles.iter().flat_map(|s| &s.profiles).filter(|p| !p.samples.is_empty()).collect();
        parts.extend(joined(&profiles).into_iter().map(|profiles| Part { resource, profiles }));
    }
    parts
}

/// The model of `parts` of `data`, the first part's first profile's type the default.
pub fn build_parts(data: &ProfilesData, parts: &[Part<'_>], options: &ParseOptions) -> Result<Profile> {
    let empty = ProfilesDictionary::default();
    let dictionary = data.dictionary.as_ref().unwrap_or(&empty);
    let mut tables = Tables::new(dictionary)?;
    let mut room = Room::new(options);
    let columns = tables.columns(parts.iter().flat_map(|p| &p.profiles).copied())?;
    tables.profile.sample_types = columns.iter().map(|&(kind, unit)| crate::model::ValueType { kind, unit }).collect();
    let mut timed = Timed::default();
    for part in parts {
        let mut labels = Vec::new();
        for (key, value) in resource_attributes(dictionary, part.resource)? {
            let key = tables.profile.strings.intern(&key);
            if let Some(value) = tables.value(value, StrId(0))? {
                labels.push(Label { key, value });
            }
        }
        tables.add_group(&part.profiles, &columns, &labels, &mut room, &mut timed)?;
    }
    timed.finish(&mut tables.profile)?;
    if let Some(first) = parts.first().map(|p| p.profiles[0]) {
        if let Some(t) = first.sample_type {
            tables.profile.default_sample_type =
                tables.profile.strings.intern(tables.string(t.type_strindex, "sample type")?);
        }
        if let Some(t) = first.period_type {
            tables.profile.period_type = Some(tables.value_type(t)?);
            tables.profile.period = first.period;
        }
    }
    Ok(tables.profile)
}

/// A resource's attributes: each key (as written, or from the string table) and value.
pub fn resource_attributes<'a>(
    dictionary: &'a ProfilesDictionary,
    resource: &'a proto::ResourceProfiles,
) -> Result<Vec<(String, Option<&'a AnyValue>)>> {
    let mut out = Vec::new();
    for kv in resource.resource.iter().flat_map(|r| &r.attributes) {
        let key = match kv.key.as_str() {
            "" => index(&dictionary.string_table, kv.key_strindex, "string", || "resource attribute key".into())?,
            key => key,
        };
        out.push((key.to_owned(), kv.value.as_ref()));
    }
    Ok(out)
}

/// An attribute's value as text (`None`: no value), string-table references resolved.
pub fn text(dictionary: &ProfilesDictionary, value: Option<&AnyValue>) -> Result<Option<String>> {
    let string = |i: i32| index(&dictionary.string_table, i, "string", || "attribute value".into());
    Ok(match value.and_then(|v| v.value.as_ref()) {
        None => None,
        Some(Any::StringValue(s)) => Some(s.clone()),
        Some(Any::StringValueStrindex(i)) => Some(string(*i)?.clone()),
        Some(Any::BoolValue(b)) => Some(b.to_string()),
        Some(Any::IntValue(n)) => Some(n.to_string()),
        Some(Any::DoubleValue(d)) => Some(d.to_string()),
        Some(Any::BytesValue(b)) => Some(b.iter().map(|b| format!("{b:02x}")).collect()),
        Some(Any::ArrayValue(a)) => {
            let items: Result<Vec<String>> =
                a.values.iter().map(|v| Ok(text(dictionary, Some(v))?.unwrap_or_default())).collect();
            Some(format!("[{}]", items?.join(", ")))
        }
        Some(Any::KvlistValue(l)) => {
            let items: Result<Vec<String>> = l
                .values
                .iter()
                .map(|kv| Ok(format!("{}={}", kv.key, text(dictionary, kv.value.as_ref())?.unwrap_or_default())))
                .collect();
            Some(format!("{{{}}}", items?.join(", ")))
        }
    })
}

/// Groups of profiles to join: each profile with the later ones of the same time, labels
/// and sample layout (stacks, attributes, links and timestamps, sample by sample).
fn joined<'a>(profiles: &[&'a proto::Profile]) -> Vec<Vec<&'a proto::Profile>> {
    let mut groups: Vec<Vec<&proto::Profile>> = Vec::new();
    for &p in profiles {
        let same_layout = |g: &Vec<&proto::Profile>| {
            let q = g[0];
            q.time_unix_nano == p.time_unix_nano
                && q.duration_nano == p.duration_nano
                && q.attribute_indices == p.attribute_indices
                && q.samples.len() == p.samples.len()
                && !g.iter().any(|o| o.sample_type == p.sample_type)
                && q.samples.iter().zip(&p.samples).all(|(a, b)| {
                    a.stack_index == b.stack_index
                        && a.attribute_indices == b.attribute_indices
                        && a.link_index == b.link_index
                        && a.timestamps_unix_nano == b.timestamps_unix_nano
                        && a.values.len() == b.values.len()
                })
        };
        match groups.iter_mut().find(|g| same_layout(g)) {
            Some(group) => group.push(p),
            None => groups.push(vec![p]),
        }
    }
    groups
}

/// The profile being built and the dictionary's entries in it, each converted when a
/// sample first needs it: a part of a large shared dictionary takes only its own.
struct Tables<'a> {
    dictionary: &'a ProfilesDictionary,
    profile: Profile,
    mappings: HashMap<i32, Option<MappingId>>,
    functions: HashMap<i32, FunctionId>,
    locations: HashMap<i32, LocationId>,
    /// Stacks converted so far, by index.
    stacks: HashMap<i32, Vec<LocationId>>,
    /// Attribute-table entries converted so far, by index (`None`: no value).
    attributes: HashMap<i32, Option<Label>>,
}

impl<'a> Tables<'a> {
    fn new(dictionary: &'a ProfilesDictionary) -> Result<Self> {
        check_zero_entries(dictionary)?;
        Ok(Tables {
            dictionary,
            profile: Profile::new(SourceFormat::Otlp),
            mappings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
        })
    }

    /// The model's mapping of mapping-table entry `i` (`None` for entry 0).
    fn mapping(&mut self, i: i32, what: impl Fn() -> String) -> Result<Option<MappingId>> {
        if let Some(&id) = self.mappings.get(&i) {
            return Ok(id);
        }
        let m = index(&self.dictionary.mapping_table, i, "mapping", what)?;
        let id = if i == 0 {
            None
        } else {
            let filename = self.profile.strings.intern(self.string(m.filename_strindex, "mapping file name")?);
            let build_id = self.build_id(m, i)?;
            self.profile.mappings.push(Mapping {
                id: i as u64,
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename,
                build_id,
                ..Default::default()
            });
            Some(MappingId(self.profile.mappings.len() as u32 - 1))
        };
        self.mappings.insert(i, id);
        Ok(id)
    }

    /// A mapping's build id, from the first of [`BUILD_ID_KEYS`] it has.
    fn build_id(&mut self, m: &proto::Mapping, i: i32) -> Result<StrId> {
        for key in BUILD_ID_KEYS {
            for &a in &m.attribute_indices {
                let kv = index(&self.dictionary.attribute_table, a, "attribute", || format!("mapping {i}"))?;
                if self.string(kv.key_strindex, "attribute key")? == key {
                    if let Some(id) = text(self.dictionary, kv.value.as_ref())? {
                        return Ok(self.profile.strings.intern(&id));
                    }
                }
            }
        }
        Ok(StrId(0))
    }

    fn function(&mut self, i: i32, what: impl Fn() -> String) -> Result<FunctionId> {
        if let Some(&id) = self.functions.get(&i) {
            return Ok(id);
        }
        if i == 0 {
            return Err(invalid(format!("{} has a line of function 0, which is no function", what())));
        }
        let f = index(&self.dictionary.function_table, i, "function", what)?;
        let name = self.string(f.name_strindex, "function name")?;
        let system_name = self.string(f.system_name_strindex, "function system name")?;
        let filename = self.string(f.filename_strindex, "function file name")?;
        let id = self.profile.add_function(name, system_name, filename, f.start_line);
        self.functions.insert(i, id);
        Ok(id)
    }

    fn location(&mut self, i: i32, what: impl Fn() -> String) -> Result<LocationId> {
        if let Some(&id) = self.locations.get(&i) {
            return Ok(id);
        }
        if i == 0 {
            return Err(invalid(format!("{} names location 0, which is no location", what())));
        }
        let l = index(&self.dictionary.location_table, i, "location", what)?;
        let here = || format!("location {i}");
        let mut lines = Vec::with_capacity(l.lines.len());
        for line in &l.lines {
            lines.push(Line {
                function: self.function(line.function_index, here)?,
                line: line.line,
                column: line.column,
            });
        }
        let mapping = self.mapping(l.mapping_index, here)?;
        if let Some(m) = mapping {
            let m = &mut self.profile.mappings[m.0 as usize];
            m.has_functions |= !lines.is_empty();
            m.has_line_numbers |= lines.iter().any(|l| l.line != 0);
            m.has_inline_frames |= lines.len() > 1;
        }
        let id = self.profile.add_location(l.address, lines);
        self.profile.locations[id.0 as usize].mapping = mapping;
        self.locations.insert(i, id);
        Ok(id)
    }

    fn string(&self, i: i32, what: &str) -> Result<&'a str> {
        index(&self.dictionary.string_table, i, "string", || what.to_owned()).map(String::as_str)
    }

    fn value_type(&mut self, t: proto::ValueType) -> Result<crate::model::ValueType> {
        let (kind, unit) = (self.string(t.type_strindex, "sample type")?, self.string(t.unit_strindex, "unit")?);
        Ok(self.profile.value_type(kind, unit))
    }

    /// The sample types of `profiles`, each once, in the order they first appear.
    fn columns<'p>(&mut self, profiles: impl Iterator<Item = &'p proto::Profile>) -> Result<Vec<(StrId, StrId)>> {
        let mut columns = Vec::new();
        for p in profiles {
            let t = self.value_type(p.sample_type.unwrap_or_default())?;
            if !columns.contains(&(t.kind, t.unit)) {
                columns.push((t.kind, t.unit));
            }
        }
        Ok(columns)
    }

    /// A label's value: integers are numbers (with `unit`), everything else text.
    fn value(&mut self, value: Option<&AnyValue>, unit: StrId) -> Result<Option<LabelValue>> {
        if let Some(Any::IntValue(n)) = value.and_then(|v| v.value.as_ref()) {
            return Ok(Some(LabelValue::Num { value: *n, unit }));
        }
        Ok(text(self.dictionary, value)?.map(|s| LabelValue::Str(self.profile.strings.intern(&s))))
    }

    /// The label of attribute-table entry `i`.
    fn attribute(&mut self, i: i32, what: impl Fn() -> String) -> Result<Option<Label>> {
        if let Some(label) = self.attributes.get(&i) {
            return Ok(label.clone());
        }
        let kv = index(&self.dictionary.attribute_table, i, "attribute", what)?;
        let key = self.profile.strings.intern(self.string(kv.key_strindex, "attribute key")?);
        let unit = self.profile.strings.intern(self.string(kv.unit_strindex, "attribute unit")?);
        let label = self.value(kv.value.as_ref(), unit)?.map(|value| Label { key, value });
        self.attributes.insert(i, label.clone());
        Ok(label)
    }

    fn stack(&mut self, i: i32, what: impl Fn() -> String) -> Result<Vec<LocationId>> {
        if let Some(stack) = self.stacks.get(&i) {
            return Ok(stack.clone());
        }
        let stack = index(&self.dictionary.stack_table, i, "stack", &what)?;
        if stack.location_indices.len() > MAX_STACK_DEPTH {
            return Err(invalid(format!(
                "stack {i} has {} frames, more than the {MAX_STACK_DEPTH} a stack may have",
                stack.location_indices.len()
            )));
        }
        let mut locations = Vec::with_capacity(stack.location_indices.len());
        for &l in &stack.location_indices {
            locations.push(self.location(l, || format!("stack {i}"))?);
        }
        self.stacks.insert(i, locations.clone());
        Ok(locations)
    }

    /// Samples of `group`, profiles of one layout, each in its sample type's column.
    fn add_group(
        &mut self,
        group: &[&proto::Profile],
        columns: &[(StrId, StrId)],
        resource: &[Label],
        room: &mut Room,
        timed: &mut Timed,
    ) -> Result<()> {
        let first = group[0];
        let mut slots = Vec::with_capacity(group.len());
        for p in group {
            let t = self.value_type(p.sample_type.unwrap_or_default())?;
            slots.push(columns.iter().position(|&c| c == (t.kind, t.unit)).expect("every sample type has a column"));
        }
        // Each observation of this group spans its value when that is time, else the period.
        let nanos =
            |t: Option<proto::ValueType>| t.is_some_and(|t| self.string(t.unit_strindex, "unit") == Ok("nanoseconds"));
        let value_is_time = nanos(first.sample_type);
        let period = if nanos(first.period_type) { first.period.max(0) } else { 0 };
        let mut profile_labels = resource.to_vec();
        for &a in &first.attribute_indices {
            profile_labels.extend(self.attribute(a, || "profile".to_owned())?);
        }
        timed.profile(first);
        for (i, sample) in first.samples.iter().enumerate() {
            let what = || format!("sample {i}");
            let locations = self.stack(sample.stack_index, what)?;
            let mut labels = profile_labels.clone();
            for &a in &sample.attribute_indices {
                labels.extend(self.attribute(a, what)?);
            }
            if sample.link_index != 0 {
                let link = index(&self.dictionary.link_table, sample.link_index, "link", what)?;
                for (key, id) in [("trace_id", &link.trace_id), ("span_id", &link.span_id)] {
                    let key = self.profile.strings.intern(key);
                    let text: String = id.iter().map(|b| format!("{b:02x}")).collect();
                    labels.push(Label { key, value: LabelValue::Str(self.profile.strings.intern(&text)) });
                }
            }
            let times = &sample.timestamps_unix_nano;
            let observations = match (sample.values.len(), times.len()) {
                (0, 0) => return Err(invalid(format!("sample {i} has neither values nor timestamps"))),
                (v, t) if v != 0 && t != 0 && v != t => {
                    return Err(invalid(format!("sample {i} has {v} values and {t} timestamps")));
                }
                (_, 0) => 1,
                (_, t) => t,
            };
            for k in 0..observations {
                let mut values = vec![0; columns.len()];
                for (p, &slot) in group.iter().zip(&slots) {
                    let s = &p.samples[i];
                    values[slot] = match (s.values.len(), times.len()) {
                        (0, _) => 1,
                        (_, 0) => s.values.iter().fold(0i64, |a, &v| a.saturating_add(v)),
                        _ => s.values[k],
                    };
                }
                let duration = if value_is_time { values[slots[0]].max(0) } else { period };
                timed.observe(times.get(k).copied(), duration);
                room.push(
                    &mut self.profile.samples,
                    Sample { locations: locations.clone(), values, labels: labels.clone() },
                )?;
            }
        }
        Ok(())
    }
}

/// Each table's entry 0 must be its zero value (the spec's "null").
fn check_zero_entries(d: &ProfilesDictionary) -> Result<()> {
    let zero = [
        ("string_table", d.string_table.first().is_none_or(String::is_empty)),
        ("mapping_table", d.mapping_table.first().is_none_or(|m| *m == Default::default())),
        ("location_table", d.location_table.first().is_none_or(|l| *l == Default::default())),
        ("function_table", d.function_table.first().is_none_or(|f| *f == Default::default())),
        ("link_table", d.link_table.first().is_none_or(|l| l.trace_id.iter().chain(&l.span_id).all(|&b| b == 0))),
        // An empty value is no value (the eBPF profiler writes `value {}`).
        (
            "attribute_table",
            d.attribute_table.first().is_none_or(|a| {
                a.key_strindex == 0 && a.unit_strindex == 0 && a.value.as_ref().is_none_or(|v| v.value.is_none())
            }),
        ),
        ("stack_table", d.stack_table.first().is_none_or(|s| s.location_indices.is_empty())),
    ];
    match zero.iter().find(|(_, ok)| !ok) {
        Some((table, _)) => Err(invalid(format!("{table}[0] is not the zero value the format requires"))),
        None => Ok(()),
    }
}

/// Entry `i` of `table`, or the error naming what referred to it.
fn index<'t, T>(table: &'t [T], i: i32, target: &'static str, what: impl Fn() -> String) -> Result<&'t T> {
    usize::try_from(i).ok().and_then(|i| table.get(i)).ok_or_else(|| Error::DanglingReference {
        what: what(),
        target,
        id: i as i64 as u64,
    })
}

/// Sample times: kept when every observation has a timestamp, counted from the earliest
/// profile start or observation.
#[derive(Default)]
struct Timed {
    starts: Vec<Option<u64>>,
    durations: Vec<i64>,
    first: Option<u64>,
    last: u64,
}

impl Timed {
    fn profile(&mut self, p: &proto::Profile) {
        if p.time_unix_nano != 0 {
            self.first = Some(self.first.map_or(p.time_unix_nano, |f| f.min(p.time_unix_nano)));
            self.last = self.last.max(p.time_unix_nano.saturating_add(p.duration_nano));
        }
    }

    fn observe(&mut self, at: Option<u64>, duration: i64) {
        if let Some(at) = at {
            self.first = Some(self.first.map_or(at, |f| f.min(at)));
            self.last = self.last.max(at.saturating_add(duration as u64));
        }
        self.starts.push(at);
        self.durations.push(duration);
    }

    fn finish(self, profile: &mut Profile) -> Result<()> {
        let Some(origin) = self.first else { return Ok(()) };
        let nanos = |t: u64| i64::try_from(t).map_err(|_| invalid(format!("time {t} ns is past the year 2262")));
        profile.time_nanos = nanos(origin)?;
        profile.duration_nanos = nanos(self.last.saturating_sub(origin))?;
        if !self.starts.iter().all(Option::is_some) {
            return Ok(());
        }
        let times: Vec<SampleTime> = self
            .starts
            .iter()
            .zip(&self.durations)
            .map(|(at, &duration)| SampleTime { start: (at.unwrap_or(origin) - origin) as i64, duration })
            .collect();
        // In time order, as the stack chart reads a thread's samples: OTLP groups a
        // stack's observations in one sample.
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by_key(|&i| times[i].start);
        let mut samples = crate::model::Samples::new();
        for &i in &order {
            samples.push_ref(profile.samples.sample(i));
        }
        profile.samples = samples;
        profile.sample_times = order.into_iter().map(|i| times[i]).collect();
        Ok(())
    }
}
