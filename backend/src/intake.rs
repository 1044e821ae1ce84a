//! Filing a profile: core reads it within the memory budget (only profiles core can
//! read are kept), its type is checked against what the caller claims, and it is
//! stored as a session held by the caller. Used by uploads, captures and samply runs.

use std::collections::BTreeMap;

use bytes::Bytes;
use stacklens_core::analysis::summary::sample_count;
use stacklens_core::ProfileKind;

use crate::budget::{ParseFailure, Reservation};
use crate::records::refs::Holder;
use crate::records::series::{Entry, FiledBy, Series};
use crate::records::sessions::{NewSession, Stored};
use crate::records::{index, now_millis, RecordError, Tenant};
use crate::state::AppState;

/// What the caller says about a profile besides its bytes.
pub struct Intake {
    pub service: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The type the caller expects; detected from the profile when absent.
    pub claimed: Option<ProfileKind>,
    /// Who files a profile of a service into the service's time index; `None` keeps it out.
    pub filed_by: Option<FiledBy>,
    /// When the profile was taken (milliseconds since the epoch), for the time index;
    /// else the profile's own time, else now.
    pub at: Option<u64>,
    /// When the session's link is to expire (milliseconds since the epoch); never when `None`.
    pub expires: Option<u64>,
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

/// Parses and stores `bytes`: a new session, or the session these bytes already are,
/// now also held by `holder` (see [`index::file`]).
pub async fn file_profile(
    state: &AppState,
    tenant: &Tenant,
    bytes: Bytes,
    intake: Intake,
    holder: &Holder,
) -> Result<Stored, IntakeError> {
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
    holder: &Holder,
) -> Result<Stored, IntakeError> {
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
        expires: intake.expires,
    };
    let indexed = intake.filed_by.filter(|_| !new.service.is_empty()).map(|filed_by| {
        let series = Series { tenant: tenant.clone(), service: new.service.clone(), kind: profile_type };
        let own_time = u64::try_from(profile.time_nanos / 1_000_000).ok().filter(|&t| t > 0);
        let millis = intake.at.or(own_time).unwrap_or_else(now_millis);
        let (labels, sample_types) = (new.labels.clone(), new.sample_types.clone());
        let units = (0..profile.sample_types.len()).map(|i| profile.sample_type_unit(i).to_owned()).collect();
        let totals = (0..profile.sample_types.len()).map(|i| profile.total(i)).collect();
        let default_index = profile.default_sample_index();
        let entry = move |session_id| Entry {
            millis,
            session_id,
            labels,
            sample_types,
            units,
            totals,
            default_index,
            filed_by: Some(filed_by),
        };
        (series, entry)
    });
    // The model goes; the bytes stay counted while they are stored.
    let _bytes_held = parsed.keep(bytes.len() as u64);
    Ok(index::file(&state.store, tenant, bytes, new, holder, indexed).await?)
}
