//! pprof protobuf output: the model encoded as google/pprof's `profile.proto` with
//! prost, gzipped as `go tool pprof` and every pprof consumer expect.

use std::io::Write;

use prost::Message;

use crate::model::{LabelValue, Profile, ValueType};

/// `profile.proto`, written as prost derive structs (no `protoc` needed), for encoding.
mod proto {
    /// Everything but the samples, which are encoded one by one after it.
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

/// Encodes a model profile as pprof protobuf (uncompressed).
pub fn encode(profile: &Profile) -> Vec<u8> {
    let vt = |v: &ValueType| proto::ValueType { r#type: v.kind.0 as i64, unit: v.unit.0 as i64 };
    let samples: Vec<proto::Sample> = profile
        .samples
        .iter()
        .map(|s| proto::Sample {
            location_id: s.locations.iter().map(|l| profile.location(*l).id).collect(),
            value: s.values.to_vec(),
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

/// Encodes a model profile as a gzipped pprof file, what `go tool pprof` reads.
pub fn write(profile: &Profile) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&encode(profile)).expect("writing to memory cannot fail");
    gz.finish().expect("writing to memory cannot fail")
}
