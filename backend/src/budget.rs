//! The memory budget for parse and analysis work (`--memory-budget`). Each piece of
//! work reserves what it will hold at its peak before it starts: the bytes it read
//! plus the model core builds from the inflated profile. Bytes are counted from
//! before they are read (a request body by its announced length, a stored profile by
//! its size) until they are parsed and stored, and bytes waiting for a parse take at
//! most half the budget, so the parses they wait for always find room. Work that does
//! not fit waits in a bounded queue; past the queue, or after waiting too long, it is
//! refused as busy. A gzip body is measured by inflating it once, keeping the output only
//! up to 256 KiB (counted in the budget first) so that a small profile is not inflated
//! again by its parse: a bomb costs CPU up to the inflate cap but never memory.
//!
//! The budget counts what core allocates; [`tune_allocator`] keeps glibc from holding
//! on to what it freed, so the process's resident memory follows the count.

mod memory;
mod plan;
mod shape;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stacklens_core::Profile;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use memory::{default_total, tune_allocator};
use plan::{measure_and_parse, parse_planned, Attempt, Plan};
pub use shape::Shape;

/// What core holds at its peak while it parses a profile and analyses it, from the
/// profile's shape (see [`Shape`]). Measured as the growth of a debug server's peak
/// resident memory over its idle peak, one operation per fresh server (the large rows
/// are `tests/memory.rs`), with the profile's bytes included:
///
/// | profile (inflated size; samples, locations, location ids) | upload (parse) | baseline (parse, top) | reserved |
/// | --- | --- | --- | --- |
/// | large CPU (22.0 MB; 247,410, 155,185, 6,158,088) | 150 MB | 151 MB | 241 MB |
/// | 1,000,000 samples of 3 frames (14.0 MB; 1,000,000, 58, 3,000,000) | 166 MB | 168 MB | 316 MB |
/// | 2,000,000 samples of 1 frame (16.0 MB; 2,000,000, 1, 2,000,000) | 314 MB | 316-471 MB | 544 MB |
/// | goroutine dump, text (21.1 MB) | 30 MB | 56 MB (analysis) | 190 MB |
///
/// A single factor per inflated byte (8, before) undercounts sample-heavy profiles
/// (the 2,000,000 samples take 20 bytes per byte) and overcounts text. So a pprof model
/// costs 2 bytes per inflated byte (the inflated copy, strings), 240 per sample, 160 per
/// location and 16 per location id; text formats cost at most 3 bytes per byte (8
/// reserved), JSON documents up to about 20 (24 reserved). A diff is its two parses:
/// the API's diffs compare functions, not stacks: a diff of the large profile with
/// itself grew the peak by 276 MB (482 MB reserved), where naming every frame of every
/// distinct stack took it to 655 MB.
///
/// Those prices are an estimate from the input; core counts what it builds as it builds
/// it, at the same prices per sample and per frame ([`stacklens_core::import::Room`]),
/// and stops where the reservation ends: a small input that expands (a Firefox sample
/// walking a deep stack chain, a call graph unfolding) then reserves more, up to the
/// whole budget, and is refused past it (see [`Budget::parse_held`]).
pub mod cost {
    pub const PPROF_PER_BYTE: u64 = 2;
    pub const PER_SAMPLE: u64 = stacklens_core::import::SAMPLE_BYTES;
    pub const PER_LOCATION: u64 = 160;
    pub const PER_LOCATION_ID: u64 = stacklens_core::import::FRAME_BYTES;
    pub const TEXT_PER_BYTE: u64 = 8;
    pub const JSON_PER_BYTE: u64 = 24;
}

/// Reservations are counted in KiB, so the semaphore's count fits a u32.
const UNIT: u64 = 1024;

#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("the profile inflates to more than {cap} bytes, the server's inflate cap")]
    InflatesTooLarge { cap: u64 },
    #[error("this work needs about {need} bytes, more than the server's whole memory budget of {budget} bytes")]
    OverBudget { need: u64, budget: u64 },
    #[error("the server is busy with other profiles; try again in {retry_after_secs} s")]
    Busy { retry_after_secs: u64 },
}

/// Why a profile could not be read within the budget.
#[derive(Debug, thiserror::Error)]
pub enum ParseFailure {
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Core(#[from] stacklens_core::Error),
    #[error("the parse stopped: {0}")]
    Stopped(String),
}

pub struct Budget {
    permits: Arc<Semaphore>,
    /// Bytes held while they wait for their parse (request bodies, stored profiles read
    /// for analysis) may take at most half the budget, so parses always find room.
    holding: Arc<Semaphore>,
    total: u64,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
    /// Largest inflated size accepted.
    pub inflate_cap: u64,
}

/// Memory held for a piece of work; given back when dropped.
#[derive(Debug, Default)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    /// This reservation's share of the holding half, while its bytes wait for a parse.
    holding: Option<OwnedSemaphorePermit>,
    /// Until when the work may wait for memory, all of its waits together.
    deadline: Option<tokio::time::Instant>,
}

impl Reservation {
    /// Bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64 * UNIT)
    }

    /// Adds `permit`'s memory to the reservation.
    fn add(&mut self, permit: Option<OwnedSemaphorePermit>) {
        if let Some(permit) = permit {
            merge(&mut self.permit, permit);
        }
    }

    /// Splits off `bytes` of the reservation (as much as it holds) for work that takes
    /// those bytes over: a pushed profile cut from its request's body is parsed within
    /// the body's reservation, not a second one that could wait for the first.
    pub fn split(&mut self, bytes: u64) -> Reservation {
        let units = bytes.div_ceil(UNIT) as usize;
        let permit = self.permit.as_mut().and_then(|p| p.split(units.min(p.num_permits())));
        Reservation { permit, holding: None, deadline: self.deadline }
    }

    /// Keeps `bytes` of the reservation and gives the rest back.
    fn shrink_to(&mut self, bytes: u64) {
        let keep = bytes.div_ceil(UNIT) as usize;
        if let Some(permit) = &mut self.permit {
            let extra = permit.num_permits().saturating_sub(keep.max(1));
            drop(permit.split(extra));
        }
    }
}

/// Profiles read within the budget; they hold their reservation until dropped.
pub struct Parsed {
    pub profiles: Vec<Profile>,
    reserved: Reservation,
}

impl Parsed {
    /// Drops the profiles, keeping only `bytes` of the reservation (the raw bytes the
    /// caller still holds, e.g. while it stores them).
    pub fn keep(self, bytes: u64) -> Reservation {
        let Parsed { profiles, mut reserved } = self;
        drop(profiles);
        reserved.shrink_to(bytes);
        reserved
    }

    /// The reservation the profiles are held in, for work that grows them (their
    /// symbolization's debug files).
    pub fn reserved(&mut self) -> &mut Reservation {
        &mut self.reserved
    }
}

impl Budget {
    pub fn new(total: u64, inflate_cap: u64, max_waiting: usize, max_wait: Duration) -> Self {
        let units = (total / UNIT).clamp(1, u64::from(u32::MAX)) as usize;
        Budget {
            permits: Arc::new(Semaphore::new(units)),
            holding: Arc::new(Semaphore::new((units / 2).max(1))),
            total: units as u64 * UNIT,
            waiting: AtomicUsize::new(0),
            max_waiting,
            max_wait,
            inflate_cap,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    fn busy(&self) -> BudgetError {
        BudgetError::Busy { retry_after_secs: self.max_wait.as_secs().clamp(1, 30) }
    }

    /// `units` of `semaphore`, waiting in the queue until `deadline` if need be.
    async fn acquire(
        &self,
        semaphore: &Arc<Semaphore>,
        units: u32,
        deadline: tokio::time::Instant,
    ) -> Result<OwnedSemaphorePermit, BudgetError> {
        if let Ok(permit) = semaphore.clone().try_acquire_many_owned(units) {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_waiting {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(self.busy());
        }
        let acquired = tokio::time::timeout_at(deadline, semaphore.clone().acquire_many_owned(units)).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match acquired {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(self.busy()),
        }
    }

    fn units(bytes: u64) -> u32 {
        bytes.div_ceil(UNIT).max(1).min(u64::from(u32::MAX)) as u32
    }

    /// Holds `bytes` that are about to be read and will wait for a parse (a stored
    /// profile). Such bytes take at most half the budget together, so the parses they
    /// wait for are never starved by them.
    pub async fn hold(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        let mut held = Reservation::default();
        self.hold_to(&mut held, bytes).await?;
        Ok(held)
    }

    /// Grows `held` ([`Budget::hold`]) to `bytes`, as the bytes arrive (a request body
    /// is held a piece at a time: bytes that have not arrived hold nothing). Each
    /// growth waits for memory at most the queue's wait.
    pub async fn hold_to(&self, held: &mut Reservation, bytes: u64) -> Result<(), BudgetError> {
        self.grow(held, bytes, true).await
    }

    /// Grows `reserved` to `bytes` for what work builds beyond its parses (a merge's
    /// merged model), waiting for memory at most the queue's wait.
    pub async fn reserve_to(&self, reserved: &mut Reservation, bytes: u64) -> Result<(), BudgetError> {
        self.grow(reserved, bytes, false).await
    }

    /// Grows `r` to `bytes`, `holding` bytes that wait for a parse.
    async fn grow(&self, held: &mut Reservation, bytes: u64, holding: bool) -> Result<(), BudgetError> {
        if bytes > self.total {
            return Err(BudgetError::OverBudget { need: bytes, budget: self.total });
        }
        let Some(more) = bytes.checked_sub(held.bytes()).filter(|&more| more > 0) else { return Ok(()) };
        let deadline = tokio::time::Instant::now() + self.max_wait;
        held.deadline.get_or_insert(deadline);
        let units = Self::units(more);
        let shared = held.holding.as_ref().map_or(0, |h| h.num_permits() as u32);
        let share = units.min(self.holding_units().saturating_sub(shared));
        if holding && share > 0 {
            let holding = self.acquire(&self.holding, share, deadline).await?;
            merge(&mut held.holding, holding);
        }
        held.add(Some(self.acquire(&self.permits, units, deadline).await?));
        Ok(())
    }

    fn holding_units(&self) -> u32 {
        ((self.total / UNIT / 2).max(1)).min(u64::from(u32::MAX)) as u32
    }

    /// Parses profiles (raw bytes as uploaded or stored) holding one reservation for
    /// all of them, so two-sided work never waits while holding half its memory.
    pub async fn parse(&self, inputs: Vec<Bytes>) -> Result<Parsed, ParseFailure> {
        self.parse_held(inputs, Reservation::default()).await
    }

    /// [`Budget::parse`] of bytes already held by `held` (from [`Budget::hold`]): only
    /// what the parse needs beyond them is reserved, and the bytes stay counted while
    /// they wait for it.
    ///
    /// One blocking task measures the inputs and, when the memory they need is free at
    /// once (the usual case), parses them too; a small profile's inflated bytes are
    /// kept from the measuring pass (counted in the budget), so it is inflated once.
    /// Otherwise the work waits for memory in the queue and then parses.
    ///
    /// Each parse may build the model its input was priced at; one that outgrows it
    /// stops (core's [`stacklens_core::Error::ModelTooLarge`]), reserves twice as much
    /// (waiting in the queue if need be) and parses again, until it fits or needs more
    /// than the whole budget ([`BudgetError::OverBudget`], 413). The memory held never
    /// runs ahead of what is reserved; an expanding input costs at most about twice its
    /// final parse in CPU.
    pub async fn parse_held(&self, inputs: Vec<Bytes>, mut held: Reservation) -> Result<Parsed, ParseFailure> {
        let (cap, total, permits) = (self.inflate_cap, self.total, self.permits.clone());
        let already = held.bytes();
        let attempt = {
            let inputs = inputs.clone();
            tokio::task::spawn_blocking(move || measure_and_parse(&inputs, cap, total, already, &permits))
                .await
                .map_err(|e| ParseFailure::Stopped(e.to_string()))??
        };
        let mut plans = match attempt {
            Attempt::Parsed { profiles, permit } => {
                held.add(permit);
                held.holding = None;
                return Ok(Parsed { profiles, reserved: held });
            }
            Attempt::Measured(plans) => plans,
        };
        let inputs = Arc::new(inputs);
        loop {
            let need = Plan::need(&plans);
            if need > total {
                return Err(BudgetError::OverBudget { need, budget: total }.into());
            }
            let more = need.saturating_sub(held.bytes());
            if more > 0 {
                let deadline = held.deadline.unwrap_or_else(|| tokio::time::Instant::now() + self.max_wait);
                held.add(Some(self.acquire(&self.permits, Self::units(more), deadline).await?));
            }
            // Parsing now: the bytes no longer wait.
            held.holding = None;
            let inputs = inputs.clone();
            let parsed = tokio::task::spawn_blocking(move || parse_planned(&inputs, vec![None; inputs.len()], plans))
                .await
                .map_err(|e| ParseFailure::Stopped(e.to_string()))??;
            match parsed {
                Ok(profiles) => return Ok(Parsed { profiles, reserved: held }),
                Err(grown) => plans = grown,
            }
        }
    }
}

fn merge(into: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match into {
        Some(p) => p.merge(permit),
        None => *into = Some(permit),
    }
}
