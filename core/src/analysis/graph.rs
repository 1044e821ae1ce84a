//! The call graph of `go tool pprof -dot` (pprof's Graph view): one node per function (at
//! the chosen granularity) with flat and cum values, and caller→callee edges weighted by
//! the samples through both. It is pruned exactly as pprof prunes a dot graph
//! (`report.newTrimmedGraph` in visual mode): nodes under `node_fraction` of the flat sum
//! go, the rest are sorted by pprof's entropy score and the first `node_count` kept (label
//! nodelets counting as nodes), and each pruning rebuilds the graph from the samples, so
//! a caller and a callee that lose the frames between them get a residual edge. Edges
//! under `edge_fraction` go, then residual edges that another path makes redundant.
mod build;
mod labels;
mod prune;
mod tags;

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use self::build::Input;
pub use self::labels::shorten_function_name;
use self::labels::{font_size, name_lines, value_lines};
use super::query::Prepared;
use super::top::fraction_cutoff;
use crate::units::{format_value_in, report_unit};
use crate::{Error, Result};

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
        label.extend(value_lines(flat, cum, result.total, |v| result.format_value(v)));
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
