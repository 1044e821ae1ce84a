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

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stacklens_core::import::wire::{field_number, packed_count, StreamVarint, WireType};
use stacklens_core::import::{gzip_inside, is_gzip, twice_gzipped};
use stacklens_core::{ParseOptions, Profile};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// Inflated bytes kept from the measuring pass, per input, at least (when the budget
/// has room), so a small profile is inflated once.
const KEEP_INFLATED: u64 = 256 * 1024;

/// Up to this much, a profile whose gzip trailer gives its inflated size keeps that
/// many bytes from the measuring pass (reserved first), so the parse does not inflate
/// it again: the second inflate of a 14 MB profile was a fifth of a diff's time. A
/// trailer may lie (it is the size modulo 2^32): past what it said, nothing is kept.
const KEEP_INFLATED_MAX: u64 = 64 << 20;

/// How many inflated bytes of `bytes` (gzip) the measuring pass may keep.
fn keep_limit(bytes: &[u8]) -> u64 {
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
enum Attempt {
    Parsed { profiles: Vec<Profile>, permit: Option<OwnedSemaphorePermit> },
    Measured(Vec<Plan>),
}

/// How one input is parsed: the bytes it may inflate to and the model it may build
/// (core stops it there, see [`stacklens_core::ParseOptions::max_model_bytes`]).
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// The input's own bytes, held while it is parsed.
    bytes: u64,
    inflated: u64,
    model: u64,
}

impl Plan {
    /// Memory reserved for parsing inputs by `plans`.
    fn need(plans: &[Plan]) -> u64 {
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
fn parse_planned(
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
fn measure_and_parse(
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

fn merge(into: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match into {
        Some(p) => p.merge(permit),
        None => *into = Some(permit),
    }
}

/// Core's parse of `bytes` within `options` (their measured inflated size, the model
/// reserved).
fn parse_within(bytes: &[u8], options: &ParseOptions) -> Result<Profile, stacklens_core::Error> {
    match twice_gzipped(bytes) {
        Some(e) => Err(e),
        None => stacklens_core::parse_with(bytes, options),
    }
}

/// What a profile's bytes say about the model core will build from them: their
/// inflated size and, for a pprof protobuf, how many samples, locations and location
/// ids in samples it holds. Found by reading the bytes once as they inflate, keeping
/// nothing, so a bomb costs CPU up to the inflate cap but never memory.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Inflated size (the bytes' own size when not gzip).
    pub bytes: u64,
    pub samples: u64,
    pub locations: u64,
    pub location_ids: u64,
    /// The bytes read as a protobuf from start to end.
    pub protobuf: bool,
    /// They start (after white space) with `{` or `[`.
    pub json: bool,
}

impl Shape {
    /// Measures `bytes`, refusing those that inflate past `cap`; also returns gzip
    /// input's inflated bytes when they are complete and at most `keep` bytes. A stream
    /// that ends early or is not valid gzip reports what was read: core's parse then
    /// names the exact error.
    fn measure(bytes: &[u8], cap: u64, keep: u64) -> Result<(Shape, Option<Vec<u8>>), BudgetError> {
        let mut scan = Scan::default();
        if !is_gzip(bytes) {
            scan.feed(bytes);
            return Ok((scan.finish(), None));
        }
        let mut decoder = flate2::read::MultiGzDecoder::new(bytes).take(cap.saturating_add(1));
        // Room for all of it at once: growing by doubling could hold twice what was reserved.
        let mut inflated = (keep > 0).then(|| Vec::with_capacity(keep as usize));
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match decoder.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => {
                    scan.feed(&buffer[..n]);
                    if scan.bytes > keep {
                        inflated = None;
                    }
                    // `keep` bounds what is kept, so the buffer never grows past its room.
                    if let Some(kept) = &mut inflated {
                        kept.extend_from_slice(&buffer[..n]);
                    }
                }
                // Core's parse names the error.
                Err(_) => {
                    inflated = None;
                    break;
                }
            }
            if scan.bytes > cap {
                return Err(BudgetError::InflatesTooLarge { cap });
            }
        }
        Ok((scan.finish(), inflated))
    }

    /// Bytes core holds at its peak for this profile (see [`cost`]).
    pub fn model_bytes(&self) -> u64 {
        use cost::*;
        if !self.protobuf {
            return self.bytes.saturating_mul(if self.json { JSON_PER_BYTE } else { TEXT_PER_BYTE });
        }
        [
            self.bytes.saturating_mul(PPROF_PER_BYTE),
            self.samples.saturating_mul(PER_SAMPLE),
            self.locations.saturating_mul(PER_LOCATION),
            self.location_ids.saturating_mul(PER_LOCATION_ID),
        ]
        .into_iter()
        .fold(0, u64::saturating_add)
    }
}

/// Where [`Scan`] is in a protobuf: reading a tag, a varint value, a length, or
/// passing over bytes (counting the location ids of a packed list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Tag,
    Value,
    Length { field: u64 },
    Skip(u64),
    LocationIds(u64),
}

/// Reads the top level of a pprof `Profile` and each `Sample` in it, a byte at a time
/// (bytes arrive in pieces as they inflate), counting what [`Shape`] counts.
#[derive(Debug)]
struct Scan {
    bytes: u64,
    step: Step,
    varint: StreamVarint,
    /// Bytes left in the sample being read, if inside one.
    sample_left: Option<u64>,
    samples: u64,
    locations: u64,
    location_ids: u64,
    broken: bool,
    first: Option<u8>,
}

impl Default for Scan {
    fn default() -> Self {
        Scan {
            bytes: 0,
            step: Step::Tag,
            varint: StreamVarint::default(),
            sample_left: None,
            samples: 0,
            locations: 0,
            location_ids: 0,
            broken: false,
            first: None,
        }
    }
}

impl Scan {
    fn feed(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        if self.first.is_none() {
            self.first = data.iter().copied().find(|b| !b.is_ascii_whitespace());
        }
        let mut data = data;
        while !self.broken && !data.is_empty() {
            // Bodies skipped and packed location ids go a run at a time; varints a byte at
            // a time (they may be split between pieces).
            let run = match self.step {
                Step::Skip(0) | Step::LocationIds(0) => {
                    self.step = Step::Tag;
                    continue;
                }
                Step::Skip(n) | Step::LocationIds(n) => n.min(data.len() as u64) as usize,
                Step::Tag | Step::Value | Step::Length { .. } => {
                    self.varint_byte(data[0]);
                    data = &data[1..];
                    continue;
                }
            };
            let (taken, rest) = data.split_at(run);
            self.consumed(run as u64);
            self.step = match self.step {
                Step::LocationIds(n) => {
                    self.location_ids += packed_count(taken) as u64;
                    if n > run as u64 {
                        Step::LocationIds(n - run as u64)
                    } else {
                        Step::Tag
                    }
                }
                Step::Skip(n) if n > run as u64 => Step::Skip(n - run as u64),
                _ => Step::Tag,
            };
            self.check_sample_end();
            data = rest;
        }
    }

    /// Counts `n` bytes read against the sample being read.
    fn consumed(&mut self, n: u64) {
        if let Some(left) = &mut self.sample_left {
            *left -= n;
        }
    }

    /// A sample's last field must end with it.
    fn check_sample_end(&mut self) {
        if self.sample_left == Some(0) {
            self.broken |= self.step != Step::Tag || self.varint.is_partial();
            self.sample_left = None;
        }
    }

    /// One byte of a tag, a value or a length.
    fn varint_byte(&mut self, b: u8) {
        self.consumed(1);
        match self.varint.push(b) {
            Ok(Some(value)) => self.varint_read(value),
            Ok(None) => {}
            Err(_) => {
                self.broken = true;
                return;
            }
        }
        self.check_sample_end();
    }

    fn varint_read(&mut self, value: u64) {
        let in_sample = self.sample_left.is_some();
        self.step = match self.step {
            Step::Tag => {
                let field = field_number(value);
                if field == 0 {
                    self.broken = true;
                }
                match WireType::of(value) {
                    Some(WireType::Varint) => {
                        // An unpacked location id.
                        self.location_ids += u64::from(in_sample && field == 1);
                        Step::Value
                    }
                    Some(WireType::LengthDelimited) => Step::Length { field },
                    Some(fixed @ (WireType::Fixed64 | WireType::Fixed32)) => {
                        Step::Skip(fixed.fixed_width().unwrap_or(0) as u64)
                    }
                    None => {
                        self.broken = true;
                        Step::Tag
                    }
                }
            }
            Step::Value => Step::Tag,
            Step::Length { field } => {
                if self.sample_left.is_some_and(|left| value > left) {
                    self.broken = true;
                }
                match (in_sample, field) {
                    (false, 2) => {
                        self.samples += 1;
                        self.sample_left = (value > 0).then_some(value);
                        Step::Tag
                    }
                    (true, 1) if value > 0 => Step::LocationIds(value),
                    _ => {
                        self.locations += u64::from(!in_sample && field == 4);
                        if value > 0 {
                            Step::Skip(value)
                        } else {
                            Step::Tag
                        }
                    }
                }
            }
            other => other,
        };
    }

    fn finish(self) -> Shape {
        let protobuf =
            !self.broken && self.step == Step::Tag && !self.varint.is_partial() && self.sample_left.is_none();
        Shape {
            bytes: self.bytes,
            samples: self.samples,
            locations: self.locations,
            location_ids: self.location_ids,
            protobuf,
            json: matches!(self.first, Some(b'{' | b'[')),
        }
    }
}

/// glibc keeps what a thread frees in that thread's arena (up to 8 arenas per core)
/// and large blocks in its heaps, so parses that ran on different blocking threads
/// add up: 24 concurrent uploads of the 14 MB test profile peaked at 918 MB of resident
/// memory under a 512 MiB budget (545 MB with two arenas, 499 MB with two arenas and
/// blocks of 1 MiB and more mapped on their own, and so unmapped when freed). Call
/// before any other thread starts.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_MMAP_THRESHOLD: i32 = -3;
        const M_ARENA_MAX: i32 = -8;
        // SAFETY: mallopt only sets glibc's allocator parameters; called before any
        // other thread exists, as glibc asks.
        unsafe {
            mallopt(M_ARENA_MAX, 2);
            mallopt(M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}

/// A quarter of the machine's memory (from /proc/meminfo; 1 GiB where unknown).
pub fn default_total() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    total_kib.map_or(1 << 30, |kib| kib * 1024 / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn inflated_sizes_are_measured_not_trusted() {
        let size = |bytes: &[u8], cap| Shape::measure(bytes, cap, 0).map(|s| s.0.bytes);
        assert_eq!(size(b"plain", 10).unwrap(), 5);
        assert_eq!(size(&gzip(&[7u8; 1000]), 10_000).unwrap(), 1000);
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(matches!(size(&bomb, 1 << 16), Err(BudgetError::InflatesTooLarge { cap: 65536 })));
        // A forged size field changes nothing.
        let mut forged = bomb.clone();
        let n = forged.len();
        forged[n - 4..].copy_from_slice(&16u32.to_le_bytes());
        assert!(matches!(size(&forged, 1 << 16), Err(BudgetError::InflatesTooLarge { .. })));
        let truncated = &bomb[..bomb.len() / 2];
        assert!(size(truncated, 1 << 30).unwrap() < 1 << 20);
    }

    /// The measuring pass keeps what the gzip trailer announces, up to its limit, and
    /// nothing of a stream that inflates past what its trailer said.
    #[test]
    fn inflated_bytes_are_kept_as_far_as_the_trailer_says() {
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        let honest = gzip(&data);
        assert_eq!(keep_limit(&honest), 3 << 20);
        let (shape, kept) = Shape::measure(&honest, 1 << 30, keep_limit(&honest)).unwrap();
        assert_eq!((shape.bytes, kept.as_deref() == Some(&data[..])), (3 << 20, true));
        let mut lying = honest.clone();
        let n = lying.len();
        lying[n - 4..].copy_from_slice(&(1u32 << 20).to_le_bytes());
        assert_eq!(keep_limit(&lying), 1 << 20);
        assert_eq!(Shape::measure(&lying, 1 << 30, keep_limit(&lying)).unwrap().1, None);
        // Small or beyond the limit: the old quarter megabyte.
        assert_eq!(keep_limit(&gzip(b"tiny")), KEEP_INFLATED);
        let mut huge = honest;
        huge[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(keep_limit(&huge), KEEP_INFLATED);
    }

    /// `samples` samples of `depth` frames each over `depth` locations.
    fn pprof(samples: usize, depth: usize) -> Vec<u8> {
        use stacklens_core::model::{Line, Sample, SourceFormat};
        let mut p = Profile::new(SourceFormat::Built);
        p.sample_types = vec![p.value_type("samples", "count")];
        let stack: Vec<_> = (0..depth)
            .map(|i| {
                let f = p.add_function(&format!("f{i}"), "", "x.go", 0);
                p.add_location(i as u64 + 1, vec![Line { function: f, line: 1, column: 0 }])
            })
            .collect();
        for i in 0..samples {
            // Location ids past 127 take two bytes: counted once each.
            p.samples.push(Sample { locations: stack.clone(), values: vec![i as i64 + 1], labels: vec![] });
        }
        stacklens_core::export::pprof::encode(&p)
    }

    #[test]
    fn a_pprof_profile_is_counted_as_it_inflates() {
        let plain = pprof(1000, 200);
        let expected = Shape {
            bytes: plain.len() as u64,
            samples: 1000,
            locations: 200,
            location_ids: 200_000,
            protobuf: true,
            json: false,
        };
        assert_eq!(Shape::measure(&plain, 1 << 30, 0).unwrap().0, expected);
        // Gzipped, it arrives in 64 KiB pieces that split fields and varints.
        assert!(plain.len() > 1 << 17);
        assert_eq!(Shape::measure(&gzip(&plain), 1 << 30, 0).unwrap().0, expected);
        assert_eq!(expected.model_bytes(), plain.len() as u64 * 2 + 1000 * 240 + 200 * 160 + 200_000 * 16);
        // Cut short, or not protobuf at all: priced per byte.
        let cut = Shape::measure(&plain[..plain.len() - 3], 1 << 30, 0).unwrap().0;
        assert!(!cut.protobuf);
        assert_eq!(cut.model_bytes(), cut.bytes * cost::TEXT_PER_BYTE);
        let dump = Shape::measure(b"goroutine 1 [running]:\nmain.main()\n", 1 << 30, 0).unwrap().0;
        assert!(!dump.protobuf && !dump.json);
        let json = Shape::measure(b"  {\"meta\": {}}", 1 << 30, 0).unwrap().0;
        assert!(!json.protobuf && json.json);
        assert_eq!(json.model_bytes(), json.bytes * cost::JSON_PER_BYTE);
    }

    #[tokio::test]
    async fn reservations_queue_and_refuse() {
        let budget = Budget::new(100 * UNIT, 1 << 20, 1, Duration::from_millis(50));
        let first = budget.hold(60 * UNIT).await.unwrap();
        assert_eq!(first.bytes(), 60 * UNIT);
        assert!(matches!(budget.hold(101 * UNIT).await, Err(BudgetError::OverBudget { .. })));
        // Does not fit: waits, then gives up as busy.
        assert!(matches!(budget.hold(30 * UNIT).await, Err(BudgetError::Busy { .. })));
        drop(first);
        let _again = budget.hold(60 * UNIT).await.unwrap();
    }

    #[tokio::test]
    async fn held_bytes_take_at_most_half_and_stay_counted_through_the_parse() {
        let plain = Bytes::from_static(b"goroutine 1 [running]:\nmain.main()\n\t/x.go:1\n");
        let len = plain.len() as u64;
        let budget = Budget::new(1000 * UNIT, 1 << 20, 4, Duration::from_millis(50));
        // Bytes waiting for a parse: half the budget at most, though the rest is free.
        let waiting = budget.hold(500 * UNIT).await.unwrap();
        assert!(matches!(budget.hold(UNIT).await, Err(BudgetError::Busy { .. })));
        drop(waiting);
        let held = budget.hold(len).await.unwrap();
        let parsed = budget.parse_held(vec![plain.clone()], held).await.unwrap();
        assert_eq!(parsed.reserved.bytes(), (len + len * cost::TEXT_PER_BYTE).div_ceil(UNIT) * UNIT);
        // Parsing, the bytes no longer wait: the holding half is free again.
        let other = budget.hold(500 * UNIT).await.unwrap();
        drop(other);
        // Kept for storing: only the bytes stay reserved.
        let kept = parsed.keep(len);
        assert_eq!(kept.bytes(), UNIT);
        assert_eq!(budget.permits.available_permits(), 999);
        drop(kept);
        assert_eq!(budget.permits.available_permits(), 1000);
    }

    #[test]
    fn small_inflated_bytes_are_kept_from_the_measuring_pass() {
        let plain = pprof(100, 20);
        let (shape, kept) = Shape::measure(&gzip(&plain), 1 << 30, plain.len() as u64).unwrap();
        assert_eq!((shape.bytes, kept.as_deref()), (plain.len() as u64, Some(plain.as_slice())));
        let (_, kept) = Shape::measure(&gzip(&plain), 1 << 30, plain.len() as u64 - 1).unwrap();
        assert!(kept.is_none(), "past the limit nothing is kept");
        let (_, kept) = Shape::measure(&plain, 1 << 30, 1 << 20).unwrap();
        assert!(kept.is_none(), "plain bytes are parsed as they are");
        let truncated = gzip(&plain);
        let (_, kept) = Shape::measure(&truncated[..truncated.len() / 2], 1 << 30, 1 << 20).unwrap();
        assert!(kept.is_none(), "a broken stream is left to core, which names the error");
    }

    #[tokio::test]
    async fn a_gzipped_profile_reserves_what_it_needs_and_parses_as_core_does() {
        let plain = pprof(100, 20);
        let body = Bytes::from(gzip(&plain));
        let budget = Budget::new(100 << 20, 1 << 30, 4, Duration::from_millis(50));
        let held = budget.hold(body.len() as u64).await.unwrap();
        let parsed = budget.parse_held(vec![body.clone()], held).await.unwrap();
        let (shape, _) = Shape::measure(&body, 1 << 30, 0).unwrap();
        let need = body.len() as u64 + shape.model_bytes();
        // The room taken for the inflated bytes is not kept beyond the need.
        assert_eq!(parsed.reserved.bytes(), need.div_ceil(UNIT) * UNIT);
        assert_eq!(parsed.profiles[0].samples, stacklens_core::parse(&body).unwrap().samples);
        drop(parsed);
        assert_eq!(budget.permits.available_permits() as u64, (100 << 20) / UNIT);
        // Inflated, a second gzip layer is named as before.
        let twice = Bytes::from(gzip(&body));
        assert!(matches!(
            budget.parse(vec![twice]).await,
            Err(ParseFailure::Core(e)) if e.to_string().contains("gzip inside gzip")
        ));
    }

    #[tokio::test]
    async fn a_bomb_is_refused_before_it_is_inflated() {
        let budget = Budget::new(1 << 30, 1 << 20, 4, Duration::from_secs(1));
        let bomb = Bytes::from(gzip(&vec![0u8; 8 << 20]));
        assert!(matches!(
            budget.parse(vec![bomb]).await,
            Err(ParseFailure::Budget(BudgetError::InflatesTooLarge { .. }))
        ));
    }
}
