//! The memory budget for parse and analysis work (`--memory-budget`). Each piece of
//! work reserves what it will hold at its peak before it starts: the bytes it read
//! plus the model core builds from the inflated profile. Work that does not fit waits
//! in a bounded queue; past the queue, or after waiting too long, it is refused as
//! busy. A gzip body is measured by inflating it once without keeping the output, so
//! a bomb costs CPU up to the inflate cap but never memory.

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
    total: u64,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
    /// Largest inflated size accepted.
    pub inflate_cap: u64,
}

/// Memory held for a piece of work; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
}

/// Profiles read within the budget; they hold their reservation until dropped.
pub struct Parsed {
    pub profiles: Vec<Profile>,
    _reserved: Reservation,
}

impl Budget {
    pub fn new(total: u64, inflate_cap: u64, max_waiting: usize, max_wait: Duration) -> Self {
        let units = (total / UNIT).clamp(1, u64::from(u32::MAX)) as usize;
        Budget {
            permits: Arc::new(Semaphore::new(units)),
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

    /// Holds `bytes` of the budget, waiting in the queue if need be.
    pub async fn reserve(&self, bytes: u64) -> Result<Reservation, BudgetError> {
        if bytes > self.total {
            return Err(BudgetError::OverBudget { need: bytes, budget: self.total });
        }
        let units = bytes.div_ceil(UNIT).max(1) as u32;
        if let Ok(permit) = self.permits.clone().try_acquire_many_owned(units) {
            return Ok(Reservation { _permit: Some(permit) });
        }
        let busy = BudgetError::Busy { retry_after_secs: self.max_wait.as_secs().clamp(1, 30) };
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_waiting {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(busy);
        }
        let acquired = tokio::time::timeout(self.max_wait, self.permits.clone().acquire_many_owned(units)).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match acquired {
            Ok(Ok(permit)) => Ok(Reservation { _permit: Some(permit) }),
            _ => Err(busy),
        }
    }

    /// Parses profiles (raw bytes as uploaded or stored) holding one reservation for
    /// all of them, so two-sided work never waits while holding half its memory.
    pub async fn parse(&self, inputs: Vec<Bytes>) -> Result<Parsed, ParseFailure> {
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
        let reservation = self.reserve(need).await?;
        let profiles = tokio::task::spawn_blocking(move || {
            inputs
                .iter()
                .zip(sizes)
                .map(|(b, size)| stacklens_core::parse_with(b, &ParseOptions { max_inflated_bytes: size.max(1) }))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| ParseFailure::Stopped(e.to_string()))??;
        Ok(Parsed { profiles, _reserved: reservation })
    }
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

    #[tokio::test]
    async fn reservations_queue_and_refuse() {
        let budget = Budget::new(100 * UNIT, 1 << 20, 1, Duration::from_millis(50));
        let first = budget.reserve(60 * UNIT).await.unwrap();
        assert!(matches!(budget.reserve(101 * UNIT).await, Err(BudgetError::OverBudget { .. })));
        // Does not fit: waits, then gives up as busy.
        assert!(matches!(budget.reserve(60 * UNIT).await, Err(BudgetError::Busy { .. })));
        drop(first);
        let _again = budget.reserve(60 * UNIT).await.unwrap();
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
