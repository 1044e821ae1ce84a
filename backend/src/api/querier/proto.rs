//! The messages of Pyroscope's query API that stacklens answers (`querier.v1` and the
//! `types.v1` and `google.v1` messages it uses, as Pyroscope publishes them), as prost
//! derive structs that also read and write proto3's JSON mapping, as Connect speaks it:
//! fields in lowerCamelCase (the proto names are read too), 64-bit integers as strings.

use serde::{Deserialize, Serialize};
use stacklens_core::proto_json::{int64, int64s, optional_int64};

mod google;
pub use google::*;

// ---- types.v1

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct LabelPair {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProfileType {
    #[prost(string, tag = "1")]
    #[serde(rename = "ID")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "4")]
    #[serde(alias = "sample_type")]
    pub sample_type: String,
    #[prost(string, tag = "5")]
    #[serde(alias = "sample_unit")]
    pub sample_unit: String,
    #[prost(string, tag = "6")]
    #[serde(alias = "period_type")]
    pub period_type: String,
    #[prost(string, tag = "7")]
    #[serde(alias = "period_unit")]
    pub period_unit: String,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Labels {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Series {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    #[prost(message, repeated, tag = "2")]
    pub points: Vec<Point>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Point {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub timestamp: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct LabelValuesRequest {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, repeated, tag = "2")]
    pub matchers: Vec<String>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub end: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct LabelNamesRequest {
    #[prost(string, repeated, tag = "1")]
    pub matchers: Vec<String>,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub end: i64,
}

/// `LabelNamesResponse` and `LabelValuesResponse`: the same one field.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Names {
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
}

/// Selects stacks by call site or shapes them for Go's PGO; stacklens answers neither
/// (read so that a request that sets one is refused rather than answered unfiltered).
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StackTraceSelector {
    #[prost(message, repeated, tag = "1")]
    #[serde(alias = "call_site")]
    pub call_site: Vec<Location>,
    #[prost(message, optional, tag = "2")]
    #[serde(alias = "go_pgo")]
    pub go_pgo: Option<GoPgo>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Location {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GoPgo {
    #[prost(uint32, tag = "1")]
    #[serde(alias = "keep_locations")]
    pub keep_locations: u32,
    #[prost(bool, tag = "2")]
    #[serde(alias = "aggregate_callees")]
    pub aggregate_callees: bool,
}

// ---- querier.v1

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileTypesRequest {
    #[prost(int64, tag = "1")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "2")]
    #[serde(with = "int64")]
    pub end: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProfileTypesResponse {
    #[prost(message, repeated, tag = "1")]
    #[serde(alias = "profile_types")]
    pub profile_types: Vec<ProfileType>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SeriesRequest {
    #[prost(string, repeated, tag = "1")]
    pub matchers: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    #[serde(alias = "label_names")]
    pub label_names: Vec<String>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub end: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SeriesResponse {
    #[prost(message, repeated, tag = "2")]
    #[serde(alias = "labels_set")]
    pub labels_set: Vec<Labels>,
}

/// `querier.v1.ProfileFormat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
pub enum ProfileFormat {
    Unspecified = 0,
    Flamegraph = 1,
    Tree = 2,
    Dot = 3,
    Pprof = 4,
}

impl ProfileFormat {
    const NAMES: [&'static str; 5] = [
        "PROFILE_FORMAT_UNSPECIFIED",
        "PROFILE_FORMAT_FLAMEGRAPH",
        "PROFILE_FORMAT_TREE",
        "PROFILE_FORMAT_DOT",
        "PROFILE_FORMAT_PPROF",
    ];
}

/// An enum field in JSON: its value's name or its number.
mod profile_format {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::ProfileFormat;

    pub fn serialize<S: Serializer>(value: &i32, serializer: S) -> Result<S::Ok, S::Error> {
        let name = usize::try_from(*value).ok().and_then(|i| ProfileFormat::NAMES.get(i));
        match name {
            Some(name) => serializer.serialize_str(name),
            None => serializer.serialize_i32(*value),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i32, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Name(String),
            Number(i32),
        }
        match Given::deserialize(deserializer)? {
            Given::Number(n) => Ok(n),
            Given::Name(name) => ProfileFormat::NAMES
                .iter()
                .position(|n| *n == name)
                .map(|i| i as i32)
                .ok_or_else(|| serde::de::Error::custom(format!("'{name}' is not a querier.v1.ProfileFormat"))),
        }
    }
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SelectMergeStacktracesRequest {
    #[prost(string, tag = "1")]
    #[serde(rename = "profileTypeID", alias = "profile_typeID")]
    pub profile_type_id: String,
    #[prost(string, tag = "2")]
    #[serde(alias = "label_selector")]
    pub label_selector: String,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub end: i64,
    #[prost(int64, optional, tag = "5")]
    #[serde(with = "optional_int64", alias = "max_nodes")]
    pub max_nodes: Option<i64>,
    #[prost(enumeration = "ProfileFormat", tag = "6")]
    #[serde(with = "profile_format")]
    pub format: i32,
    #[prost(message, optional, tag = "7")]
    #[serde(alias = "stack_trace_selector")]
    pub stack_trace_selector: Option<StackTraceSelector>,
    #[prost(string, repeated, tag = "8")]
    #[serde(alias = "profile_id_selector")]
    pub profile_id_selector: Vec<String>,
    #[prost(string, repeated, tag = "10")]
    #[serde(alias = "trace_id_selector")]
    pub trace_id_selector: Vec<String>,
    #[prost(string, repeated, tag = "11")]
    #[serde(alias = "span_selector")]
    pub span_selector: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct SelectMergeStacktracesResponse {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flamegraph: Option<FlameGraph>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dot: String,
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pprof: Option<PprofProfile>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SelectMergeSpanProfileRequest {
    #[prost(string, tag = "1")]
    #[serde(rename = "profileTypeID", alias = "profile_typeID")]
    pub profile_type_id: String,
    #[prost(string, tag = "2")]
    #[serde(alias = "label_selector")]
    pub label_selector: String,
    #[prost(string, repeated, tag = "3")]
    #[serde(alias = "span_selector")]
    pub span_selector: Vec<String>,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "5")]
    #[serde(with = "int64")]
    pub end: i64,
    #[prost(int64, optional, tag = "6")]
    #[serde(with = "optional_int64", alias = "max_nodes")]
    pub max_nodes: Option<i64>,
    #[prost(enumeration = "ProfileFormat", tag = "7")]
    #[serde(with = "profile_format")]
    pub format: i32,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct SelectMergeSpanProfileResponse {
    #[prost(message, optional, tag = "1")]
    pub flamegraph: Option<FlameGraph>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct PprofProfile {
    #[prost(message, optional, tag = "1")]
    pub profile: Option<Profile>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct DiffRequest {
    #[prost(message, optional, tag = "1")]
    pub left: Option<SelectMergeStacktracesRequest>,
    #[prost(message, optional, tag = "2")]
    pub right: Option<SelectMergeStacktracesRequest>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct DiffResponse {
    #[prost(message, optional, tag = "1")]
    pub flamegraph: Option<FlameGraphDiff>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FlameGraph {
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
    #[prost(message, repeated, tag = "2")]
    pub levels: Vec<Level>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub total: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64", alias = "max_self")]
    pub max_self: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FlameGraphDiff {
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
    #[prost(message, repeated, tag = "2")]
    pub levels: Vec<Level>,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub total: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64", alias = "max_self")]
    pub max_self: i64,
    #[prost(int64, tag = "5")]
    #[serde(with = "int64", rename = "leftTicks")]
    pub left_ticks: i64,
    #[prost(int64, tag = "6")]
    #[serde(with = "int64", rename = "rightTicks")]
    pub right_ticks: i64,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Level {
    #[prost(int64, repeated, tag = "1")]
    #[serde(with = "int64s")]
    pub values: Vec<i64>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SelectMergeProfileRequest {
    #[prost(string, tag = "1")]
    #[serde(rename = "profileTypeID", alias = "profile_typeID")]
    pub profile_type_id: String,
    #[prost(string, tag = "2")]
    #[serde(alias = "label_selector")]
    pub label_selector: String,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub end: i64,
    #[prost(int64, optional, tag = "5")]
    #[serde(with = "optional_int64", alias = "max_nodes")]
    pub max_nodes: Option<i64>,
    #[prost(message, optional, tag = "6")]
    #[serde(alias = "stack_trace_selector")]
    pub stack_trace_selector: Option<StackTraceSelector>,
    #[prost(string, repeated, tag = "7")]
    #[serde(alias = "profile_id_selector")]
    pub profile_id_selector: Vec<String>,
    #[prost(string, repeated, tag = "8")]
    #[serde(alias = "trace_id_selector")]
    pub trace_id_selector: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SelectSeriesRequest {
    #[prost(string, tag = "1")]
    #[serde(rename = "profileTypeID", alias = "profile_typeID")]
    pub profile_type_id: String,
    #[prost(string, tag = "2")]
    #[serde(alias = "label_selector")]
    pub label_selector: String,
    #[prost(int64, tag = "3")]
    #[serde(with = "int64")]
    pub start: i64,
    #[prost(int64, tag = "4")]
    #[serde(with = "int64")]
    pub end: i64,
    #[prost(string, repeated, tag = "5")]
    #[serde(alias = "group_by")]
    pub group_by: Vec<String>,
    /// Seconds.
    #[prost(double, tag = "6")]
    pub step: f64,
    #[prost(enumeration = "Aggregation", optional, tag = "7")]
    #[serde(with = "aggregation")]
    pub aggregation: Option<i32>,
    #[prost(message, optional, tag = "8")]
    #[serde(alias = "stack_trace_selector")]
    pub stack_trace_selector: Option<StackTraceSelector>,
    #[prost(int64, optional, tag = "9")]
    #[serde(with = "optional_int64")]
    pub limit: Option<i64>,
}

/// `types.v1.TimeSeriesAggregationType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
pub enum Aggregation {
    Sum = 0,
    Average = 1,
}

mod aggregation {
    use serde::{Deserialize, Deserializer, Serializer};

    const NAMES: [&str; 2] = ["TIME_SERIES_AGGREGATION_TYPE_SUM", "TIME_SERIES_AGGREGATION_TYPE_AVERAGE"];

    pub fn serialize<S: Serializer>(value: &Option<i32>, serializer: S) -> Result<S::Ok, S::Error> {
        match value.and_then(|v| usize::try_from(v).ok()).and_then(|i| NAMES.get(i)) {
            Some(name) => serializer.serialize_str(name),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i32>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Name(String),
            Number(i32),
        }
        Option::<Given>::deserialize(deserializer)?
            .map(|given| match given {
                Given::Number(n) => Ok(n),
                Given::Name(name) => NAMES.iter().position(|n| *n == name).map(|i| i as i32).ok_or_else(|| {
                    serde::de::Error::custom(format!("'{name}' is not a types.v1.TimeSeriesAggregationType"))
                }),
            })
            .transpose()
    }
}

#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct SelectSeriesResponse {
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<Series>,
}
