//! How the budget parses its inputs: the plan of each (bytes it may inflate to, model it
//! may build), the measuring pass that keeps a small profile's inflated bytes, and the
//! parse that grows a plan when its model outgrows it.

use std::sync::Arc;

use bytes::Bytes;
use stacklens_core::import::{gzip_inside, is_gzip, twice_gzipped};
use stacklens_core::{ParseOptions, Profile};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{merge, Budget, BudgetError, ParseFailure, Shape, UNIT};

/// Inflated bytes kept from the measuring pass, per input, at least (when the budget
/// has room), so a small profile is inflated once.
pub(super) const KEEP_INFLATED: u64 = 256 * 1024;

/// Up to this much, a profile whose gzip trailer gives its inflated size keeps that
/// many bytes from the measuring pass (reserved first), so the parse does not inflate
/// it again: the second inflate of a 14 MB profile was a fifth of a diff's time. A
/// trailer may lie (it is the size modulo 2^32): past what it said, nothing is kept.
const KEEP_INFLATED_MAX: u64 = 64 << 20;

/// How many inflated bytes of `bytes` (gzip) the measuring pass may keep.
pub(super) fn keep_limit(bytes: &[u8]) -> u64 {
    let trailer = bytes
        .len()
        .checked_sub(4)
        .and_then(|at| bytes.get(at..))
        .map(|t| u64::from(u32::from_le_bytes(t.try_into().expect("four bytes"))));
    match trailer {
        Some(size) if size <= KEEP_INFLATED_MAX => size.max(KEEP_INFLATED),
        _ => KEEP_INFLATED,
    }
}

/// What the measuring task got to: the profiles, with the memory reserved for them
/// beyond what the caller held; or the plans to parse them by once memory is reserved.
pub(super) enum Attempt {
    Parsed { profiles: Vec<Profile>, permit: Option<OwnedSemaphorePermit> },
    Measured(Vec<Plan>),
}

/// How one input is parsed: the bytes it may inflate to and the model it may build
/// (core stops it there, see [`stacklens_core::ParseOptions::max_model_bytes`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    /// The input's own bytes, held while it is parsed.
    bytes: u64,
    inflated: u64,
    model: u64,
}

impl Plan {
    /// Memory reserved for parsing inputs by `plans`.
    pub(super) fn need(plans: &[Plan]) -> u64 {
        plans.iter().map(|p| p.bytes.saturating_add(p.model)).fold(0, u64::saturating_add)
    }

    fn options(&self) -> ParseOptions {
        ParseOptions { max_inflated_bytes: self.inflated.max(1), max_model_bytes: self.model }
    }
}

/// Parses `inputs` by their plans (from their inflated bytes where the measuring pass
/// `kept` them). A model that outgrows its plan (the input expands
/// past what its size suggested: a deep stack chain, a call graph's paths) stops the
/// parse, and the plans come back with that model's room doubled, to be reserved
/// before the next try; past the whole budget the work is refused.
pub(super) fn parse_planned(
    inputs: &[Bytes],
    kept: Vec<Option<Vec<u8>>>,
    mut plans: Vec<Plan>,
) -> Result<Result<Vec<Profile>, Vec<Plan>>, ParseFailure> {
    let mut profiles = Vec::with_capacity(inputs.len());
    for (i, (bytes, kept)) in inputs.iter().zip(kept).enumerate() {
        let options = plans[i].options();
        let parsed = match kept {
            Some(plain) => match gzip_inside(&plain) {
                Some(e) => Err(e),
                None if plain.is_empty() => Err(stacklens_core::Error::Empty),
                None => stacklens_core::parse_with(&plain, &options),
            },
            None => parse_within(bytes, &options),
        };
        match parsed {
            Ok(profile) => profiles.push(profile),
            Err(stacklens_core::Error::ModelTooLarge { .. }) => {
                drop(profiles);
                plans[i].model = plans[i].model.saturating_mul(2);
                return Ok(Err(plans));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Ok(profiles))
}

/// Measures `inputs` (refusing those past `cap` or the whole budget) and parses them at
/// once if the memory they need beyond `already` held can be had without waiting.
pub(super) fn measure_and_parse(
    inputs: &[Bytes],
    cap: u64,
    total: u64,
    already: u64,
    permits: &Arc<Semaphore>,
) -> Result<Attempt, ParseFailure> {
    let mut kept = Vec::with_capacity(inputs.len());
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut plans = Vec::with_capacity(inputs.len());
    for bytes in inputs {
        // Room for the inflated bytes is reserved before they are kept.
        let limit = keep_limit(bytes).min(cap);
        let keep = is_gzip(bytes).then(|| permits.clone().try_acquire_many_owned(Budget::units(limit)).ok()).flatten();
        let (shape, inflated) = Shape::measure(bytes, cap, if keep.is_some() { limit } else { 0 })?;
        if let (Some(k), Some(_)) = (keep, &inflated) {
            merge(&mut permit, k);
        }
        kept.push(inflated);
        plans.push(Plan {
            bytes: bytes.len() as u64,
            inflated: shape.bytes.saturating_add(1),
            model: shape.model_bytes(),
        });
    }
    let need = Plan::need(&plans);
    if need > total {
        return Err(BudgetError::OverBudget { need, budget: total }.into());
    }
    let reserved = already + permit.as_ref().map_or(0, |p| p.num_permits() as u64 * UNIT);
    let more = need.saturating_sub(reserved);
    if let Some(p) = permit.as_mut().filter(|_| more == 0) {
        // The room kept for inflated bytes may be more than the work needs.
        let beyond_held = need.saturating_sub(already).div_ceil(UNIT) as usize;
        drop(p.split(p.num_permits().saturating_sub(beyond_held)));
    }
    if more > 0 {
        match permits.clone().try_acquire_many_owned(Budget::units(more)) {
            Ok(p) => merge(&mut permit, p),
            // Memory is short: give back what the kept bytes held, and wait in the queue.
            Err(_) => return Ok(Attempt::Measured(plans)),
        }
    }
    Ok(match parse_planned(inputs, kept, plans)? {
        Ok(profiles) => Attempt::Parsed { profiles, permit },
        // Given back: the grown plans are reserved in the queue.
        Err(grown) => Attempt::Measured(grown),
    })
}

/// Core's parse of `bytes` within `options` (their measured inflated size, the model
/// reserved).
fn parse_within(bytes: &[u8], options: &ParseOptions) -> Result<Profile, stacklens_core::Error> {
    match twice_gzipped(bytes) {
        Some(e) => Err(e),
        None => stacklens_core::parse_with(bytes, options),
    }
}
