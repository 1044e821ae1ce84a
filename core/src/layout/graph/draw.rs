//! What the page draws from the placed layers: boxes in layer bands, edge paths through
//! their dummy vertices with curves and label points, and edge ends spread along a side.

use super::layered::Layered;
use super::{EdgePath, GraphLayout, GraphLayoutOptions, NodeBox, Point};
use crate::analysis::graph::CallGraph;

impl Layered {
    pub(super) fn finish(self, graph: &CallGraph, sizes: &[(f64, f64)], options: &GraphLayoutOptions) -> GraphLayout {
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
