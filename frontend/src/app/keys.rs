//! Keyboard shortcuts for the whole page.

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
            "Escape" => State::reset(state.zoom),
            "ArrowDown" | "ArrowUp" | "Enter" if !typing && state.view_kind.get_untracked() == ViewKind::Top => {
                move_in_top(state, &e)
            }
            _ => {}
        }
    });
}
