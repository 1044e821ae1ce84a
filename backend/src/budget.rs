//! The memory budget for parse and analysis work (`--memory-budget`). Each piece of
//! work reserves what it will hold at its peak before it starts: the bytes it read
//! plus the model core builds from the inflated profile. Bytes are counted from
//! before they are read (a request body by its announced length, a stored profile by
//! its size) until they are parsed and stored, and bytes waiting for a parse take at
//! most half the budget, so the parses they wait for always find room. Work that does
//! not fit waits in a bounded queue; past the queue, or after waiting too long, it is
//! refused as busy. A gzip body is measured by inflating it once without keeping the
//! output, so a bomb costs CPU up to the inflate cap but never memory.
//!
//! The budget counts what core allocates; [`tune_allocator`] keeps glibc from holding
//! on to what it freed, so the process's resident memory follows the count.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stacklens_core::{ParseOptions, Profile};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Peak bytes core holds per inflated profile byte while parsing and analysing it
/// (measured in BENCHMARKS.md: parse + top of the large CPU profile).
pub const MODEL_BYTES_PER_BYTE: u64 = 8;
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
}

impl Reservation {
    /// Bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64 * UNIT)
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

    /// Holds `bytes` that are about to be read and will wait for a parse (a request
    /// body, a stored profile). Such bytes take at most half the budget together, so
    /// the parses they wait for are never starved by them.
    pub async fn hold(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        if bytes > self.total {
            return Err(BudgetError::OverBudget { need: bytes, budget: self.total });
        }
        let deadline = tokio::time::Instant::now() + self.max_wait;
        let units = Self::units(bytes);
        let share = units.min(self.holding_units());
        let holding = self.acquire(&self.holding, share, deadline).await?;
        let permit = self.acquire(&self.permits, units, deadline).await?;
        Ok(Reservation { permit: Some(permit), holding: Some(holding) })
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
    pub async fn parse_held(&self, inputs: Vec<Bytes>, mut held: Reservation) -> Result<Parsed, ParseFailure> {
        let cap = self.inflate_cap;
        let measured = inputs.clone();
        let sizes = tokio::task::spawn_blocking(move || {
            measured.iter().map(|b| inflated_size(b, cap)).collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ParseFailure::Stopped(e.to_string()))??;
        let need = inputs
            .iter()
            .zip(&sizes)
            .map(|(b, s)| (b.len() as u64).saturating_add(s.saturating_mul(MODEL_BYTES_PER_BYTE)))
            .fold(0u64, u64::saturating_add);
        if need > self.total {
            return Err(BudgetError::OverBudget { need, budget: self.total }.into());
        }
        let more = need.saturating_sub(held.bytes());
        if more > 0 {
            let deadline = tokio::time::Instant::now() + self.max_wait;
            let permit = self.acquire(&self.permits, Self::units(more), deadline).await?;
            match &mut held.permit {
                Some(p) => p.merge(permit),
                None => held.permit = Some(permit),
            }
        }
        // Parsing now: the bytes no longer wait.
        held.holding = None;
        let profiles = tokio::task::spawn_blocking(move || {
            inputs
                .iter()
                .zip(sizes)
                .map(|(b, size)| match twice_gzipped(b) {
                    Some(e) => Err(e),
                    None => stacklens_core::parse_with(b, &ParseOptions { max_inflated_bytes: size.max(1) }),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ParseFailure::Stopped(e.to_string()))??;
        Ok(Parsed { profiles, reserved: held })
    }
}

/// Core inflates one gzip layer and would read a second one as a malformed protobuf;
/// this names what is wrong instead (for the server and the command line).
pub fn twice_gzipped(bytes: &[u8]) -> Option<stacklens_core::Error> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return None;
    }
    let mut inner = [0u8; 2];
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes);
    let mut filled = 0;
    while filled < inner.len() {
        match decoder.read(&mut inner[filled..]) {
            Ok(0) | Err(_) => return None,
            Ok(n) => filled += n,
        }
    }
    (inner == [0x1f, 0x8b]).then(|| stacklens_core::Error::UnknownFormat {
        hint: "gzip inside gzip: the profile was compressed twice (gunzip it once)".to_owned(),
    })
}

/// The size `bytes` inflate to (their own size when not gzip), found by inflating
/// without keeping the output. A stream that ends early or is not valid gzip reports
/// the size reached: core's parse then names the exact error.
fn inflated_size(bytes: &[u8], cap: u64) -> Result<u64, BudgetError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes.len() as u64);
    }
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes).take(cap.saturating_add(1));
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match decoder.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    if total > cap {
        return Err(BudgetError::InflatesTooLarge { cap });
    }
    // Room for core to meet the same error where the stream broke off.
    Ok(total.saturating_add(1))
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
        assert_eq!(inflated_size(b"plain", 10).unwrap(), 5);
        assert_eq!(inflated_size(&gzip(&[7u8; 1000]), 10_000).unwrap(), 1001);
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(matches!(inflated_size(&bomb, 1 << 16), Err(BudgetError::InflatesTooLarge { cap: 65536 })));
        // A forged size field changes nothing.
        let mut forged = bomb.clone();
        let n = forged.len();
        forged[n - 4..].copy_from_slice(&16u32.to_le_bytes());
        assert!(matches!(inflated_size(&forged, 1 << 16), Err(BudgetError::InflatesTooLarge { .. })));
        let truncated = &bomb[..bomb.len() / 2];
        assert!(inflated_size(truncated, 1 << 30).unwrap() < 1 << 20);
    }

    #[test]
    fn a_second_gzip_layer_is_named() {
        assert!(twice_gzipped(&gzip(&gzip(b"profile"))).unwrap().to_string().contains("gzip inside gzip"));
        assert!(twice_gzipped(&gzip(b"profile")).is_none());
        assert!(twice_gzipped(b"profile").is_none());
        assert!(twice_gzipped(&gzip(b"")).is_none());
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
        assert_eq!(parsed.reserved.bytes(), (len + (len + 1) * MODEL_BYTES_PER_BYTE).div_ceil(UNIT) * UNIT);
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
