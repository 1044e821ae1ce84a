//! Building the graph from the samples, as pprof's `newGraph`: the filtered samples'
//! stacks walked once into report nodes, every node's values summed once, and each build's
//! edges summed between the nodes it keeps.

use rustc_hash::FxHashMap as HashMap;

use super::tags::SampleTags;
use crate::analysis::frames::{FrameTable, Stamps};

/// The samples a graph is built from: those the filters (and the focus node) keep, with
/// their values, their stacks as report nodes (walked once: every build streams through
/// them), and, when nodes are to be selected, their label tags.
pub(super) struct Input<'a> {
    pub(super) table: FrameTable<'a>,
    /// (index into the table's `profile().samples`, value, end of its stack in `frames`)
    samples: Vec<(u32, i64, usize)>,
    /// The samples' nodes, root first, each with [`INLINED`] set for an inlined call.
    frames: Vec<u32>,
    pub(super) tags: SampleTags,
    /// pprof's total, as [`Profile::total`](crate::Profile::total) (label frames change no value), summed in
    /// the same walk: each sample's values are a pointer away, so a second walk costs.
    pub(super) total: i64,
}

/// Marks a node in [`Input::frames`] as inlined into its caller.
const INLINED: u32 = 1 << 31;
/// A location with other than one node, in [`Input::new`]'s table of single nodes (no
/// node is `u32::MAX`: that would be an inlined node numbered 2³¹ - 1).
const SEVERAL: u32 = u32::MAX;

impl<'a> Input<'a> {
    pub(super) fn new(table: FrameTable<'a>, index: usize, focus: Option<u32>, with_tags: bool) -> Self {
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
    pub(super) fn node_values(&self) -> NodeValues {
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
    pub(super) fn build<'v>(&self, kept: &[u32], values: &'v NodeValues) -> WorkGraph<'v> {
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
pub(super) struct NodeValues {
    pub(super) flat: Vec<i64>,
    pub(super) cum: Vec<i64>,
    /// (node, label set) → (flat, cum)
    pub(super) tags: PairMap<(i64, i64)>,
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
    pub(super) fn with_value(&self, nodes: impl Iterator<Item = u32>) -> Vec<u32> {
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
pub(super) enum PairMap<V> {
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
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = ((u32, u32), V)> + '_> {
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

pub(super) struct WorkEdge {
    pub(super) src: u32,
    pub(super) dest: u32,
    pub(super) weight: i64,
    pub(super) residual: bool,
    pub(super) inline: bool,
    pub(super) live: bool,
}

/// A graph being pruned; nodes are frame-table ids.
pub(super) struct WorkGraph<'v> {
    /// The nodes with a value, in pprof's current order.
    pub(super) nodes: Vec<u32>,
    /// Every node's values (pruning keeps them).
    pub(super) values: &'v NodeValues,
    pub(super) edges: Vec<WorkEdge>,
    /// Per node, the indices of its incoming and outgoing edges (dead ones included).
    pub(super) ins: Vec<Vec<u32>>,
    pub(super) outs: Vec<Vec<u32>>,
}
