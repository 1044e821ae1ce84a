//! Times merging stored captures as `stacklens top A B C…` merges them: the parse and
//! `Merger::add` of each, one at a time, each parsed model dropped before the next:
//! `STACKLENS_FIXTURES=/path/to/fixtures cargo run --release -p stacklens-core --example merge_timing [FILE [N]]`
//! (N = 1,000 variants of go/base/cpu.pb.gz by default). The variants are made first, in
//! memory, as gzipped pprof (core's export): each drops a pseudo-random third of the
//! samples and multiplies the values of the others by 1 to 4, so that stacks overlap as
//! in real captures of one program. Prints the time, the merged profile's sample count
//! and the peak RSS (VmHWM) while merging.

mod common;

use std::time::{Duration, Instant};

use stacklens_core::analysis::merge::Merger;
use stacklens_core::analysis::Prepared;
use stacklens_core::export::{export, ExportFormat};

/// xorshift64*: the same sequence in every run, so every run merges the same variants.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A memory figure of this process (`VmHWM:`, the peak resident set, or `VmRSS:`), in MiB,
/// where Linux tells it.
fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 =
        status.lines().find_map(|l| l.strip_prefix(field))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let path = common::input(args.next(), "go/base/cpu.pb.gz");
    let count: u32 = match args.next() {
        Some(n) => n.to_string_lossy().parse()?,
        None => 1000,
    };
    let original = stacklens_core::parse(&std::fs::read(&path)?)?;
    let last = original.sample_types.len().saturating_sub(1);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut expected_total = 0i64;
    let mut variants = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let mut variant = original.clone();
        let factor = 1 + (rng.next() % 4) as i64;
        variant.retain_samples(|sample| {
            for value in &mut sample.values {
                *value *= factor;
            }
            !rng.next().is_multiple_of(3)
        });
        expected_total += variant.total(last);
        variants.push(export(&Prepared::whole(&variant)?, ExportFormat::Pprof)?);
    }
    let size: usize = variants.iter().map(Vec::len).sum();
    println!(
        "{}: {} samples; {count} variants, {:.1} MB of gzipped pprof in memory",
        path.display(),
        original.samples.len(),
        size as f64 / 1e6
    );
    drop(original);
    // From here on the peak is the merge's: Linux resets VmHWM when 5 is written here.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = memory_mib("VmRSS:");

    let (mut parsing, mut adding) = (Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    let mut merger = Merger::default();
    for bytes in &variants {
        let parsed = Instant::now();
        let profile = stacklens_core::parse(bytes)?;
        let added = Instant::now();
        merger.add(&profile)?;
        adding += added.elapsed();
        parsing += added - parsed;
    }
    let merged = merger.finish()?;
    let elapsed = start.elapsed();
    println!("parse + merge of {count}: {elapsed:.3?} (parse {parsing:.3?}, Merger::add {adding:.3?})");
    println!(
        "merged: {} samples, {} locations, {} functions; {} total {} (expected {expected_total})",
        merged.samples.len(),
        merged.locations.len(),
        merged.functions.len(),
        merged.sample_type_name(last),
        merged.total(last),
    );
    assert_eq!(merged.total(last), expected_total, "the merge sums every variant's values");
    match (memory_mib("VmHWM:"), before) {
        (Some(peak), Some(before)) if reset => println!(
            "peak RSS while merging (VmHWM): {peak:.1} MiB, {:.1} MiB above the RSS before it (which holds the \
             variants' bytes)",
            peak - before
        ),
        (Some(peak), _) => println!("peak RSS of the whole run (VmHWM; it could not be reset): {peak:.1} MiB"),
        _ => println!("peak RSS: not known here (no /proc/self/status)"),
    }
    Ok(())
}
