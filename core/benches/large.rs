//! Benchmarks on the benchmark-size fixtures (`../shared/fixtures/large`). Results and
//! the comparison with `go tool pprof` are in BENCHMARKS.md (scripts/bench.sh).

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use stacklens_core::analysis::details::details;
use stacklens_core::analysis::frames::{FrameTable, Granularity};
use stacklens_core::analysis::goroutines::{analyze, GoroutineOptions};
use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::source::{source, SourceOptions};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::Prepared;
use stacklens_core::layout::graph::{layout_call_graph, GraphLayoutOptions};
use stacklens_core::layout::{layout, Viewport};

fn large(name: &str) -> Option<Vec<u8>> {
    fixture(&format!("large/{name}"))
}

fn fixture(name: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os("STACKLENS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    match std::fs::read(dir.join(name)) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("SKIPPED: {name}: {e}");
            None
        }
    }
}

fn inflate(gzipped: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(gzipped), &mut raw).expect("gzip");
    raw
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("large");
    g.sample_size(10);
    // What the server parses for each upload in the load test (BENCHMARKS.md).
    if let Some(small) = fixture("go/base/cpu.pb.gz") {
        g.bench_function("go/base/cpu: parse", |b| b.iter(|| stacklens_core::parse(&small).unwrap()));
    }
    if let Some(cpu) = large("cpu.large.pb.gz") {
        g.bench_function("cpu.large: parse", |b| b.iter(|| stacklens_core::parse(&cpu).unwrap()));
        // The protobuf decoder alone (issue 13 asks for its MB/s): the inflated bytes.
        let raw = inflate(&cpu);
        g.throughput(criterion::Throughput::Bytes(raw.len() as u64));
        g.bench_function("cpu.large: decode raw protobuf", |b| b.iter(|| stacklens_core::parse(&raw).unwrap()));
        // As the page decodes it: fed in the browser's 64 KiB pieces (one thread here).
        g.bench_function("cpu.large: decode raw protobuf as it arrives", |b| {
            b.iter(|| {
                let mut parse = stacklens_core::import::IncrementalParse::new();
                for end in (1 << 16..raw.len()).step_by(1 << 16) {
                    parse.advance(&raw[..end]);
                }
                parse.finish(&raw, &stacklens_core::ParseOptions::default(), &mut |_, _| {}).unwrap()
            })
        });
        g.throughput(criterion::Throughput::Elements(1));
        let p = stacklens_core::parse(&cpu).unwrap();
        let whole = Prepared::whole(&p).unwrap();
        let options = TopOptions { node_count: Some(20), node_fraction: 0.005, ..TopOptions::default() };
        g.bench_function("cpu.large: top (parsed)", |b| b.iter(|| top(&whole, &options).unwrap()));
        g.bench_function("cpu.large: parse + top", |b| {
            b.iter(|| top(&Prepared::whole(&stacklens_core::parse(&cpu).unwrap()).unwrap(), &options).unwrap())
        });
        g.bench_function("cpu.large: call tree", |b| {
            b.iter(|| CallTree::build(&whole, &TreeOptions::default()).unwrap())
        });
        let tree = CallTree::build(&whole, &TreeOptions::default()).unwrap();
        let viewport = Viewport { width_px: 1920.0, min_width_px: 0.5, ..Viewport::default() };
        g.bench_function("cpu.large: flame layout 1920px", |b| b.iter(|| layout(&tree, &viewport)));
        // What the page's worker sends: frames at least 1/16384 of the view (0.5 px at 8192 px).
        let min_total = tree.total() / 16384;
        let (window, _) = tree.window(0, min_total, 399);
        eprintln!(
            "window at the root: {} of {} nodes, {} bytes",
            window.nodes.len(),
            tree.nodes.len(),
            window.to_bytes().len()
        );
        g.bench_function("cpu.large: window at the root + encode", |b| {
            b.iter(|| tree.window(0, min_total, 399).0.to_bytes())
        });
        // The page's transforms, before a call tree is built of the result.
        let transforms = [
            Transform::MergeFunction { name: "runtime.asyncPreempt".into() },
            Transform::CollapseRecursion { name: "runtime.mallocgc".into() },
            Transform::CollapsePackage { prefix: "runtime".into() },
            Transform::Invert,
        ];
        g.bench_function("cpu.large: transforms (merge, recursion, package, invert)", |b| {
            b.iter(|| p.transform(&transforms).unwrap())
        });
        // The page's source view of one function, and `-list` of a whole package.
        let function = SourceOptions::function("runtime.mallocgc");
        g.bench_function("cpu.large: source lines of one function", |b| b.iter(|| source(&whole, &function).unwrap()));
        let package = SourceOptions { functions: r"^runtime\.".into(), ..SourceOptions::default() };
        g.bench_function("cpu.large: source lines of runtime.*", |b| b.iter(|| source(&whole, &package).unwrap()));
        // The page's details panel: what a click on a frame asks.
        let selected = "main.startBranchy.func1.1";
        g.bench_function("cpu.large: details of one function", |b| b.iter(|| details(&whole, selected).unwrap()));
        g.bench_function("cpu.large: frame table", |b| {
            b.iter(|| FrameTable::new(&p, Granularity::default(), whole.filters()).unwrap().node_count())
        });
        // The page's graph view (issue 11: built and laid out in under 200 ms).
        let graph_options = GraphOptions::default();
        let layout_options = GraphLayoutOptions::default();
        g.bench_function("cpu.large: call graph (default pruning)", |b| {
            b.iter(|| call_graph(&whole, &graph_options).unwrap())
        });
        let graph = call_graph(&whole, &graph_options).unwrap();
        g.bench_function("cpu.large: call graph layout", |b| {
            b.iter(|| layout_call_graph(&graph, &layout_options).unwrap())
        });
        g.bench_function("cpu.large: call graph + layout", |b| {
            b.iter(|| layout_call_graph(&call_graph(&whole, &graph_options).unwrap(), &layout_options).unwrap())
        });
    }
    if let Some(dump) = large("goroutine.large.debug2.txt") {
        g.bench_function("goroutine.large.debug2: parse", |b| b.iter(|| stacklens_core::parse(&dump).unwrap()));
        g.bench_function("goroutine.large.debug2: parse + analyze", |b| {
            b.iter(|| analyze(&stacklens_core::parse(&dump).unwrap(), &GoroutineOptions::default()).unwrap())
        });
    }
    g.finish();
}

criterion_group!(large_inputs, benches);
criterion_main!(large_inputs);
