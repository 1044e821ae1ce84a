//! A layered (Sugiyama) layout of a [`CallGraph`], so the page only draws boxes and
//! paths. Callers sit above their callees: cycles are broken by reversing the DFS back
//! edges, nodes get layers by longest path, edges longer than one layer pass through
//! dummy nodes, barycenter sweeps order each layer to reduce crossings, and x positions
//! come from repeated per-layer least-squares placement (nodes pulled toward their
//! neighbours, never closer than a gap). Boxes are sized from their label as pprof sizes
//! them: its font grows with the node's flat share. Everything is deterministic.
mod draw;
mod layered;
mod place;

use serde::{Deserialize, Serialize};

use self::layered::Layered;
use crate::analysis::graph::CallGraph;
use crate::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GraphLayoutOptions {
    /// Vertical space between layers.
    pub layer_gap: f64,
    /// Horizontal space between boxes.
    pub node_gap: f64,
    /// Space between a box's border and its text.
    pub padding: f64,
    /// A character's advance, in units of the font size (the page's font should match).
    pub char_width: f64,
    /// A text line's height, in units of the font size.
    pub line_height: f64,
    /// Space around the drawing.
    pub margin: f64,
}

impl Default for GraphLayoutOptions {
    fn default() -> Self {
        Self { layer_gap: 48.0, node_gap: 16.0, padding: 4.0, char_width: 0.6, line_height: 1.2, margin: 8.0 }
    }
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// A node's box; `x` and `y` are its top-left corner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeBox {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    pub font_size: f64,
    /// Its layer, 0 at the top.
    pub layer: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EdgePath {
    /// From a point on the caller's box to a point on the callee's box.
    pub points: Vec<Point>,
    /// The same path as cubic Bézier curves: the start point, then three points (two
    /// control points and an end point) per curve, for SVG's `M p C c1 c2 p …`.
    pub curve: Vec<Point>,
    /// Where the edge's weight label goes.
    pub label: Point,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphLayout {
    pub width: f64,
    pub height: f64,
    /// One per [`CallGraph::nodes`] entry, in the same order.
    pub nodes: Vec<NodeBox>,
    /// One per [`CallGraph::edges`] entry, in the same order.
    pub edges: Vec<EdgePath>,
}

/// Lays `graph` out; an edge naming a node the graph does not have is an error.
pub fn layout_call_graph(graph: &CallGraph, options: &GraphLayoutOptions) -> Result<GraphLayout> {
    let n = graph.nodes.len();
    for (i, e) in graph.edges.iter().enumerate() {
        if let Some(&missing) = [e.from, e.to].iter().find(|&&node| node as usize >= n) {
            return Err(Error::DanglingReference {
                what: format!("graph edge {i}"),
                target: "node",
                id: missing.into(),
            });
        }
    }
    let sizes: Vec<(f64, f64)> = graph
        .nodes
        .iter()
        .map(|node| {
            let font = f64::from(node.font_size);
            let chars = node.label.iter().map(|l| l.chars().count()).max().unwrap_or(0);
            let width = chars as f64 * font * options.char_width + 2.0 * options.padding;
            let height = node.label.len() as f64 * font * options.line_height + 2.0 * options.padding;
            (width, height)
        })
        .collect();
    let edges: Vec<(u32, u32)> = graph.edges.iter().map(|e| (e.from, e.to)).collect();
    let mut layout = Layered::new(&sizes, &edges);
    layout.order_layers();
    layout.place_x(options);
    Ok(layout.finish(graph, &sizes, options))
}
