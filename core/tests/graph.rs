//! The call graph against `go tool pprof -dot` run at test time on the Go fixtures (several
//! profile types, pprof's defaults and other pruning settings) and on third-party pprof
//! files: the same nodes in the same order with the same flat, cum and font size, the
//! same edges with the same weights and inline/residual styles, and the same legend.
//! Both our graph and our DOT writer's text are compared. Then the layered layout's
//! geometry: no overlapping boxes, edges from box to box, callers above callees.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use stacklens_core::analysis::graph::{call_graph, CallGraph, GraphEdge, GraphNode, GraphOptions};
use stacklens_core::analysis::{Granularity, Query};
use stacklens_core::layout::graph::{layout_call_graph, GraphLayout, GraphLayoutOptions, NodeBox, Point};
use stacklens_core::report::dot::dot;
use stacklens_core::{Profile, Result};

/// What a pprof-shaped DOT text says, values as printed.
#[derive(Debug, PartialEq)]
struct DotGraph {
    /// (name, label lines, cum, font size), in `N1`, `N2`, … order. The label has the
    /// shortened name, and flat and cum with their shares of the total.
    nodes: Vec<(String, Vec<String>, String, u32)>,
    /// (caller, callee) → (weight, inline, residual)
    edges: BTreeMap<(String, String), (String, bool, bool)>,
    /// The legend, without the lines we do not write (the time, the active filters).
    legend: Vec<String>,
}

fn read_dot(text: &str) -> DotGraph {
    let node = Regex::new(
        r##"^N(\d+) \[label="(.*)" id="node\d+" fontsize=(\d+) shape=box tooltip="(.*) \(([^()]*)\)" color="#"##,
    )
    .unwrap();
    let edge = Regex::new(r#"^N(\d+) -> N(\d+) \[label=" ([^"\\]*)(\\n \(inline\))?"(.*)\]$"#).unwrap();
    let legend =
        Regex::new(r#"^subgraph cluster_L \{ ".*" \[shape=box fontsize=16 label="(.*)\\l"(?: tooltip=".*")?\] \}$"#)
            .unwrap();
    let mut graph = DotGraph { nodes: Vec::new(), edges: BTreeMap::new(), legend: Vec::new() };
    let mut names = Vec::new();
    for line in text.lines() {
        if let Some(c) = node.captures(line) {
            assert_eq!(c[1].parse::<usize>().unwrap(), graph.nodes.len() + 1, "{line}");
            let label = c[2].split("\\n").map(str::to_owned).collect();
            names.push(c[4].to_owned());
            graph.nodes.push((c[4].to_owned(), label, c[5].to_owned(), c[3].parse().unwrap()));
        } else if let Some(c) = edge.captures(line) {
            let name = |n: &str| names[n.parse::<usize>().unwrap() - 1].clone();
            let residual = c[5].contains(r#"style="dotted""#);
            let previous =
                graph.edges.insert((name(&c[1]), name(&c[2])), (c[3].to_owned(), c.get(4).is_some(), residual));
            assert!(previous.is_none(), "two edges in {line}");
        } else if let Some(c) = legend.captures(line) {
            let mut in_filters = false;
            for l in c[1].split("\\l") {
                in_filters = l == "Active filters:" || (in_filters && l.starts_with("   "));
                if !in_filters && !l.starts_with("Time: ") {
                    graph.legend.push(l.to_owned());
                }
            }
        }
    }
    graph
}

/// Our graph as pprof would print it (the legend left empty).
fn printed(graph: &CallGraph) -> DotGraph {
    let nodes =
        graph.nodes.iter().map(|n| (n.name.clone(), n.label.clone(), graph.format_value(n.cum), n.font_size)).collect();
    let edges = graph
        .edges
        .iter()
        .map(|e| {
            let (from, to) = (&graph.nodes[e.from as usize], &graph.nodes[e.to as usize]);
            ((from.name.clone(), to.name.clone()), (graph.format_value(e.weight), e.inline, e.residual))
        })
        .collect();
    DotGraph { nodes, edges, legend: Vec::new() }
}

/// pprof's flags for our options.
fn pprof_flags(query: &Query, options: &GraphOptions) -> Vec<String> {
    let mut flags = vec![
        format!("-nodefraction={}", options.node_fraction),
        format!("-edgefraction={}", options.edge_fraction),
        format!("-nodecount={}", options.node_count.unwrap_or(0)),
    ];
    let sample = query.sample.to_string();
    if !sample.is_empty() {
        flags.push(format!("-sample_index={sample}"));
    }
    if query.granularity == Granularity::Lines {
        flags.push("-lines".to_owned());
    }
    let filters = &query.filters;
    for (flag, value) in [
        ("focus", &filters.focus),
        ("hide", &filters.hide),
        ("tagfocus", &filters.tag_focus),
        ("tagignore", &filters.tag_ignore),
    ] {
        if let Some(value) = value {
            flags.push(format!("-{flag}={value}"));
        }
    }
    for (flag, keys) in [("tagroot", &filters.tag_root), ("tagleaf", &filters.tag_leaf)] {
        if !keys.is_empty() {
            flags.push(format!("-{flag}={}", keys.join(",")));
        }
    }
    flags
}

fn load(path: &Path) -> Profile {
    stacklens_core::parse(&common::read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The call graph of `profile` under `query`.
fn graph_of(profile: &Profile, query: &Query, options: &GraphOptions) -> Result<CallGraph> {
    query.prepare(profile).and_then(|prepared| call_graph(&prepared, options))
}

/// Compares our graph and our DOT text of `file` with `go tool pprof -dot`.
fn assert_like_pprof(go: &Path, file: &Path, query: &Query, options: &GraphOptions) {
    let flags = pprof_flags(query, options);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let dir = file.parent().unwrap();
    let expected = read_dot(&common::pprof(go, dir, &[file], &[&["-dot"], &flags[..]].concat()));
    let profile = load(file);
    let graph = graph_of(&profile, query, options).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let what = format!("{} {flags:?}", file.display());
    assert!(!expected.nodes.is_empty() && !expected.legend.is_empty(), "{what}: unreadable pprof output");
    let ours = printed(&graph);
    assert_eq!(ours.nodes, expected.nodes, "{what}: nodes");
    assert_eq!(ours.edges, expected.edges, "{what}: edges");
    let written = read_dot(&dot(&profile, &graph));
    let legend_free = |mut g: DotGraph| {
        g.legend.clear();
        g
    };
    assert_eq!(written.legend, expected.legend, "{what}: legend");
    assert_eq!(legend_free(written), legend_free(expected), "{what}: DOT text");
}

fn go_fixtures() -> Option<(&'static Path, std::path::PathBuf)> {
    Some((common::go()?, common::fixtures()?))
}

/// Every Go profile type in both fixture sets, at pprof's `-dot` defaults.
#[test]
fn go_profiles_at_pprof_defaults() {
    let Some((go, root)) = go_fixtures() else { return };
    for set in ["go/base", "go/compare"] {
        for (file, sample_index) in [
            ("cpu.pb.gz", ""),
            ("heap.pb.gz", ""),
            ("heap.pb.gz", "alloc_space"),
            ("heap.pb.gz", "alloc_objects"),
            ("allocs.pb.gz", ""),
            ("mutex.pb.gz", ""),
            ("block.pb.gz", ""),
            ("goroutine.pb.gz", ""),
            ("threadcreate.pb.gz", ""),
        ] {
            let query = Query { sample: sample_index.into(), ..Query::default() };
            assert_like_pprof(go, &root.join(set).join(file), &query, &GraphOptions::default());
        }
    }
}

/// Fewer nodes, and coarser node and edge fractions, where pruning leaves residual edges.
#[test]
fn go_profiles_pruned_harder() {
    let Some((go, root)) = go_fixtures() else { return };
    let settings = [
        GraphOptions { node_count: Some(20), ..GraphOptions::default() },
        GraphOptions { node_count: Some(8), ..GraphOptions::default() },
        GraphOptions { node_fraction: 0.01, edge_fraction: 0.01, ..GraphOptions::default() },
        GraphOptions { node_fraction: 0.05, edge_fraction: 0.02, node_count: Some(12), ..GraphOptions::default() },
    ];
    for set in ["go/base", "go/compare"] {
        for file in ["cpu.pb.gz", "heap.pb.gz", "allocs.pb.gz", "mutex.pb.gz", "block.pb.gz", "goroutine.pb.gz"] {
            for options in &settings {
                assert_like_pprof(go, &root.join(set).join(file), &Query::default(), options);
            }
        }
    }
}

/// The large CPU profile (labels on every sample: nodelets crowd out nodes), at the
/// defaults and with many more nodes.
#[test]
fn large_cpu_profile() {
    let Some((go, root)) = go_fixtures() else { return };
    let file = root.join("large/cpu.large.pb.gz");
    for options in [
        GraphOptions::default(),
        GraphOptions { node_count: Some(200), node_fraction: 0.001, ..GraphOptions::default() },
    ] {
        assert_like_pprof(go, &file, &Query::default(), &options);
    }
}

/// Third-party pprof files (C++ and Go, inlined frames), and granularities and filters.
#[test]
fn other_profiles_and_options() {
    let Some((go, root)) = go_fixtures() else { return };
    let pprof = root.join("thirdparty/pprof");
    for file in ["cppbench.cpu", "gobench.cpu", "large.cpu", "cppbench.contention"] {
        assert_like_pprof(go, &pprof.join(file), &Query::default(), &GraphOptions::default());
    }
    let cpu = root.join("go/base/cpu.pb.gz");
    let defaults = GraphOptions::default();
    let mut by_line = Query { granularity: Granularity::Lines, ..Query::default() };
    assert_like_pprof(go, &cpu, &by_line, &defaults);
    by_line.filters.focus = Some("main".to_owned());
    by_line.filters.hide = Some("runtime".to_owned());
    assert_like_pprof(go, &cpu, &by_line, &defaults);
    let hidden = Query {
        filters: stacklens_core::analysis::Filters { hide: Some("compress".to_owned()), ..Default::default() },
        ..Query::default()
    };
    assert_like_pprof(go, &root.join("go/base/heap.pb.gz"), &hidden, &defaults);
}

/// Tag filters keep and drop samples by label; tagroot/tagleaf label frames are nodes
/// (and edges) of their own, as in `go tool pprof -dot -tagroot`.
#[test]
fn tag_filters_and_label_frames_like_pprof() {
    let Some((go, root)) = go_fixtures() else { return };
    let tags = |focus: &str, ignore: &str, tag_root: &[&str], tag_leaf: &[&str]| Query {
        filters: stacklens_core::analysis::Filters {
            tag_focus: (!focus.is_empty()).then(|| focus.to_owned()),
            tag_ignore: (!ignore.is_empty()).then(|| ignore.to_owned()),
            tag_root: tag_root.iter().map(|&k| k.to_owned()).collect(),
            tag_leaf: tag_leaf.iter().map(|&k| k.to_owned()).collect(),
            ..Default::default()
        },
        ..Query::default()
    };
    let defaults = GraphOptions::default();
    let cpu = root.join("go/base/cpu.pb.gz");
    assert_like_pprof(go, &cpu, &tags("endpoint=/api/report", "", &[], &[]), &defaults);
    assert_like_pprof(go, &cpu, &tags("", "tenant=acme|globex", &[], &[]), &defaults);
    assert_like_pprof(go, &cpu, &tags("", "", &["endpoint"], &[]), &defaults);
    assert_like_pprof(go, &cpu, &tags("tenant=umbrella", "", &["endpoint", "tenant"], &["tenant"]), &defaults);
    let heap = root.join("go/compare/heap.pb.gz");
    let alloc_space = Query { sample: "alloc_space".into(), ..tags("", "", &[], &["bytes"]) };
    assert_like_pprof(go, &heap, &alloc_space, &defaults);
    assert_like_pprof(go, &heap, &tags(":32kb", "", &["bytes"], &[]), &defaults);
    let labelled = graph_of(&load(&cpu), &tags("", "", &["endpoint"], &[]), &defaults).unwrap();
    // A label frame is a function named by the value, in a "file" named by the key.
    assert!(labelled.nodes.iter().any(|n| n.file.as_deref() == Some("endpoint")), "{:?}", labelled.nodes);
}

/// Focusing on a node keeps the samples through it, as pprof's `-focus` on its exact name.
#[test]
fn focus_node_is_pprof_focus_on_its_name() {
    let Some((go, root)) = go_fixtures() else { return };
    let cpu = root.join("go/base/cpu.pb.gz");
    let whole = Query::default();
    let graph = graph_of(&load(&cpu), &whole, &GraphOptions::default()).unwrap();
    let name = &graph.nodes[graph.nodes.len() / 2].name;
    let focused = GraphOptions { focus_node: Some(name.clone()), ..GraphOptions::default() };
    let by_regex = Query {
        filters: stacklens_core::analysis::Filters {
            focus: Some(format!("^{}$", regex::escape(name))),
            ..Default::default()
        },
        ..Query::default()
    };
    let ours = graph_of(&load(&cpu), &whole, &focused).unwrap();
    assert!(ours.nodes.iter().any(|n| &n.name == name) && ours.nodes.len() < graph.nodes.len());
    let flags = pprof_flags(&by_regex, &GraphOptions::default());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let expected = read_dot(&common::pprof(go, cpu.parent().unwrap(), &[&cpu], &[&["-dot"], &flags[..]].concat()));
    let ours = printed(&ours);
    assert_eq!((ours.nodes, ours.edges), (expected.nodes, expected.edges));
    let unknown = GraphOptions { focus_node: Some("no such function".to_owned()), ..GraphOptions::default() };
    assert_eq!(graph_of(&load(&cpu), &whole, &unknown).unwrap_err().code(), "UnknownNode");
}

/// A graph of `n` nodes with these edges, labels of varying length and font size.
fn synthetic(n: u32, edges: &[(u32, u32)]) -> CallGraph {
    let nodes = (0..n)
        .map(|i| GraphNode {
            name: format!("node{i}"),
            flat: i64::from(i),
            cum: 100,
            file: None,
            label: vec![format!("pkg{}", "x".repeat(i as usize % 7)), format!("f{i}"), "1s (1%)".to_owned()],
            font_size: 8 + i % 17,
        })
        .collect();
    let edges =
        edges.iter().map(|&(from, to)| GraphEdge { from, to, weight: 1, inline: false, residual: false }).collect();
    CallGraph {
        sample_type: "cpu".to_owned(),
        unit: "nanoseconds".to_owned(),
        output_unit: "s".to_owned(),
        total: 100,
        nodes,
        edges,
        node_total: n as usize,
        dropped_nodes: 0,
        dropped_edges: 0,
        node_cutoff: 0,
        edge_cutoff: 0,
    }
}

/// Graphs from a fixed pseudo-random sequence: `n` nodes, edges from lower to higher
/// indices only when `acyclic`.
fn random_graphs(acyclic: bool) -> Vec<CallGraph> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |bound: u32| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % u64::from(bound)) as u32
    };
    (0..40)
        .map(|g| {
            let n = 1 + g % 30;
            let mut edges = std::collections::BTreeSet::new();
            for _ in 0..n * 2 {
                let (a, b) = (next(n), next(n));
                if a != b {
                    edges.insert(if acyclic { (a.min(b), a.max(b)) } else { (a, b) });
                }
            }
            synthetic(n, &edges.into_iter().collect::<Vec<_>>())
        })
        .collect()
}

/// The geometry every layout must have: boxes inside the drawing and apart, each edge
/// from a point on its caller's box to a point on its callee's box.
fn assert_drawable(graph: &CallGraph, layout: &GraphLayout) {
    const EPSILON: f64 = 1e-6;
    assert_eq!((layout.nodes.len(), layout.edges.len()), (graph.nodes.len(), graph.edges.len()));
    for (i, a) in layout.nodes.iter().enumerate() {
        assert!(a.x >= -EPSILON && a.y >= -EPSILON, "box {i} out of the drawing: {a:?}");
        assert!(a.x + a.width <= layout.width + EPSILON && a.y + a.height <= layout.height + EPSILON, "{a:?}");
        for (j, b) in layout.nodes.iter().enumerate().skip(i + 1) {
            let apart = a.x + a.width <= b.x + EPSILON
                || b.x + b.width <= a.x + EPSILON
                || a.y + a.height <= b.y + EPSILON
                || b.y + b.height <= a.y + EPSILON;
            assert!(apart, "boxes {i} and {j} overlap: {a:?} {b:?}");
        }
    }
    let on_border = |p: &Point, b: &NodeBox| {
        let inside = p.x >= b.x - EPSILON
            && p.x <= b.x + b.width + EPSILON
            && p.y >= b.y - EPSILON
            && p.y <= b.y + b.height + EPSILON;
        let edge = [p.x - b.x, b.x + b.width - p.x, p.y - b.y, b.y + b.height - p.y].iter().any(|d| d.abs() < EPSILON);
        inside && edge
    };
    for (edge, path) in graph.edges.iter().zip(&layout.edges) {
        let (from, to) = (&layout.nodes[edge.from as usize], &layout.nodes[edge.to as usize]);
        let (first, last) = (&path.points[0], path.points.last().unwrap());
        assert!(on_border(first, from) && on_border(last, to), "edge {edge:?} runs {first:?}..{last:?}");
        assert_eq!(path.curve.len(), 1 + 3 * (path.points.len() - 1));
        assert_eq!((&path.curve[0], path.curve.last().unwrap()), (first, last));
    }
}

#[test]
fn layouts_of_fixture_graphs_are_drawable_and_deterministic() {
    let Some((_, root)) = go_fixtures() else { return };
    for (file, options) in [
        ("go/base/cpu.pb.gz", GraphOptions::default()),
        ("go/compare/cpu.pb.gz", GraphOptions { node_count: Some(200), node_fraction: 0.0, ..GraphOptions::default() }),
        ("go/base/heap.pb.gz", GraphOptions::default()),
        ("go/base/goroutine.pb.gz", GraphOptions::default()),
        ("large/cpu.large.pb.gz", GraphOptions::default()),
    ] {
        let graph = graph_of(&load(&root.join(file)), &Query::default(), &options).unwrap();
        let layout = layout_call_graph(&graph, &GraphLayoutOptions::default()).unwrap();
        assert_drawable(&graph, &layout);
        assert_eq!(layout, layout_call_graph(&graph, &GraphLayoutOptions::default()).unwrap(), "{file}");
        // Boxes grow with their font: the node with the largest flat value has the largest.
        let biggest = graph.nodes.iter().enumerate().max_by_key(|(_, n)| n.flat.unsigned_abs()).unwrap().0;
        assert_eq!(layout.nodes[biggest].font_size, 24.0, "{file}");
    }
}

#[test]
fn acyclic_graphs_put_callers_above_callees() {
    for graph in random_graphs(true) {
        let layout = layout_call_graph(&graph, &GraphLayoutOptions::default()).unwrap();
        assert_drawable(&graph, &layout);
        for edge in &graph.edges {
            let (from, to) = (&layout.nodes[edge.from as usize], &layout.nodes[edge.to as usize]);
            assert!(from.layer < to.layer && from.y + from.height < to.y, "{edge:?}: {from:?} {to:?}");
            let path = &layout.edges.iter().zip(&graph.edges).find(|(_, e)| *e == edge).unwrap().0.points;
            assert!(path.windows(2).all(|w| w[0].y <= w[1].y), "{edge:?} goes up: {path:?}");
        }
    }
}

#[test]
fn cyclic_graphs_and_self_calls_are_drawable() {
    for graph in random_graphs(false) {
        let layout = layout_call_graph(&graph, &GraphLayoutOptions::default()).unwrap();
        assert_drawable(&graph, &layout);
        assert_eq!(layout, layout_call_graph(&graph, &GraphLayoutOptions::default()).unwrap());
    }
    let recursive = synthetic(3, &[(0, 1), (1, 2), (2, 0), (1, 1)]);
    let layout = layout_call_graph(&recursive, &GraphLayoutOptions::default()).unwrap();
    assert_drawable(&recursive, &layout);
    let empty = layout_call_graph(&synthetic(0, &[]), &GraphLayoutOptions::default()).unwrap();
    assert!(empty.nodes.is_empty() && empty.width > 0.0 && empty.height > 0.0);
}

#[test]
fn an_edge_to_a_missing_node_is_an_error() {
    let broken = synthetic(2, &[(0, 5)]);
    let error = layout_call_graph(&broken, &GraphLayoutOptions::default()).unwrap_err();
    assert_eq!(error.code(), "InvalidProfile", "{error}");
}
