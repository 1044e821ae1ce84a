//! Keyboard shortcuts for the whole page, and the list `?` opens.

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{HtmlElement, KeyboardEvent};

use stacklens_core::analysis::transforms::Transform;

use super::state::{State, ViewKind};

fn element(selector: &str) -> Option<HtmlElement> {
    document().query_selector(selector).ok()??.dyn_into().ok()
}

/// Moves the Top view's selection (↑/↓) or opens the selected row (Enter).
fn move_in_top(state: State, e: &KeyboardEvent) {
    let Ok(rows) = document().query_selector_all("[data-testid=top-row]") else { return };
    let last = rows.length().saturating_sub(1) as usize;
    let selected = state.selected_row.get_untracked();
    let at = match e.key().as_str() {
        "ArrowDown" => (selected + 1).min(last),
        "ArrowUp" => selected.saturating_sub(1),
        _ => selected,
    };
    e.prevent_default();
    state.selected_row.set(at);
    let Some(row) = rows.item(at as u32).and_then(|n| n.dyn_into::<HtmlElement>().ok()) else { return };
    if e.key() == "Enter" {
        // Focus the flame graph on the selected function, like a double click.
        if let Some(name) =
            row.query_selector("[data-col=name]").ok().flatten().and_then(|c| c.get_attribute("data-value"))
        {
            crate::views::table::focus_flame(state, &name);
        }
    } else {
        // The details panel follows the selection.
        row.click();
        row.scroll_into_view_with_bool(false);
    }
}

/// Every shortcut, as the list shows it.
const SHORTCUTS: [(&str, &str); 14] = [
    ("?", "show or hide this list"),
    ("/", "search frames"),
    ("1 – 9", "switch view, in the toolbar's order"),
    ("+", "zoom the flame graph in (around the middle)"),
    ("-", "zoom the flame graph out, then one frame up"),
    ("0", "zoom the flame graph out to the whole profile"),
    ("← → or A D", "pan the zoomed flame graph"),
    ("↑ ↓ or W S", "scroll the flame graph; in the top table, move through it"),
    ("r", "collapse the selected function's recursion (a transform)"),
    ("Esc", "back: close this list, or zoom out to the whole profile"),
    ("Enter", "in the top table: focus the flame graph on the selected function"),
    ("click", "select a function (details panel); in a flame graph, zoom into it"),
    ("double-click", "in the top table: focus the flame graph on the function"),
    ("⇅", "in the top table: the function's callers and callees (sandwich)"),
];

/// Zooms the flame graph's span by `factor` around its middle (out when above 1),
/// within the zoomed frame.
fn zoom_span(state: State, factor: f64) {
    state.span.update(|(from, to)| {
        let width = ((*to - *from) * factor).clamp(1e-6, 1.0);
        let middle = ((*from + *to) / 2.0).clamp(width / 2.0, 1.0 - width / 2.0);
        (*from, *to) = (middle - width / 2.0, middle + width / 2.0);
    });
}

/// Moves the flame graph's span by `step` of its width, staying within the frame.
fn pan_span(state: State, step: f64) {
    state.span.update(|(from, to)| {
        let width = *to - *from;
        let start = (*from + step * width).clamp(0.0, 1.0 - width);
        (*from, *to) = (start, start + width);
    });
}

fn zoom_out(state: State) {
    if state.span.get_untracked() == (0.0, 1.0) {
        state.zoom.update(|z| {
            z.pop();
        });
    } else {
        zoom_span(state, 2.0);
    }
}

fn reset_zoom(state: State) {
    State::reset(state.zoom);
    state.span.set((0.0, 1.0));
}

#[component]
pub fn ShortcutsHelp() -> impl IntoView {
    let state = expect_context::<State>();
    let rows = SHORTCUTS
        .iter()
        .map(|(keys, what)| view! { <tr><td><kbd>{*keys}</kbd></td><td>{*what}</td></tr> })
        .collect_view();
    view! {
        <Show when=move || state.shortcuts_open.get()>
            <div class="shortcuts" role="dialog" aria-label="keyboard shortcuts" data-testid="shortcuts">
                <h3>"Keyboard shortcuts"</h3>
                <table>{rows.clone()}</table>
                <button data-testid="shortcuts-close" on:click=move |_| state.shortcuts_open.set(false)>"Close"</button>
            </div>
        </Show>
    }
}

pub fn install(state: State) {
    let _ = window_event_listener(ev::keydown, move |e: KeyboardEvent| {
        // The browser's own shortcuts (Ctrl+R, Cmd+F, …) stay the browser's.
        if e.ctrl_key() || e.meta_key() || e.alt_key() {
            return;
        }
        let typing = e
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
        match e.key().as_str() {
            "/" if !typing => {
                e.prevent_default();
                if let Some(search) = element("[data-testid=search]") {
                    let _ = search.focus();
                }
            }
            "?" if !typing => state.shortcuts_open.update(|open| *open = !*open),
            "Escape" if state.shortcuts_open.get_untracked() => state.shortcuts_open.set(false),
            "Escape" => reset_zoom(state),
            "0" if !typing => reset_zoom(state),
            "-" if !typing => zoom_out(state),
            "+" | "=" if !typing => zoom_span(state, 0.5),
            "r" if !typing => {
                if let Some(name) = state.selected_fn.get_untracked() {
                    state.apply(Transform::CollapseRecursion { name });
                }
            }
            digit @ ("1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9") if !typing => {
                let at = digit.parse::<usize>().unwrap_or(1) - 1;
                if let Some(&(view, _)) = ViewKind::ALL.get(at) {
                    state.view_kind.set(view);
                }
            }
            "ArrowDown" | "ArrowUp" | "Enter" if !typing && state.view_kind.get_untracked() == ViewKind::Top => {
                move_in_top(state, &e)
            }
            key @ ("ArrowLeft" | "ArrowRight" | "a" | "d") if !typing => {
                e.prevent_default();
                pan_span(state, if matches!(key, "ArrowLeft" | "a") { -0.1 } else { 0.1 });
            }
            key @ ("ArrowUp" | "ArrowDown" | "w" | "s") if !typing => {
                e.prevent_default();
                let rows = if matches!(key, "ArrowUp" | "w") { -3.0 } else { 3.0 };
                window().scroll_by_with_x_and_y(0.0, rows * 18.0);
            }
            _ => {}
        }
    });
}
