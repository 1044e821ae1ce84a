//! The shape of a profile's bytes (inflated size; samples, locations and location ids
//! of a pprof protobuf), measured by one pass over them as they inflate.

use std::io::Read;

use stacklens_core::import::is_gzip;
use stacklens_core::import::wire::{field_number, packed_count, StreamVarint, WireType};

use super::{cost, BudgetError};

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
    pub(super) fn measure(bytes: &[u8], cap: u64, keep: u64) -> Result<(Shape, Option<Vec<u8>>), BudgetError> {
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
