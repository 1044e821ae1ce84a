//! Two panes side by side with a draggable divider (also moved with ← and → when it has
//! the keyboard focus); the left pane's share of the width is the page's `split`.

use leptos::ev;
use leptos::prelude::*;
use web_sys::{KeyboardEvent, PointerEvent};

use crate::app::state::State;

const LIMITS: (f64, f64) = (0.15, 0.85);

#[component]
pub fn Split(left: fn() -> AnyView, right: impl Fn() -> AnyView + Send + 'static) -> impl IntoView {
    let state = expect_context::<State>();
    let container = NodeRef::<leptos::html::Div>::new();
    let dragging = RwSignal::new(false);
    let set_from = move |client_x: f64| {
        let Some(el) = container.get_untracked() else { return };
        let rect = el.get_bounding_client_rect();
        if rect.width() > 0.0 {
            state.split.set(((client_x - rect.left()) / rect.width()).clamp(LIMITS.0, LIMITS.1));
        }
    };
    let moving = window_event_listener(ev::pointermove, move |e: PointerEvent| {
        if dragging.get_untracked() {
            set_from(f64::from(e.client_x()));
        }
    });
    let released = window_event_listener(ev::pointerup, move |_| dragging.set(false));
    on_cleanup(move || {
        moving.remove();
        released.remove();
    });
    let keys = move |e: KeyboardEvent| {
        let step = match e.key().as_str() {
            "ArrowLeft" => -0.05,
            "ArrowRight" => 0.05,
            _ => return,
        };
        // The page's arrows pan the flame graph; here they move the divider.
        e.stop_propagation();
        e.prevent_default();
        state.split.update(|s| *s = (*s + step).clamp(LIMITS.0, LIMITS.1));
    };
    view! {
        <div
            class="split"
            class:dragging=move || dragging.get()
            node_ref=container
            style:grid-template-columns=move || format!("{:.1}% 8px minmax(0, 1fr)", state.split.get() * 100.0)
        >
            <div class="pane" data-testid="split-left">{left()}</div>
            <div
                class="divider"
                data-testid="split-divider"
                role="separator"
                aria-orientation="vertical"
                aria-label="resize the table and the flame graph"
                aria-valuenow=move || format!("{:.0}", state.split.get() * 100.0)
                tabindex="0"
                on:pointerdown=move |e| {
                    e.prevent_default();
                    dragging.set(true);
                }
                on:keydown=keys
            ></div>
            <div class="pane" data-testid="split-right">{right()}</div>
        </div>
    }
}
