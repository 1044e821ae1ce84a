//! The sandwich view: one function's callers (a flame graph down to it) and callees (an
//! icicle from it).

use leptos::prelude::*;
use stacklens_core::analysis::tree::Side;

use super::flame::{flame_panel, tree_key, TreeWindow};
use crate::app::state::State;
use crate::worker::protocol::TreeKind;

#[component]
pub fn SandwichView() -> impl IntoView {
    let state = expect_context::<State>();
    let (callers, callees) = (TreeWindow::new(), TreeWindow::new());
    Effect::new(move |_| {
        state.generation().get();
        let (Some(e), Some(function)) = (state.current.get(), state.selected_fn.get()) else { return };
        let search = state.search.get();
        let callers_key = tree_key(&state, e.id, TreeKind::Sandwich(function.clone(), Side::Callers));
        callers.ask(&state, callers_key, state.callers_zoom.get(), search.clone());
        let callees_key = tree_key(&state, e.id, TreeKind::Sandwich(function, Side::Callees));
        callees.ask(&state, callees_key, state.callees_zoom.get(), search);
    });
    move || {
        let Some(function) = state.selected_fn.get() else {
            return view! { <p class="hint">"Pick a function with ⇅ in the Top view to see its callers and callees."</p> }
                .into_any();
        };
        view! {
            <h3 data-testid="sandwich-function">{function}</h3>
            <h4>"Callers"</h4>
            <div data-testid="sandwich-callers">{flame_panel(state, callers, state.callers_zoom, RwSignal::new((0.0, 1.0)), Signal::derive(|| false), false)}</div>
            <h4>"Callees"</h4>
            <div data-testid="sandwich-callees">{flame_panel(state, callees, state.callees_zoom, RwSignal::new((0.0, 1.0)), Signal::derive(|| true), false)}</div>
        }
        .into_any()
    }
}
