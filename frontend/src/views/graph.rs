//! The call graph (pprof's Graph view): core prunes it as `go tool pprof -dot` does and
//! lays it out; this view only draws the SVG. Nodes are sized by flat (pprof's font
//! size) and coloured by cum; edges are as thick and as red as their weight's share,
//! dashed when inlined and dotted when they stand for pruned paths. A click on a node
//! selects its function and focuses the graph on it.

use leptos::prelude::*;
use stacklens_core::analysis::graph::{CallGraph, GraphEdge};
use stacklens_core::layout::graph::{EdgePath, NodeBox};
use stacklens_core::report::dot::{edge_color, node_colors, pen_width};

use crate::app::state::State;
use crate::worker::protocol::{Ask, GraphPruning, LaidOutGraph, Request, Response};

/// The SVG path of an edge's Bézier curves.
fn curve_path(edge: &EdgePath) -> String {
    let mut d = String::new();
    for (i, p) in edge.curve.iter().enumerate() {
        let command = match i {
            0 => "M",
            1 => " C",
            _ => " ",
        };
        d.push_str(&format!("{command}{:.1},{:.1}", p.x, p.y));
    }
    d
}

fn edge_view(graph: &CallGraph, edge: &GraphEdge, path: &EdgePath) -> impl IntoView {
    let (from, to) = (&graph.nodes[edge.from as usize].name, &graph.nodes[edge.to as usize].name);
    let weight = graph.format_value(edge.weight);
    let dash = if edge.residual {
        Some("2,3")
    } else if edge.inline {
        Some("6,3")
    } else {
        None
    };
    let label = if edge.inline { format!("{weight} (inline)") } else { weight.clone() };
    view! {
        <g class="graph-edge" data-testid="graph-edge" data-from=from.clone() data-to=to.clone() data-weight=edge.weight.to_string() data-inline=edge.inline.to_string() data-residual=edge.residual.to_string()>
            <title>{format!("{from} {} {to} ({weight})", if edge.residual { "..." } else { "->" })}</title>
            <path
                d=curve_path(path)
                fill="none"
                stroke=edge_color(graph, edge)
                stroke-width=pen_width(graph, edge).to_string()
                stroke-dasharray=dash
                marker-end="url(#arrow)"
            ></path>
            <text x=format!("{:.1}", path.label.x) y=format!("{:.1}", path.label.y) class="edge-label">{label}</text>
        </g>
    }
}

fn node_view(
    state: State,
    graph: &CallGraph,
    index: usize,
    at: &NodeBox,
    focus: RwSignal<Option<String>>,
) -> impl IntoView {
    let node = &graph.nodes[index];
    let (stroke, fill) = node_colors(graph, node);
    let name = node.name.clone();
    let line_height = at.font_size * 1.2;
    // Lines are centred in the box, as Graphviz does.
    let top = at.y + (at.height - line_height * node.label.len() as f64) / 2.0;
    let lines = node
        .label
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let y = top + line_height * (i as f64 + 0.8);
            view! { <tspan x=format!("{:.1}", at.x + at.width / 2.0) y=format!("{y:.1}")>{text.clone()}</tspan> }
        })
        .collect_view();
    let selected = {
        let name = name.clone();
        move || state.selected_fn.with(|s| s.as_deref() == Some(name.as_str()))
    };
    let clicked = name.clone();
    view! {
        <g
            class="graph-node"
            class:selected=selected
            data-testid="graph-node"
            data-name=name.clone()
            data-flat=node.flat.to_string()
            data-cum=node.cum.to_string()
            tabindex="0"
            role="button"
            aria-label=format!("{name}: focus the graph on it")
            on:click=move |_| {
                state.select(Some(clicked.clone()));
                focus.set(Some(clicked.clone()));
            }
        >
            <title>{format!("{} ({})", node.name, graph.format_value(node.cum))}</title>
            <rect x=at.x.to_string() y=at.y.to_string() width=at.width.to_string() height=at.height.to_string() fill=fill stroke=stroke></rect>
            <text font-size=at.font_size.to_string() text-anchor="middle">{lines}</text>
        </g>
    }
}

fn drawing(state: State, laid: LaidOutGraph, scale: RwSignal<f64>, focus: RwSignal<Option<String>>) -> AnyView {
    let LaidOutGraph { graph, layout, legend } = laid;
    if graph.nodes.is_empty() {
        return view! { <p class="hint" data-testid="graph-empty">"No node is left at these settings."</p> }.into_any();
    }
    let edges = graph.edges.iter().zip(&layout.edges).map(|(e, p)| edge_view(&graph, e, p)).collect_view();
    let nodes = layout.nodes.iter().enumerate().map(|(i, b)| node_view(state, &graph, i, b, focus)).collect_view();
    let (width, height) = (layout.width, layout.height);
    view! {
        <p class="legend" data-testid="graph-legend">{legend.into_iter().map(|line| view! { <span>{line}</span> }).collect_view()}</p>
        <div class="graph-scroll">
            <svg
                data-testid="callgraph"
                role="img"
                aria-label="call graph"
                viewBox=format!("0 0 {width:.0} {height:.0}")
                width=move || format!("{:.0}", width * scale.get())
                height=move || format!("{:.0}", height * scale.get())
            >
                <defs>
                    <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse">
                        <path d="M0,0 L10,5 L0,10 z" fill="context-stroke"></path>
                    </marker>
                </defs>
                {edges}
                {nodes}
            </svg>
        </div>
    }
    .into_any()
}

/// A number input bound to `value`; what does not parse (or is out of `range`) is refused.
fn number_input(
    label: &'static str,
    testid: &'static str,
    value: RwSignal<f64>,
    range: (f64, f64),
    step: &'static str,
) -> impl IntoView {
    let set = move |text: String| match text.parse::<f64>() {
        Ok(v) if (range.0..=range.1).contains(&v) => value.set(v),
        // Shows the value in effect again.
        _ => value.notify(),
    };
    view! {
        <label>
            {label} " "
            <input
                type="number"
                data-testid=testid
                aria-label=label
                step=step
                min=range.0.to_string()
                max=range.1.to_string()
                prop:value=move || value.get().to_string()
                on:change=move |ev| set(event_target_value(&ev))
            />
        </label>
    }
}

#[component]
pub fn GraphView() -> impl IntoView {
    let state = expect_context::<State>();
    // pprof's defaults for its web view's graph.
    let node_count = RwSignal::new(80.0);
    let node_fraction = RwSignal::new(0.005);
    let edge_fraction = RwSignal::new(0.001);
    let focus = RwSignal::new(None::<String>);
    let scale = RwSignal::new(1.0f64);
    let answer = super::report_on_active(
        state,
        move |e| {
            let pruning = GraphPruning {
                node_fraction: node_fraction.get(),
                edge_fraction: edge_fraction.get(),
                node_count: node_count.get() as usize,
                focus: focus.get(),
            };
            Some(Request::Ask { profile: e.id, query: state.query.get(), ask: Ask::Graph { pruning } })
        },
        |r| match r {
            Response::Graph(g) => Some(g),
            _ => None,
        },
    );
    let focus_chip = move || {
        focus.get().map(|name| {
            view! {
                <span class="chip" data-testid="graph-focus-chip">
                    "focused on " {name.clone()}
                    <button aria-label=format!("stop focusing on {name}") on:click=move |_| focus.set(None)>"×"</button>
                </span>
            }
        })
    };
    view! {
        <div class="graph-view" data-testid="view-graph-panel">
            <div class="graph-tools">
                {number_input("nodes", "graph-nodecount", node_count, (1.0, 1000.0), "1")}
                {number_input("node fraction", "graph-nodefraction", node_fraction, (0.0, 1.0), "0.001")}
                {number_input("edge fraction", "graph-edgefraction", edge_fraction, (0.0, 1.0), "0.001")}
                <button aria-label="zoom the graph out" on:click=move |_| scale.update(|s| *s = (*s / 1.25).max(0.2))>"−"</button>
                <button aria-label="zoom the graph in" on:click=move |_| scale.update(|s| *s = (*s * 1.25).min(4.0))>"+"</button>
                <button aria-label="graph at its natural size" on:click=move |_| scale.set(1.0)>"1:1"</button>
                {focus_chip}
            </div>
            {move || super::answered(answer, move |laid| drawing(state, laid, scale, focus))}
        </div>
    }
}
