//! The flame graph: a HiDPI canvas painted from core's layout (only visible, wide-enough
//! frames), with hover tooltip, click to zoom, search highlight and icicle mode. It
//! shows a window of the tree (the worker keeps the whole tree): a click zooms into the
//! window at once and asks, through `on_zoom`, for a finer window of the new frame.

use std::collections::HashMap;
use std::sync::Arc;

use leptos::prelude::*;
use stacklens_core::analysis::summary::package_of;
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::tree::{CallTree, ROOT};
use stacklens_core::layout::{hit, layout, Rect, Viewport};
use stacklens_core::units::{format_value, percentage};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, MouseEvent};

use crate::app::state::{Answer, State};
use crate::worker::protocol::{Ask, Request, Response, TreeKey, TreeKind};
use stacklens_core::analysis::tree::window::{search_matcher, MAX_ROWS};

use super::SharedTree;

const ROW: f64 = 18.0;

/// What a flame graph shows: a window of a call tree (see [`CallTree::window`]), the
/// zoomed node in it, and the value a search matches in the whole tree (with the
/// search it was counted for).
#[derive(Clone, PartialEq)]
pub struct FlameData {
    pub tree: SharedTree,
    pub zoom: u32,
    pub matched: Option<(String, i64)>,
    /// What the worker's tree left out, from [`WindowMeta`].
    pub pruned_below: i64,
    pub complete: bool,
}

/// What a frame's colour is chosen by: its package, or its name when it has none.
fn colour_key(name: &str) -> &str {
    match package_of(name) {
        "" => name,
        p => p,
    }
}

/// Stable colour per package: warm hues for code, hashed from the package path.
pub(crate) fn package_colour(name: &str) -> String {
    let package = colour_key(name);
    let hash = package.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
    let hue = hash % 55; // red..yellow
    let light = 52 + (hash >> 8) % 14;
    format!("hsl({hue}, 78%, {light}%)")
}

/// Red when a frame grew, blue when it shrank, by how much relative to its size.
fn diff_colour(total: i64, base: i64) -> String {
    let delta = total - base;
    let scale = total.max(base).max(1) as f64;
    let strength = (delta.abs() as f64 / scale).min(1.0);
    let light = 92.0 - 42.0 * strength;
    if delta >= 0 {
        format!("hsl(0, 80%, {light:.0}%)")
    } else {
        format!("hsl(220, 80%, {light:.0}%)")
    }
}

#[derive(Clone, Copy, PartialEq, Default)]
pub struct FlameSettings {
    pub icicle: bool,
    pub diff: bool,
    /// For diffs: compare shares of each total rather than raw values.
    pub normalize: bool,
}

pub(crate) fn context(canvas: &HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    canvas.get_context("2d").ok().flatten()?.dyn_into().ok()
}

/// Writes a frame's name in its box (`width` wide from `x`, text on `baseline`) in the
/// current font and fill, cut with … to fit; boxes too narrow for a few letters get none.
fn box_label(ctx: &CanvasRenderingContext2d, name: &str, x: f64, width: f64, baseline: f64) {
    if width <= 28.0 {
        return;
    }
    let chars = ((width - 6.0) / 7.2) as usize;
    let label: String = if name.chars().count() > chars {
        name.chars().take(chars.saturating_sub(1)).chain(['…']).collect()
    } else {
        name.to_owned()
    };
    let _ = ctx.fill_text(&label, x + 3.0, baseline);
}

/// A frame's box as painted: its top left corner, its width (`label_width` for the name
/// written in it), its fill and its name.
pub(crate) struct PaintedBox<'a> {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub label_width: f64,
    pub fill: &'a str,
    pub label: &'a str,
}

/// Paints `boxes` `row` high, then their names ([`box_label`], `baseline` below each
/// top) in the 12px monospace font. The canvas parses its fill style from a string each
/// time it is set, so it is set only when it changes, and once for all the names.
pub(crate) fn paint_boxes(ctx: &CanvasRenderingContext2d, boxes: &[PaintedBox<'_>], row: f64, baseline: f64) {
    let mut fill = None;
    for b in boxes {
        if fill != Some(b.fill) {
            ctx.set_fill_style_str(b.fill);
            fill = Some(b.fill);
        }
        ctx.fill_rect(b.x, b.y, b.width, row);
    }
    ctx.set_font("12px ui-monospace, SFMono-Regular, Menlo, monospace");
    ctx.set_fill_style_str("#1d1f24");
    for b in boxes {
        box_label(ctx, b.label, b.x, b.label_width, b.y + baseline);
    }
}

#[component]
pub fn FlameGraph(
    data: Signal<Option<FlameData>>,
    search: Signal<String>,
    settings: Signal<FlameSettings>,
    /// Called with the frame names from the root to the newly zoomed frame.
    on_zoom: Callback<Vec<String>>,
    /// The part of the zoomed frame's span shown (fractions; `+`, `-` and the arrows
    /// move it); back to all of it when the zoomed frame changes.
    span: RwSignal<(f64, f64)>,
) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let rects = StoredValue::new(Vec::<Rect>::new());
    let hovered = RwSignal::new(None::<(u32, f64, f64)>);
    let width = RwSignal::new(1000.0f64);
    // A zoom chosen in the current window, until the finer window arrives: the tree
    // it applies to (by address) and the node.
    let clicked = RwSignal::new(None::<(usize, u32)>);
    let tree = Signal::derive(move || data.get().map(|d| d.tree));
    let zoom = Signal::derive(move || {
        let d = data.get()?;
        let here = std::sync::Arc::as_ptr(&d.tree.0) as usize;
        Some(clicked.get().filter(|&(tree, _)| tree == here).map_or(d.zoom, |(_, node)| node))
    });
    // A window that comes replaces a zoom chosen in the one before (a kept window may be
    // the very tree that zoom was chosen in: its old click must not apply again).
    Effect::new(move |_| {
        data.track();
        clicked.set(None);
    });
    let zoom_to = move |node: u32| {
        let Some(d) = data.get_untracked() else { return };
        clicked.set(Some((std::sync::Arc::as_ptr(&d.tree.0) as usize, node)));
        let t = &d.tree.0;
        on_zoom.run(t.path(node).into_iter().map(|n| t.name(n).to_owned()).collect());
    };

    // A canvas resized (the window, the split beside the table) is painted again.
    let resized = RwSignal::new(0u32);
    let observer = StoredValue::new_local(None::<(web_sys::ResizeObserver, Closure<dyn FnMut()>)>);
    Effect::new(move |_| {
        let Some(canvas) = canvas_ref.get() else { return };
        if let Some(Some((old, _))) = observer.try_update_value(Option::take) {
            old.disconnect();
        }
        let bump = Closure::<dyn FnMut()>::new(move || resized.update(|n| *n = n.wrapping_add(1)));
        if let Ok(o) = web_sys::ResizeObserver::new(bump.as_ref().unchecked_ref()) {
            o.observe(&canvas);
            observer.set_value(Some((o, bump)));
        }
    });
    on_cleanup(move || {
        if let Some(Some((o, _bump))) = observer.try_update_value(Option::take) {
            o.disconnect();
        }
    });

    Effect::new(move |previous: Option<Option<u32>>| {
        let now = zoom.get();
        if previous.is_some_and(|p| p != now) {
            span.set((0.0, 1.0));
        }
        now
    });

    // Frames matching the search in this window, and the value they cover in the whole
    // tree once the worker has counted it for this search.
    let search_hits = Memo::new(move |_| {
        let needle = search.get();
        data.with(|d| {
            d.as_ref().filter(|_| !needle.is_empty()).map(|d| {
                let (hits, _) = d.tree.0.search(search_matcher(&needle));
                let covered = d.matched.as_ref().filter(|(n, _)| *n == needle).map(|&(_, v)| v);
                (hits, covered, d.tree.0.total())
            })
        })
    });

    // Repaint whenever the tree, zoom, search, mode or size changes.
    Effect::new(move |_| {
        let (Some(canvas), Some(t), Some(zoom_node)) = (canvas_ref.get(), tree.get(), zoom.get()) else { return };
        let settings = settings.get();
        resized.track();
        let css_width = f64::from(canvas.client_width().max(300));
        width.set(css_width);
        let tree = &t.0;
        let rows = (tree.max_depth + 1).min(MAX_ROWS);
        let css_height = f64::from(rows) * ROW;
        let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
        // Resizing reallocates the canvas: only when the size changed.
        let (w, h) = ((css_width * dpr) as u32, (css_height * dpr) as u32);
        if canvas.width() != w || canvas.height() != h {
            canvas.set_width(w);
            canvas.set_height(h);
        }
        let Some(ctx) = context(&canvas) else { return };
        let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
        ctx.clear_rect(0.0, 0.0, css_width, css_height);
        let (from, to) = span.get();
        let laid = layout(
            tree,
            &Viewport { zoom: zoom_node, width_px: css_width, min_width_px: 0.5, max_depth: MAX_ROWS - 1, from, to },
        );
        let hits = search_hits.get();
        // With normalisation a frame is compared as a share of each profile's total.
        let base_scale = if settings.normalize && tree.base_values(ROOT).total > 0 {
            tree.total() as f64 / tree.base_values(ROOT).total as f64
        } else {
            1.0
        };
        // The colours: a search's two, the root's, one per package (made once), or a
        // diff's one per frame.
        let mut colours: Vec<String> =
            ["hsl(300, 70%, 60%)", "hsl(0, 0%, 82%)", "hsl(0, 0%, 70%)"].map(str::to_owned).into();
        let (matched, unmatched, root) = (0, 1, 2);
        let mut by_package: HashMap<&str, usize> = HashMap::new();
        let fills: Vec<usize> = laid
            .iter()
            .map(|r| match &hits {
                Some((h, _, _)) => {
                    if h[r.node as usize] {
                        matched
                    } else {
                        unmatched
                    }
                }
                None if settings.diff => {
                    let base = (tree.base_values(r.node).total as f64 * base_scale) as i64;
                    colours.push(diff_colour(tree.nodes[r.node as usize].total, base));
                    colours.len() - 1
                }
                None if r.node == ROOT => root,
                None => {
                    let name = tree.name(r.node);
                    *by_package.entry(colour_key(name)).or_insert_with(|| {
                        colours.push(package_colour(name));
                        colours.len() - 1
                    })
                }
            })
            .collect();
        let boxes: Vec<PaintedBox> = laid
            .iter()
            .zip(fills)
            .map(|(r, fill)| PaintedBox {
                x: r.x,
                y: if settings.icicle { f64::from(r.depth) * ROW } else { css_height - f64::from(r.depth + 1) * ROW },
                width: (r.width - 0.5).max(0.5),
                label_width: r.width,
                fill: &colours[fill],
                label: tree.name(r.node),
            })
            .collect();
        paint_boxes(&ctx, &boxes, ROW - 1.0, ROW - 5.0);
        rects.set_value(laid);
    });

    let locate = move |ev: &MouseEvent| -> Option<(u32, f64, f64)> {
        let t = tree.get_untracked()?;
        let rows = (t.0.max_depth + 1).min(MAX_ROWS);
        let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
        let row = (y / ROW) as u32;
        let depth = if settings.get_untracked().icicle { row } else { rows.checked_sub(row + 1)? };
        rects.with_value(|r| hit(r, x, depth)).map(|n| (n, x, y))
    };

    let css_height =
        move || tree.with(|t| t.as_ref().map_or(0.0, |t| f64::from((t.0.max_depth + 1).min(MAX_ROWS)) * ROW));

    let tooltip = move || {
        let (node, x, y) = hovered.get()?;
        let t = tree.get()?;
        let tree = &t.0;
        let n = &tree.nodes[node as usize];
        let unit = tree.unit.clone();
        let total = tree.total();
        let diff = settings.get().diff.then(|| {
            let b = tree.base_values(node);
            format!(
                "before {} → after {} ({:+})",
                format_value(b.total, &unit),
                format_value(n.total, &unit),
                format_value(n.total - b.total, &unit)
            )
        });
        let left = (x + 14.0).min(width.get() - 320.0).max(0.0);
        Some(view! {
            <div class="tooltip" data-testid="flame-tooltip" style=format!("left:{left}px;top:{}px", y + 14.0)>
                <div class="tt-name">{tree.name(node).to_owned()}</div>
                {(!tree.file(node).is_empty()).then(|| view! { <div class="tt-file">{tree.file(node).to_owned()}</div> })}
                <div>"total " {format_value(n.total, &unit)} " (" {percentage(n.total, total).trim().to_owned()} ")"</div>
                <div>"self " {format_value(n.self_value, &unit)} " (" {percentage(n.self_value, total).trim().to_owned()} ")"</div>
                {diff.map(|d| view! { <div>{d}</div> })}
            </div>
        })
    };

    let breadcrumb = move || {
        let t = tree.get()?;
        let z = zoom.get()?;
        (z != ROOT).then(|| {
            let crumbs =
                t.0.path(z)
                    .into_iter()
                    .map(|n| {
                        let name = t.0.name(n).to_owned();
                        view! { <button class="crumb" on:click=move |_| zoom_to(n)>{name}</button> }
                    })
                    .collect_view();
            view! {
                <nav class="breadcrumb" data-testid="breadcrumb">
                    <button class="crumb" data-testid="reset-zoom" on:click=move |_| zoom_to(ROOT)>"all"</button>
                    {crumbs}
                </nav>
            }
        })
    };

    let pruned = move || data.with(|d| d.as_ref().map_or(0, |d| d.pruned_below));
    let matched = move || {
        search_hits.get().map(|(_, covered, total)| {
            let share = covered.map_or_else(|| "…".to_owned(), |c| percentage(c, total).trim().to_owned());
            // Matches inside left-out subtrees are not counted.
            let at_least = if pruned() > 0 { "≥ " } else { "" };
            view! { <span class="matched" data-testid="search-matched" data-value=covered.map(|c| c.to_string())>"matched " {at_least} {share}</span> }
        })
    };
    // A tree too large to build whole leaves out its narrowest frames: say so, and say
    // when the zoom is deep enough for that to show.
    let pruning_note = move || {
        data.with(|d| {
            let d = d.as_ref().filter(|d| d.pruned_below > 0)?;
            let root_total = d.tree.0.total();
            let below = percentage(d.pruned_below, root_total).trim().to_owned();
            let missing = if d.complete { "" } else { "; at this zoom some frames are missing" };
            Some(view! {
                <span class="pruned" data-testid="flame-pruned" data-complete=d.complete.to_string()>
                    {format!("frames under {below} of the total are left out of this large profile's tree{missing}")}
                </span>
            })
        })
    };

    view! {
        <div class="flame">
            {breadcrumb}
            {matched}
            {pruning_note}
            <div class="flame-canvas">
                <canvas
                    node_ref=canvas_ref
                    data-testid="flamegraph"
                    style:height=move || format!("{}px", css_height())
                    on:mousemove=move |ev| hovered.set(locate(&ev))
                    on:mouseleave=move |_| hovered.set(None)
                    on:click=move |ev| {
                        if let Some((n, _, _)) = locate(&ev) {
                            zoom_to(n);
                        }
                    }
                ></canvas>
                {tooltip}
            </div>
        </div>
    }
}

/// One flame graph's questions to the worker: a window of the whole tree a [`TreeKey`]
/// names, cut again when the zoom or the search changes. Another tree blanks the graph
/// until it arrives; another zoom or search keeps the old window meanwhile. The last
/// few windows of the tree shown are kept, so zooming back out (a click on an ancestor,
/// Escape) shows the wider window at once instead of asking for it again.
#[derive(Copy, Clone)]
pub struct TreeWindow {
    pub answer: Answer<FlameData>,
    token: StoredValue<u64>,
    shown: StoredValue<Option<TreeKey>>,
    /// Windows received for `shown`, by zoom and search, the latest last.
    recent: StoredValue<Vec<(WindowAt, FlameData)>>,
}

/// The zoom path and the search a window was cut for.
type WindowAt = (Vec<String>, String);

/// How many windows [`TreeWindow`] keeps (cpu.large's root window: 4,052 nodes, 0.19 MB
/// encoded).
const RECENT_WINDOWS: usize = 8;

impl TreeWindow {
    pub fn new() -> Self {
        TreeWindow {
            answer: RwSignal::new(None),
            token: StoredValue::new(0),
            shown: StoredValue::new(None),
            recent: StoredValue::new(Vec::new()),
        }
    }

    pub fn ask(&self, state: &State, key: TreeKey, zoom: Vec<String>, search: String) {
        if self.shown.with_value(|k| k.as_ref() != Some(&key)) {
            self.answer.set(None);
            self.shown.set_value(Some(key.clone()));
            self.recent.set_value(Vec::new());
        }
        let at = (zoom, search);
        if let Some(kept) = self.recent.with_value(|r| r.iter().find(|(a, _)| *a == at).map(|(_, d)| d.clone())) {
            // An answer still on its way is for another window: not to be shown.
            self.token.update_value(|t| *t += 1);
            self.answer.set(Some(Ok(kept)));
            return;
        }
        let TreeKey { id, query, kind } = key;
        let (zoom, search) = at.clone();
        let request = Request::Ask { profile: id, query, ask: Ask::Tree { kind, zoom, search } };
        let recent = self.recent;
        state.ask(self.token, self.answer, request, move |response, bytes| {
            let window = decode_tree(response, bytes);
            if let Some(Ok(data)) = &window {
                recent.update_value(|r| {
                    if r.len() == RECENT_WINDOWS {
                        r.remove(0);
                    }
                    r.push((at, data.clone()));
                });
            }
            window
        });
    }
}

impl Default for TreeWindow {
    fn default() -> Self {
        Self::new()
    }
}

fn decode_tree(response: Response, bytes: Option<Vec<u8>>) -> Option<Result<FlameData, String>> {
    match response {
        Response::Tree(Ok(meta)) => Some(
            bytes
                .and_then(|b| CallTree::from_bytes(&b))
                .map(|t| FlameData {
                    tree: SharedTree(Arc::new(t)),
                    zoom: meta.zoom,
                    matched: meta.matched,
                    pruned_below: meta.pruned_below,
                    complete: meta.complete,
                })
                .ok_or_else(|| "the worker sent an unreadable tree".to_owned()),
        ),
        Response::Tree(Err(e)) => Some(Err(e)),
        _ => None,
    }
}

/// The key of `kind`'s tree for `id` at the page's sample type and filters.
pub fn tree_key(state: &State, id: u32, kind: TreeKind) -> TreeKey {
    TreeKey { id, query: state.query.get(), kind }
}

/// A flame graph of `window`'s answer, zooming through `zoom` and `span`. A click on a
/// frame selects its function too.
pub fn flame_panel(
    state: State,
    window: TreeWindow,
    zoom: RwSignal<Vec<String>>,
    span: RwSignal<(f64, f64)>,
    icicle: Signal<bool>,
    diff: bool,
) -> AnyView {
    let data = Signal::derive(move || window.answer.get().and_then(Result::ok));
    let settings =
        Signal::derive(move || FlameSettings { icicle: icicle.get(), diff, normalize: diff && state.normalize.get() });
    let on_zoom = Callback::new(move |path: Vec<String>| {
        state.wanted_zoom.set_value(Vec::new());
        let function = path.last().cloned();
        // The zoom first: the worker answers in order, and the finer window (10–20 ms of
        // its time) should not wait behind the details panel's (45–80 ms on cpu.large).
        zoom.set(path);
        if function.is_some() {
            state.select(function);
        }
    });
    view! { <FlameGraph data=data search=Signal::derive(move || state.search.get()) settings=settings on_zoom=on_zoom span=span /> }
        .into_any()
}

/// The flame graph view of the active profile.
#[component]
pub fn FlameView() -> impl IntoView {
    let state = expect_context::<State>();
    let window = TreeWindow::new();
    Effect::new(move |_| {
        state.generation().get();
        let Some(e) = state.current.get() else { return };
        window.ask(&state, tree_key(&state, e.id, TreeKind::Plain), state.zoom.get(), state.search.get());
    });
    let subtree = move || {
        let path = state.zoom.get();
        (!path.is_empty()).then(|| {
            view! {
                <button
                    class="focus-subtree"
                    data-testid="focus-subtree"
                    title="keep only the samples under this frame, with it as the root (a transform)"
                    on:click=move |_| state.apply(Transform::FocusSubtree { path: path.clone() })
                >
                    "focus on this subtree"
                </button>
            }
        })
    };
    let layout = move |with_table: bool| {
        view! {
            <button class:active=move || state.with_table.get() == with_table on:click=move |_| state.with_table.set(with_table) data-testid=if with_table { "layout-both" } else { "layout-flame" }>
                {if with_table { "table + flame graph" } else { "flame graph" }}
            </button>
        }
    };
    let flame = move || {
        let graph = super::when_ready(window.answer, move || {
            flame_panel(state, window, state.zoom, state.span, Signal::derive(move || state.icicle.get()), false)
        });
        view! { {subtree} {graph} }
    };
    view! {
        <div class="layout-toggle" role="group" aria-label="layout">{layout(false)}{layout(true)}</div>
        {move || {
            if state.with_table.get() {
                view! { <super::split::Split left=|| view! { <super::table::TopView /> }.into_any() right=move || flame().into_any() /> }.into_any()
            } else {
                flame().into_any()
            }
        }}
    }
}
