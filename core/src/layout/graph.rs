//! A layered (Sugiyama) layout of a [`CallGraph`], so the page only draws boxes and
//! paths. Callers sit above their callees: cycles are broken by reversing the DFS back
//! edges, nodes get layers by longest path, edges longer than one layer pass through
//! dummy nodes, barycenter sweeps order each layer to reduce crossings, and x positions
//! come from repeated per-layer least-squares placement (nodes pulled toward their
//! neighbours, never closer than a gap). Boxes are sized from their label as pprof sizes
//! them: its font grows with the node's flat share. Everything is deterministic.

use serde::{Deserialize, Serialize};

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

/// Rounds of barycenter sweeps and of x placement.
const ORDER_SWEEPS: usize = 12;
const PLACEMENT_ROUNDS: usize = 8;

/// The layered graph: real nodes `0..n`, then dummy vertices for long edges.
struct Layered {
    real: usize,
    layer: Vec<u32>,
    width: Vec<f64>,
    /// Neighbours one layer up and one layer down.
    up: Vec<Vec<u32>>,
    down: Vec<Vec<u32>>,
    /// Per layer, its vertices left to right.
    layers: Vec<Vec<u32>>,
    position: Vec<u32>,
    x: Vec<f64>,
    /// Per input edge, its vertices from top to bottom (`None` for a self-loop), and
    /// whether it was reversed to break a cycle.
    chains: Vec<Option<(Vec<u32>, bool)>>,
}

impl Layered {
    fn new(sizes: &[(f64, f64)], edges: &[(u32, u32)]) -> Self {
        let n = sizes.len();
        let reversed = back_edges(n, edges);
        let downward: Vec<Option<(u32, u32)>> = edges
            .iter()
            .zip(&reversed)
            .map(|(&(from, to), &rev)| (from != to).then_some(if rev { (to, from) } else { (from, to) }))
            .collect();
        let layer = assign_layers(n, &downward);
        let mut graph = Layered {
            real: n,
            width: sizes.iter().map(|s| s.0).collect(),
            up: vec![Vec::new(); n],
            down: vec![Vec::new(); n],
            layer,
            layers: Vec::new(),
            position: Vec::new(),
            x: Vec::new(),
            chains: Vec::with_capacity(edges.len()),
        };
        for (edge, rev) in downward.iter().zip(&reversed) {
            let chain = edge.map(|(top, bottom)| {
                let mut chain = vec![top];
                for layer in graph.layer[top as usize] + 1..graph.layer[bottom as usize] {
                    chain.push(graph.add_vertex(layer));
                }
                chain.push(bottom);
                for pair in chain.windows(2) {
                    graph.down[pair[0] as usize].push(pair[1]);
                    graph.up[pair[1] as usize].push(pair[0]);
                }
                (chain, *rev)
            });
            graph.chains.push(chain);
        }
        graph.initial_order();
        graph
    }

    fn add_vertex(&mut self, layer: u32) -> u32 {
        self.layer.push(layer);
        self.width.push(0.0);
        self.up.push(Vec::new());
        self.down.push(Vec::new());
        (self.layer.len() - 1) as u32
    }

    /// Layers filled in depth-first order from the top nodes, so a node starts next to
    /// its callers' other callees.
    fn initial_order(&mut self) {
        let count = self.layer.len();
        let depth = self.layer.iter().max().map_or(0, |&d| d as usize + 1);
        self.layers = vec![Vec::new(); depth];
        let mut placed = vec![false; count];
        let roots: Vec<u32> = (0..self.real as u32).filter(|&v| self.up[v as usize].is_empty()).collect();
        for start in roots.into_iter().chain(0..count as u32) {
            let mut stack = vec![start];
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut placed[v as usize], true) {
                    continue;
                }
                self.layers[self.layer[v as usize] as usize].push(v);
                stack.extend(self.down[v as usize].iter().rev().filter(|&&w| !placed[w as usize]));
            }
        }
        self.position = vec![0; count];
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                self.position[v as usize] = i as u32;
            }
        }
    }

    /// Barycenter sweeps, down then up, keeping the order with the fewest crossings.
    fn order_layers(&mut self) {
        let mut best = (self.crossings(), self.layers.clone());
        for sweep in 0..ORDER_SWEEPS {
            let downward = sweep % 2 == 0;
            let layers: Vec<usize> = if downward {
                (1..self.layers.len()).collect()
            } else {
                (0..self.layers.len().saturating_sub(1)).rev().collect()
            };
            for l in layers {
                self.reorder(l, downward);
            }
            let crossings = self.crossings();
            if crossings < best.0 {
                best = (crossings, self.layers.clone());
            }
        }
        self.layers = best.1;
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                self.position[v as usize] = i as u32;
            }
        }
    }

    /// Sorts a layer by the mean position of each vertex's neighbours in the layer above
    /// (or below); a vertex without any keeps its place.
    fn reorder(&mut self, l: usize, from_above: bool) {
        let key = |v: u32| {
            let neighbours = if from_above { &self.up[v as usize] } else { &self.down[v as usize] };
            if neighbours.is_empty() {
                return f64::from(self.position[v as usize]);
            }
            neighbours.iter().map(|&u| f64::from(self.position[u as usize])).sum::<f64>() / neighbours.len() as f64
        };
        let mut keyed: Vec<(f64, u32, u32)> =
            self.layers[l].iter().map(|&v| (key(v), self.position[v as usize], v)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        self.layers[l] = keyed.into_iter().map(|(_, _, v)| v).collect();
        for (i, &v) in self.layers[l].iter().enumerate() {
            self.position[v as usize] = i as u32;
        }
    }

    /// Edge crossings between all adjacent layers: inversions among each layer's
    /// downward edges sorted by their upper ends.
    fn crossings(&self) -> usize {
        let mut total = 0;
        for layer in &self.layers {
            let mut ends: Vec<(u32, u32)> = layer
                .iter()
                .flat_map(|&v| self.down[v as usize].iter().map(move |&w| (self.position[v as usize], w)))
                .map(|(p, w)| (p, self.position[w as usize]))
                .collect();
            ends.sort_unstable();
            total += inversions(&mut ends.into_iter().map(|e| e.1).collect::<Vec<_>>());
        }
        total
    }

    /// x centers: each layer placed as close as it can be to its neighbours' mean x,
    /// alternately from above and from below, then once from both.
    fn place_x(&mut self, options: &GraphLayoutOptions) {
        self.x = vec![0.0; self.layer.len()];
        let depth = self.layers.len();
        for l in 0..depth {
            self.place_layer(l, &vec![None; self.layers[l].len()], options);
        }
        let place = |graph: &mut Self, l: usize, above: bool, below: bool| {
            let wishes = graph.wishes(l, above, below);
            graph.place_layer(l, &wishes, options);
        };
        for _ in 0..PLACEMENT_ROUNDS {
            for l in 1..depth {
                place(self, l, true, false);
            }
            for l in (0..depth.saturating_sub(1)).rev() {
                place(self, l, false, true);
            }
        }
        for l in 0..depth {
            place(self, l, true, true);
        }
    }

    /// Per vertex of layer `l`, the mean x of its neighbours above and (or) below, if any.
    fn wishes(&self, l: usize, above: bool, below: bool) -> Vec<Option<f64>> {
        let none: &[u32] = &[];
        self.layers[l]
            .iter()
            .map(|&v| {
                let up = if above { &self.up[v as usize][..] } else { none };
                let down = if below { &self.down[v as usize][..] } else { none };
                let count = up.len() + down.len();
                (count > 0).then(|| up.iter().chain(down).map(|&u| self.x[u as usize]).sum::<f64>() / count as f64)
            })
            .collect()
    }

    /// Places one layer's vertices, in their order and at least their gap apart, as near
    /// their wished x as a weighted least-squares fit allows (pool-adjacent-violators).
    /// Dummies weigh more, to keep long edges straight; a vertex with no wish stays put.
    fn place_layer(&mut self, l: usize, wishes: &[Option<f64>], options: &GraphLayoutOptions) {
        let layer = &self.layers[l];
        let mut offset = 0.0;
        // Per vertex: (target minus offset, weight).
        let mut points = Vec::with_capacity(layer.len());
        for (i, &v) in layer.iter().enumerate() {
            if i > 0 {
                let u = layer[i - 1];
                let gap = if self.is_real(u) && self.is_real(v) { options.node_gap } else { options.node_gap / 2.0 };
                offset += (self.width[u as usize] + self.width[v as usize]) / 2.0 + gap;
            }
            let (target, weight) = match wishes[i] {
                Some(x) if self.is_real(v) => (x, 1.0),
                Some(x) => (x, 4.0),
                None => (self.x[v as usize], 0.01),
            };
            points.push((target - offset, weight, offset));
        }
        // Blocks of (weighted sum, total weight, length), means non-decreasing.
        let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
        for &(y, w, _) in &points {
            blocks.push((y * w, w, 1));
            while blocks.len() > 1 {
                let (last, previous) = (blocks[blocks.len() - 1], blocks[blocks.len() - 2]);
                if previous.0 / previous.1 <= last.0 / last.1 {
                    break;
                }
                blocks.pop();
                *blocks.last_mut().expect("two blocks") =
                    (previous.0 + last.0, previous.1 + last.1, previous.2 + last.2);
            }
        }
        let mut i = 0;
        for (sum, weight, len) in blocks {
            for _ in 0..len {
                self.x[layer[i] as usize] = sum / weight + points[i].2;
                i += 1;
            }
        }
    }

    fn is_real(&self, v: u32) -> bool {
        (v as usize) < self.real
    }

    fn finish(self, graph: &CallGraph, sizes: &[(f64, f64)], options: &GraphLayoutOptions) -> GraphLayout {
        let left = (0..self.layer.len()).map(|v| self.x[v] - self.width[v] / 2.0).fold(f64::INFINITY, f64::min);
        let shift = if left.is_finite() { options.margin - left } else { options.margin };
        let x = |v: u32| self.x[v as usize] + shift;
        // Each layer is as tall as its tallest box; boxes are centred in it.
        let mut band_top = Vec::with_capacity(self.layers.len());
        let mut band_height = Vec::with_capacity(self.layers.len());
        let mut top = options.margin;
        for layer in &self.layers {
            let height = layer.iter().filter(|&&v| self.is_real(v)).map(|&v| sizes[v as usize].1).fold(0.0, f64::max);
            band_top.push(top);
            band_height.push(height);
            top += height + options.layer_gap;
        }
        let nodes: Vec<NodeBox> = (0..self.real)
            .map(|v| {
                let (width, height) = sizes[v];
                let l = self.layer[v] as usize;
                NodeBox {
                    x: x(v as u32) - width / 2.0,
                    y: band_top[l] + (band_height[l] - height) / 2.0,
                    width,
                    height,
                    font_size: f64::from(graph.nodes[v].font_size),
                    layer: l as u32,
                }
            })
            .collect();
        let edges = self
            .chains
            .iter()
            .enumerate()
            .map(|(i, chain)| match chain {
                None => self_loop(&nodes[graph.edges[i].from as usize], options),
                Some((chain, reversed)) => {
                    let mut points =
                        vec![Point { x: x(chain[0]), y: nodes[chain[0] as usize].y + nodes[chain[0] as usize].height }];
                    for &d in &chain[1..chain.len() - 1] {
                        let l = self.layer[d as usize] as usize;
                        points.push(Point { x: x(d), y: band_top[l] });
                        points.push(Point { x: x(d), y: band_top[l] + band_height[l] });
                    }
                    let bottom = chain[chain.len() - 1];
                    points.push(Point { x: x(bottom), y: nodes[bottom as usize].y });
                    if *reversed {
                        points.reverse();
                    }
                    path(points)
                }
            })
            .collect();
        let mut layout = GraphLayout {
            width: (0..self.layer.len()).map(|v| x(v as u32) + self.width[v] / 2.0).fold(0.0, f64::max)
                + options.margin,
            height: if self.layers.is_empty() {
                2.0 * options.margin
            } else {
                top - options.layer_gap + options.margin
            },
            nodes,
            edges,
        };
        spread_ports(&mut layout, graph);
        layout.width =
            layout.edges.iter().flat_map(|e| &e.points).map(|p| p.x + options.margin).fold(layout.width, f64::max);
        layout
    }
}

/// A self-call: a loop out of the box's right side and back.
fn self_loop(node: &NodeBox, options: &GraphLayoutOptions) -> EdgePath {
    let right = node.x + node.width;
    let (upper, lower) = (node.y + node.height / 3.0, node.y + 2.0 * node.height / 3.0);
    let out = right + options.node_gap;
    path(vec![
        Point { x: right, y: upper },
        Point { x: out, y: upper },
        Point { x: out, y: lower },
        Point { x: right, y: lower },
    ])
}

/// Spreads the ends of the edges meeting one side of a box along that side, ordered by
/// where each edge heads, so that parallel edges do not overlap.
fn spread_ports(layout: &mut GraphLayout, graph: &CallGraph) {
    // (node, bottom side?) → (edge, which end, x of the neighbouring point)
    let mut ends: Vec<((u32, bool), usize, bool, f64)> = Vec::new();
    for (i, (edge, path)) in graph.edges.iter().zip(&layout.edges).enumerate() {
        if edge.from == edge.to {
            continue;
        }
        let (first, last) = (path.points[0], path.points[path.points.len() - 1]);
        let from_box = &layout.nodes[edge.from as usize];
        let to_box = &layout.nodes[edge.to as usize];
        ends.push(((edge.from, first.y > from_box.y), i, true, path.points[1].x));
        ends.push(((edge.to, last.y > to_box.y), i, false, path.points[path.points.len() - 2].x));
    }
    ends.sort_by(|a, b| a.0.cmp(&b.0).then(a.3.total_cmp(&b.3)).then(a.1.cmp(&b.1)));
    for side in ends.chunk_by(|a, b| a.0 == b.0) {
        let node = &layout.nodes[side[0].0 .0 as usize];
        // The middle half of the side, so arrows stay clear of the corners.
        let (start, span) = (node.x + node.width / 4.0, node.width / 2.0);
        for (k, &(_, edge, first, _)) in side.iter().enumerate() {
            let x = start + span * (k as f64 + 1.0) / (side.len() as f64 + 1.0);
            let points = &mut layout.edges[edge].points;
            let end = if first { 0 } else { points.len() - 1 };
            points[end].x = x;
        }
    }
    for edge in &mut layout.edges {
        *edge = path(std::mem::take(&mut edge.points));
    }
}

/// An edge path through `points`, with a curve through the same points that leaves and
/// meets each of them vertically (so it never swings wider than its points), and its
/// label beside the middle.
fn path(points: Vec<Point>) -> EdgePath {
    let mut curve = vec![points[0]];
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let pull = (b.y - a.y) / 2.0;
        curve.extend([Point { x: a.x, y: a.y + pull }, Point { x: b.x, y: b.y - pull }, b]);
    }
    let middle = (points.len() - 1) / 2;
    let (a, b) = (points[middle], points[(middle + 1).min(points.len() - 1)]);
    let label = Point { x: (a.x + b.x) / 2.0 + 4.0, y: (a.y + b.y) / 2.0 };
    EdgePath { points, curve, label }
}

/// Per edge, whether a depth-first search from the nodes without callers (then from
/// any node left) meets it as a back edge: reversing those makes the graph acyclic.
fn back_edges(n: usize, edges: &[(u32, u32)]) -> Vec<bool> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut has_caller = vec![false; n];
    for (i, &(from, to)) in edges.iter().enumerate() {
        out[from as usize].push(i);
        has_caller[to as usize] |= from != to;
    }
    // 0 unvisited, 1 on the DFS stack, 2 done.
    let mut state = vec![0u8; n];
    let mut back = vec![false; edges.len()];
    let starts = (0..n).filter(|&v| !has_caller[v]).chain(0..n);
    for start in starts {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        let mut stack = vec![(start, 0usize)];
        while let Some((v, next)) = stack.last_mut() {
            let Some(&e) = out[*v].get(*next) else {
                state[*v] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            let to = edges[e].1 as usize;
            match state[to] {
                0 => {
                    state[to] = 1;
                    stack.push((to, 0));
                }
                1 => back[e] = true,
                _ => {}
            }
        }
    }
    back
}

/// Longest-path layers over the downward edges; a node no edge enters then moves down
/// to just above its highest callee, so entry points do not pull long edges.
fn assign_layers(n: usize, downward: &[Option<(u32, u32)>]) -> Vec<u32> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(top, bottom) in downward.iter().flatten() {
        indegree[bottom as usize] += 1;
        out[top as usize].push(bottom);
    }
    let mut layer = vec![0u32; n];
    let mut order: Vec<u32> = (0..n as u32).filter(|&v| indegree[v as usize] == 0).collect();
    let mut i = 0;
    while i < order.len() {
        let v = order[i] as usize;
        i += 1;
        for &w in &out[v] {
            layer[w as usize] = layer[w as usize].max(layer[v] + 1);
            indegree[w as usize] -= 1;
            if indegree[w as usize] == 0 {
                order.push(w);
            }
        }
    }
    let mut entered = vec![false; n];
    for &(_, bottom) in downward.iter().flatten() {
        entered[bottom as usize] = true;
    }
    for &v in order.iter().rev() {
        let v = v as usize;
        if !entered[v] {
            if let Some(highest) = out[v].iter().map(|&w| layer[w as usize]).min() {
                layer[v] = highest - 1;
            }
        }
    }
    layer
}

/// Inversions in `values` (pairs out of order), by merge sort; sorts them.
fn inversions(values: &mut [u32]) -> usize {
    if values.len() < 2 {
        return 0;
    }
    let middle = values.len() / 2;
    let mut count = inversions(&mut values[..middle]) + inversions(&mut values[middle..]);
    let mut merged = Vec::with_capacity(values.len());
    let (mut i, mut j) = (0, middle);
    while i < middle && j < values.len() {
        if values[j] < values[i] {
            count += middle - i;
            merged.push(values[j]);
            j += 1;
        } else {
            merged.push(values[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&values[i..middle]);
    merged.extend_from_slice(&values[j..]);
    values.copy_from_slice(&merged);
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversions_count_out_of_order_pairs() {
        assert_eq!(inversions(&mut [0, 1, 2]), 0);
        assert_eq!(inversions(&mut [2, 1, 0]), 3);
        assert_eq!(inversions(&mut [1, 0, 1, 0]), 3);
    }

    #[test]
    fn cycles_are_broken_at_their_back_edge() {
        // 0 → 1 → 2 → 0, and 2 → 3.
        let edges = [(0, 1), (1, 2), (2, 0), (2, 3)];
        assert_eq!(back_edges(4, &edges), [false, false, true, false]);
    }
}
