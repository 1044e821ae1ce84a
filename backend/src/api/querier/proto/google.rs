//! `google.v1`, pprof's profile.proto as Pyroscope names its package, for
//! SelectMergeProfile's answer in JSON as well as protobuf.

use serde::{Deserialize, Serialize};
use stacklens_core::proto_json::{int64, int64s};

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<PprofLocation>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "7")]
    #[serde(with = "int64")]
    pub drop_frames: i64,
    #[prost(int64, tag = "8")]
    #[serde(with = "int64")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    #[serde(with = "int64")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    #[serde(with = "int64")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    #[serde(with = "int64")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    #[serde(with = "int64s")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    #[serde(with = "int64")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    #[serde(with = "int64", rename = "type")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    #[serde(with = "int64s")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    #[serde(with = "int64s")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Label {
    #[prost(int64, tag = "1")]
    #[serde(with = "int64")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    #[serde(with = "int64")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    #[serde(with = "int64")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    #[serde(with = "int64")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    #[serde(with = "int64")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    #[serde(with = "int64")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    #[serde(with = "int64")]
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

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PprofLocation {
    #[prost(uint64, tag = "1")]
    #[serde(with = "int64")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    #[serde(with = "int64")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    #[serde(with = "int64")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    #[serde(with = "int64")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub column: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    #[serde(with = "int64")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    #[serde(with = "int64")]
    pub start_line: i64,
}
