//! What the analysis worker holds: the loaded profiles, the call trees cached for
//! zooming, and the windows cut from them. Everything is core's analysis; this module
//! only adapts it to the worker's requests.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use stacklens_core::analysis::diff::{diff, DiffOptions, DiffReport};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineComparison, GoroutineOptions, GoroutineReport};
use stacklens_core::analysis::graph::{call_graph, GraphOptions};
use stacklens_core::analysis::timeline::{histogram, restrict, stack_chart, ChartViewport, TimelineOptions};
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::transforms::apply;
use stacklens_core::analysis::tree::{CallTree, Side, TreeOptions, ROOT};
use stacklens_core::analysis::Filters;
use stacklens_core::import::IncrementalParse;
use stacklens_core::layout::graph::{layout_call_graph, GraphLayoutOptions};
use stacklens_core::report::dot::legend;
use stacklens_core::{Error, Profile};

use super::protocol::{GraphPruning, LaidOutGraph, Shape, Timeline, WindowMeta};

/// A profile the user loaded, under the name they gave it, and the last shape the views
/// asked for (they ask many questions of one shape; a new shape replaces it).
pub struct Loaded {
    pub name: String,
    pub profile: Rc<Profile>,
    shaped: RefCell<Option<(Shape, Rc<Profile>)>>,
}

/// A call tree shared by the views; equal when it is the same tree.
#[derive(Clone)]
pub struct SharedTree(pub Arc<CallTree>);

impl PartialEq for SharedTree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Frames a window leaves out are narrower than 1/(2·WINDOW_PX) of the zoomed frame, so
/// invisible (under 0.5 px) on any canvas up to WINDOW_PX CSS pixels wide.
pub const WINDOW_PX: i64 = 8192;
/// Rows deeper than this are neither sent nor drawn (a 10,000-deep stack stays usable).
pub const MAX_ROWS: u32 = 400;

/// The search box's rule: a case-insensitive substring of the frame's name.
pub fn search_matcher(needle: &str) -> impl Fn(&str) -> bool {
    let needle = needle.to_lowercase();
    move |name| name.to_lowercase().contains(&needle)
}

/// A tree of more nodes is built without its narrowest subtrees (32 bytes a node: 256 MB
/// at most; the large CPU fixture's whole tree has 4.45 M nodes).
pub const MAX_TREE_NODES: usize = 8 << 20;

/// A zoomed subtree's detail is built within what its whole tree left of
/// [`MAX_TREE_NODES`], and at least this many nodes.
pub const MIN_DETAIL_NODES: usize = 1 << 20;

/// The window of `tree` zoomed at the node `zoom_path` names (from the root), and what
/// the page learns with it: the zoomed node, what `search` matches in the whole tree,
/// and whether pruning left anything out of it.
pub fn flame_window(tree: &CallTree, zoom_path: &[String], search: &str) -> (CallTree, WindowMeta) {
    let zoom = tree.node_at_path(zoom_path);
    let min_total = tree.nodes[zoom as usize].total / (2 * WINDOW_PX);
    let (window, at) = tree.window(zoom, min_total, MAX_ROWS - 1);
    let matched = (!search.is_empty()).then(|| (search.to_owned(), tree.search(search_matcher(search)).1));
    let meta =
        WindowMeta { zoom: at, matched, pruned_below: tree.pruned_below, complete: min_total >= tree.pruned_below };
    (window, meta)
}

/// Where a window of `tree` zoomed at `zoom_path` goes deeper than `tree` kept: the
/// root-first path of the deepest node of `zoom_path` that `tree` has, whose subtree
/// built alone has every frame the window lacks ([`detail_window`]); `None` when the
/// window is complete or at the root.
pub fn detail_path(tree: &CallTree, zoom_path: &[String], meta: &WindowMeta) -> Option<Vec<String>> {
    let zoom = tree.node_at_path(zoom_path);
    (!meta.complete && zoom != ROOT).then(|| tree.path(zoom).iter().map(|&n| tree.name(n).to_owned()).collect())
}

/// The window at `zoom_path` cut from `detail`, the tree of only the stacks through
/// `path` (a prefix of `zoom_path`), instead of from the pruned `whole`: every frame the
/// zoom can show, and a zoom deeper than `whole` kept. The root and the ancestors above
/// `path`'s node take their values from `whole` (in `detail` they carry only that
/// node's); the search and the whole tree's pruning stay `meta`'s.
pub fn detail_window(
    whole: &CallTree,
    detail: &CallTree,
    path: &[String],
    zoom_path: &[String],
    meta: WindowMeta,
) -> (CallTree, WindowMeta) {
    let zoom = detail.node_at_path(zoom_path);
    let min_total = detail.nodes[zoom as usize].total / (2 * WINDOW_PX);
    let (mut window, at) = detail.window(zoom, min_total, MAX_ROWS - 1);
    let above = std::iter::once(ROOT).chain(whole.path(whole.node_at_path(path))).take(path.len());
    for (node, from) in window.nodes[..at as usize].iter_mut().zip(above) {
        let whole_node = whole.nodes[from as usize];
        (node.total, node.self_value) = (whole_node.total, whole_node.self_value);
    }
    window.pruned_below = whole.pruned_below;
    (window, WindowMeta { zoom: at, complete: min_total >= detail.pruned_below, ..meta })
}

/// Whole call trees kept by the worker, newest last, so zooming and searching only cut
/// new windows; a few at most, and at most `kept_nodes` nodes while another is built, as
/// a large profile's tree takes over a hundred MB and the worker's memory never shrinks.
pub struct TreeCache<K> {
    entries: Vec<(K, Arc<CallTree>)>,
    kept_nodes: usize,
}

impl<K: PartialEq> Default for TreeCache<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PartialEq> TreeCache<K> {
    const CAPACITY: usize = 3;
    /// 32 MB of nodes: small trees stay cached side by side, a large one is dropped
    /// before the next is built.
    pub const KEPT_NODES: usize = 1 << 20;

    pub const fn new() -> Self {
        Self::keeping(Self::KEPT_NODES)
    }

    pub const fn keeping(kept_nodes: usize) -> Self {
        TreeCache { entries: Vec::new(), kept_nodes }
    }

    pub fn get_or_build(
        &mut self,
        key: K,
        build: impl FnOnce() -> Result<SharedTree, String>,
    ) -> Result<Arc<CallTree>, String> {
        self.get_or_build_keeping(key, self.kept_nodes, build)
    }

    /// [`TreeCache::get_or_build`], keeping up to `kept_nodes` nodes of the newest trees
    /// while building (a zoomed subtree's detail is built beside its whole tree).
    pub fn get_or_build_keeping(
        &mut self,
        key: K,
        kept_nodes: usize,
        build: impl FnOnce() -> Result<SharedTree, String>,
    ) -> Result<Arc<CallTree>, String> {
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            let entry = self.entries.remove(i);
            let tree = entry.1.clone();
            self.entries.push(entry);
            return Ok(tree);
        }
        // Evict first, so large trees are never held while another is built.
        while self.entries.len() >= Self::CAPACITY
            || self.entries.iter().map(|(_, t)| t.nodes.len()).sum::<usize>() > kept_nodes
        {
            self.entries.remove(0);
        }
        let tree = build()?.0;
        self.entries.push((key, tree.clone()));
        Ok(tree)
    }

    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.entries.retain(|(k, _)| keep(k));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
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

    /// The profile with `shape` applied: the time range first, then the transforms.
    pub fn shaped(&self, shape: &Shape) -> Result<Rc<Profile>, String> {
        if *shape == Shape::default() {
            self.shaped.replace(None);
            return Ok(self.profile.clone());
        }
        if let Some((_, profile)) = self.shaped.borrow().as_ref().filter(|(s, _)| s == shape) {
            return Ok(profile.clone());
        }
        // Dropped first, so two shaped copies of a large profile are never held at once.
        self.shaped.replace(None);
        let ranged = match shape.range {
            Some((from, to)) => Rc::new(restrict(&self.profile, from, to).map_err(|e| e.to_string())?),
            None => self.profile.clone(),
        };
        let profile = Rc::new(apply(&ranged, &shape.transforms).map_err(|e| e.to_string())?);
        self.shaped.replace(Some((shape.clone(), profile.clone())));
        Ok(profile)
    }

    /// Sample type names, and the index pprof would show by default.
    pub fn sample_types(&self) -> (Vec<String>, usize) {
        let p = &self.profile;
        ((0..p.sample_types.len()).map(|i| p.sample_type_name(i).to_owned()).collect(), p.default_sample_index())
    }

    pub fn top(&self, shape: &Shape, sample_index: usize, filters: &Filters) -> Result<TopReport, String> {
        let options =
            TopOptions { sample_index: sample_index.to_string(), filters: filters.clone(), ..TopOptions::default() };
        top(&*self.shaped(shape)?, &options).map_err(|e| e.to_string())
    }

    pub fn tree(&self, shape: &Shape, sample_index: usize, filters: &Filters) -> Result<SharedTree, String> {
        self.tree_below(shape, sample_index, filters, Vec::new(), MAX_TREE_NODES)
    }

    /// The tree of the stacks through `below` (root first; empty: all of them), within
    /// `max_nodes` nodes.
    pub fn tree_below(
        &self,
        shape: &Shape,
        sample_index: usize,
        filters: &Filters,
        below: Vec<String>,
        max_nodes: usize,
    ) -> Result<SharedTree, String> {
        let options = TreeOptions { max_nodes: Some(max_nodes), below, ..tree_options(sample_index, filters) };
        shared(CallTree::build(&*self.shaped(shape)?, &options))
    }

    /// Callers or callees of one function (the sandwich view).
    pub fn sandwich(
        &self,
        shape: &Shape,
        sample_index: usize,
        filters: &Filters,
        function: &str,
        side: Side,
    ) -> Result<SharedTree, String> {
        shared(CallTree::sandwich(&*self.shaped(shape)?, &tree_options(sample_index, filters), function, side))
    }

    /// The stack chart of `window` (the whole span when `None`) and the histogram of the
    /// whole span in `buckets` buckets; a profile without sample times gets core's reason.
    pub fn timeline(
        &self,
        shape: &Shape,
        sample_index: usize,
        filters: Filters,
        window: Option<(i64, i64)>,
        viewport: &ChartViewport,
        buckets: usize,
    ) -> Result<Timeline, String> {
        let profile = self.shaped(shape)?;
        let whole = TimelineOptions { sample_index: sample_index.to_string(), filters, ..TimelineOptions::default() };
        let histogram = match histogram(&profile, &whole, buckets) {
            Err(e @ Error::NoSampleTimes(_)) => return Ok(Timeline::Unavailable(e.to_string())),
            other => other.map_err(|e| e.to_string())?,
        };
        let options = TimelineOptions { start: window.map(|w| w.0), end: window.map(|w| w.1), ..whole };
        let chart = stack_chart(&profile, &options, viewport).map_err(|e| e.to_string())?;
        Ok(Timeline::Drawn { chart, histogram })
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
    let filters = Filters::default();
    let made_up = warm_up_profile();
    for _ in 0..2 {
        let Ok(loaded) = Loaded::parse("warm-up", &made_up) else { return };
        let _ = loaded.top(&Shape::default(), 1, &filters);
        if let Ok(tree) = loaded.tree(&Shape::default(), 1, &filters) {
            let _ = flame_window(&tree.0, &[], "hot").0.to_bytes();
        }
    }
}

/// pprof's call graph of `profile` at `pruning`, core's drawing of it and its legend.
pub fn call_graph_laid_out(
    profile: &Profile,
    sample_index: usize,
    filters: Filters,
    pruning: GraphPruning,
) -> Result<LaidOutGraph, String> {
    let options = GraphOptions {
        sample_index: sample_index.to_string(),
        filters,
        node_fraction: pruning.node_fraction,
        edge_fraction: pruning.edge_fraction,
        node_count: Some(pruning.node_count),
        focus_node: pruning.focus,
        ..GraphOptions::default()
    };
    let graph = call_graph(profile, &options).map_err(|e| e.to_string())?;
    let layout = layout_call_graph(&graph, &GraphLayoutOptions::default()).map_err(|e| e.to_string())?;
    let legend = legend(profile, &graph);
    Ok(LaidOutGraph { graph, layout, legend })
}

/// The diff of `compare` against `base` for the compared profile's sample type.
pub fn diff_profiles(
    base: &Loaded,
    compare: &Loaded,
    transforms: &Shape,
    sample_index: usize,
    filters: &Filters,
    normalize: bool,
) -> Result<DiffReport, String> {
    let options = DiffOptions {
        sample_index: sample_index.to_string(),
        filters: filters.clone(),
        normalize,
        ..DiffOptions::default()
    };
    diff(&*base.shaped(transforms)?, &*compare.shaped(transforms)?, &options).map_err(|e| e.to_string())
}

pub fn diff_tree(
    base: &Loaded,
    compare: &Loaded,
    transforms: &Shape,
    sample_index: usize,
    filters: &Filters,
) -> Result<SharedTree, String> {
    // Whole: diff trees are not pruned.
    let options = TreeOptions { max_nodes: None, ..tree_options(sample_index, filters) };
    shared(CallTree::build_diff(&*base.shaped(transforms)?, &*compare.shaped(transforms)?, &options))
}

/// The page's sample type and filters, within [`MAX_TREE_NODES`].
fn tree_options(sample_index: usize, filters: &Filters) -> TreeOptions {
    TreeOptions {
        sample_index: sample_index.to_string(),
        filters: filters.clone(),
        max_nodes: Some(MAX_TREE_NODES),
        ..TreeOptions::default()
    }
}

/// A built tree as the worker keeps it, or core's error as the page shows it.
fn shared(tree: stacklens_core::Result<CallTree>) -> Result<SharedTree, String> {
    tree.map(|t| SharedTree(Arc::new(t))).map_err(|e| e.to_string())
}

pub fn goroutine_growth(base: &Loaded, later: &Loaded) -> Result<GoroutineComparison, String> {
    compare(&base.profile, &later.profile).map_err(|e| e.to_string())
}
