//! OTLP profiles output: the model as one `ProfilesData` message (protobuf), with the
//! types the importer reads (`import::otlp::proto`). One OTLP profile per sample type,
//! each with every sample in the same order (so a reader joins them again), the chosen
//! type first; labels become sample attributes, a `trace_id` and `span_id` pair a link;
//! sample times become timestamps.

use std::collections::HashMap;

use prost::Message;

use crate::import::otlp::proto::{self, any_value::Value as Any, hex_bytes, AnyValue};
use crate::model::{LabelValue, Profile, StrId};

/// The mapping attribute a build id is written under (what the importer reads first).
const BUILD_ID_KEY: &str = "process.executable.build_id.gnu";

/// `profile` as OTLP protobuf, sample type `first` leading.
pub fn write(profile: &Profile, first: usize) -> Vec<u8> {
    data(profile, first).encode_to_vec()
}

/// The message [`write`] encodes.
pub fn data(profile: &Profile, first: usize) -> proto::ProfilesData {
    let mut strings: Vec<String> = profile.strings.iter().map(str::to_owned).collect();
    // Text to its index: the profile's strings (first of equal ones), then those added.
    let mut added: HashMap<String, i32> = HashMap::with_capacity(strings.len());
    for (i, s) in strings.iter().enumerate().rev() {
        added.insert(s.clone(), i as i32);
    }
    let mut string = |text: &str, strings: &mut Vec<String>| -> i32 {
        *added.entry(text.to_owned()).or_insert_with(|| {
            strings.push(text.to_owned());
            strings.len() as i32 - 1
        })
    };
    let index = |id: StrId| id.0 as i32;
    let mut d = proto::ProfilesDictionary::default();
    // Entry 0 of every table is its zero value.
    d.attribute_table.push(Default::default());
    d.mapping_table.push(Default::default());
    for m in &profile.mappings {
        let mut attribute_indices = Vec::new();
        if m.build_id.0 != 0 {
            let key = string(BUILD_ID_KEY, &mut strings);
            d.attribute_table.push(proto::KeyValueAndUnit {
                key_strindex: key,
                value: Some(AnyValue { value: Some(Any::StringValueStrindex(index(m.build_id))) }),
                unit_strindex: 0,
            });
            attribute_indices.push(d.attribute_table.len() as i32 - 1);
        }
        d.mapping_table.push(proto::Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename_strindex: index(m.filename),
            attribute_indices,
        });
    }
    d.function_table.push(Default::default());
    d.function_table.extend(profile.functions.iter().map(|f| proto::Function {
        name_strindex: index(f.name),
        system_name_strindex: index(f.system_name),
        filename_strindex: index(f.filename),
        start_line: f.start_line,
    }));
    d.location_table.push(Default::default());
    d.location_table.extend(profile.locations.iter().map(|l| {
        proto::Location {
            mapping_index: l.mapping.map_or(0, |m| m.0 as i32 + 1),
            address: l.address,
            lines: l
                .lines
                .iter()
                .map(|line| proto::Line {
                    function_index: line.function.0 as i32 + 1,
                    line: line.line,
                    column: line.column,
                })
                .collect(),
            attribute_indices: Vec::new(),
        }
    }));
    d.link_table.push(proto::Link { trace_id: vec![0; 16], span_id: vec![0; 8] });
    d.stack_table.push(Default::default());
    let mut stacks: HashMap<Vec<i32>, i32> = HashMap::new();
    let mut attributes: HashMap<(i32, Option<i64>, i32, i32), i32> = HashMap::new();
    let mut links: HashMap<(Vec<u8>, Vec<u8>), i32> = HashMap::new();
    // Each sample's stack, attributes and link, shared by the profiles of every type.
    let mut shapes = Vec::with_capacity(profile.samples.len());
    for sample in profile.samples.iter() {
        let locations: Vec<i32> = sample.locations.iter().map(|l| l.0 as i32 + 1).collect();
        let next = stacks.len() as i32 + 1;
        let stack_index = *stacks.entry(locations.clone()).or_insert_with(|| {
            d.stack_table.push(proto::Stack { location_indices: locations });
            next
        });
        let id = |key: &str| {
            sample.labels.iter().find_map(|l| match l.value {
                LabelValue::Str(v) if profile.str(l.key) == key => hex_bytes(profile.str(v)),
                _ => None,
            })
        };
        let link = match (id("trace_id"), id("span_id")) {
            (Some(trace), Some(span)) if trace.len() == 16 && span.len() == 8 => Some((trace, span)),
            _ => None,
        };
        let mut attribute_indices = Vec::with_capacity(sample.labels.len());
        for l in sample.labels.iter() {
            if link.is_some() && matches!(profile.str(l.key), "trace_id" | "span_id") {
                continue;
            }
            let key = match l.value {
                LabelValue::Str(v) => (index(l.key), None, index(v), 0),
                LabelValue::Num { value, unit } => (index(l.key), Some(value), 0, index(unit)),
            };
            let next = d.attribute_table.len() as i32;
            attribute_indices.push(*attributes.entry(key).or_insert_with(|| {
                let value = match key.1 {
                    Some(n) => Any::IntValue(n),
                    None => Any::StringValueStrindex(key.2),
                };
                d.attribute_table.push(proto::KeyValueAndUnit {
                    key_strindex: key.0,
                    value: Some(AnyValue { value: Some(value) }),
                    unit_strindex: key.3,
                });
                next
            }));
        }
        let link_index = link.map_or(0, |(trace, span)| {
            let next = d.link_table.len() as i32;
            *links.entry((trace.clone(), span.clone())).or_insert_with(|| {
                d.link_table.push(proto::Link { trace_id: trace, span_id: span });
                next
            })
        });
        shapes.push((stack_index, attribute_indices, link_index));
    }
    let value_type =
        |t: crate::model::ValueType| proto::ValueType { type_strindex: index(t.kind), unit_strindex: index(t.unit) };
    let mut order: Vec<usize> = (0..profile.sample_types.len()).collect();
    order.retain(|&i| i != first);
    order.insert(0, first);
    let profiles = order
        .into_iter()
        .map(|i| proto::Profile {
            sample_type: Some(value_type(profile.sample_types[i])),
            samples: profile
                .samples
                .iter()
                .zip(&shapes)
                .enumerate()
                .map(|(k, (sample, (stack_index, attribute_indices, link_index)))| proto::Sample {
                    stack_index: *stack_index,
                    attribute_indices: attribute_indices.clone(),
                    link_index: *link_index,
                    values: vec![sample.values[i]],
                    timestamps_unix_nano: profile
                        .sample_times
                        .get(k)
                        .map(|t| vec![profile.time_nanos.saturating_add(t.start).max(0) as u64])
                        .unwrap_or_default(),
                })
                .collect(),
            time_unix_nano: profile.time_nanos.max(0) as u64,
            duration_nano: profile.duration_nanos.max(0) as u64,
            period_type: profile.period_type.map(value_type),
            period: profile.period,
            attribute_indices: Vec::new(),
        })
        .collect();
    d.string_table = strings;
    proto::ProfilesData {
        resource_profiles: vec![proto::ResourceProfiles {
            resource: None,
            scope_profiles: vec![proto::ScopeProfiles {
                scope: Some(proto::InstrumentationScope { name: "stacklens".into(), version: String::new() }),
                profiles,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(d),
    }
}
