#![allow(dead_code)] // Each including test uses the generators it needs.

//! Small inputs that expand into large models: each sample walks a deep stack chain, or
//! a call graph unfolds into every path through it. Used by core's tests of
//! `ParseOptions::max_model_bytes` and by the server's memory tests
//! (`backend/tests/memory.rs`).

use serde_json::json;
use std::fmt::Write;

/// A Firefox Profiler (processed) profile of one thread whose `samples` samples all
/// stand on the leaf of a stack chain `depth` frames deep.
pub fn firefox(depth: usize, samples: usize) -> Vec<u8> {
    let prefix: Vec<Option<usize>> = (0..depth).map(|i| i.checked_sub(1)).collect();
    let thread = json!({
        "name": "main",
        "stringArray": ["f"],
        "funcTable": { "name": [0] },
        "frameTable": { "func": [0] },
        "stackTable": { "frame": vec![0; depth], "prefix": prefix },
        "samples": { "stack": vec![depth - 1; samples] },
    });
    serde_json::to_vec(&json!({ "meta": { "interval": 1.0 }, "threads": [thread] })).unwrap()
}

/// A callgrind profile whose call graph has `layers` layers of `width` functions, each
/// calling every function of the next layer: `width^(layers - 1)` paths from the root.
pub fn callgrind(width: usize, layers: usize) -> Vec<u8> {
    let mut out = String::from("events: Ir\n");
    for layer in 0..layers {
        for i in 0..if layer == 0 { 1 } else { width } {
            // A self cost large enough to be shared among all the paths to the function.
            writeln!(out, "fn=f{layer}_{i}\n1 {}", 1u64 << 30).unwrap();
            if layer + 1 < layers {
                for j in 0..width {
                    // Enough inclusive cost to carry down every path.
                    writeln!(out, "cfn=f{}_{j}\ncalls=1 1\n1 {}", layer + 1, 1u64 << 40).unwrap();
                }
            }
        }
    }
    out.into_bytes()
}

/// A Chrome trace of `depth` nested `B` events, one microsecond apart, then their ends:
/// every step is a stretch of time with its own stack, `depth * depth / 2` frames.
pub fn chrome_durations(depth: usize) -> Vec<u8> {
    let event = |ph: &str, ts: usize| json!({ "ph": ph, "name": "f", "pid": 1, "tid": 1, "ts": ts });
    let begins = (0..depth).map(|i| event("B", i));
    let ends = (0..depth).map(|i| event("E", depth + i));
    serde_json::to_vec(&json!({ "traceEvents": begins.chain(ends).collect::<Vec<_>>() })).unwrap()
}

/// A V8 `.cpuprofile` whose node tree is a chain `depth` deep, with `samples` samples
/// on its leaf.
pub fn v8_cpuprofile(depth: usize, samples: usize) -> Vec<u8> {
    let nodes: Vec<_> = (1..=depth)
        .map(|id| {
            let children: Vec<usize> = (id < depth).then_some(id + 1).into_iter().collect();
            json!({ "id": id, "callFrame": { "functionName": "f", "url": "" }, "children": children })
        })
        .collect();
    let profile = json!({
        "nodes": nodes,
        "startTime": 0,
        "endTime": samples,
        "samples": vec![depth; samples],
        "timeDeltas": vec![1; samples],
    });
    serde_json::to_vec(&profile).unwrap()
}

/// Folded stacks: `lines` lines of a stack `depth` frames deep under `root`.
pub fn folded(root: &str, depth: usize, lines: usize) -> Vec<u8> {
    let stack = std::iter::once(root).chain(std::iter::repeat_n("f", depth)).collect::<Vec<_>>().join(";");
    (0..lines).map(|i| format!("{stack};g{i} 1\n")).collect::<String>().into_bytes()
}

/// `perf script` text: `records` records of a stack `depth` frames deep.
pub fn perf_script(depth: usize, records: usize) -> Vec<u8> {
    let mut out = String::new();
    for r in 0..records {
        writeln!(out, "app 1 {}.000001: 1 cycles:", r + 1).unwrap();
        for f in 0..depth {
            writeln!(out, "\t{:x} f{f} (/bin/app)", 0x1000 + f).unwrap();
        }
        out.push('\n');
    }
    out.into_bytes()
}

/// gzip of `bytes`.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}
