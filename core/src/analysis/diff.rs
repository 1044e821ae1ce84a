//! Differences between two profiles of the same type. Per-node numbers equal
//! `go tool pprof -diff_base=BASE COMPARE`: compare minus base, percentages of the base
//! total. On top: regressions/improvements beyond a noise threshold, and per-stack deltas.

use rustc_hash::FxHashMap as HashMap;

use serde::{Deserialize, Serialize};

use super::frames::FrameTable;
use super::query::Prepared;
use super::top::{
    fraction_cutoff, inline_marks, scale, select_rows, sort_rows, NodeValues, TopOptions, TopReport, TopRow,
};
use crate::{Profile, Result};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DiffOptions {
    /// Scale the compared profile's samples by base total / compared total before
    /// subtracting, as pprof's `-normalize` does with `-diff_base`.
    pub normalize: bool,
    /// A change smaller than this share of the base total (in %) counts as unchanged.
    pub noise_threshold_pct: f64,
    /// Longest list of new/removed/changed stacks returned (the counts are always exact);
    /// 0 skips comparing stacks altogether (the lists and counts stay empty), which is
    /// most of a diff's time and memory.
    pub max_stacks: usize,
}

impl Default for DiffOptions {
    fn default() -> Self {
        Self { normalize: false, noise_threshold_pct: 1.0, max_stacks: 50 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FunctionDelta {
    pub name: String,
    pub base_flat: i64,
    pub compare_flat: i64,
    pub flat_delta: i64,
    pub base_cum: i64,
    pub compare_cum: i64,
    pub cum_delta: i64,
    /// `flat_delta` as a percentage of the base total.
    pub flat_delta_pct: f64,
    pub cum_delta_pct: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackDelta {
    /// Root first.
    pub frames: Vec<String>,
    pub base: i64,
    pub compare: i64,
    pub delta: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffReport {
    pub sample_type: String,
    pub unit: String,
    pub base_total: i64,
    pub compare_total: i64,
    /// (compare − base) / base × 100, on the raw totals.
    pub overall_delta_pct: f64,
    pub normalized: bool,
    /// Every node with a change, in pprof's `-diff_base` order (|flat delta| desc).
    pub functions: Vec<FunctionDelta>,
    /// Functions whose self or cumulative value grew beyond the noise threshold,
    /// largest change first.
    pub regressions: Vec<FunctionDelta>,
    /// Functions that did not grow and whose self or cumulative value shrank beyond
    /// the noise threshold, largest change first.
    pub improvements: Vec<FunctionDelta>,
    /// Functions present in either profile whose change stayed within the threshold.
    pub unchanged: usize,
    pub noise_threshold: i64,
    pub new_stacks: Vec<StackDelta>,
    pub new_stack_count: usize,
    pub removed_stacks: Vec<StackDelta>,
    pub removed_stack_count: usize,
    /// Stacks in both profiles with the largest absolute change.
    pub changed_stacks: Vec<StackDelta>,
}

/// Scales base values so the base total equals the compare total.
/// Per-name values in both profiles: (base flat, base cum, compare flat, compare cum).
struct Deltas<'a> {
    base: NodeValues<'a>,
    compare: NodeValues<'a>,
    base_index: usize,
    compare_index: usize,
    by_name: HashMap<String, (i64, i64, i64, i64)>,
    /// What base values were multiplied by (1 unless normalised).
    ratio: f64,
}

/// `base` and `compare` come from [`super::query::Query::prepare_pair`]: of one sample type.
fn deltas<'a>(base: &'a Prepared, compare: &'a Prepared, normalize: bool) -> Result<Deltas<'a>> {
    let (base_index, compare_index) = (base.sample_index, compare.sample_index);
    let b = NodeValues::compute(base)?;
    // pprof's Profile.Normalize: every sample's values (filters apply later), and a
    // compared profile that sums to 0 is scaled to nothing.
    let ratio = if normalize {
        let sum =
            |p: &Profile, i: usize| p.samples.iter().map(|s| s.values.get(i).copied().unwrap_or(0) as f64).sum::<f64>();
        let compare_sum = sum(compare.profile(), compare_index);
        if compare_sum == 0.0 {
            0.0
        } else {
            sum(base.profile(), base_index) / compare_sum
        }
    } else {
        1.0
    };
    let c = NodeValues::compute_scaled(compare, ratio)?;
    let mut by_name: HashMap<String, (i64, i64, i64, i64)> = HashMap::default();
    for n in 0..b.table.node_count() {
        let e = by_name.entry(b.table.name(n as u32).to_owned()).or_default();
        e.0 = e.0.saturating_add(b.flat[n]);
        e.1 = e.1.saturating_add(b.cum[n]);
    }
    for n in 0..c.table.node_count() {
        let e = by_name.entry(c.table.name(n as u32).to_owned()).or_default();
        e.2 = e.2.saturating_add(c.flat[n]);
        e.3 = e.3.saturating_add(c.cum[n]);
    }
    by_name.retain(|_, v| *v != (0, 0, 0, 0));
    Ok(Deltas { base: b, compare: c, base_index, compare_index, by_name, ratio })
}

/// A function whose share of its profile changed between two profiles: a "top mover".
/// Shares are of each side's own total, so a busier period does not move everything.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mover {
    pub name: String,
    /// Self (flat) value as % of the base total.
    pub base_share_pct: f64,
    pub compare_share_pct: f64,
    /// compare − base, in percentage points.
    pub delta_pct: f64,
}

/// The `n` functions whose self share changed most, largest change first (then by name).
pub fn movers(base: &Prepared, compare: &Prepared, n: usize) -> Result<Vec<Mover>> {
    let d = deltas(base, compare, false)?;
    let share = |v: i64, total: i64| if total != 0 { v as f64 * 100.0 / total as f64 } else { 0.0 };
    let mut movers: Vec<Mover> = d
        .by_name
        .into_iter()
        .map(|(name, (base_flat, _, compare_flat, _))| {
            let (b, c) = (share(base_flat, d.base.total), share(compare_flat, d.compare.total));
            Mover { name, base_share_pct: b, compare_share_pct: c, delta_pct: c - b }
        })
        .filter(|m| m.delta_pct != 0.0)
        .collect();
    movers.sort_by(|a, b| b.delta_pct.abs().total_cmp(&a.delta_pct.abs()).then_with(|| a.name.cmp(&b.name)));
    movers.truncate(n);
    Ok(movers)
}

/// `go tool pprof -top -diff_base=BASE COMPARE`: flat and cum are compare − base, the
/// total is the base total (before filters, as pprof's), and rows are trimmed exactly as
/// pprof trims them.
pub fn diff_top(base: &Prepared, compare: &Prepared, options: &TopOptions) -> Result<TopReport> {
    let d = deltas(base, compare, false)?;
    let mut rows: Vec<TopRow> = d
        .by_name
        .into_iter()
        .map(|(name, v)| TopRow { name, flat: v.2.saturating_sub(v.0), cum: v.3.saturating_sub(v.1), inline: None })
        .collect();
    let selection = select_rows(&mut rows, options, |r| (r.flat, r.cum), |a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let sources = [(&d.base, d.base_index, -1), (&d.compare, d.compare_index, 1)];
    let marks = inline_marks(&sources, &names, selection.flat_sum);
    for (row, inline) in rows.iter_mut().zip(marks) {
        row.inline = inline;
    }
    Ok(TopReport {
        sample_type: compare.sample_type().to_owned(),
        unit: compare.unit().to_owned(),
        total: d.base.unfiltered_total,
        node_total: selection.node_total,
        dropped_nodes: selection.dropped_nodes,
        node_cutoff: fraction_cutoff(d.base.unfiltered_total, options.node_fraction),
        functions: rows,
    })
}

pub fn diff(base: &Prepared, compare: &Prepared, options: &DiffOptions) -> Result<DiffReport> {
    let d = deltas(base, compare, options.normalize)?;
    let (b, c, by_name) = (&d.base, &d.compare, &d.by_name);
    let (base_index, compare_index, ratio) = (d.base_index, d.compare_index, d.ratio);
    let base_total = b.total;
    let pct = |v: i64| if base_total != 0 { v as f64 * 100.0 / base_total as f64 } else { 0.0 };
    let mut rows: Vec<TopRow> = by_name
        .iter()
        .map(|(name, v)| TopRow {
            name: name.clone(),
            flat: v.2.saturating_sub(v.0),
            cum: v.3.saturating_sub(v.1),
            inline: None,
        })
        .collect();
    sort_rows(&mut rows, false, &|r: &TopRow| (r.flat, r.cum), |a, b| a.name.cmp(&b.name));
    let functions: Vec<FunctionDelta> = rows
        .into_iter()
        .map(|r| {
            let v = by_name[r.name.as_str()];
            FunctionDelta {
                base_flat: v.0,
                compare_flat: v.2,
                flat_delta: r.flat,
                base_cum: v.1,
                compare_cum: v.3,
                cum_delta: r.cum,
                flat_delta_pct: pct(r.flat),
                cum_delta_pct: pct(r.cum),
                name: r.name,
            }
        })
        .collect();

    let noise_threshold = (base_total.max(c.total) as f64 * options.noise_threshold_pct / 100.0).round() as i64;
    // A function regressed when its own time or the time under it grew past the noise:
    // a caller whose inlined callee got slower has a flat of 0 but a grown cum.
    let mut regressions: Vec<FunctionDelta> =
        functions.iter().filter(|f| f.flat_delta > noise_threshold || f.cum_delta > noise_threshold).cloned().collect();
    let mut improvements: Vec<FunctionDelta> = functions
        .iter()
        .filter(|f| f.flat_delta <= noise_threshold && f.cum_delta <= noise_threshold)
        .filter(|f| f.flat_delta < -noise_threshold || f.cum_delta < -noise_threshold)
        .cloned()
        .collect();
    let largest = |f: &FunctionDelta| f.flat_delta.abs().max(f.cum_delta.abs());
    regressions.sort_by(|a, b| largest(b).cmp(&largest(a)).then_with(|| a.name.cmp(&b.name)));
    improvements.sort_by(|a, b| largest(b).cmp(&largest(a)).then_with(|| a.name.cmp(&b.name)));
    let unchanged = functions.len() - regressions.len() - improvements.len();

    let stacks = if options.max_stacks == 0 {
        HashMap::default()
    } else {
        stack_values(base_index, &b.table, compare_index, &c.table, ratio)
    };
    let mut new_stacks = Vec::new();
    let mut removed_stacks = Vec::new();
    let mut changed_stacks = Vec::new();
    for (frames, (bv, cv)) in stacks {
        let d = StackDelta { frames, base: bv, compare: cv, delta: cv.saturating_sub(bv) };
        match (bv, cv) {
            (0, 0) => {}
            (0, _) => new_stacks.push(d),
            (_, 0) => removed_stacks.push(d),
            _ if d.delta != 0 => changed_stacks.push(d),
            _ => {}
        }
    }
    let by_size = |a: &StackDelta, b: &StackDelta| {
        b.delta.unsigned_abs().cmp(&a.delta.unsigned_abs()).then_with(|| a.frames.cmp(&b.frames))
    };
    for list in [&mut new_stacks, &mut removed_stacks, &mut changed_stacks] {
        list.sort_by(by_size);
    }
    let (new_stack_count, removed_stack_count) = (new_stacks.len(), removed_stacks.len());
    for list in [&mut new_stacks, &mut removed_stacks, &mut changed_stacks] {
        list.truncate(options.max_stacks);
    }

    Ok(DiffReport {
        sample_type: compare.sample_type().to_owned(),
        unit: compare.unit().to_owned(),
        base_total,
        compare_total: c.total,
        overall_delta_pct: pct(c.total.saturating_sub(base_total)),
        normalized: options.normalize,
        functions,
        regressions,
        improvements,
        unchanged,
        noise_threshold,
        new_stacks,
        new_stack_count,
        removed_stacks,
        removed_stack_count,
        changed_stacks,
    })
}

/// Sums values per distinct stack (root-first node names) in both profiles.
fn stack_values(
    base_index: usize,
    base_table: &FrameTable,
    compare_index: usize,
    compare_table: &FrameTable,
    ratio: f64,
) -> HashMap<Vec<String>, (i64, i64)> {
    let mut out: HashMap<Vec<String>, (i64, i64)> = HashMap::default();
    let mut frames: Vec<u32> = Vec::new();
    for (index, table, is_base) in [(base_index, base_table, true), (compare_index, compare_table, false)] {
        // Aggregate by node ids first (cheap), then translate each distinct stack once.
        let mut by_ids: HashMap<Vec<u32>, i64> = HashMap::default();
        for sample in table.kept_samples() {
            let raw = sample.values.get(index).copied().unwrap_or(0);
            let value = if is_base { raw } else { scale(raw, ratio) };
            if value == 0 {
                continue;
            }
            frames.clear();
            table.walk_root_first(sample, |node, _| frames.push(node));
            let e = by_ids.entry(frames.clone()).or_default();
            *e = e.saturating_add(value);
        }
        for (ids, value) in by_ids {
            let names: Vec<String> = ids.iter().map(|&n| table.name(n).to_owned()).collect();
            let e = out.entry(names).or_default();
            if is_base {
                e.0 = e.0.saturating_add(value);
            } else {
                e.1 = e.1.saturating_add(value);
            }
        }
    }
    out
}
