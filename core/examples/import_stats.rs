//! Imports profile files and prints what the import cost, and for profiles with sample
//! times what their stack chart at 1000 px costs: `cargo run --release -p stacklens-core
//! --example import_stats -- FILE...` (under `/usr/bin/time -v` for the peak memory).

use std::time::Instant;

use stacklens_core::analysis::timeline::{self, ChartViewport, TimelineOptions};
use stacklens_core::analysis::Prepared;

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let started = Instant::now();
        let p = match stacklens_core::parse(&bytes) {
            Ok(p) => p,
            Err(e) => {
                println!("{path}: {e}");
                continue;
            }
        };
        let ms = |since: Instant| since.elapsed().as_secs_f64() * 1e3;
        println!(
            "{path}: {:?}, {} samples ({} timed), {} locations, imported in {:.1} ms",
            p.source,
            p.samples.len(),
            p.sample_times.len(),
            p.locations.len(),
            ms(started)
        );
        if timeline::time_range(&p).is_some() {
            let started = Instant::now();
            match Prepared::whole(&p)
                .and_then(|w| timeline::stack_chart(&w, &TimelineOptions::default(), &ChartViewport::default()))
            {
                Ok(chart) => println!("  stack chart: {} boxes in {:.1} ms", chart.boxes.len(), ms(started)),
                Err(e) => println!("  stack chart: {e}"),
            }
        }
    }
}
