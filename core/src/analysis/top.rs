//! Flat and cumulative values per node, sorted like `go tool pprof -top`.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde::{Deserialize, Serialize};

use super::frames::{FrameTable, Stamps};
use super::query::Prepared;
use crate::Result;

/// How the rows of a top report are chosen (what they sum is the [`Prepared`] query's).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopOptions {
    /// Sort by cumulative value instead of flat (`-cum`).
    pub cum: bool,
    /// Keep only the first N rows (`-nodecount`); all when `None`.
    pub node_count: Option<usize>,
    /// Drop nodes whose |cum| is below this share of the total (pprof's
    /// `-nodefraction`, 0.005 in its text reports); 0 keeps every node.
    pub node_fraction: f64,
}

/// How a node is reached, as pprof marks it in `-top` output.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Inlining {
    Inline,
    PartialInline,
}

impl Inlining {
    /// pprof's word for it, which its reports print in parentheses after the name.
    pub fn as_str(self) -> &'static str {
        match self {
            Inlining::Inline => "inline",
            Inlining::PartialInline => "partial-inline",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopRow {
    pub name: String,
    pub flat: i64,
    pub cum: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline: Option<Inlining>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopReport {
    pub sample_type: String,
    pub unit: String,
    /// pprof's total: the sum of |value| over every sample, before focus/ignore/hide/show
    /// (pprof computes it before filtering, so percentages are of the whole profile).
    pub total: i64,
    /// Number of nodes with a non-zero value, before any is dropped.
    pub node_total: usize,
    /// Nodes dropped by `node_fraction`.
    pub dropped_nodes: usize,
    /// The cutoff pprof reports in "Dropped N nodes (cum <= X)": |total × node_fraction|.
    /// (It drops by the summed flat values of the kept samples, which differ from the
    /// total under filters and in a diff.)
    pub node_cutoff: i64,
    pub functions: Vec<TopRow>,
}

/// `value × ratio`, rounded half away from zero like Go's `math.Round`.
pub(crate) fn scale(value: i64, ratio: f64) -> i64 {
    if ratio == 1.0 {
        value
    } else {
        (value as f64 * ratio).round() as i64
    }
}

/// Per-node sums for one sample type; shared by top and diff.
pub(crate) struct NodeValues<'a> {
    pub table: FrameTable<'a>,
    pub flat: Vec<i64>,
    pub cum: Vec<i64>,
    /// Sum of |value| over the samples the filters keep.
    pub total: i64,
    /// Sum of |value| over every sample: pprof's report total.
    pub unfiltered_total: i64,
}

impl<'a> NodeValues<'a> {
    pub fn compute(prepared: &'a Prepared) -> Result<Self> {
        Self::compute_scaled(prepared, 1.0)
    }

    /// [`compute`](Self::compute) with each sample's value first scaled by `ratio` and
    /// rounded, as pprof's `Profile.ScaleN` does; the totals stay those of the raw values.
    pub fn compute_scaled(prepared: &'a Prepared, ratio: f64) -> Result<Self> {
        let (table, sample_index) = (prepared.frames()?, prepared.sample_index);
        let parts = crate::parallel::each(sample_ranges(&table, sample_index, ratio), |range| {
            let mut v = Sums::new(table.node_count());
            let mut seen = Stamps::new(table.node_count());
            for sample in table.profile().samples.iter_range(range) {
                let raw = sample.values.get(sample_index).copied().unwrap_or(0);
                v.unfiltered_total = v.unfiltered_total.saturating_add(raw.saturating_abs());
                let value = scale(raw, ratio);
                if value == 0 || !table.keeps(sample) {
                    continue;
                }
                v.total = v.total.saturating_add(raw.saturating_abs());
                seen.next_sample();
                let mut parent: Option<u32> = None;
                table.walk_root_first(sample, |node, _| {
                    // Recursion must not count a sample twice for one node.
                    if seen.first_visit(node) {
                        v.cum[node as usize] = v.cum[node as usize].saturating_add(value);
                    }
                    parent = Some(node);
                });
                if let Some(leaf) = parent {
                    v.flat[leaf as usize] = v.flat[leaf as usize].saturating_add(value);
                }
            }
            v
        });
        let sums = parts.into_iter().fold(Sums::new(table.node_count()), Sums::add);
        Ok(NodeValues {
            table,
            flat: sums.flat,
            cum: sums.cum,
            total: sums.total,
            unfiltered_total: sums.unfiltered_total,
        })
    }

    /// pprof's `(inline)` markers for the shown nodes (see [`inline_marks`]).
    fn inlining(&self, sample_index: usize, shown: &[u32], flat_sum: i64) -> Vec<Option<Inlining>> {
        let names: Vec<&str> = shown.iter().map(|&n| self.table.name(n)).collect();
        inline_marks(&[(self, sample_index, 1)], &names, flat_sum)
    }
}

/// Sums over some of the samples, added up by [`Sums::add`].
struct Sums {
    flat: Vec<i64>,
    cum: Vec<i64>,
    total: i64,
    unfiltered_total: i64,
}

impl Sums {
    fn new(nodes: usize) -> Sums {
        Sums { flat: vec![0; nodes], cum: vec![0; nodes], total: 0, unfiltered_total: 0 }
    }

    fn add(mut self, other: Sums) -> Sums {
        for (a, b) in self.flat.iter_mut().zip(other.flat).chain(self.cum.iter_mut().zip(other.cum)) {
            *a = a.saturating_add(b);
        }
        self.total = self.total.saturating_add(other.total);
        self.unfiltered_total = self.unfiltered_total.saturating_add(other.unfiltered_total);
        self
    }
}

/// Fewest samples worth a thread of their own in a walk.
const SAMPLES_PER_THREAD: usize = 1 << 15;

/// The table's samples cut into stretches to sum on separate threads: a thread a core
/// when no sum of values can saturate (then sums added in any order are the same as
/// the one-thread sums), else one stretch, so saturation stays where it was.
fn sample_ranges(table: &FrameTable<'_>, sample_index: usize, ratio: f64) -> Vec<std::ops::Range<usize>> {
    let samples = &table.profile().samples;
    let fits = ratio == 1.0
        && samples
            .iter()
            .try_fold(0i64, |sum, s| sum.checked_add(s.values.get(sample_index).copied().unwrap_or(0).checked_abs()?))
            .is_some();
    if fits {
        crate::parallel::ranges(samples.len(), SAMPLES_PER_THREAD)
    } else {
        std::iter::once(0..samples.len()).collect()
    }
}

/// pprof's default `-edgefraction`: `-top` drops the call edges whose |weight| is below
/// this share of the summed flat values before it marks nodes `(inline)`.
const EDGE_FRACTION: f64 = 0.001;

/// pprof's `(inline)` markers for the shown rows, named in `shown`. pprof draws call
/// edges only between shown nodes (from the nearest shown caller), and an edge is inline
/// when every call along it is; edges lighter than [`EDGE_FRACTION`] of `flat_sum` are
/// dropped; a node is inline when all its remaining incoming edges are. The edges come
/// from the samples of every source, each value multiplied by the source's sign: for
/// `-diff_base` pprof merges the base's samples (negated) into the compared profile, so
/// both profiles' calls count.
pub(crate) fn inline_marks(
    sources: &[(&NodeValues, usize, i64)],
    shown: &[&str],
    flat_sum: i64,
) -> Vec<Option<Inlining>> {
    let row_of: HashMap<&str, u32> = shown.iter().enumerate().map(|(i, &name)| (name, i as u32)).collect();
    // Each edge: whether every call along it is inline, and its weight.
    let mut edges: HashMap<(u32, u32), (bool, i64)> = HashMap::default();
    for &(values, sample_index, sign) in sources {
        let table = &values.table;
        let position: Vec<u32> =
            (0..table.node_count() as u32).map(|n| row_of.get(table.name(n)).copied().unwrap_or(u32::MAX)).collect();
        let parts = crate::parallel::each(sample_ranges(table, sample_index, 1.0), |range| {
            let mut edges: HashMap<(u32, u32), (bool, i64)> = HashMap::default();
            let mut seen_in_sample: HashSet<(u32, u32)> = HashSet::default();
            for sample in table.profile().samples.iter_range(range).filter(|&s| table.keeps(s)) {
                let value = sample.values.get(sample_index).copied().unwrap_or(0);
                if value == 0 {
                    continue;
                }
                let weight = value.saturating_mul(sign);
                seen_in_sample.clear();
                let mut parent: Option<u32> = None;
                table.walk_root_first(sample, |node, inlined| {
                    let shown_at = position[node as usize];
                    if shown_at == u32::MAX {
                        return;
                    }
                    if let Some(p) = parent.filter(|&p| p != shown_at) {
                        if seen_in_sample.insert((p, shown_at)) {
                            let (all_inline, sum) = edges.entry((p, shown_at)).or_insert((true, 0));
                            *all_inline &= inlined;
                            *sum = sum.saturating_add(weight);
                        }
                    }
                    parent = Some(shown_at);
                });
            }
            edges
        });
        for (edge, (inline, weight)) in parts.into_iter().flatten() {
            let (all_inline, sum) = edges.entry(edge).or_insert((true, 0));
            *all_inline &= inline;
            *sum = sum.saturating_add(weight);
        }
    }
    let edge_cutoff = fraction_cutoff(flat_sum, EDGE_FRACTION).unsigned_abs();
    let mut marks = vec![(false, false); shown.len()];
    for ((_, to), (inline, weight)) in edges {
        if weight.unsigned_abs() < edge_cutoff {
            continue;
        }
        let m = &mut marks[to as usize];
        if inline {
            m.0 = true;
        } else {
            m.1 = true;
        }
    }
    marks
        .into_iter()
        .map(|m| match m {
            (true, true) => Some(Inlining::PartialInline),
            (true, false) => Some(Inlining::Inline),
            _ => None,
        })
        .collect()
}

/// pprof's ordering: |flat| desc, name asc, |cum| desc (or |cum| first with `-cum`).
/// `values` gives (flat, cum) of a row, `names` compares two rows' names.
pub(crate) fn sort_rows<T>(
    rows: &mut [T],
    by_cum: bool,
    values: &impl Fn(&T) -> (i64, i64),
    names: impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    rows.sort_by(|a, b| {
        let (fa, ca) = values(a);
        let (fb, cb) = values(b);
        let (ka, kb, sa, sb) = if by_cum { (ca, cb, fa, fb) } else { (fa, fb, ca, cb) };
        kb.unsigned_abs()
            .cmp(&ka.unsigned_abs())
            .then_with(|| names(a, b))
            .then_with(|| sb.unsigned_abs().cmp(&sa.unsigned_abs()))
    });
}

/// How many rows survive pprof's trimming.
pub(crate) struct Selection {
    pub node_total: usize,
    pub dropped_nodes: usize,
    /// The summed flat values of every node, which pprof's cutoffs are shares of.
    pub flat_sum: i64,
}

/// |value × node_fraction|, saturating: pprof drops nodes by this of the summed flat
/// values, and prints it of the total.
pub(crate) fn fraction_cutoff(total: i64, node_fraction: f64) -> i64 {
    ((total as f64 * node_fraction) as i64).saturating_abs()
}

/// pprof's row selection: nodes with any value, sorted, then those with |cum| below
/// `node_fraction` of the summed flat values (for a diff, the net change) dropped,
/// then the first `node_count` kept.
pub(crate) fn select_rows<T>(
    items: &mut Vec<T>,
    options: &TopOptions,
    values: impl Fn(&T) -> (i64, i64),
    names: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> Selection {
    items.retain(|t| values(t) != (0, 0));
    let flat_sum = items.iter().map(|t| values(t).0).fold(0i64, i64::saturating_add);
    sort_rows(items, options.cum, &values, names);
    let node_total = items.len();
    // A huge or negative fraction saturates the product at i64::MIN, which has no `abs`.
    let node_cutoff = fraction_cutoff(flat_sum, options.node_fraction);
    items.retain(|t| values(t).1.unsigned_abs() >= node_cutoff.unsigned_abs());
    let dropped_nodes = node_total - items.len();
    if let Some(limit) = options.node_count {
        items.truncate(limit);
    }
    Selection { node_total, dropped_nodes, flat_sum }
}

pub fn top(prepared: &Prepared, options: &TopOptions) -> Result<TopReport> {
    let index = prepared.sample_index;
    let values = NodeValues::compute(prepared)?;
    let mut nodes: Vec<u32> = (0..values.table.node_count() as u32).collect();
    let selection = select_rows(
        &mut nodes,
        options,
        |&n| (values.flat[n as usize], values.cum[n as usize]),
        |&a, &b| values.table.name(a).cmp(values.table.name(b)),
    );
    let inlining = values.inlining(index, &nodes, selection.flat_sum);
    let functions = nodes
        .iter()
        .zip(inlining)
        .map(|(&n, inline)| TopRow {
            name: values.table.name(n).to_owned(),
            flat: values.flat[n as usize],
            cum: values.cum[n as usize],
            inline,
        })
        .collect();
    Ok(TopReport {
        sample_type: prepared.sample_type().to_owned(),
        unit: prepared.unit().to_owned(),
        total: values.unfiltered_total,
        node_total: selection.node_total,
        dropped_nodes: selection.dropped_nodes,
        node_cutoff: fraction_cutoff(values.unfiltered_total, options.node_fraction),
        functions,
    })
}
