//! A profile in a few numbers, as stored beside it and returned by the API: sample
//! count and the functions with the largest self value.

use serde::{Deserialize, Serialize};

pub use super::frames::package_of;
use super::query::Prepared;
use super::top::{top, TopOptions};
use crate::units::percentage_value;
use crate::{Profile, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionShare {
    pub func_name: String,
    pub package: String,
    /// Self (flat) value as a percentage of the total.
    pub self_pct: f64,
    pub cumulative_pct: f64,
    /// Self value in the profile's count sample type (samples, objects,
    /// contentions, goroutines), or in its default type when it has none.
    pub sample_count: i64,
}

/// The sample type counting events (unit "count"), if the profile has one.
fn count_index(profile: &Profile) -> Option<usize> {
    (0..profile.sample_types.len()).find(|&i| profile.sample_type_unit(i) == "count")
}

/// Number of samples: the total of the count sample type, else the number of records.
pub fn sample_count(profile: &Profile) -> i64 {
    count_index(profile).map_or(profile.samples.len() as i64, |i| profile.total(i))
}

/// The `n` functions with the largest self value in the prepared sample type.
pub fn top_functions(prepared: &Prepared, n: usize) -> Result<Vec<FunctionShare>> {
    let report = top(prepared, &TopOptions { node_count: Some(n), ..TopOptions::default() })?;
    let counts = match count_index(prepared.profile()) {
        Some(i) if i != prepared.sample_index => {
            let all = top(&prepared.with_sample(i), &TopOptions::default())?;
            Some(all.functions.into_iter().map(|r| (r.name, r.flat)).collect::<std::collections::HashMap<_, _>>())
        }
        _ => None,
    };
    Ok(report
        .functions
        .into_iter()
        .map(|row| FunctionShare {
            package: package_of(&row.name).to_owned(),
            self_pct: percentage_value(row.flat, report.total),
            cumulative_pct: percentage_value(row.cum, report.total),
            sample_count: counts.as_ref().map_or(row.flat, |c| c.get(&row.name).copied().unwrap_or(0)),
            func_name: row.name,
        })
        .collect())
}

/// One sample type of a profile, with its whole total.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleTypeMeta {
    pub name: String,
    pub unit: String,
    pub total: i64,
    /// The type pprof shows first.
    pub default: bool,
}

/// A sampling period: one sample every `value` `unit` of `kind` (10,000,000 nanoseconds of cpu).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Period {
    pub value: i64,
    pub kind: String,
    pub unit: String,
}

/// What a profile is, for the page's header: where it came from, what it measures and
/// how much of it there is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileMeta {
    /// The format it was read from ("pprof", "Linux perf script", …).
    pub format: String,
    /// What made it, when the profile says: its comments, else its main binary.
    pub producer: Option<String>,
    pub sample_types: Vec<SampleTypeMeta>,
    /// When it was taken (nanoseconds since the Unix epoch) and for how long; 0 when unknown.
    pub time_nanos: i64,
    pub duration_nanos: i64,
    /// The sampling period, when known.
    pub period: Option<Period>,
    pub sample_count: i64,
    /// Sample records, which may aggregate many samples each.
    pub record_count: usize,
    pub function_count: usize,
    pub location_count: usize,
}

/// The profile's [`ProfileMeta`].
pub fn meta(profile: &Profile) -> ProfileMeta {
    let default = profile.default_sample_index();
    let sample_types = (0..profile.sample_types.len())
        .map(|i| SampleTypeMeta {
            name: profile.sample_type_name(i).to_owned(),
            unit: profile.sample_type_unit(i).to_owned(),
            total: profile.total(i),
            default: i == default,
        })
        .collect();
    let comments: Vec<&str> = profile.comments.iter().map(|&c| profile.strings.get(c)).collect();
    let main_binary = profile.mappings.first().map(|m| profile.strings.get(m.filename)).filter(|f| !f.is_empty());
    let producer = if comments.is_empty() { main_binary.map(str::to_owned) } else { Some(comments.join("; ")) };
    let period = profile.period_type.filter(|_| profile.period > 0).map(|t| Period {
        value: profile.period,
        kind: profile.strings.get(t.kind).to_owned(),
        unit: profile.strings.get(t.unit).to_owned(),
    });
    ProfileMeta {
        format: profile.source.label().to_owned(),
        producer,
        sample_types,
        time_nanos: profile.time_nanos,
        duration_nanos: profile.duration_nanos,
        period,
        sample_count: sample_count(profile),
        record_count: profile.samples.len(),
        function_count: profile.functions.len(),
        location_count: profile.locations.len(),
    }
}
