//! How long `details` takes for one function of a large profile:
//! `cargo run --release -p stacklens-core --example details_timing [FILE [FUNCTION]]`, by
//! default `$STACKLENS_FIXTURES/large/cpu.large.pb.gz` and its hottest function (by flat).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use stacklens_core::analysis::details::details;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Prepared;

const RUNS: usize = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args_os().nth(1) {
        Some(file) => PathBuf::from(file),
        None => PathBuf::from(std::env::var_os("STACKLENS_FIXTURES").ok_or("give a FILE or set STACKLENS_FIXTURES")?)
            .join("large/cpu.large.pb.gz"),
    };
    let profile = stacklens_core::parse(&std::fs::read(&path)?)?;
    let whole = Prepared::whole(&profile)?;
    let function = match std::env::args().nth(2) {
        Some(function) => function,
        None => {
            let hottest = top(&whole, &TopOptions { node_count: Some(1), ..TopOptions::default() })?;
            hottest.functions.first().ok_or("the profile has no samples")?.name.clone()
        }
    };
    let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
    let mut report = details(&whole, &function)?; // warm-up
    for _ in 0..RUNS {
        let start = Instant::now();
        report = details(&whole, &function)?;
        times.push(start.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "details({}) on {} ({} samples, {} locations): median {:.1} ms, min {:.1} ms, max {:.1} ms over {RUNS} runs",
        report.name,
        path.display(),
        profile.samples.len(),
        profile.locations.len(),
        ms(times[RUNS / 2]),
        ms(times[0]),
        ms(times[RUNS - 1]),
    );
    println!("{} callers, {} callees, {} label keys", report.callers.len(), report.callees.len(), report.labels.len());
    Ok(())
}
