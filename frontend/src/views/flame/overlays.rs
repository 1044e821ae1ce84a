//! What the flame graph shows around its canvas: the breadcrumb of the zoom, the share
//! a search matched, the note on left-out frames, and the hovered frame's tooltip.

use leptos::prelude::*;
use stacklens_core::analysis::tree::ROOT;
use stacklens_core::units::{format_value, percentage};

use super::paint::FlameSettings;
use super::window::FlameData;
use crate::views::SharedTree;

/// Frames matching a search in the window shown, the value they cover in the whole tree
/// once the worker has counted it for that search, and the tree's total.
pub(super) type SearchHits = (Vec<bool>, Option<i64>, i64);

/// The path from the root to the zoomed frame, each a button zooming to it.
#[component]
pub(super) fn Breadcrumb(
    tree: Signal<Option<SharedTree>>,
    zoom: Signal<Option<u32>>,
    zoom_to: Callback<u32>,
) -> impl IntoView {
    move || {
        let t = tree.get()?;
        let z = zoom.get()?;
        (z != ROOT).then(|| {
            let crumbs =
                t.0.path(z)
                    .into_iter()
                    .map(|n| {
                        let name = t.0.name(n).to_owned();
                        view! { <button class="crumb" on:click=move |_| zoom_to.run(n)>{name}</button> }
                    })
                    .collect_view();
            view! {
                <nav class="breadcrumb" data-testid="breadcrumb">
                    <button class="crumb" data-testid="reset-zoom" on:click=move |_| zoom_to.run(ROOT)>"all"</button>
                    {crumbs}
                </nav>
            }
        })
    }
}

/// The share of the whole tree a search matched ("…" until the worker has counted it).
#[component]
pub(super) fn SearchMatched(search_hits: Memo<Option<SearchHits>>, data: Signal<Option<FlameData>>) -> impl IntoView {
    let pruned = move || data.with(|d| d.as_ref().map_or(0, |d| d.pruned_below));
    move || {
        search_hits.get().map(|(_, covered, total)| {
            let share = covered.map_or_else(|| "…".to_owned(), |c| percentage(c, total).trim().to_owned());
            // Matches inside left-out subtrees are not counted.
            let at_least = if pruned() > 0 { "≥ " } else { "" };
            view! { <span class="matched" data-testid="search-matched" data-value=covered.map(|c| c.to_string())>"matched " {at_least} {share}</span> }
        })
    }
}

/// A tree too large to build whole leaves out its narrowest frames: says so, and says
/// when the zoom is deep enough for that to show.
#[component]
pub(super) fn PruningNote(data: Signal<Option<FlameData>>) -> impl IntoView {
    move || {
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
    }
}

/// The hovered frame's name, file, total and self (and before → after in a diff), by
/// the mouse at (x, y) and inside the canvas's `width`.
#[component]
pub(super) fn FlameTooltip(
    tree: Signal<Option<SharedTree>>,
    hovered: RwSignal<Option<(u32, f64, f64)>>,
    settings: Signal<FlameSettings>,
    width: RwSignal<f64>,
) -> impl IntoView {
    move || {
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
    }
}
