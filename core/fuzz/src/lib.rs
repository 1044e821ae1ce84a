//! Helpers shared by the fuzz targets: structural checks on parsed profiles, and
//! analysis options read from a fixed-size prefix of the fuzz input.

use arbitrary::{Arbitrary, Unstructured};
use stacklens_core::analysis::diff::DiffOptions;
use stacklens_core::analysis::top::TopOptions;
use stacklens_core::analysis::{Filters, Granularity, Query};
use stacklens_core::Profile;

/// Bytes at the start of an analysis target's input that choose the options; the rest
/// is the profile. Fixed, so `scripts/fuzz.sh` can seed with `PREFIX` zero bytes + a fixture.
pub const PREFIX: usize = 64;

/// Splits `data` into the option bytes (zero-padded) and the profile bytes.
pub fn split(data: &[u8]) -> ([u8; PREFIX], &[u8]) {
    let n = data.len().min(PREFIX);
    let mut head = [0u8; PREFIX];
    head[..n].copy_from_slice(&data[..n]);
    (head, &data[n..])
}

/// `header` followed by the fuzz input: steers the input into one importer.
pub fn with_header(header: &[u8], data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(header.len() + data.len());
    v.extend_from_slice(header);
    v.extend_from_slice(data);
    v
}

/// The model's invariants every importer must keep (analysis indexes by them).
pub fn check(p: &Profile) {
    let (nl, nf, nm) = (p.locations.len(), p.functions.len(), p.mappings.len());
    for (i, s) in p.samples.iter().enumerate() {
        assert_eq!(s.values.len(), p.sample_types.len(), "sample {i}: one value per sample type");
        assert!(s.locations.iter().all(|l| (l.0 as usize) < nl), "sample {i}: location out of range");
    }
    for l in &p.locations {
        assert!(l.lines.iter().all(|line| (line.function.0 as usize) < nf), "line names a missing function");
        assert!(l.mapping.is_none_or(|m| (m.0 as usize) < nm), "location names a missing mapping");
    }
    for g in &p.goroutines {
        assert!(g.stack.iter().all(|l| (l.0 as usize) < nl), "goroutine stack out of range");
        assert!(g.created_by.as_ref().is_none_or(|c| (c.location.0 as usize) < nl), "creator out of range");
    }
}

/// Regular expressions the filters pick from (one invalid, for the error path).
const REGEXES: &[&str] = &["main", "^runtime\\.", ".", "^$", "Lock", "(", "\\.go$", "(?i)gc", "0x", "\\[", "a|b"];

/// Sample type specs: names pprof knows, a number, the legacy prefix, and nonsense.
const SAMPLE_INDEX: &[&str] = &[
    "",
    "0",
    "1",
    "3",
    "samples",
    "cpu",
    "inuse_space",
    "alloc_space",
    "space",
    "contentions",
    "delay",
    "goroutine",
    "sample_index=1",
    "bogus",
];

#[derive(Debug, Arbitrary)]
struct RawOptions {
    sample_index: u8,
    granularity: u8,
    focus: Option<u8>,
    ignore: Option<u8>,
    hide: Option<u8>,
    show: Option<u8>,
    cum: bool,
    node_count: Option<u8>,
    node_fraction: f64,
    normalize: bool,
    noise_threshold_pct: f64,
    max_stacks: u8,
    filter: Option<u8>,
}

/// Analysis options as the API could send them (any finite JSON number included).
#[derive(Debug)]
pub struct Options {
    /// Sample type, granularity, filters.
    pub query: Query,
    /// -cum, -nodecount, -nodefraction.
    pub top: TopOptions,
    pub normalize: bool,
    pub noise_threshold_pct: f64,
    pub max_stacks: usize,
    /// A goroutine filter: a regex from the list used as plain text.
    pub filter: Option<String>,
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

impl Options {
    pub fn read(u: &mut Unstructured<'_>) -> Self {
        let r: RawOptions = u.arbitrary().unwrap_or(RawOptions {
            sample_index: 0,
            granularity: 0,
            focus: None,
            ignore: None,
            hide: None,
            show: None,
            cum: false,
            node_count: None,
            node_fraction: 0.0,
            normalize: false,
            noise_threshold_pct: 1.0,
            max_stacks: 50,
            filter: None,
        });
        let regex = |i: Option<u8>| i.map(|i| REGEXES[i as usize % REGEXES.len()].to_owned());
        Options {
            query: Query {
                sample: SAMPLE_INDEX[r.sample_index as usize % SAMPLE_INDEX.len()].into(),
                granularity: [
                    Granularity::Functions,
                    Granularity::Filefunctions,
                    Granularity::Lines,
                    Granularity::Addresses,
                ][r.granularity as usize % 4],
                filters: Filters {
                    focus: regex(r.focus),
                    ignore: regex(r.ignore),
                    hide: regex(r.hide),
                    show: regex(r.show),
                    ..Filters::default()
                },
                ..Query::default()
            },
            top: TopOptions {
                cum: r.cum,
                node_count: r.node_count.map(usize::from),
                node_fraction: finite(r.node_fraction),
            },
            normalize: r.normalize,
            noise_threshold_pct: finite(r.noise_threshold_pct),
            max_stacks: usize::from(r.max_stacks),
            filter: regex(r.filter),
        }
    }

    /// The diff's own settings (the query holds the rest).
    pub fn diff(&self) -> DiffOptions {
        DiffOptions {
            normalize: self.normalize,
            noise_threshold_pct: self.noise_threshold_pct,
            max_stacks: self.max_stacks,
        }
    }
}

/// A flame-graph viewport with any finite numbers.
pub fn viewport(u: &mut Unstructured<'_>, nodes: usize) -> stacklens_core::layout::Viewport {
    let zoom: u32 = u.arbitrary().unwrap_or(0);
    let width_px: f64 = u.arbitrary().unwrap_or(1000.0);
    let min_width_px: f64 = u.arbitrary().unwrap_or(0.5);
    let max_depth: u32 = u.arbitrary().unwrap_or(u32::MAX);
    let (from, to): (f64, f64) = (u.arbitrary().unwrap_or(0.0), u.arbitrary().unwrap_or(1.0));
    stacklens_core::layout::Viewport {
        // Sometimes one past the end: layout must fall back to the root.
        zoom: zoom % (nodes as u32).saturating_add(1).max(1),
        width_px: finite(width_px),
        min_width_px: finite(min_width_px),
        max_depth,
        // NaN and infinities too: layout must fall back to the whole span.
        from,
        to,
    }
}

/// The call tree's pre-order shape: every node inside its parent's subtree, one level
/// below it, names and per-node side tables in range.
pub fn check_tree(t: &stacklens_core::analysis::tree::CallTree) {
    let n = t.nodes.len();
    assert!(n >= 1, "a tree has its root");
    assert_eq!(t.nodes[0].end as usize, n, "the root spans the tree");
    assert_eq!(t.names.len(), t.files.len());
    assert!(t.base.is_empty() || t.base.len() == n);
    assert!(t.left_out_before.is_empty() || t.left_out_before.len() == n);
    for (i, node) in t.nodes.iter().enumerate().skip(1) {
        let parent = &t.nodes[node.parent as usize];
        assert!((node.parent as usize) < i, "node {i}: parent {} comes first", node.parent);
        assert!(i < parent.end as usize && node.end <= parent.end, "node {i}: inside its parent");
        assert!(node.end as usize > i, "node {i}: end after itself");
        assert_eq!(node.depth, parent.depth + 1, "node {i}: one below its parent");
        assert!((node.name as usize) < t.names.len());
    }
    assert_eq!(t.max_depth, t.nodes.iter().map(|n| n.depth).max().unwrap_or(0));
}

/// `to_bytes` → `from_bytes` gives the same tree.
pub fn check_round_trip(t: &stacklens_core::analysis::tree::CallTree) {
    let back = stacklens_core::analysis::tree::CallTree::from_bytes(&t.to_bytes()).expect("to_bytes output reads back");
    assert_eq!(back.nodes, t.nodes);
    assert_eq!(back.names, t.names);
    assert_eq!(back.files, t.files);
    assert_eq!(back.base, t.base);
    assert_eq!(back.left_out_before, t.left_out_before);
}
