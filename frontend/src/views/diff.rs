//! The diff view: a base and a compared profile, their differential flame graph and the
//! regressions and improvements core's diff finds.

use leptos::prelude::*;
use stacklens_core::analysis::diff::DiffReport;

use super::flame::{flame_panel, tree_key, TreeWindow};
use super::movers::TopMovers;
use super::table::DiffTable;
use crate::app::state::{Answer, State};
use crate::worker::protocol::{Request, Response, TreeKind};

/// A base or compare picker over the loaded profiles.
fn picker(state: State, label: &'static str, testid: &'static str, selected: RwSignal<Option<u32>>) -> impl IntoView {
    let options = move || {
        state
            .entries
            .get()
            .into_iter()
            .map(|e| view! { <option value=e.id.to_string() selected=move || selected.get() == Some(e.id)>{e.name.clone()}</option> })
            .collect_view()
    };
    view! {
        <label>
            {label}
            <select data-testid=testid on:change=move |ev| selected.set(event_target_value(&ev).parse().ok())>
                <option value="">"—"</option>
                {options}
            </select>
        </label>
    }
}

#[component]
pub fn DiffView() -> impl IntoView {
    let state = expect_context::<State>();
    let report: Answer<DiffReport> = RwSignal::new(None);
    let token = StoredValue::new(0);
    let window = TreeWindow::new();
    Effect::new(move |_| {
        state.generation().get();
        let (Some(base), Some(compare)) = (state.base_id.get(), state.compare_id.get()) else { return };
        let (query, normalize) = (state.query.get().without_range(), state.normalize.get());
        report.set(None);
        state.ask(token, report, Request::Diff { base, compare, query, normalize }, |r, _| match r {
            Response::Diff(d) => Some(d),
            _ => None,
        });
    });
    Effect::new(move |_| {
        state.generation().get();
        let (Some(base), Some(compare)) = (state.base_id.get(), state.compare_id.get()) else { return };
        let key = tree_key(&state, compare, TreeKind::DiffAgainst(base));
        window.ask(&state, key, state.zoom.get(), state.search.get());
    });
    let body = move || {
        if state.base_id.get().is_none() || state.compare_id.get().is_none() {
            return view! { <p class="hint">"Load two profiles of the same type and pick a base and a compare profile."</p> }
                .into_any();
        }
        super::answered(report, |report| {
            view! {
                {flame_panel(state, window, state.zoom, state.span, Signal::derive(move || state.icicle.get()), true)}
                <TopMovers />
                <DiffTable report=report />
            }
            .into_any()
        })
    };
    view! {
        <div class="diff-pick">
            {picker(state, "base ", "diff-base", state.base_id)}
            {picker(state, " compare ", "diff-compare", state.compare_id)}
            <label>
                <input type="checkbox" data-testid="normalize" on:change=move |ev| state.normalize.set(event_target_checked(&ev)) />
                " normalize"
            </label>
        </div>
        {body}
    }
}
