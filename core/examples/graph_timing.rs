//! Times the call graph and its layout, separately, at pprof's `-dot` pruning:
//! `STACKLENS_FIXTURES=/path/to/fixtures cargo run --release -p stacklens-core --example graph_timing [FILE]`
//! (the large CPU fixture by default). Besides wall time it prints the thread's CPU time
//! (Linux's schedstat), which a busy machine does not inflate as much.

mod common;

use std::time::{Duration, Instant};

use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::Prepared;
use stacklens_core::layout::graph::{layout_call_graph, GraphLayoutOptions};

const RUNS: usize = 10;

/// This thread's CPU time so far, where Linux tells it.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// Prints the fastest and the median wall time of `RUNS` runs of `f`, and their mean CPU
/// time; returns the last result.
fn time<T>(what: &str, mut f: impl FnMut() -> T) -> T {
    let mut times = Vec::with_capacity(RUNS);
    let mut result = None;
    let cpu_start = cpu_time();
    for _ in 0..RUNS {
        let start = Instant::now();
        result = Some(f());
        times.push(start.elapsed());
    }
    times.sort();
    let cpu = match (cpu_start, cpu_time()) {
        // Linux updates it at scheduler ticks: too coarse for a sub-millisecond total.
        (Some(start), Some(end)) if end > start => format!(", mean CPU time {:?}", (end - start) / RUNS as u32),
        _ => String::new(),
    };
    println!("{what}: fastest {:?}, median {:?}{cpu}", times[0], times[RUNS / 2]);
    result.expect("RUNS > 0")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = common::input(std::env::args_os().nth(1), "large/cpu.large.pb.gz");
    let profile = stacklens_core::parse(&std::fs::read(&path)?)?;
    println!("{}: {} samples", path.display(), profile.samples.len());
    let whole = Prepared::whole(&profile)?;
    let graph = time("graph", || call_graph(&whole, &GraphOptions::default()))?;
    println!("  {} nodes, {} edges", graph.nodes.len(), graph.edges.len());
    let layout = time("layout", || layout_call_graph(&graph, &GraphLayoutOptions::default()))?;
    println!("  {:.0} × {:.0}", layout.width, layout.height);
    Ok(())
}
