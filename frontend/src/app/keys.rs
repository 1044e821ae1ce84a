//! Keyboard shortcuts for the whole page, and the list `?` opens.

use leptos::ev;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{HtmlElement, KeyboardEvent};

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
        // Focus the flame graph on the selected function, like a click.
        row.click();
    } else {
        row.scroll_into_view_with_bool(false);
    }
}

/// Every shortcut, as the list shows it.
const SHORTCUTS: [(&str, &str); 10] = [
    ("?", "show or hide this list"),
    ("/", "search frames"),
    ("1 – 7", "switch view: flame graph, top, sandwich, diff, goroutines, labels, source"),
    ("-", "zoom the flame graph out one level"),
    ("0", "zoom the flame graph out to the whole profile"),
    ("Esc", "back: close this list, or zoom out to the whole profile"),
    ("↑ ↓", "move through the top table"),
    ("Enter", "focus the flame graph on the selected function"),
    ("click", "zoom into a frame; click the breadcrumb to go back"),
    ("⇅", "in the top table: the function's callers and callees (sandwich)"),
];

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
            "Escape" => State::reset(state.zoom),
            "0" if !typing => State::reset(state.zoom),
            "-" if !typing => state.zoom.update(|z| {
                z.pop();
            }),
            digit @ ("1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9") if !typing => {
                let at = digit.parse::<usize>().unwrap_or(1) - 1;
                if let Some(&(view, _)) = ViewKind::ALL.get(at) {
                    state.view_kind.set(view);
                }
            }
            "ArrowDown" | "ArrowUp" | "Enter" if !typing && state.view_kind.get_untracked() == ViewKind::Top => {
                move_in_top(state, &e)
            }
            _ => {}
        }
    });
}
