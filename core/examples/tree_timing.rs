//! How long a call tree within the page's node budget takes to build:
//! `cargo run --release -p stacklens-core --example tree_timing FILE [MAX_NODES [RUNS]]`
//! (MAX_NODES default 8,388,608, the worker's; RUNS default 3). For a profile whose
//! whole tree is larger (the `huge` example's huge.pb), this is the pruned build, and
//! it names the node with the most left out under it (a zoom there needs more detail).

use std::time::{Duration, Instant};

use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::Prepared;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("give a FILE")?;
    let max_nodes: usize = args.next().map_or(Ok(8 << 20), |n| n.parse())?;
    let runs: usize = args.next().map_or(Ok(3), |n| n.parse())?;
    let profile = stacklens_core::parse(&std::fs::read(&path)?)?;
    let whole = Prepared::whole(&profile)?;
    let options = TreeOptions { max_nodes: Some(max_nodes), ..TreeOptions::default() };
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    let mut tree = None;
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        tree = Some(CallTree::build(&whole, &options)?);
        times.push(start.elapsed());
    }
    times.sort();
    let tree = tree.expect("built at least once");
    println!(
        "tree of {path} ({} samples) within {max_nodes} nodes: median {:.2} s, min {:.2} s over {} runs; \
         {} nodes, pruned below {}",
        profile.samples.len(),
        times[times.len() / 2].as_secs_f64(),
        times[0].as_secs_f64(),
        times.len(),
        tree.nodes.len(),
        tree.pruned_below,
    );
    // Where a zoom passes the kept detail: the node with the most left out under it.
    let left_out = |n: u32| {
        let node = tree.nodes[n as usize];
        node.total - node.self_value - tree.children(n).map(|c| tree.nodes[c as usize].total).sum::<i64>()
    };
    if let Some(widest) = (1..tree.nodes.len() as u32).filter(|&n| left_out(n) > 0).max_by_key(|&n| left_out(n)) {
        let path: Vec<&str> = tree.path(widest).iter().map(|&n| tree.name(n)).collect();
        let total = tree.nodes[widest as usize].total;
        println!("most left out ({} of its {total}) under: {}", left_out(widest), path.join(";"));
    }
    Ok(())
}
