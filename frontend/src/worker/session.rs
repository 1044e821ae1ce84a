//! What the analysis worker holds: the loaded profiles, each with the last shape the
//! views asked for. Everything is core's analysis; this module only adapts it to the
//! worker's requests.

use std::cell::RefCell;
use std::rc::Rc;

use stacklens_core::analysis::diff::{diff, DiffOptions, DiffReport};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineComparison, GoroutineOptions, GoroutineReport};
use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::timeline::{histogram, stack_chart, ChartViewport, TimelineOptions};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::tree::cache::MAX_TREE_NODES;
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::import::IncrementalParse;
use stacklens_core::layout::graph::{layout_call_graph, GraphLayoutOptions};
use stacklens_core::report::dot::legend;
use stacklens_core::{Error, Profile, Result as CoreResult};

use super::protocol::{GraphPruning, LaidOutGraph, Timeline};

/// A profile the user loaded, under the name they gave it, and the last shape (time
/// range and transforms) the views asked for: they ask many questions of one shape, and
/// a new shape replaces it.
pub struct Loaded {
    pub name: String,
    pub profile: Rc<Profile>,
    shaped: RefCell<Option<(Shape, Rc<Profile>)>>,
}

/// The part of a query that changes the profile itself, which [`Loaded`] keeps applied.
type Shape = (Vec<Transform>, Option<(i64, i64)>);

fn shape_of(query: &Query) -> Shape {
    (query.transforms.clone(), query.range)
}

impl Loaded {
    /// Parses bytes; the error names the file and says what is wrong with it.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Self, String> {
        Self::parse_reporting(name, IncrementalParse::new(), bytes, &mut |_, _| {})
    }

    /// [`Loaded::parse`] of the bytes `parse` was fed as they came (any part of them, or
    /// none), reporting progress. Every parse in the worker goes this way, so that the
    /// warm-up runs the code a large file's pieces do.
    pub fn parse_reporting(
        name: &str,
        parse: IncrementalParse,
        bytes: &[u8],
        progress: stacklens_core::import::Progress<'_>,
    ) -> Result<Self, String> {
        parse
            .finish(bytes, &stacklens_core::ParseOptions::default(), progress)
            .map(|profile| Self::new(name, profile))
            .map_err(|e| format!("{name}: {e}"))
    }

    pub fn new(name: &str, profile: Profile) -> Self {
        Loaded { name: name.to_owned(), profile: Rc::new(profile), shaped: RefCell::new(None) }
    }

    /// The profile with the query's range and transforms applied, the last one kept.
    pub fn shaped(&self, query: &Query) -> Result<Rc<Profile>, String> {
        let shape = shape_of(query);
        if shape == Shape::default() {
            self.shaped.replace(None);
            return Ok(self.profile.clone());
        }
        if let Some((_, profile)) = self.shaped.borrow().as_ref().filter(|(s, _)| *s == shape) {
            return Ok(profile.clone());
        }
        // Dropped first, so two shaped copies of a large profile are never held at once.
        self.shaped.replace(None);
        let profile = Rc::new(query.shape(&self.profile).map_err(|e| e.to_string())?.into_owned());
        self.shaped.replace(Some((shape, profile.clone())));
        Ok(profile)
    }

    /// Answers `ask` of the profile prepared for `query`; core's error as the page shows it.
    pub fn prepared<T>(&self, query: &Query, ask: impl FnOnce(&Prepared) -> CoreResult<T>) -> Result<T, String> {
        let shaped = self.shaped(query)?;
        query.prepare_shaped(&shaped).and_then(|prepared| ask(&prepared)).map_err(|e| e.to_string())
    }

    /// Sample type names, and the index pprof would show by default.
    pub fn sample_types(&self) -> (Vec<String>, usize) {
        let p = &self.profile;
        ((0..p.sample_types.len()).map(|i| p.sample_type_name(i).to_owned()).collect(), p.default_sample_index())
    }

    /// The tree of the stacks through `below` (root first; empty: all of them), within
    /// `max_nodes` nodes.
    pub fn tree_below(&self, query: &Query, below: Vec<String>, max_nodes: usize) -> Result<CallTree, String> {
        self.prepared(query, |p| CallTree::build(p, &TreeOptions { max_nodes: Some(max_nodes), below }))
    }

    /// The stack chart of `window` (the whole span when `None`) and the histogram of the
    /// whole span in `buckets` buckets; a profile without sample times gets core's reason.
    pub fn timeline(
        &self,
        query: &Query,
        window: Option<(i64, i64)>,
        viewport: &ChartViewport,
        buckets: usize,
    ) -> Result<Timeline, String> {
        self.prepared(query, |prepared| {
            let histogram = match histogram(prepared, &TimelineOptions::default(), buckets) {
                Err(e @ Error::NoSampleTimes(_)) => return Ok(Timeline::Unavailable(e.to_string())),
                other => other?,
            };
            let options = TimelineOptions { start: window.map(|w| w.0), end: window.map(|w| w.1) };
            let chart = stack_chart(prepared, &options, viewport)?;
            Ok(Timeline::Drawn { chart, histogram })
        })
    }

    pub fn goroutines(&self, filter: &str) -> Result<GoroutineReport, String> {
        let options = GoroutineOptions { filter: Some(filter.to_owned()), max_stacks: Some(200) };
        analyze(&self.profile, &options).map_err(|e| e.to_string())
    }
}

/// A tiny gzipped cpu profile (main → work → hot: 3 samples, main → idle: 1), for
/// tests and the warm-up's inflate.
pub fn tiny_cpu_profile() -> Vec<u8> {
    use stacklens_core::model::{Line, Sample, SourceFormat};
    use std::io::Write;
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    let mut frame = |name: &str| {
        let f = p.add_function(name, name, "main.go", 1);
        p.add_location(0x1000 + u64::from(f.0), vec![Line { function: f, line: 10, column: 0 }])
    };
    let (main, work, hot, idle) = (frame("main"), frame("work"), frame("hot"), frame("idle"));
    p.samples.push(Sample { locations: vec![hot, work, main], values: vec![3, 30], labels: vec![] });
    p.samples.push(Sample { locations: vec![idle, main], values: vec![1, 10], labels: vec![] });
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&stacklens_core::export::pprof::encode(&p)).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// The landing page's "Try an example": 30 s of CPU of a small Go web service, made
/// here (no network, no file): three endpoints for two tenants (`endpoint` and
/// `tenant` labels), JSON, gzip, SQL and the garbage collector.
pub fn example_profile() -> Vec<u8> {
    use stacklens_core::model::{Label, LabelValue, Line, Sample, SourceFormat};
    use std::io::Write;
    const SERVE: [&str; 4] = [
        "net/http.(*conn).serve",
        "net/http.serverHandler.ServeHTTP",
        "net/http.(*ServeMux).ServeHTTP",
        "net/http.HandlerFunc.ServeHTTP",
    ];
    // Leaf-last paths under an endpoint's handler, with their weight per request.
    let paths: [(&str, &[&str], u64); 9] = [
        ("/checkout", &["main.checkout", "main.priceCart", "main.applyDiscounts"], 9),
        (
            "/checkout",
            &[
                "main.checkout",
                "encoding/json.Marshal",
                "encoding/json.(*encodeState).reflectValue",
                "reflect.Value.Field",
            ],
            7,
        ),
        ("/checkout", &["main.checkout", "database/sql.(*DB).QueryContext", "syscall.Syscall"], 5),
        ("/checkout", &["main.checkout", "crypto/sha256.(*digest).Write", "crypto/sha256.block"], 4),
        ("/search", &["main.search", "main.rank", "sort.Slice", "main.rank.func1"], 8),
        ("/search", &["main.search", "compress/gzip.(*Writer).Write", "compress/flate.(*compressor).deflate"], 6),
        ("/search", &["main.search", "regexp.(*Regexp).FindAllString", "regexp.(*machine).match"], 5),
        ("/search", &["main.search", "runtime.mallocgc"], 3),
        ("/health", &["main.health", "fmt.Fprintf"], 1),
    ];
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    p.period_type = Some(p.value_type("cpu", "nanoseconds"));
    p.period = 10_000_000;
    p.duration_nanos = 30_000_000_000;
    p.comments = vec![p.strings.intern("stacklens example: a Go web service under load")];
    let mut frames = std::collections::HashMap::new();
    let mut frame = |p: &mut Profile, name: &str| {
        let next = frames.len() as u64;
        *frames.entry(name.to_owned()).or_insert_with(|| {
            let file = format!("/src/{}.go", stacklens_core::analysis::summary::package_of(name).replace('/', "_"));
            let f = p.add_function(name, name, &file, 10 + next as i64 * 7);
            p.add_location(0x40_0000 + next * 0x40, vec![Line { function: f, line: 12 + next as i64 * 7, column: 0 }])
        })
    };
    let (endpoint, tenant) = (p.strings.intern("endpoint"), p.strings.intern("tenant"));
    // A fixed pseudo-random walk, so every visitor sees the same example.
    let mut next = pseudo_random();
    for (i, (path, stack, weight)) in paths.iter().enumerate() {
        for (t, name) in ["acme", "globex"].iter().enumerate() {
            let count = (weight * (14 + 6 * t as u64) + next() % 9) as i64;
            let mut locations: Vec<_> = stack.iter().rev().map(|n| frame(&mut p, n)).collect();
            locations.extend(SERVE.iter().rev().map(|n| frame(&mut p, n)));
            let labels = vec![
                Label { key: endpoint, value: LabelValue::Str(p.strings.intern(path)) },
                Label { key: tenant, value: LabelValue::Str(p.strings.intern(name)) },
            ];
            p.samples.push(Sample { locations, values: vec![count, count * 10_000_000], labels });
            if i == 0 && t == 0 {
                let gc = ["runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"].map(|n| frame(&mut p, n));
                p.samples.push(Sample { locations: gc.to_vec(), values: vec![31, 310_000_000], labels: vec![] });
            }
        }
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&stacklens_core::export::pprof::encode(&p)).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// The same sequence of pseudo-random numbers every time (a linear congruential
/// generator's high bits), for the made-up profiles.
fn pseudo_random() -> impl FnMut() -> u64 {
    let mut seed = 0x2545_f491_u64;
    move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        seed >> 33
    }
}

/// A raw cpu profile made up for the warm-up: 3,000 samples 10 to 40 deep over 400
/// locations (every fifth with an inlined line), stacks sharing prefixes as real ones do.
pub fn warm_up_profile() -> Vec<u8> {
    use stacklens_core::model::{Line, Sample, SourceFormat};
    const LOCATIONS: u64 = 400;
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    let locations: Vec<_> = (0..LOCATIONS)
        .map(|i| {
            let name = format!("example.com/service/pkg{}.function{i}", i % 23);
            let line = |p: &mut Profile, name: &str| {
                let function = p.add_function(name, name, "service.go", i as i64);
                Line { function, line: 10 + i as i64, column: 0 }
            };
            let mut lines = vec![line(&mut p, &name)];
            if i % 5 == 0 {
                lines.insert(0, line(&mut p, &format!("{name}.inlined")));
            }
            p.add_location(0x40_0000 + i * 0x40, lines)
        })
        .collect();
    let mut next = pseudo_random();
    for _ in 0..3_000 {
        let depth = 10 + next() % 31;
        let mut at = next() % 4;
        let mut stack: Vec<_> = (0..depth)
            .map(|_| {
                at = (at * 7 + 1 + next() % 3) % LOCATIONS;
                locations[at as usize]
            })
            .collect();
        stack.reverse();
        p.samples.push(Sample { locations: stack, values: vec![1, 10_000_000], labels: vec![] });
    }
    stacklens_core::export::pprof::encode(&p)
}

/// Parses and analyses a made-up profile the way a loaded one is, twice, at
/// the worker's start: WebAssembly starts in a baseline compiler and only optimises a
/// function once it has run a while (never during a call), so the first large file's
/// parse and call tree, one long call each, ran entirely unoptimised.
pub fn warm_up() {
    let query = Query { sample: 1.into(), ..Query::default() };
    let made_up = warm_up_profile();
    for _ in 0..2 {
        let Ok(loaded) = Loaded::parse("warm-up", &made_up) else { return };
        let _ = loaded.prepared(&query, |p| top(p, &TopOptions::default()));
        if let Ok(tree) = loaded.tree_below(&query, Vec::new(), MAX_TREE_NODES) {
            let _ = tree.flame_window(&[], "hot").0.to_bytes();
        }
    }
}

/// pprof's call graph of the prepared profile at `pruning`, core's drawing of it and its
/// legend.
pub fn call_graph_laid_out(prepared: &Prepared, pruning: GraphPruning) -> CoreResult<LaidOutGraph> {
    let options = GraphOptions {
        node_fraction: pruning.node_fraction,
        edge_fraction: pruning.edge_fraction,
        node_count: Some(pruning.node_count),
        focus_node: pruning.focus,
    };
    let graph = call_graph(prepared, &options)?;
    let layout = layout_call_graph(&graph, &GraphLayoutOptions::default())?;
    let legend = legend(prepared.profile(), &graph);
    Ok(LaidOutGraph { graph, layout, legend })
}

/// Answers `ask` of `base` and `compare` prepared as a pair for `query` (its transforms;
/// a diff has no time range).
pub fn with_pair<T>(
    base: &Loaded,
    compare: &Loaded,
    query: &Query,
    ask: impl FnOnce(&Prepared, &Prepared) -> CoreResult<T>,
) -> Result<T, String> {
    let query = query.without_range();
    let (base, compare) = (base.shaped(&query)?, compare.shaped(&query)?);
    query.prepare_pair(&base, &compare).and_then(|(b, c)| ask(&b, &c)).map_err(|e| e.to_string())
}

/// The diff report of `compare` against `base`.
pub fn diff_profiles(base: &Loaded, compare: &Loaded, query: &Query, normalize: bool) -> Result<DiffReport, String> {
    with_pair(base, compare, query, |b, c| diff(b, c, &DiffOptions { normalize, ..DiffOptions::default() }))
}

/// The diff tree of `compare` against `base` (whole: diff trees are not pruned).
pub fn diff_tree(base: &Loaded, compare: &Loaded, query: &Query) -> Result<CallTree, String> {
    with_pair(base, compare, query, |b, c| CallTree::build_diff(b, c, &TreeOptions::default()))
}

pub fn goroutine_growth(base: &Loaded, later: &Loaded) -> Result<GoroutineComparison, String> {
    compare(&base.profile, &later.profile).map_err(|e| e.to_string())
}
