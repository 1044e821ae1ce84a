//! Filing a profile: core reads it within the memory budget (only profiles core can
//! read are kept), its type is checked against what the caller claims, and it is
//! stored as a session held by the caller. Used by uploads, captures and samply runs.

use std::collections::BTreeMap;

use bytes::Bytes;
use stacklens_core::analysis::summary::sample_count;
use stacklens_core::ProfileKind;

use crate::budget::{ParseFailure, Reservation};
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
    let held = state.budget.hold(bytes.len() as u64).await.map_err(ParseFailure::from)?;
    file_profile_held(state, tenant, bytes, held, intake, holder).await
}

/// [`file_profile`] of bytes already counted in the memory budget by `held` (a request
/// body reserved before it was read); they stay counted until they are stored.
pub async fn file_profile_held(
    state: &AppState,
    tenant: &Tenant,
    bytes: Bytes,
    held: Reservation,
    intake: Intake,
    holder: &str,
) -> Result<(bool, SessionRecord), IntakeError> {
    let parsed = state.budget.parse_held(vec![bytes.clone()], held).await?;
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
    // The model goes; the bytes stay counted while they are stored.
    let _bytes_held = parsed.keep(bytes.len() as u64);
    Ok(sessions::store(&state.store, tenant, bytes, new, holder).await?)
}
