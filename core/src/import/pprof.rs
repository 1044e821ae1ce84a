//! pprof protobuf (`profile.proto` from google/pprof), decoded with prost.

use rustc_hash::FxHashMap as HashMap;

use prost::Message;

use crate::model::{
    Function, FunctionId, Label, LabelValue, Line, Location, LocationId, Mapping, MappingId, Profile, Sample,
    SourceFormat, StrId, StringTable, ValueType,
};
use crate::{Error, Result};

/// `profile.proto`, written as prost derive structs so no `protoc` is needed.
/// Strings are read as bytes: producers do write non-UTF-8 names, and one bad name
/// should not make a whole profile unreadable.
pub(crate) mod proto {
    /// Everything but the samples (field 2, which prost skips here): samples are
    /// decoded one by one straight into the model, so they are never held twice.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Head {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(bytes = "vec", repeated, tag = "6")]
        pub string_table: Vec<Vec<u8>>,
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
        #[prost(int64, tag = "15")]
        pub doc_url: i64,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
        #[prost(int64, tag = "3")]
        pub column: i64,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

pub fn parse(bytes: &[u8], progress: super::Progress<'_>) -> Result<Profile> {
    let wire_error = |fallback_offset: usize, e: prost::DecodeError| {
        let (offset, reason) = super::pprof_wire::locate_error(bytes).unwrap_or((fallback_offset, e.to_string()));
        Error::Protobuf { offset, reason }
    };
    let head = proto::Head::decode(bytes).map_err(|e| wire_error(0, e))?;
    let (mut out, location_index) = convert_head(head)?;
    let step = (bytes.len() / 100).max(1 << 16);
    let mut next_report = step;
    for (i, item) in super::pprof_wire::length_delimited(bytes, 2).enumerate() {
        let (at, body) = item.map_err(|(offset, reason)| Error::Protobuf { offset, reason })?;
        if at >= next_report {
            progress(super::Stage::Decoding, at as f64 / bytes.len() as f64);
            next_report = at + step;
        }
        let sample = proto::Sample::decode(body).map_err(|e| wire_error(at, e))?;
        out.samples.push(convert_sample(i, sample, &out, &location_index)?);
    }
    if out.sample_types.is_empty() && out.samples.is_empty() && out.strings.is_empty() {
        return Err(Error::UnknownFormat {
            hint: "no profile fields found (not a pprof protobuf, nor a known text format)".into(),
        });
    }
    Ok(out)
}

/// Maps a pprof id (arbitrary u64) to an arena index. Dense 1..=n ids, the common case,
/// need no hash map.
enum IdIndex {
    Dense(usize),
    Sparse(HashMap<u64, u32>),
}

impl IdIndex {
    fn new(ids: impl ExactSizeIterator<Item = u64> + Clone, kind: &'static str) -> Result<Self> {
        if let Some(pos) = ids.clone().position(|id| id == 0) {
            return Err(Error::Invalid(format!("{kind} #{pos} has the reserved id 0")));
        }
        let n = ids.len();
        if ids.clone().enumerate().all(|(i, id)| id == i as u64 + 1) {
            return Ok(IdIndex::Dense(n));
        }
        // Later duplicates win, as in pprof.
        Ok(IdIndex::Sparse(ids.enumerate().map(|(i, id)| (id, i as u32)).collect()))
    }

    fn get(&self, id: u64) -> Option<u32> {
        match self {
            IdIndex::Dense(n) => (id >= 1 && id <= *n as u64).then(|| (id - 1) as u32),
            IdIndex::Sparse(map) => map.get(&id).copied(),
        }
    }
}

struct Strings {
    len: usize,
}

impl Strings {
    fn get(&self, index: i64, what: impl FnOnce() -> String) -> Result<StrId> {
        if index >= 0 && (index as usize) < self.len {
            Ok(StrId(index as u32))
        } else {
            Err(Error::DanglingReference { what: what(), target: "string", id: index as u64 })
        }
    }
}

/// Everything but the samples; returns the location id index the samples need.
fn convert_head(p: proto::Head) -> Result<(Profile, IdIndex)> {
    let strings: Vec<String> = p
        .string_table
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
        .collect();
    if strings.first().is_some_and(|s| !s.is_empty()) {
        return Err(Error::Invalid("string table does not start with the empty string".into()));
    }
    let st = Strings { len: strings.len().max(1) };
    let mut out = Profile::new(SourceFormat::Pprof);
    out.strings = StringTable::from_vec(strings);

    let value_type = |vt: &proto::ValueType, what: &str| -> Result<ValueType> {
        Ok(ValueType {
            kind: st.get(vt.r#type, || format!("{what} type"))?,
            unit: st.get(vt.unit, || format!("{what} unit"))?,
        })
    };
    out.sample_types = p
        .sample_type
        .iter()
        .enumerate()
        .map(|(i, vt)| value_type(vt, &format!("sample_type #{i}")))
        .collect::<Result<_>>()?;
    out.period_type = p.period_type.as_ref().map(|vt| value_type(vt, "period_type")).transpose()?;
    out.period = p.period;
    out.time_nanos = p.time_nanos;
    out.duration_nanos = p.duration_nanos;
    out.drop_frames = st.get(p.drop_frames, || "drop_frames".into())?;
    out.keep_frames = st.get(p.keep_frames, || "keep_frames".into())?;
    out.default_sample_type = st.get(p.default_sample_type, || "default_sample_type".into())?;
    out.doc_url = st.get(p.doc_url, || "doc_url".into())?;
    out.comments = p.comment.iter().map(|&c| st.get(c, || "comment".into())).collect::<Result<_>>()?;

    let mapping_index = IdIndex::new(p.mapping.iter().map(|m| m.id), "mapping")?;
    out.mappings = p
        .mapping
        .iter()
        .map(|m| {
            Ok(Mapping {
                id: m.id,
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename: st.get(m.filename, || format!("mapping {} filename", m.id))?,
                build_id: st.get(m.build_id, || format!("mapping {} build_id", m.id))?,
                has_functions: m.has_functions,
                has_filenames: m.has_filenames,
                has_line_numbers: m.has_line_numbers,
                has_inline_frames: m.has_inline_frames,
            })
        })
        .collect::<Result<_>>()?;

    let function_index = IdIndex::new(p.function.iter().map(|f| f.id), "function")?;
    out.functions = p
        .function
        .iter()
        .map(|f| {
            Ok(Function {
                id: f.id,
                name: st.get(f.name, || format!("function {} name", f.id))?,
                system_name: st.get(f.system_name, || format!("function {} system_name", f.id))?,
                filename: st.get(f.filename, || format!("function {} filename", f.id))?,
                start_line: f.start_line,
            })
        })
        .collect::<Result<_>>()?;

    let location_index = IdIndex::new(p.location.iter().map(|l| l.id), "location")?;
    out.locations = p
        .location
        .into_iter()
        .map(|l| {
            let mapping = match l.mapping_id {
                0 => None,
                id => Some(MappingId(mapping_index.get(id).ok_or_else(|| Error::DanglingReference {
                    what: format!("location {}", l.id),
                    target: "mapping",
                    id,
                })?)),
            };
            let mut lines = Vec::with_capacity(l.line.len());
            for line in &l.line {
                // A line without a function carries no name; pprof shows such frames by
                // address, which is what a location without lines gets here too.
                if line.function_id == 0 {
                    continue;
                }
                let f = function_index.get(line.function_id).ok_or_else(|| Error::DanglingReference {
                    what: format!("location {}", l.id),
                    target: "function",
                    id: line.function_id,
                })?;
                lines.push(Line { function: FunctionId(f), line: line.line, column: line.column });
            }
            Ok(Location { id: l.id, mapping, address: l.address, lines, is_folded: l.is_folded })
        })
        .collect::<Result<_>>()?;

    Ok((out, location_index))
}

fn convert_sample(i: usize, s: proto::Sample, out: &Profile, location_index: &IdIndex) -> Result<Sample> {
    let n_types = out.sample_types.len();
    if s.value.len() != n_types {
        return Err(Error::Invalid(format!(
            "sample #{i} has {} values but the profile has {n_types} sample types",
            s.value.len()
        )));
    }
    let st = Strings { len: out.strings.len() };
    let locations = s
        .location_id
        .iter()
        .map(|&id| {
            location_index.get(id).map(LocationId).ok_or_else(|| Error::DanglingReference {
                what: format!("sample #{i}"),
                target: "location",
                id,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let labels = s
        .label
        .iter()
        .map(|l| {
            let key = st.get(l.key, || format!("sample #{i} label key"))?;
            let value = if l.str != 0 {
                LabelValue::Str(st.get(l.str, || format!("sample #{i} label value"))?)
            } else {
                LabelValue::Num { value: l.num, unit: st.get(l.num_unit, || format!("sample #{i} label unit"))? }
            };
            Ok(Label { key, value })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Sample { locations, values: s.value, labels })
}

/// Encodes a model profile back to pprof protobuf (uncompressed). Used to hand profiles
/// built from other formats to pprof-compatible tools, and by property tests.
pub fn encode(profile: &Profile) -> Vec<u8> {
    let vt = |v: &ValueType| proto::ValueType { r#type: v.kind.0 as i64, unit: v.unit.0 as i64 };
    let samples: Vec<proto::Sample> = profile
        .samples
        .iter()
        .map(|s| proto::Sample {
            location_id: s.locations.iter().map(|l| profile.location(*l).id).collect(),
            value: s.values.clone(),
            label: s
                .labels
                .iter()
                .map(|l| match l.value {
                    LabelValue::Str(v) => proto::Label { key: l.key.0 as i64, str: v.0 as i64, num: 0, num_unit: 0 },
                    LabelValue::Num { value, unit } => {
                        proto::Label { key: l.key.0 as i64, str: 0, num: value, num_unit: unit.0 as i64 }
                    }
                })
                .collect(),
        })
        .collect();
    let head = proto::Head {
        sample_type: profile.sample_types.iter().map(vt).collect(),
        mapping: profile
            .mappings
            .iter()
            .map(|m| proto::Mapping {
                id: m.id,
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename: m.filename.0 as i64,
                build_id: m.build_id.0 as i64,
                has_functions: m.has_functions,
                has_filenames: m.has_filenames,
                has_line_numbers: m.has_line_numbers,
                has_inline_frames: m.has_inline_frames,
            })
            .collect(),
        location: profile
            .locations
            .iter()
            .map(|l| proto::Location {
                id: l.id,
                mapping_id: l.mapping.map_or(0, |m| profile.mapping(m).id),
                address: l.address,
                line: l
                    .lines
                    .iter()
                    .map(|ln| proto::Line {
                        function_id: profile.function(ln.function).id,
                        line: ln.line,
                        column: ln.column,
                    })
                    .collect(),
                is_folded: l.is_folded,
            })
            .collect(),
        function: profile
            .functions
            .iter()
            .map(|f| proto::Function {
                id: f.id,
                name: f.name.0 as i64,
                system_name: f.system_name.0 as i64,
                filename: f.filename.0 as i64,
                start_line: f.start_line,
            })
            .collect(),
        string_table: profile.strings.iter().map(|s| s.as_bytes().to_vec()).collect(),
        drop_frames: profile.drop_frames.0 as i64,
        keep_frames: profile.keep_frames.0 as i64,
        time_nanos: profile.time_nanos,
        duration_nanos: profile.duration_nanos,
        period_type: profile.period_type.as_ref().map(vt),
        period: profile.period,
        comment: profile.comments.iter().map(|c| c.0 as i64).collect(),
        default_sample_type: profile.default_sample_type.0 as i64,
        doc_url: profile.doc_url.0 as i64,
    };
    // Field order does not matter in protobuf: the head, then each sample as field 2.
    let mut out = head.encode_to_vec();
    for sample in &samples {
        prost::encoding::message::encode(2, sample, &mut out);
    }
    out
}
