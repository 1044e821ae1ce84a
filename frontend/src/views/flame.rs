//! The flame graph: a HiDPI canvas painted from core's layout (only visible, wide-enough
//! frames), with hover tooltip, click to zoom, search highlight and icicle mode. It
//! shows a window of the tree (the worker keeps the whole tree): a click zooms into the
//! window at once and asks, through `on_zoom`, for a finer window of the new frame.

mod overlays;
pub(crate) mod paint;
mod window;

use leptos::prelude::*;
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::layout::{hit, layout, Rect, Viewport};
use web_sys::MouseEvent;

use self::overlays::{Breadcrumb, FlameTooltip, PruningNote, SearchMatched};
pub use self::paint::FlameSettings;
use self::paint::{paint_frames, resize_count, rows, sized_context, ROW};
pub use self::window::{tree_key, FlameData, TreeWindow};
use crate::app::state::State;
use crate::worker::protocol::TreeKind;
use stacklens_core::analysis::tree::window::{search_matcher, MAX_ROWS};

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
    let resized = resize_count(canvas_ref);

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
        let css_height = f64::from(rows(tree)) * ROW;
        let Some(ctx) = sized_context(&canvas, css_width, css_height, f64::INFINITY) else { return };
        let (from, to) = span.get();
        let laid = layout(
            tree,
            &Viewport { zoom: zoom_node, width_px: css_width, min_width_px: 0.5, max_depth: MAX_ROWS - 1, from, to },
        );
        search_hits.with(|hits| paint_frames(&ctx, tree, &laid, css_height, settings, hits.as_ref().map(|h| &h.0[..])));
        rects.set_value(laid);
    });

    let locate = move |ev: &MouseEvent| -> Option<(u32, f64, f64)> {
        let t = tree.get_untracked()?;
        let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
        let row = (y / ROW) as u32;
        let depth = if settings.get_untracked().icicle { row } else { rows(&t.0).checked_sub(row + 1)? };
        rects.with_value(|r| hit(r, x, depth)).map(|n| (n, x, y))
    };

    let css_height = move || tree.with(|t| t.as_ref().map_or(0.0, |t| f64::from(rows(&t.0)) * ROW));
    let zoom_to = Callback::new(zoom_to);

    view! {
        <div class="flame">
            <Breadcrumb tree=tree zoom=zoom zoom_to=zoom_to />
            <SearchMatched search_hits=search_hits data=data />
            <PruningNote data=data />
            <div class="flame-canvas">
                <canvas
                    node_ref=canvas_ref
                    data-testid="flamegraph"
                    style:height=move || format!("{}px", css_height())
                    on:mousemove=move |ev| hovered.set(locate(&ev))
                    on:mouseleave=move |_| hovered.set(None)
                    on:click=move |ev| {
                        if let Some((n, _, _)) = locate(&ev) {
                            zoom_to.run(n);
                        }
                    }
                ></canvas>
                <FlameTooltip tree=tree hovered=hovered settings=settings width=width />
            </div>
        </div>
    }
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
