//! The JSON the server answers and the page reads, defined once for both: a session
//! (a stored raw profile), an encrypted blob, a baseline, a service's capture history,
//! the time-range API's series, labels, services, function histories and range specs,
//! and the bodies of a baseline's creation and of a diff.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::diff::{FunctionDelta, Mover};
use crate::analysis::goroutines::GoroutineGroup;
use crate::analysis::summary::FunctionShare;
use crate::ids::{BaselineId, BlobId, CaptureId, SessionId};
use crate::timestamp::Timestamp;
use crate::ProfileKind;

/// What is stored beside each raw profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionRecord {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: SessionId,
    pub service: String,
    pub profile_type: ProfileKind,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub sample_types: Vec<String>,
    pub sample_count: i64,
    pub duration_seconds: f64,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub created_at: Timestamp,
    pub size: u64,
    pub sha256: String,
    pub content_type: String,
    /// Whether an upload created the session: that upload holds it until it is deleted.
    #[serde(default)]
    pub created_by_upload: bool,
    /// When the link expires (RFC 3339): the latest expiry any upload of these bytes asked
    /// for; absent when it never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub expires_at: Option<Timestamp>,
}

/// A session with the link that opens it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionResponse {
    #[serde(flatten)]
    pub record: SessionRecord,
    pub share_url: String,
    /// Uploads only: revokes the link without a credential (`DELETE` with
    /// `X-Stacklens-Delete-Token`); the server keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_token: Option<String>,
}

/// A stored encrypted blob: the server keeps its bytes exactly as sent and never reads them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlobResponse {
    /// 128 random bits: the link is a capability.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: BlobId,
    /// Where its bytes are read (`GET`, no credential needed).
    pub url: String,
    /// Revokes the link without a credential (`DELETE` with `X-Stacklens-Delete-Token`);
    /// the server keeps only its hash.
    pub delete_token: String,
    pub size: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub created_at: Timestamp,
    /// When the link expires (RFC 3339); absent when it never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub expires_at: Option<Timestamp>,
}

/// A labelled session whose top functions later profiles are compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineRecord {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub baseline_id: BaselineId,
    pub baseline_label: String,
    pub profile_type: ProfileKind,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub session_id: SessionId,
    /// The session's service: "latest" is per type and service.
    pub service: String,
    pub description: String,
    pub top_functions: Vec<FunctionShare>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub created_at: Timestamp,
    pub tags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineResponse {
    #[serde(flatten)]
    pub record: BaselineRecord,
    /// The newest baseline of its type and service.
    pub is_latest: bool,
    pub share_url: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineList {
    /// Newest first.
    pub baselines: Vec<BaselineResponse>,
}

/// One capture in a service's history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryPoint {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: CaptureId,
    pub service: String,
    pub profile_type: ProfileKind,
    pub started_at: String,
    /// For scheduled captures: the interval number it fills.
    pub slot: Option<u64>,
    pub status: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub session_id: Option<SessionId>,
    pub sample_count: Option<i64>,
    /// The profile's total in `unit` (cpu: nanoseconds; memory: bytes; …).
    pub total: Option<i64>,
    pub unit: Option<String>,
    pub top_functions: Vec<FunctionShare>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    /// Oldest first.
    pub captures: Vec<HistoryPoint>,
}

/// One point of a series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesPoint {
    /// The step's start (milliseconds since the epoch).
    pub t: u64,
    /// The summed totals of the step's profiles.
    pub value: i64,
    /// Profiles in the step.
    pub profiles: usize,
}

/// The points of one label value (or of everything, without groupBy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesLine {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<SeriesPoint>,
}

/// Totals per step over a range (`GET /api/v1/profiling/series`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesResponse {
    pub from: String,
    pub to: String,
    pub step_seconds: u64,
    pub sample_type: String,
    pub unit: String,
    pub series: Vec<SeriesLine>,
    /// Objects the server fetched from its store to answer, and listings it made.
    #[serde(default)]
    pub objects_read: u64,
    #[serde(default)]
    pub listings: u64,
}

/// A label key or value, and how many profiles of the range carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LabelCount {
    pub name: String,
    pub profiles: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LabelList {
    pub labels: Vec<LabelCount>,
}

/// A service and profile type with stored profiles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesName {
    pub service: String,
    pub profile_type: ProfileKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesList {
    pub series: Vec<SeriesName>,
}

/// A function's values in one step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionPoint {
    /// The step's start (milliseconds since the epoch).
    pub t: u64,
    /// Self (flat) and total (cum) values of the function, summed over the step's profiles.
    #[serde(rename = "self")]
    pub flat: i64,
    pub cum: i64,
    /// The step's profiles' total.
    pub total: i64,
    /// Self and cum as % of the total.
    pub self_share_pct: f64,
    pub cum_share_pct: f64,
    pub profiles: usize,
}

/// A function's trend over a range (`GET /api/v1/profiling/functions/{name}/history`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionHistory {
    pub function: String,
    pub from: String,
    pub to: String,
    pub step_seconds: u64,
    pub sample_type: String,
    pub unit: String,
    pub points: Vec<FunctionPoint>,
}

/// Saves a session as a baseline (`POST /api/v1/profiling/baselines`), field for field
/// as the seed's CreateBaseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateBaseline {
    pub label: String,
    pub session_id: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub profile_type: ProfileTypeName,
    #[serde(default)]
    pub description: String,
    /// Without them the server computes the session's top functions by self.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_functions: Vec<FunctionShare>,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// A diff (`POST /api/v1/profiling/diff`): of two stored sessions by id, or of two time
/// ranges of stored profiles, each merged. Absent fields are left out of the JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiffRequest {
    /// A session id, or a baseline or capture id standing for its session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_id: Option<String>,
    /// Or two time ranges of stored profiles, each merged (instead of the ids).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<RangeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<RangeSpec>,
    /// cpu, memory, alloc, block, mutex or goroutine, or Go's endpoint names (heap, allocs,
    /// profile); for ranges, the ranges' profileType by default.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none", deserialize_with = "kind_by_name")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub kind: Option<ProfileKind>,
    /// Scale the compared profile to the base's total before subtracting (pprof's `-normalize`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub normalize: bool,
    /// Changes below this % of the base total are "unchanged" (default 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_threshold_pct: Option<f64>,
}

/// A profile kind as people write it: any case, and Go's endpoint names ([`ProfileKind::parse`]).
fn kind_by_name<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<ProfileKind>, D::Error> {
    let name = String::deserialize(deserializer)?;
    let known = || ProfileKind::ALL.map(ProfileKind::as_str).join(", ");
    ProfileKind::parse(&name)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown profileType '{name}'; known: {}", known())))
}

/// A time range of stored profiles, as one side of a range diff.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RangeSpec {
    pub service: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub profile_type: ProfileTypeName,
    /// RFC 3339, epoch seconds or ms, now, now-1h (a string or a number); default: to - 1h.
    #[serde(default, deserialize_with = "time_bound_or_absent")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub from: Option<TimeBound>,
    #[serde(default, deserialize_with = "time_bound_or_absent")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub to: Option<TimeBound>,
    /// Labels the profiles must all have.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A profile type as a client names it: one of [`ProfileKind`]'s names or Go's endpoint
/// names (`heap`, `allocs`, `profile`), in any case. Kept as written, so an unknown name
/// is refused by the handler as an unknown profile type (`InvalidProfileType`), not as
/// a bad body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProfileTypeName(pub String);

/// One end of a time range as the client wrote it: text (RFC 3339, `now`, `now-1h`,
/// epoch seconds or ms) or a number (epoch seconds or ms). The server reads both from
/// their text, so a number that is not a whole one is refused as that text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TimeBound {
    Text(String),
    Number(serde_json::Number),
}

impl std::fmt::Display for TimeBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeBound::Text(text) => f.write_str(text),
            TimeBound::Number(number) => write!(f, "{number}"),
        }
    }
}

impl From<u64> for TimeBound {
    fn from(millis: u64) -> Self {
        TimeBound::Number(millis.into())
    }
}

/// A `from` or `to` that is neither text nor a number (`null`, `true`, an object) was
/// always read as absent: the range's default.
fn time_bound_or_absent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<TimeBound>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(text) => Some(TimeBound::Text(text)),
        serde_json::Value::Number(number) => Some(TimeBound::Number(number)),
        _ => None,
    })
}

/// A goroutine stack in the later snapshot that the earlier one lacks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewStack {
    pub count: u64,
    pub state: String,
    pub wait_reason: Option<String>,
    /// Function names, leaf first.
    pub frames: Vec<String>,
    pub created_by: Option<String>,
}

impl From<&GoroutineGroup> for NewStack {
    fn from(g: &GoroutineGroup) -> Self {
        NewStack {
            count: g.count,
            state: g.state.clone(),
            wait_reason: g.wait_reason.clone(),
            frames: g.frames.clone(),
            created_by: g.created_by.clone(),
        }
    }
}

/// A merged range, as a diff reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RangeEcho {
    pub service: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub profile_type: ProfileKind,
    pub from: String,
    pub to: String,
    pub labels: BTreeMap<String, String>,
    pub profile_count: usize,
    /// Objects the server fetched from its store to merge the range, and listings it made.
    #[serde(default)]
    pub objects_read: u64,
    #[serde(default)]
    pub listings: u64,
}

/// For `type: goroutine`: newStacks, growthCount, goroutineGrowthRate; for the other
/// types: sampleType, unit, regressions, improvements, unchanged, overallDelta (%).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiffResponse {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_session_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub compare_session_id: String,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_stacks: Option<Vec<NewStack>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub growth_count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goroutine_growth_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regressions: Option<Vec<FunctionDelta>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub improvements: Option<Vec<FunctionDelta>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overall_delta: Option<f64>,
    /// For ranges: the merged ranges, and the functions whose self share moved most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_range: Option<RangeEcho>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare_range: Option<RangeEcho>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_movers: Option<Vec<Mover>>,
}
