//! Filing a profile: core reads it within the memory budget (only profiles core can
//! read are kept), its type is checked against what the caller claims, and it is
//! stored as a session held by the caller. Used by uploads, captures and samply runs.

use std::collections::BTreeMap;

use bytes::Bytes;
use stacklens_core::analysis::summary::sample_count;
use stacklens_core::ProfileKind;

use crate::budget::ParseFailure;
use crate::records::sessions::{self, NewSession, SessionRecord};
use crate::records::{RecordError, Tenant};
use crate::state::AppState;

/// What the caller says about a profile besides its bytes.
pub struct Intake {
    pub service: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The type the caller expects; detected from the profile when absent.
    pub claimed: Option<ProfileKind>,
}

#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("{0}")]
    Parse(#[from] ParseFailure),
    #[error("profileType '{claimed}' does not match the profile, which is {detected}")]
    TypeMismatch { claimed: ProfileKind, detected: ProfileKind },
    #[error("{0}")]
    Record(#[from] RecordError),
}

/// Parses and stores `bytes`; `true` when a new session was created (else the session
/// these bytes already are, now also held by `holder`).
pub async fn file_profile(
    state: &AppState,
    tenant: &Tenant,
    bytes: Bytes,
    intake: Intake,
    holder: &str,
) -> Result<(bool, SessionRecord), IntakeError> {
    let parsed = state.budget.parse(vec![bytes.clone()]).await?;
    let profile = &parsed.profiles[0];
    let detected = ProfileKind::of(profile);
    let profile_type = match intake.claimed {
        Some(claimed) if !detected.accepts(claimed) => return Err(IntakeError::TypeMismatch { claimed, detected }),
        Some(claimed) => claimed,
        None => detected,
    };
    let new = NewSession {
        service: intake.service,
        name: intake.name,
        labels: intake.labels,
        profile_type,
        sample_types: (0..profile.sample_types.len()).map(|i| profile.sample_type_name(i).to_owned()).collect(),
        sample_count: sample_count(profile),
        duration_seconds: profile.duration_nanos as f64 / 1e9,
    };
    drop(parsed);
    Ok(sessions::store(&state.store, tenant, bytes, new, holder).await?)
}
