//! The call graph of `go tool pprof -dot` (pprof's Graph view): one node per function (at
//! the chosen granularity) with flat and cum values, and caller→callee edges weighted by
//! the samples through both. It is pruned exactly as pprof prunes a dot graph
//! (`report.newTrimmedGraph` in visual mode): nodes under `node_fraction` of the flat sum
//! go, the rest are sorted by pprof's entropy score and the first `node_count` kept (label
//! nodelets counting as nodes), and each pruning rebuilds the graph from the samples, so
//! a caller and a callee that lose the frames between them get a residual edge. Edges
//! under `edge_fraction` go, then residual edges that another path makes redundant.

use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::{Deserialize, Serialize};

use super::frames::{FrameTable, Granularity, Stamps};
use super::query::Prepared;
use super::top::fraction_cutoff;
use crate::model::{Label, LabelValue};
use crate::units::{format_value, format_value_in, percentage, report_unit};
use crate::{Error, Profile, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GraphOptions {
    /// Drop nodes whose |cum| is below this share of the summed flat values
    /// (`-nodefraction`).
    pub node_fraction: f64,
    /// Drop edges whose |weight| is below this share of the summed flat values
    /// (`-edgefraction`).
    pub edge_fraction: f64,
    /// Keep at most this many nodes (`-nodecount`), a node's label nodelets counted as
    /// pprof counts them; `None` (or 0) keeps all.
    pub node_count: Option<usize>,
    /// Keep only the samples whose stack passes through this node, named as
    /// [`GraphNode::name`] (pprof's web view focusing on one node).
    pub focus_node: Option<String>,
}

/// pprof's defaults for `-dot`.
impl Default for GraphOptions {
    fn default() -> Self {
        Self { node_fraction: 0.005, edge_fraction: 0.001, node_count: Some(80), focus_node: None }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// The full name, as pprof's tooltip and `-top` print it.
    pub name: String,
    pub flat: i64,
    pub cum: i64,
    /// The source file of the node's function, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The box's text, one entry per line, as pprof labels a node: the shortened name
    /// split at `.` and `::`, then flat and cum with their shares of the total.
    pub label: Vec<String>,
    /// pprof's font size: 8, growing to 24 with the square root of flat's share of the
    /// largest flat.
    pub font_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
    /// Index of the caller in [`CallGraph::nodes`].
    pub from: u32,
    /// Index of the callee.
    pub to: u32,
    pub weight: i64,
    /// Every call along the edge was inlined into its caller (dot's "(inline)").
    pub inline: bool,
    /// The edge stands for a path whose intermediate nodes were pruned (dot's dotted line).
    pub residual: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallGraph {
    pub sample_type: String,
    /// The unit of the sample values.
    pub unit: String,
    /// The unit the labels print values in (pprof picks one per report).
    pub output_unit: String,
    /// pprof's total: the sum of |value| over every sample, before any filter.
    pub total: i64,
    /// In pprof's order (dot's `N1`, `N2`, …): by entropy score, then name.
    pub nodes: Vec<GraphNode>,
    /// Heaviest first, then by caller and callee name.
    pub edges: Vec<GraphEdge>,
    /// Nodes left after `node_fraction`, before `node_count` ("Showing top N nodes out of M").
    pub node_total: usize,
    /// Nodes dropped by `node_fraction`.
    pub dropped_nodes: usize,
    /// Edges dropped by `edge_fraction` in the last pruning step (as pprof counts them).
    pub dropped_edges: usize,
    /// The cutoffs pprof prints in its legend: |total × fraction|.
    pub node_cutoff: i64,
    pub edge_cutoff: i64,
}

impl CallGraph {
    /// A value as the labels print it, in [`CallGraph::output_unit`].
    pub fn format_value(&self, value: i64) -> String {
        format_value_in(value, &self.unit, &self.output_unit)
    }
}

/// A profile's call graph, pruned as `go tool pprof -dot` prunes it.
pub fn call_graph(prepared: &Prepared, options: &GraphOptions) -> Result<CallGraph> {
    let (profile, sample_index) = (prepared.profile(), prepared.sample_index);
    let table = prepared.frames()?;
    let focus = match &options.focus_node {
        Some(name) => Some(
            (0..table.node_count() as u32)
                .find(|&n| table.name(n) == name)
                .ok_or_else(|| Error::UnknownNode(name.clone()))?,
        ),
        None => None,
    };
    let node_count = options.node_count.filter(|&n| n > 0);
    let input = Input::new(table, sample_index, focus, node_count.is_some());

    let values = input.node_values();
    // pprof's cutoffs are shares of the full graph's flat sum.
    let nodes = values.with_value(0..input.table.node_count() as u32);
    let flat_sum = nodes.iter().map(|&n| values.flat[n as usize]).fold(0i64, i64::saturating_add);
    let node_cutoff = fraction_cutoff(flat_sum, options.node_fraction);
    let edge_cutoff = fraction_cutoff(flat_sum, options.edge_fraction);
    let mut kept: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|&n| values.cum[n as usize].unsigned_abs() >= node_cutoff.unsigned_abs())
        .collect();
    // Hottest first: the build numbers them in this order.
    kept.sort_by_key(|&n| std::cmp::Reverse(values.cum[n as usize].unsigned_abs()));
    let dropped_nodes = nodes.len() - kept.len();
    let mut graph = input.build(&kept, &values);
    let node_total = graph.nodes.len();
    graph.sort_by_entropy(&input.table);
    if let Some(limit) = node_count {
        graph.trim_edges(edge_cutoff);
        let shown = graph.top_nodes(limit, node_cutoff, &input.tags);
        if shown < graph.nodes.len() {
            graph = input.build(&graph.nodes[..shown], &values);
            graph.sort_by_entropy(&input.table);
        }
    }
    let dropped_edges = graph.trim_edges(edge_cutoff);
    graph.remove_redundant_edges(&input.table);

    let total = input.total;
    let unit = profile.sample_type_unit(sample_index).to_owned();
    let shown = graph.nodes.iter().map(|&n| (values.flat[n as usize], values.cum[n as usize]));
    let mut result = CallGraph {
        sample_type: profile.sample_type_name(sample_index).to_owned(),
        output_unit: report_unit(shown, total, &unit),
        unit,
        total,
        nodes: Vec::with_capacity(graph.nodes.len()),
        edges: Vec::new(),
        node_total,
        dropped_nodes,
        dropped_edges,
        node_cutoff: fraction_cutoff(total, options.node_fraction),
        edge_cutoff: fraction_cutoff(total, options.edge_fraction),
    };
    let max_flat = graph.nodes.iter().map(|&n| values.flat[n as usize].unsigned_abs()).max().unwrap_or(0);
    for &n in &graph.nodes {
        let (flat, cum) = (values.flat[n as usize], values.cum[n as usize]);
        let mut label = name_lines(&input.table, prepared.granularity, n);
        label.extend(value_lines(&result, flat, cum));
        let file = input.table.file(n);
        result.nodes.push(GraphNode {
            name: input.table.name(n).to_owned(),
            flat,
            cum,
            file: (!file.is_empty()).then(|| file.to_owned()),
            label,
            font_size: font_size(flat, max_flat),
        });
    }
    let position: HashMap<u32, u32> = graph.nodes.iter().enumerate().map(|(i, &n)| (n, i as u32)).collect();
    result.edges = graph
        .sorted_live_edges((0..graph.edges.len() as u32).collect(), &input.table)
        .into_iter()
        .filter_map(|e| {
            let e = &graph.edges[e as usize];
            // Values that cancel out (negative samples) leave a node without any, and out.
            Some(GraphEdge {
                from: *position.get(&e.src)?,
                to: *position.get(&e.dest)?,
                weight: e.weight,
                inline: e.inline,
                residual: e.residual,
            })
        })
        .collect();
    Ok(result)
}

/// pprof's node font size: 8 for no flat value, up to 24 for the largest.
fn font_size(flat: i64, max_flat: u64) -> u32 {
    if max_flat == 0 || flat == 0 {
        return 8;
    }
    8 + (16.0 * (flat.unsigned_abs() as f64 / max_flat as f64).sqrt()).ceil() as u32
}

/// The value part of a node's label: `5.46s (0.21%)` and `of 2489.35s (96.22%)`, or
/// `0 of 6.64MB (91.34%)` when the node has no flat value.
fn value_lines(graph: &CallGraph, flat: i64, cum: i64) -> Vec<String> {
    let with_share = |v: i64| format!("{} ({})", graph.format_value(v), percentage(v, graph.total).trim());
    match (flat, cum == flat) {
        (_, true) if flat != 0 => vec![with_share(flat)],
        (0, true) => vec!["0".to_owned()],
        (0, false) => vec![format!("0 of {}", with_share(cum))],
        _ => vec![with_share(flat), format!("of {}", with_share(cum))],
    }
}

/// The name part of a node's label, as pprof's `multilinePrintableName`: the address
/// (by address only), the shortened function name split at `::` and `.`, and the file's
/// base name (with the line, by line or address).
fn name_lines(table: &FrameTable, granularity: Granularity, node: u32) -> Vec<String> {
    // The table's profile: tagroot/tagleaf label frames are locations of its own.
    let profile = table.profile();
    let (location, line) = table.origin(node);
    let location = profile.location(location);
    let mut lines = Vec::new();
    if granularity == Granularity::Addresses && location.address != 0 {
        lines.push(format!("{:016x}", location.address));
    }
    let Some(line) = line.and_then(|i| location.lines.get(i)) else {
        lines.push(profile.unsymbolized_name(location));
        return lines;
    };
    let function = profile.function(line.function);
    let name = profile.str(function.name);
    if !name.is_empty() {
        let name = shorten_function_name(name).replace("::", "\n").replace("[...]", "[…]").replace('.', "\n");
        lines.extend(name.split('\n').map(str::to_owned));
    }
    let file = profile.str(function.filename);
    let base = file.rsplit('/').next().unwrap_or(file);
    match granularity {
        Granularity::Functions => {}
        Granularity::Lines | Granularity::Addresses if line.line != 0 => lines.push(format!("{base}:{}", line.line)),
        _ if !file.is_empty() => lines.push(base.to_owned()),
        _ => {}
    }
    if lines.is_empty() {
        lines.push("<unknown>".to_owned());
    }
    lines
}

/// pprof's `ShortenFunctionName`: a Go, Java or C++ name without its package path,
/// Java package and arguments, or C++ namespaces.
pub fn shorten_function_name(name: &str) -> String {
    // Go's `\w` and `\d` are ASCII only.
    static ANONYMOUS_NAMESPACE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\(anonymous namespace\)::").expect("valid regex"));
    static GO_MODULE_VERSION: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*?)/v(?:[2-9]|[1-9][0-9]+)([./].*)$").expect("valid regex"));
    static SHORTENERS: LazyLock<[Regex; 3]> = LazyLock::new(|| {
        [
            r"^(?:[0-9A-Za-z_\-.]+/)+([^.]+\..+)",
            r"^(?:[a-z][0-9A-Za-z_]*\.)*([A-Z][0-9A-Za-z_$]*\.(?:<init>|[a-z][0-9A-Za-z_$]*(?:\$[0-9]+)?))(?:\(|$)",
            r"^(?:[_a-zA-Z][0-9A-Za-z_]*::)+(_*[A-Z][0-9A-Za-z_]*::~?[_a-zA-Z][0-9A-Za-z_]*(?:<.*>)?)",
        ]
        .map(|re| Regex::new(re).expect("valid regex"))
    });
    let name = ANONYMOUS_NAMESPACE.replace(name, "");
    let name = GO_MODULE_VERSION.replace(&name, "${1}${2}");
    SHORTENERS
        .iter()
        .find_map(|re| re.captures(&name).and_then(|c| c.get(1)).map(|m| m.as_str().to_owned()))
        .unwrap_or_else(|| name.into_owned())
}

/// The samples a graph is built from: those the filters (and the focus node) keep, with
/// their values, their stacks as report nodes (walked once: every build streams through
/// them), and, when nodes are to be selected, their label tags.
struct Input<'a> {
    table: FrameTable<'a>,
    /// (index into the table's `profile().samples`, value, end of its stack in `frames`)
    samples: Vec<(u32, i64, usize)>,
    /// The samples' nodes, root first, each with [`INLINED`] set for an inlined call.
    frames: Vec<u32>,
    tags: SampleTags,
    /// pprof's total, as [`Profile::total`] (label frames change no value), summed in
    /// the same walk: each sample's values are a pointer away, so a second walk costs.
    total: i64,
}

/// Marks a node in [`Input::frames`] as inlined into its caller.
const INLINED: u32 = 1 << 31;
/// A location with other than one node, in [`Input::new`]'s table of single nodes (no
/// node is `u32::MAX`: that would be an inlined node numbered 2³¹ - 1).
const SEVERAL: u32 = u32::MAX;

impl<'a> Input<'a> {
    fn new(table: FrameTable<'a>, index: usize, focus: Option<u32>, with_tags: bool) -> Self {
        // The samples as the filters see them (with tagroot/tagleaf label frames).
        let profile = table.profile();
        let mut samples = Vec::new();
        // At least a node per location: growing 10⁷ frames by doubling costs more.
        let mut frames = Vec::with_capacity(profile.samples.iter().map(|s| s.locations.len()).sum());
        // Each location's nodes, root first, packed once: the walk below then reads one
        // table instead of the frame table's three (the large profiles' cost is memory).
        // Nearly every location has one node, kept in `single` so that the walk reads one
        // word per location; the others are `SEVERAL` there and read from the packed table.
        let mut location_frames = Vec::with_capacity(profile.locations.len());
        let mut location_starts = Vec::with_capacity(profile.locations.len() + 1);
        let mut single = Vec::with_capacity(profile.locations.len());
        for l in 0..profile.locations.len() as u32 {
            let start = location_frames.len();
            location_starts.push(start);
            location_frames
                .extend(table.nodes(l).rev().map(|(node, inlined)| if inlined { node | INLINED } else { node }));
            single.push(if location_frames.len() == start + 1 { location_frames[start] } else { SEVERAL });
        }
        location_starts.push(location_frames.len());
        let mut total = 0i64;
        for (i, sample) in profile.samples.iter().enumerate() {
            let value = sample.values.get(index).copied().unwrap_or(0);
            total = total.saturating_add(value.saturating_abs());
            if value == 0 || !table.keeps(sample) {
                continue;
            }
            let start = frames.len();
            for location in sample.locations.iter().rev() {
                let l = location.0 as usize;
                match single[l] {
                    SEVERAL => frames.extend_from_slice(&location_frames[location_starts[l]..location_starts[l + 1]]),
                    frame => frames.push(frame),
                }
            }
            let through = focus.is_none_or(|focus| frames[start..].iter().any(|&f| f & !INLINED == focus));
            if through {
                samples.push((i as u32, value, frames.len()));
            } else {
                frames.truncate(start);
            }
        }
        let tags = if with_tags { SampleTags::new(profile, &samples) } else { SampleTags::default() };
        Self { table, samples, frames, tags, total }
    }

    /// Every node's values, summed over the samples once: a node's flat and cum count
    /// the samples through it whichever other nodes pruning keeps (pprof sums them again
    /// for each graph it builds, to the same values).
    fn node_values(&self) -> NodeValues {
        let n = self.table.node_count();
        let mut values =
            NodeValues { flat: vec![0; n], cum: vec![0; n], tags: PairMap::new(n, self.tags.sets.len(), (0, 0)) };
        let mut seen_nodes = Stamps::new(n);
        let mut start = 0;
        for (i, &(_, value, end)) in self.samples.iter().enumerate() {
            seen_nodes.next_sample();
            let tags = self.tags.set_of_sample.get(i).copied().unwrap_or(SampleTags::NO_SET);
            let stack = &self.frames[start..end];
            start = end;
            // A recursive stack counts once per node.
            for &frame in stack {
                if seen_nodes.first_visit(frame & !INLINED) {
                    values.add(frame & !INLINED, tags, value, false);
                }
            }
            if let Some(&leaf) = stack.last() {
                values.add(leaf & !INLINED, tags, value, true);
            }
        }
        values
    }

    /// pprof's `newGraph`: the graph of the nodes in `kept` (listed hottest first), with
    /// their `values` and the edges between them. A sample's frames outside `kept` are
    /// skipped: the next kept frame gets a residual edge from the last one.
    fn build<'v>(&self, kept: &[u32], values: &'v NodeValues) -> WorkGraph<'v> {
        let n = self.table.node_count();
        let mut edges = EdgeSums::new(kept, n);
        let mut start = 0;
        for (i, &(_, value, end)) in self.samples.iter().enumerate() {
            let (mut parent, mut residual) = (None, false);
            for &frame in &self.frames[start..end] {
                let node = frame & !INLINED;
                if edges.slot[node as usize] == EdgeSums::NOT_KEPT {
                    residual = true;
                    continue;
                }
                if let Some(caller) = parent.filter(|&p| p != node) {
                    let call = Call { caller, callee: node, sample: i as u32, residual, inline: frame & INLINED != 0 };
                    edges.add(call, value);
                }
                parent = Some(node);
                residual = false;
            }
            start = end;
        }
        let mut nodes = values.with_value(kept.iter().copied());
        // In node order, where pprof's entropy sort starts from.
        nodes.sort_unstable();
        let mut graph =
            WorkGraph { nodes, values, edges: edges.into_edges(), ins: vec![Vec::new(); n], outs: vec![Vec::new(); n] };
        for (e, edge) in graph.edges.iter().enumerate() {
            graph.outs[edge.src as usize].push(e as u32);
            graph.ins[edge.dest as usize].push(e as u32);
        }
        graph
    }
}

/// Every node's flat and cum values and, when nodes are to be selected, their shares
/// per label set.
struct NodeValues {
    flat: Vec<i64>,
    cum: Vec<i64>,
    /// (node, label set) → (flat, cum)
    tags: PairMap<(i64, i64)>,
}

impl NodeValues {
    fn add(&mut self, node: u32, label_set: u32, value: i64, flat: bool) {
        let values = if flat { &mut self.flat } else { &mut self.cum };
        values[node as usize] = values[node as usize].saturating_add(value);
        if label_set != SampleTags::NO_SET {
            let (tag_flat, tag_cum) = self.tags.get_mut(node, label_set);
            let sum = if flat { tag_flat } else { tag_cum };
            *sum = sum.saturating_add(value);
        }
    }

    /// The nodes among `nodes` that have a value.
    fn with_value(&self, nodes: impl Iterator<Item = u32>) -> Vec<u32> {
        nodes.filter(|&n| (self.flat[n as usize], self.cum[n as usize]) != (0, 0)).collect()
    }
}

/// A build's kept nodes, numbered densely, and its edges summed up by their ends'
/// numbers: the hot loop reaches an edge in one memory access (the large profiles' calls
/// spread over too many edges for a cache).
struct EdgeSums {
    /// Per node, its number among the kept nodes ([`EdgeSums::NOT_KEPT`] if not kept).
    slot: Vec<u32>,
    /// Per number, its node.
    nodes: Vec<u32>,
    /// (caller's number, callee's number) → edge
    sums: PairMap<EdgeSum>,
    /// How many edges were met so far.
    met: u32,
}

/// An edge being summed up, in 16 bytes: the hot loop's cost is the cache lines it reads.
#[derive(Copy, Clone, PartialEq)]
struct EdgeSum {
    weight: i64,
    /// The last sample that added to the edge, so a recursive stack adds once.
    last_sample: u32,
    /// How many edges were met before this one, shifted left past the [`EdgeSum::RESIDUAL`]
    /// and [`EdgeSum::INLINE`] marks ([`EdgeSum::UNMET`] until it is met). The edges keep
    /// this order, in which entropy scores sum their weights.
    order_and_marks: u32,
}

impl EdgeSum {
    const UNMET: u32 = u32::MAX;
    const RESIDUAL: u32 = 1;
    const INLINE: u32 = 2;
    const MARKS: u32 = 2;
}

impl EdgeSums {
    const NOT_KEPT: u32 = u32::MAX;

    /// Numbers the `kept` nodes, of `node_count`, in their order: hot nodes first put
    /// the edges between them on shared cache lines.
    fn new(kept: &[u32], node_count: usize) -> Self {
        let mut slot = vec![Self::NOT_KEPT; node_count];
        for (i, &node) in kept.iter().enumerate() {
            slot[node as usize] = i as u32;
        }
        let unmet = EdgeSum { weight: 0, last_sample: 0, order_and_marks: EdgeSum::UNMET };
        Self { slot, sums: PairMap::new(kept.len(), kept.len(), unmet), nodes: kept.to_vec(), met: 0 }
    }

    /// pprof's `AddToEdge`, once per sample: an edge is residual if any sample made it
    /// so, and inline if every sample did.
    fn add(&mut self, call: Call, value: i64) {
        let sum = self.sums.get_mut(self.slot[call.caller as usize], self.slot[call.callee as usize]);
        if sum.order_and_marks == EdgeSum::UNMET {
            // `met` stays far below 2³⁰ (as many edges would take 16 GB), so the shift
            // keeps every bit and no sum reads as unmet.
            sum.order_and_marks = self.met << EdgeSum::MARKS | EdgeSum::INLINE;
            self.met += 1;
        } else if sum.last_sample == call.sample {
            return;
        }
        sum.last_sample = call.sample;
        sum.weight = sum.weight.saturating_add(value);
        if call.residual {
            sum.order_and_marks |= EdgeSum::RESIDUAL;
        }
        if !call.inline {
            sum.order_and_marks &= !EdgeSum::INLINE;
        }
    }

    /// The edges met, in the order they were.
    fn into_edges(self) -> Vec<WorkEdge> {
        let mut met: Vec<(u32, WorkEdge)> = self
            .sums
            .iter()
            .map(|((caller, callee), sum)| {
                let edge = WorkEdge {
                    src: self.nodes[caller as usize],
                    dest: self.nodes[callee as usize],
                    weight: sum.weight,
                    residual: sum.order_and_marks & EdgeSum::RESIDUAL != 0,
                    inline: sum.order_and_marks & EdgeSum::INLINE != 0,
                    live: true,
                };
                (sum.order_and_marks >> EdgeSum::MARKS, edge)
            })
            .collect();
        met.sort_unstable_by_key(|&(order, _)| order);
        met.into_iter().map(|(_, edge)| edge).collect()
    }
}

/// Values for pairs of small numbers: a matrix when there are few enough pairs (the
/// hot loop then neither hashes nor probes), a hash map otherwise.
enum PairMap<V> {
    Dense { columns: usize, cells: Vec<V>, empty: V },
    Sparse { map: HashMap<(u32, u32), V>, empty: V },
}

impl<V: Copy + PartialEq> PairMap<V> {
    const DENSE_MAX_BYTES: usize = 16 << 20;

    /// A map of `rows` × `columns` pairs, each `empty` until set.
    fn new(rows: usize, columns: usize, empty: V) -> Self {
        match rows.checked_mul(columns) {
            Some(cells) if cells <= Self::DENSE_MAX_BYTES / size_of::<V>() => {
                Self::Dense { columns, cells: vec![empty; cells], empty }
            }
            _ => Self::Sparse { map: HashMap::default(), empty },
        }
    }

    fn get_mut(&mut self, row: u32, column: u32) -> &mut V {
        match self {
            Self::Dense { columns, cells, .. } => &mut cells[row as usize * *columns + column as usize],
            Self::Sparse { map, empty } => map.entry((row, column)).or_insert(*empty),
        }
    }

    /// The pairs set, with their values.
    fn iter(&self) -> Box<dyn Iterator<Item = ((u32, u32), V)> + '_> {
        match self {
            Self::Dense { columns, cells, empty } => {
                let columns = *columns;
                Box::new(
                    cells
                        .iter()
                        .enumerate()
                        .filter(move |(_, v)| *v != empty)
                        .map(move |(i, &v)| (((i / columns) as u32, (i % columns) as u32), v)),
                )
            }
            Self::Sparse { map, .. } => Box::new(map.iter().map(|(&pair, &v)| (pair, v))),
        }
    }
}

/// One caller→callee step of a sample's stack.
struct Call {
    caller: u32,
    callee: u32,
    /// The sample's index among the input samples.
    sample: u32,
    residual: bool,
    inline: bool,
}

/// The tags pprof's graph attaches to nodes: a sample's string labels joined (one tag),
/// and each of its `bytes` numeric labels as formatted under those labels. Samples mostly
/// share a few label sets, so nodes sum values per set; node selection then counts a
/// node's distinct tags.
#[derive(Default)]
struct SampleTags {
    /// Per input sample, its label set ([`SampleTags::NO_SET`] without tags).
    set_of_sample: Vec<u32>,
    /// Per label set, the ids of its tags.
    sets: Vec<Vec<u32>>,
}

impl SampleTags {
    const NO_SET: u32 = u32::MAX;

    fn new(profile: &Profile, samples: &[(u32, i64, usize)]) -> Self {
        let bytes = profile.strings.iter().position(|s| s == "bytes");
        // pprof's unit for a numeric label: the first one a sample names, else its key.
        let bytes_unit = profile
            .samples
            .iter()
            .flat_map(|s| s.labels)
            .find_map(|l| match l.value {
                LabelValue::Num { unit, .. } if Some(l.key.0 as usize) == bytes && unit.0 != 0 => {
                    Some(profile.str(unit))
                }
                _ => None,
            })
            .unwrap_or("bytes");
        let mut tags = Self::default();
        let mut tag_ids: HashMap<String, u32> = HashMap::default();
        let mut set_ids: HashMap<&[Label], u32> = HashMap::default();
        for &(sample, ..) in samples {
            let labels = profile.samples.sample(sample as usize).labels;
            if let Some(&set) = set_ids.get(labels) {
                tags.set_of_sample.push(set);
                continue;
            }
            let mut strings: Vec<String> = labels
                .iter()
                .filter_map(|l| match l.value {
                    LabelValue::Str(v) => Some(format!("{}:{}", profile.str(l.key), profile.str(v))),
                    LabelValue::Num { .. } => None,
                })
                .collect();
            strings.sort();
            // pprof joins them with a literal `\n`; a NUL separates the numeric tags' key.
            let joined = strings.join("\\n");
            let mut keys = Vec::new();
            for l in labels {
                if let LabelValue::Num { value, .. } = l.value {
                    if Some(l.key.0 as usize) == bytes {
                        keys.push(format!("{joined}\0{}", format_value(value, bytes_unit)));
                    }
                }
            }
            if !joined.is_empty() {
                keys.push(joined);
            }
            let set = if keys.is_empty() {
                Self::NO_SET
            } else {
                let ids = keys.into_iter().map(|key| {
                    let next = tag_ids.len() as u32;
                    *tag_ids.entry(key).or_insert(next)
                });
                tags.sets.push(ids.collect());
                (tags.sets.len() - 1) as u32
            };
            set_ids.insert(labels, set);
            tags.set_of_sample.push(set);
        }
        tags
    }
}

struct WorkEdge {
    src: u32,
    dest: u32,
    weight: i64,
    residual: bool,
    inline: bool,
    live: bool,
}

/// A graph being pruned; nodes are frame-table ids.
struct WorkGraph<'v> {
    /// The nodes with a value, in pprof's current order.
    nodes: Vec<u32>,
    /// Every node's values (pruning keeps them).
    values: &'v NodeValues,
    edges: Vec<WorkEdge>,
    /// Per node, the indices of its incoming and outgoing edges (dead ones included).
    ins: Vec<Vec<u32>>,
    outs: Vec<Vec<u32>>,
}

impl WorkGraph<'_> {
    fn live<'a>(&'a self, edges: &'a [u32]) -> impl Iterator<Item = &'a WorkEdge> + 'a {
        edges.iter().map(|&e| &self.edges[e as usize]).filter(|e| e.live)
    }

    /// pprof's `EntropyOrder`: a node whose calls fan in or out scores higher than one
    /// that only passes its caller's time on; entry and leaf nodes are favoured.
    fn sort_by_entropy(&mut self, table: &FrameTable) {
        let (flat, cum) = (&self.values.flat, &self.values.cum);
        let mut score = vec![0i64; flat.len()];
        for &n in &self.nodes {
            let (flat, cum) = (flat[n as usize], cum[n as usize]);
            let side = |edges: &[u32], own: i64| {
                let weights: Vec<i64> = self.live(edges).map(|e| e.weight).collect();
                if weights.is_empty() {
                    1.0
                } else {
                    edge_entropy(&weights, own)
                }
            };
            let entropy = side(&self.ins[n as usize], 0) + side(&self.outs[n as usize], flat);
            score[n as usize] = ((entropy * cum as f64) as i64).saturating_add(flat);
        }
        self.nodes.sort_by(|&a, &b| {
            score[b as usize]
                .unsigned_abs()
                .cmp(&score[a as usize].unsigned_abs())
                .then_with(|| table.name(a).cmp(table.name(b)))
                .then_with(|| flat[b as usize].unsigned_abs().cmp(&flat[a as usize].unsigned_abs()))
        });
    }

    /// pprof's `TrimLowFrequencyEdges`: removes the edges into the graph's nodes lighter
    /// than `cutoff`, and says how many.
    fn trim_edges(&mut self, cutoff: i64) -> usize {
        let mut dropped = 0;
        for &n in &self.nodes {
            for &e in &self.ins[n as usize] {
                let edge = &mut self.edges[e as usize];
                if edge.live && edge.weight.unsigned_abs() < cutoff.unsigned_abs() {
                    edge.live = false;
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// How many of the first nodes pprof keeps for `limit` in a visual graph: each node
    /// counts once plus its tags with a flat value (at most 4, as pprof draws at most 4
    /// nodelets), tags under `tag_cutoff` left out.
    fn top_nodes(&self, limit: usize, tag_cutoff: i64, tags: &SampleTags) -> usize {
        let mut sums: HashMap<(u32, u32), (i64, i64)> = HashMap::default();
        for ((node, set), (flat, cum)) in self.values.tags.iter() {
            for &tag in &tags.sets[set as usize] {
                let sum = sums.entry((node, tag)).or_default();
                *sum = (sum.0.saturating_add(flat), sum.1.saturating_add(cum));
            }
        }
        let mut counts = vec![0usize; self.values.flat.len()];
        for (&(node, _), &(flat, cum)) in &sums {
            let kept =
                flat.unsigned_abs() >= tag_cutoff.unsigned_abs() || cum.unsigned_abs() >= tag_cutoff.unsigned_abs();
            if flat != 0 && kept {
                counts[node as usize] += 1;
            }
        }
        const MAX_NODELETS: usize = 4;
        let mut count = 0;
        for (i, &n) in self.nodes.iter().enumerate() {
            count += counts[n as usize].min(MAX_NODELETS) + 1;
            if count >= limit {
                return i + 1;
            }
        }
        limit.min(self.nodes.len())
    }

    /// Live edges among `edges`, in pprof's edge order: heaviest first, then by the
    /// caller's and the callee's names.
    fn sorted_live_edges(&self, mut edges: Vec<u32>, table: &FrameTable) -> Vec<u32> {
        edges.retain(|&e| self.edges[e as usize].live);
        edges.sort_by(|&a, &b| {
            let (a, b) = (&self.edges[a as usize], &self.edges[b as usize]);
            b.weight
                .unsigned_abs()
                .cmp(&a.weight.unsigned_abs())
                .then_with(|| table.name(a.src).cmp(table.name(b.src)))
                .then_with(|| table.name(a.dest).cmp(table.name(b.dest)))
        });
        edges
    }

    /// pprof's `RemoveRedundantEdges`: from the last node up, its lightest incoming
    /// residual edges go when the caller still reaches the node another way; the first
    /// non-residual edge stops the node's turn.
    fn remove_redundant_edges(&mut self, table: &FrameTable) {
        for i in (0..self.nodes.len()).rev() {
            let n = self.nodes[i];
            for e in self.sorted_live_edges(self.ins[n as usize].clone(), table).into_iter().rev() {
                if !self.edges[e as usize].residual {
                    break;
                }
                if self.reachable_without(e) {
                    self.edges[e as usize].live = false;
                }
            }
        }
    }

    /// Whether the edge's caller reaches its callee through other edges (a breadth-first
    /// walk up the callers).
    fn reachable_without(&self, edge: u32) -> bool {
        let WorkEdge { src, dest, .. } = self.edges[edge as usize];
        let mut seen: HashSet<u32> = HashSet::from_iter([dest]);
        let mut queue = std::collections::VecDeque::from([dest]);
        while let Some(n) = queue.pop_front() {
            for &e in &self.ins[n as usize] {
                let caller = self.edges[e as usize].src;
                if e == edge || !self.edges[e as usize].live || seen.contains(&caller) {
                    continue;
                }
                if caller == src {
                    return true;
                }
                seen.insert(caller);
                queue.push_back(caller);
            }
        }
        false
    }
}

/// pprof's `edgeEntropyScore`: the entropy of how a node's value splits over its edges
/// (and its own flat value, for the outgoing side).
fn edge_entropy(weights: &[i64], own: i64) -> f64 {
    let total = weights.iter().filter(|&&w| w > 0).fold(own, |t, &w| t.saturating_add(w));
    if total == 0 {
        return 0.0;
    }
    let term = |w: i64| {
        let frac = w.unsigned_abs() as f64 / total as f64;
        -frac * frac.log2()
    };
    let mut score: f64 = weights.iter().map(|&w| term(w)).sum();
    if own > 0 {
        score += term(own);
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_shorten_like_pprof() {
        for (full, short) in [
            ("github.com/google/pprof/internal/graph.(*Graph).TrimTree", "graph.(*Graph).TrimTree"),
            ("example.com/mod/v2/pkg.Func", "pkg.Func"),
            ("main.main", "main.main"),
            ("java.util.HashMap.put(Ljava/lang/Object;)", "HashMap.put"),
            ("(anonymous namespace)::Foo::Bar::baz", "Bar::baz"),
            ("std::vector<int>::push_back", "std::vector<int>::push_back"),
        ] {
            assert_eq!(shorten_function_name(full), short, "{full}");
        }
    }

    #[test]
    fn entropy_of_an_even_split_is_one_bit() {
        assert_eq!(edge_entropy(&[5, 5], 0), 1.0);
        assert_eq!(edge_entropy(&[10], 0), 0.0);
        assert_eq!(edge_entropy(&[0], 0), 0.0);
    }
}
