//! The call graph as Graphviz DOT, in the shape of `go tool pprof -dot` (pprof's
//! `graph.ComposeDot`), so that `dot -Tsvg` draws it as pprof's Graph view. Label
//! nodelets are not drawn.

use std::fmt::Write;

use crate::analysis::graph::{CallGraph, GraphEdge, GraphNode};
use crate::units::{format_value, percentage, scale_to};
use crate::Profile;

/// The DOT text of `graph`, a call graph of `profile`.
pub fn dot(profile: &Profile, graph: &CallGraph) -> String {
    let title = profile.mappings.first().map_or("", |m| base_name(profile.str(m.filename)));
    let mut out = String::new();
    let name = if title.is_empty() { "unnamed" } else { title };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "digraph \"{}\" {{\nnode [style=filled fillcolor=\"#f8f8f8\"]", escape(name));
    let legend = legend(profile, graph);
    let lines: Vec<String> = legend.iter().map(|l| escape(l)).collect();
    let _ =
        write!(out, "subgraph cluster_L {{ \"{}\" [shape=box fontsize=16 label=\"{}\\l\"", lines[0], lines.join("\\l"));
    if !title.is_empty() {
        let _ = write!(out, " tooltip=\"{}\"", escape(title));
    }
    out.push_str("] }\n");
    for (i, node) in graph.nodes.iter().enumerate() {
        let label: Vec<String> = node.label.iter().map(|l| escape(l)).collect();
        let (color, fill) = node_colors(graph, node);
        let _ = writeln!(
            out,
            "N{} [label=\"{}\" id=\"node{}\" fontsize={} shape=box tooltip=\"{} ({})\" color=\"{}\" fillcolor=\"{}\"]",
            i + 1,
            label.join("\\n"),
            i + 1,
            node.font_size,
            escape(&node.name),
            graph.format_value(node.cum),
            color,
            fill,
        );
    }
    for edge in &graph.edges {
        let _ = writeln!(out, "N{} -> N{} [{}]", edge.from + 1, edge.to + 1, edge_attributes(graph, edge));
    }
    out.push_str("}\n");
    out
}

fn edge_attributes(graph: &CallGraph, edge: &GraphEdge) -> String {
    let weight = graph.format_value(edge.weight);
    let mut attributes = format!("label=\" {weight}{}\"", if edge.inline { "\\n (inline)" } else { "" });
    if graph.total != 0 {
        // Graphviz's edge weight and pen width grow with the edge's share of the total.
        if let w @ 1.. = scaled_weight(graph, edge, 100) {
            let _ = write!(attributes, " weight={}", w + 1);
        }
        if let w @ 2.. = pen_width(graph, edge) {
            let _ = write!(attributes, " penwidth={w}");
        }
        let _ = write!(attributes, " color=\"{}\"", edge_color(graph, edge));
    }
    let arrow = if edge.residual { "..." } else { "->" };
    let (from, to) = (&graph.nodes[edge.from as usize].name, &graph.nodes[edge.to as usize].name);
    let tooltip = format!("\"{} {arrow} {} ({weight})\"", escape(from), escape(to));
    let _ = write!(attributes, " tooltip={tooltip} labeltooltip={tooltip}");
    if edge.residual {
        attributes.push_str(" style=\"dotted\"");
    }
    attributes
}

/// A node's border and fill colors: pprof colours a node by its cum's share of the total.
pub fn node_colors(graph: &CallGraph, node: &GraphNode) -> (String, String) {
    let share = share(node.cum, graph.total);
    (dot_color(share, false), dot_color(share, true))
}

/// An edge's colour, by its weight's share of the total.
pub fn edge_color(graph: &CallGraph, edge: &GraphEdge) -> String {
    dot_color(share(edge.weight, graph.total), false)
}

/// An edge's pen width as pprof draws it: 1, plus its share of the total in fifths.
pub fn pen_width(graph: &CallGraph, edge: &GraphEdge) -> u32 {
    scaled_weight(graph, edge, 5) + 1
}

/// The edge's weight as a share of the total, in `max`ths (at most `max`).
fn scaled_weight(graph: &CallGraph, edge: &GraphEdge, max: u32) -> u32 {
    if graph.total == 0 {
        return 0;
    }
    let scaled = (i128::from(edge.weight) * i128::from(max) / i128::from(graph.total)).unsigned_abs();
    scaled.min(u128::from(max)) as u32
}

/// `value` over |total|, for colors (0 when there is no total).
fn share(value: i64, total: i64) -> f64 {
    if total == 0 {
        0.0
    } else {
        value as f64 / total.unsigned_abs() as f64
    }
}

/// The legend pprof writes into the graph: the profile's file, comments, type and
/// duration, how much the shown nodes account for, and what pruning dropped. (pprof
/// also prints the profile's time, in the viewer's time zone, and the active filters.)
pub fn legend(profile: &Profile, graph: &CallGraph) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(mapping) = profile.mappings.first() {
        let file = profile.str(mapping.filename);
        if !file.is_empty() {
            lines.push(format!("File: {}", base_name(file)));
        }
        let build_id = profile.str(mapping.build_id);
        if !build_id.is_empty() {
            lines.push(format!("Build ID: {build_id}"));
        }
    }
    lines.extend(profile.comments.iter().map(|&c| profile.str(c)).filter(|c| !c.starts_with('#')).map(str::to_owned));
    lines.push(format!("Type: {}", graph.sample_type));
    if profile.duration_nanos != 0 {
        let (total_nanos, unit) = scale_to(graph.total, &graph.unit, "nanoseconds");
        let ratio = if unit == "ns" && total_nanos != 0.0 {
            format!("({})", percentage(total_nanos as i64, profile.duration_nanos))
        } else {
            String::new()
        };
        lines.push(format!(
            "Duration: {}, Total samples = {} {ratio}",
            format_value(profile.duration_nanos, "nanoseconds"),
            graph.format_value(graph.total)
        ));
    }
    let flat_sum = graph.nodes.iter().map(|n| n.flat).fold(0i64, i64::saturating_add);
    lines.push(format!(
        "Showing nodes accounting for {}, {} of {} total",
        graph.format_value(flat_sum),
        percentage(flat_sum, graph.total).trim(),
        graph.format_value(graph.total)
    ));
    if graph.total != 0 {
        let dropped = |count: usize, what: &str, by: &str, cutoff: i64| {
            let plural = if count > 1 { "s" } else { "" };
            format!("Dropped {count} {what}{plural} ({by} <= {})", graph.format_value(cutoff))
        };
        if graph.dropped_nodes > 0 {
            lines.push(dropped(graph.dropped_nodes, "node", "cum", graph.node_cutoff));
        }
        if graph.dropped_edges > 0 {
            lines.push(dropped(graph.dropped_edges, "edge", "freq", graph.edge_cutoff));
        }
        if !graph.nodes.is_empty() && graph.nodes.len() < graph.node_total {
            lines.push(format!("Showing top {} nodes out of {}", graph.nodes.len(), graph.node_total));
        }
    }
    lines.push("\nSee https://git.io/JfYMW for how to read the graph".to_owned());
    lines
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// pprof's `escapeForDot`: backslashes and quotes escaped, newlines left-justified.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\l")
}

/// pprof's `dotColor`: a score in [-1, 1] as a color from green (-1) through grey (0)
/// to red (1); light for backgrounds, dark for borders, edges and text.
pub fn dot_color(score: f64, background: bool) -> String {
    // How far scores are pushed away from grey, to use more of the color range.
    const SHIFT: f64 = 0.7;
    let (mut saturation, value) = if background { (0.1, 0.93) } else { (1.0, 0.7) };
    let score = if score.is_nan() { 0.0 } else { score.clamp(-1.0, 1.0) };
    if score.abs() < 0.2 {
        saturation *= score.abs() / 0.2;
    }
    let score = score.signum() * score.abs().powf(1.0 - SHIFT);
    let (r, g) = if score < 0.0 {
        (value * (1.0 + saturation * score), value)
    } else {
        (value, value * (1.0 - saturation * score))
    };
    let b = value * (1.0 - saturation);
    format!("#{:02x}{:02x}{:02x}", (r * 255.0) as u8, (g * 255.0) as u8, (b * 255.0) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colors_match_pprof() {
        // From `go tool pprof -dot` on the fixtures: cum shares 96.22% and 8.71%.
        assert_eq!(dot_color(0.9622, false), "#b20200");
        assert_eq!(dot_color(0.9622, true), "#edd5d5");
        assert_eq!(dot_color(0.0871, false), "#b28d64");
        assert_eq!(dot_color(0.0871, true), "#ede8e2");
        assert_eq!(dot_color(0.0, true), "#ededed");
    }
}
