//! What this replica's compaction passes have done, for `/metrics` (kept apart from the
//! compactor so that the shared state holds counters, not the work).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Counters of the passes made by this process.
#[derive(Default)]
pub struct Progress {
    passes: AtomicU64,
    failures: AtomicU64,
    blocks: AtomicU64,
    profiles: AtomicU64,
    bytes: AtomicU64,
    day_blocks: AtomicU64,
    day_bytes: AtomicU64,
    raced: AtomicU64,
    last_pass_millis: AtomicU64,
    /// Whether a pass is running now.
    running: AtomicBool,
}

impl Progress {
    /// The counters in Prometheus' text format.
    pub fn prometheus(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let lines = [
            ("passes_total", "counter", "Compaction passes finished", get(&self.passes) as f64),
            ("pass_failures_total", "counter", "Compaction passes stopped by an error", get(&self.failures) as f64),
            ("blocks_written_total", "counter", "Hour blocks written", get(&self.blocks) as f64),
            ("profiles_compacted_total", "counter", "Stored profiles written into blocks", get(&self.profiles) as f64),
            ("block_bytes_written_total", "counter", "Bytes of blocks written", get(&self.bytes) as f64),
            ("day_blocks_written_total", "counter", "Day blocks written", get(&self.day_blocks) as f64),
            ("day_block_bytes_written_total", "counter", "Bytes of day blocks written", get(&self.day_bytes) as f64),
            (
                "hours_raced_total",
                "counter",
                "Hours and days that changed while their block was made",
                get(&self.raced) as f64,
            ),
            ("last_pass_seconds", "gauge", "How long the last pass took", get(&self.last_pass_millis) as f64 / 1000.0),
            ("running", "gauge", "1 while a pass runs", f64::from(u8::from(self.running.load(Ordering::Relaxed)))),
        ];
        let mut out = String::new();
        for (name, kind, help, value) in lines {
            out.push_str(&format!(
                "# HELP stacklens_compaction_{name} {help}\n# TYPE stacklens_compaction_{name} {kind}\nstacklens_compaction_{name} {value}\n"
            ));
        }
        out
    }

    pub fn started(&self) {
        self.running.store(true, Ordering::Relaxed);
    }

    pub fn finished(&self, took: Duration, ok: bool) {
        self.running.store(false, Ordering::Relaxed);
        self.last_pass_millis.store(took.as_millis() as u64, Ordering::Relaxed);
        (if ok { &self.passes } else { &self.failures }).fetch_add(1, Ordering::Relaxed);
    }

    pub fn written(&self, profiles: usize, bytes: usize) {
        self.blocks.fetch_add(1, Ordering::Relaxed);
        self.profiles.fetch_add(profiles as u64, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn day_written(&self, bytes: usize) {
        self.day_blocks.fetch_add(1, Ordering::Relaxed);
        self.day_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn raced(&self) {
        self.raced.fetch_add(1, Ordering::Relaxed);
    }
}
