//! The details of one report node (a function at the chosen granularity), for the page's
//! details panel: where it lives, its flat and cumulative values in every sample type (as
//! `go tool pprof -top`), its direct callers and callees (as `go tool pprof -peek`) and
//! the labels on its samples (as `go tool pprof -tags -focus`, by [`super::labels`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::frames::{CompiledFilters, FrameTable, Stamps};
use super::labels::{LabelKeySummary, LabelTally};
use super::query::Prepared;
use crate::model::{LocationId, SampleRef};
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionDetails {
    pub name: String,
    /// The source files of the functions behind the node, by file name.
    pub files: Vec<SourceFile>,
    /// The binaries its locations belong to, by file name.
    pub mappings: Vec<Binary>,
    /// Flat and cum in every sample type (of the samples the filters keep, as `top`), in
    /// the profile's order.
    pub values: Vec<SampleTypeValues>,
    /// The sample type `callers`, `callees` and `labels` are weighed in.
    pub sample_type: String,
    pub unit: String,
    pub callers: Vec<CallWeight>,
    pub callees: Vec<CallWeight>,
    /// The labels of the samples that contain the node, as the label panel shows a
    /// profile's: by key name, the shown keys' values largest first.
    pub labels: Vec<LabelKeySummary>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFile {
    pub file: String,
    /// The smallest and largest line number its samples were seen at; when they carry
    /// none, both are the function's start line (0 when unknown too).
    pub first_line: i64,
    pub last_line: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binary {
    pub file: String,
    pub build_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SampleTypeValues {
    pub sample_type: String,
    pub unit: String,
    /// The value of the samples whose leaf is the node.
    pub flat: i64,
    /// The value of the samples that contain it (once, however often they recurse).
    pub cum: i64,
    /// pprof's total: the sum of |value| over every sample, before filters.
    pub total: i64,
}

/// A direct caller or callee and the weight of its edge with the node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallWeight {
    pub name: String,
    pub value: i64,
    /// `value` over the node's cum (0 when that is 0).
    pub share: f64,
}

/// What the samples that contain the target node add up to.
struct Sums<'p> {
    /// Per location: whether one of its nodes is the target.
    holds_target: Vec<bool>,
    /// Per location: its innermost and outermost node, if the filters left it any.
    ends: Vec<Option<(u32, u32)>>,
    /// pprof's total ([`Profile::total`]) of each sample type, summed in the same pass.
    totals: Vec<i64>,
    flat: Vec<i64>,
    cum: Vec<i64>,
    calls: Calls,
    labels: LabelTally<'p>,
    /// Whether a sample was added.
    found: bool,
}

/// The calls into and out of the target node, by the other node (dense: a report has a
/// few thousand nodes at most, fewer than hashing every edge of every sample costs).
struct Calls {
    target: u32,
    callers: Vec<Option<i64>>,
    callees: Vec<Option<i64>>,
    /// An edge counts once per sample, as in pprof's graph.
    seen_callers: Stamps,
    seen_callees: Stamps,
}

impl Calls {
    fn next_sample(&mut self) {
        self.seen_callers.next_sample();
        self.seen_callees.next_sample();
    }

    /// Weighs the call from `caller` to `callee` if it enters or leaves the target, once
    /// per sample however often it is seen, as pprof weighs an edge of its graph; a node
    /// calling itself is no edge, and samples without value add none.
    fn add(&mut self, callee: Option<u32>, caller: u32, value: i64) {
        let Some(callee) = callee.filter(|&callee| callee != caller && value != 0) else { return };
        if callee == self.target && self.seen_callers.first_visit(caller) {
            add_to(&mut self.callers, caller, value);
        } else if caller == self.target && self.seen_callees.first_visit(callee) {
            add_to(&mut self.callees, callee, value);
        }
    }
}

impl<'p> Sums<'p> {
    /// Adds a kept sample that contains the target (first at `locations[first]`): its
    /// values in every sample type, and, weighed by its value at `index`, the calls into
    /// and out of the target and its labels.
    fn add(&mut self, table: &FrameTable, sample: SampleRef<'_>, index: usize, first: usize) {
        let value = sample.values.get(index).copied().unwrap_or(0);
        self.calls.next_sample();
        // Stacks are deep and their locations scattered in memory, so only the target's
        // own locations and their nearest neighbours with nodes are read, leaf first.
        let locations = &sample.locations;
        let innermost = |l: &LocationId| self.ends[l.0 as usize].map(|(innermost, _)| innermost);
        let outermost = |l: &LocationId| self.ends[l.0 as usize].map(|(_, outermost)| outermost);
        for (at, location) in locations.iter().enumerate().skip(first) {
            if !self.holds_target[location.0 as usize] {
                continue;
            }
            // The callee of the node at hand.
            let mut inner = locations[..at].iter().rev().find_map(outermost);
            for (node, _) in table.nodes(location.0) {
                self.calls.add(inner, node, value);
                inner = Some(node);
            }
            if let Some(caller) = locations[at + 1..].iter().find_map(innermost) {
                self.calls.add(inner, caller, value);
            }
        }
        let is_leaf = locations.iter().find_map(innermost) == Some(self.calls.target);
        for (i, &v) in sample.values.iter().enumerate().take(self.cum.len()) {
            self.cum[i] = self.cum[i].saturating_add(v);
            if is_leaf {
                self.flat[i] = self.flat[i].saturating_add(v);
            }
        }
        self.labels.add(sample);
        self.found = true;
    }
}

/// `sums[node] += value`, saturating like every sum of sample values.
fn add_to(sums: &mut [Option<i64>], node: u32, value: i64) {
    let sum = sums[node as usize].get_or_insert(0);
    *sum = sum.saturating_add(value);
}

/// The details of `function` (a node's name as top and tree name it at the prepared
/// granularity), weighed in the prepared sample type, or [`Error::UnknownNode`] when no
/// sample the filters keep contains it.
pub fn details(prepared: &Prepared, function: &str) -> Result<FunctionDetails> {
    let index = prepared.sample_index;
    let filters = prepared.filters();
    let table = prepared.frames()?;
    // The samples as the filters see them, with their label frames.
    let kept = table.profile();
    let unknown = || Error::UnknownNode(function.to_owned());
    let target = (0..table.node_count() as u32).find(|&n| table.name(n) == function).ok_or_else(unknown)?;
    let types = kept.sample_types.len();
    let mut sums = Sums {
        holds_target: (0..kept.locations.len() as u32)
            .map(|l| table.nodes(l).any(|(node, _)| node == target))
            .collect(),
        ends: (0..kept.locations.len() as u32)
            .map(|l| {
                let mut nodes = table.nodes(l).map(|(node, _)| node);
                nodes.next().map(|innermost| (innermost, nodes.next_back().unwrap_or(innermost)))
            })
            .collect(),
        totals: vec![0; types],
        flat: vec![0; types],
        cum: vec![0; types],
        calls: Calls {
            target,
            callers: vec![None; table.node_count()],
            callees: vec![None; table.node_count()],
            seen_callers: Stamps::new(table.node_count()),
            seen_callees: Stamps::new(table.node_count()),
        },
        labels: LabelTally::new(kept, index),
        found: false,
    };
    for sample in &kept.samples {
        for (total, value) in sums.totals.iter_mut().zip(sample.values) {
            *total = total.saturating_add(value.saturating_abs());
        }
        let first = sample.locations.iter().position(|l| sums.holds_target[l.0 as usize]);
        if let Some(first) = first.filter(|_| table.keeps(sample)) {
            sums.add(&table, sample, index, first);
        }
    }
    // A node no kept sample reaches is not in the report.
    if !sums.found {
        return Err(unknown());
    }

    let cum = sums.cum.get(index).copied().unwrap_or(0);
    let weights = |edges: Vec<Option<i64>>| {
        let mut edges: Vec<(u32, i64)> =
            edges.into_iter().enumerate().filter_map(|(node, sum)| Some((node as u32, sum?))).collect();
        // pprof's edge order: |weight| descending, then name.
        edges.sort_by(|a, b| {
            b.1.unsigned_abs().cmp(&a.1.unsigned_abs()).then_with(|| table.name(a.0).cmp(table.name(b.0)))
        });
        edges
            .into_iter()
            .map(|(node, value)| CallWeight {
                name: table.name(node).to_owned(),
                value,
                share: if cum == 0 { 0.0 } else { value as f64 / cum as f64 },
            })
            .collect()
    };
    let values = (0..types)
        .map(|i| SampleTypeValues {
            sample_type: kept.sample_type_name(i).to_owned(),
            unit: kept.sample_type_unit(i).to_owned(),
            flat: sums.flat[i],
            cum: sums.cum[i],
            total: sums.totals[i],
        })
        .collect();
    let total = sums.totals.get(index).copied().unwrap_or(0);
    let labels = sums.labels.summary(total, &filters.tags.keys).keys;
    let (files, mappings) = whereabouts(&table, filters, target, &sums.holds_target);
    Ok(FunctionDetails {
        name: function.to_owned(),
        files,
        mappings,
        values,
        sample_type: kept.sample_type_name(index).to_owned(),
        unit: kept.sample_type_unit(index).to_owned(),
        callers: weights(sums.calls.callers),
        callees: weights(sums.calls.callees),
        labels,
    })
}

/// The line numbers seen in one file, and its function's start line for want of them.
#[derive(Default)]
struct FileLines {
    seen: Option<(i64, i64)>,
    start_line: i64,
}

impl FileLines {
    fn add(&mut self, line: i64, start_line: i64) {
        if self.start_line == 0 {
            self.start_line = start_line;
        }
        if line != 0 {
            self.seen = Some(self.seen.map_or((line, line), |(first, last)| (first.min(line), last.max(line))));
        }
    }

    fn source_file(self, file: &str) -> SourceFile {
        let (first_line, last_line) = self.seen.unwrap_or((self.start_line, self.start_line));
        SourceFile { file: file.to_owned(), first_line, last_line }
    }
}

/// The source files (with the lines seen in each) and the binaries of the locations that
/// hold `target`.
fn whereabouts(
    table: &FrameTable,
    filters: &CompiledFilters,
    target: u32,
    holds_target: &[bool],
) -> (Vec<SourceFile>, Vec<Binary>) {
    let profile = table.profile();
    let mut files: BTreeMap<&str, FileLines> = BTreeMap::new();
    let mut binaries: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (l, _) in holds_target.iter().enumerate().filter(|(_, &holds)| holds) {
        let location = LocationId(l as u32);
        if let Some(mapping) = profile.location(location).mapping.map(|m| profile.mapping(m)) {
            binaries.insert((profile.str(mapping.filename), profile.str(mapping.build_id)));
        }
        for (line, _) in table.line_nodes(filters, location).filter(|&(_, node)| node == target) {
            let function = profile.function(line.function);
            let file = profile.str(function.filename);
            if file.is_empty() {
                continue;
            }
            files.entry(file).or_default().add(line.line, function.start_line);
        }
    }
    let files = files.into_iter().map(|(file, lines)| lines.source_file(file)).collect();
    let binaries = binaries
        .into_iter()
        .map(|(file, build_id)| Binary { file: file.to_owned(), build_id: build_id.to_owned() })
        .collect();
    (files, binaries)
}
