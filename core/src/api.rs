//! The JSON the server answers and the page reads, defined once for both: a session
//! (a stored raw profile), a baseline, and a service's capture history.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::summary::FunctionShare;
use crate::ProfileKind;

/// What is stored beside each raw profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionRecord {
    pub id: String,
    pub service: String,
    pub profile_type: ProfileKind,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub sample_types: Vec<String>,
    pub sample_count: i64,
    pub duration_seconds: f64,
    pub created_at: String,
    pub size: u64,
    pub sha256: String,
    pub content_type: String,
    /// Whether an upload created the session: that upload holds it until it is deleted.
    #[serde(default)]
    pub created_by_upload: bool,
}

/// A session with the link that opens it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionResponse {
    #[serde(flatten)]
    pub record: SessionRecord,
    pub share_url: String,
}

/// A labelled session whose top functions later profiles are compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaselineRecord {
    pub baseline_id: String,
    pub baseline_label: String,
    pub profile_type: ProfileKind,
    pub session_id: String,
    /// The session's service: "latest" is per type and service.
    pub service: String,
    pub description: String,
    pub top_functions: Vec<FunctionShare>,
    pub created_at: String,
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
    pub id: String,
    pub service: String,
    pub profile_type: ProfileKind,
    pub started_at: String,
    /// For scheduled captures: the interval number it fills.
    pub slot: Option<u64>,
    pub status: String,
    pub session_id: Option<String>,
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
