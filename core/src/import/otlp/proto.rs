//! OpenTelemetry's profiles messages (`opentelemetry.proto.profiles.v1development` as of
//! opentelemetry-proto 1.10 and 1.11, and the collector's `ExportProfilesServiceRequest`)
//! written as prost derive structs, no `protoc` needed: decoded by the importer, encoded
//! by the exporter and the server's gRPC route. They also read OTLP/JSON (proto3's JSON
//! mapping with OTLP's exceptions: 64-bit integers as strings or numbers, trace and span
//! ids as hex).

use serde::{Deserialize, Deserializer};

use crate::proto_json::{integer, integers, optional_integer};

/// `ProfilesData`, and `ExportProfilesServiceRequest`: the same fields, so the same bytes.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProfilesData {
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
    #[prost(message, optional, tag = "2")]
    pub dictionary: Option<ProfilesDictionary>,
}

/// Tables every profile of a message indexes; entry 0 of each is its zero value.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProfilesDictionary {
    #[prost(message, repeated, tag = "1")]
    pub mapping_table: Vec<Mapping>,
    #[prost(message, repeated, tag = "2")]
    pub location_table: Vec<Location>,
    #[prost(message, repeated, tag = "3")]
    pub function_table: Vec<Function>,
    #[prost(message, repeated, tag = "4")]
    pub link_table: Vec<Link>,
    #[prost(string, repeated, tag = "5")]
    pub string_table: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    pub attribute_table: Vec<KeyValueAndUnit>,
    #[prost(message, repeated, tag = "7")]
    pub stack_table: Vec<Stack>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceProfiles {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScopeProfiles {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<Profile>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

/// One sample type's samples.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Profile {
    #[prost(message, optional, tag = "1")]
    pub sample_type: Option<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    #[prost(fixed64, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub time_unix_nano: u64,
    #[prost(uint64, tag = "4")]
    #[serde(deserialize_with = "integer")]
    pub duration_nano: u64,
    #[prost(message, optional, tag = "5")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "6")]
    #[serde(deserialize_with = "integer")]
    pub period: i64,
    #[prost(int32, repeated, tag = "11")]
    #[serde(deserialize_with = "integers")]
    pub attribute_indices: Vec<i32>,
}

#[derive(Clone, Copy, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ValueType {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub type_strindex: i32,
    #[prost(int32, tag = "2")]
    #[serde(deserialize_with = "integer")]
    pub unit_strindex: i32,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sample {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub stack_index: i32,
    #[prost(int32, repeated, tag = "2")]
    #[serde(deserialize_with = "integers")]
    pub attribute_indices: Vec<i32>,
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub link_index: i32,
    #[prost(int64, repeated, tag = "4")]
    #[serde(deserialize_with = "integers")]
    pub values: Vec<i64>,
    #[prost(fixed64, repeated, tag = "5")]
    #[serde(deserialize_with = "integers")]
    pub timestamps_unix_nano: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub memory_start: u64,
    #[prost(uint64, tag = "2")]
    #[serde(deserialize_with = "integer")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub file_offset: u64,
    #[prost(int32, tag = "4")]
    #[serde(deserialize_with = "integer")]
    pub filename_strindex: i32,
    #[prost(int32, repeated, tag = "5")]
    #[serde(deserialize_with = "integers")]
    pub attribute_indices: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Stack {
    /// Leaf first.
    #[prost(int32, repeated, tag = "1")]
    #[serde(deserialize_with = "integers")]
    pub location_indices: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Location {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub mapping_index: i32,
    #[prost(uint64, tag = "2")]
    #[serde(deserialize_with = "integer")]
    pub address: u64,
    /// Innermost inlined function first.
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<Line>,
    #[prost(int32, repeated, tag = "4")]
    #[serde(deserialize_with = "integers")]
    pub attribute_indices: Vec<i32>,
}

#[derive(Clone, Copy, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Line {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub function_index: i32,
    #[prost(int64, tag = "2")]
    #[serde(deserialize_with = "integer")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub column: i64,
}

#[derive(Clone, Copy, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Function {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub name_strindex: i32,
    #[prost(int32, tag = "2")]
    #[serde(deserialize_with = "integer")]
    pub system_name_strindex: i32,
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub filename_strindex: i32,
    #[prost(int64, tag = "4")]
    #[serde(deserialize_with = "integer")]
    pub start_line: i64,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Link {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(deserialize_with = "hex")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(deserialize_with = "hex")]
    pub span_id: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValueAndUnit {
    #[prost(int32, tag = "1")]
    #[serde(deserialize_with = "integer")]
    pub key_strindex: i32,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub unit_strindex: i32,
}

/// A resource's or scope's attribute: its key as text, or (1.10) in the string table.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
    #[prost(int32, tag = "3")]
    #[serde(deserialize_with = "integer")]
    pub key_strindex: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5, 6, 7, 8")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(message, tag = "5")]
        ArrayValue(super::ArrayValue),
        #[prost(message, tag = "6")]
        KvlistValue(super::KeyValueList),
        #[prost(bytes, tag = "7")]
        BytesValue(Vec<u8>),
        #[prost(int32, tag = "8")]
        StringValueStrindex(i32),
    }
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

/// What the collector's `ProfilesService/Export` answers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportProfilesPartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportProfilesPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_profiles: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `AnyValue` in JSON: an object with one of its oneof's members.
impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct Json {
            string_value: Option<String>,
            bool_value: Option<bool>,
            #[serde(deserialize_with = "optional_integer")]
            int_value: Option<i64>,
            double_value: Option<f64>,
            array_value: Option<ArrayValue>,
            kvlist_value: Option<KeyValueList>,
            #[serde(deserialize_with = "optional_integer")]
            string_value_strindex: Option<i32>,
        }
        use any_value::Value;
        let json = Json::deserialize(deserializer)?;
        let value = json
            .string_value
            .map(Value::StringValue)
            .or(json.bool_value.map(Value::BoolValue))
            .or(json.int_value.map(Value::IntValue))
            .or(json.double_value.map(Value::DoubleValue))
            .or(json.array_value.map(Value::ArrayValue))
            .or(json.kvlist_value.map(Value::KvlistValue))
            .or(json.string_value_strindex.map(Value::StringValueStrindex));
        Ok(AnyValue { value })
    }
}

/// Trace and span ids: OTLP/JSON writes them as hex, not as proto3's base64.
fn hex<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(deserializer)?;
    hex_bytes(&text).ok_or_else(|| serde::de::Error::custom(format!("id \"{text}\" is not hex")))
}

/// The bytes of a hex id (either case), `None` when it is not hex.
pub(crate) fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}
