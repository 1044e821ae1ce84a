//! The capture history's actions on the ranges selected: open range A or B as a
//! profile tab, or compare A with B (the diff, with the server's top movers).

use leptos::prelude::*;
use leptos::task::spawn_local;

use super::fetch::open_range;
use super::shown::History;
use crate::app::ranges;
use crate::app::state::ViewKind;

/// Opens the range selected in `slot` (0 for A, 1 for B) in the flame graph.
fn open_selected(h: History, slot: usize) {
    let History { state, selections, busy, .. } = h;
    let (Some(s), Some(&range)) = (h.current(), selections.get_untracked().get(slot)) else { return };
    busy.set(true);
    spawn_local(async move {
        if let Some(id) = open_range(state, &s, range).await {
            state.active.set(Some(id));
            state.view_kind.set(ViewKind::Flame);
            h.close();
        }
        busy.set(false);
    });
}

/// Opens both ranges and the diff of A → B, with the server's top movers.
fn compare(h: History) {
    let History { state, selections, busy, .. } = h;
    let Some(s) = h.current() else { return };
    let [a, b] = selections.get_untracked()[..] else { return };
    busy.set(true);
    spawn_local(async move {
        let tenant = state.tenant.get_value();
        let (base, later) = (s.profile(a).range, s.profile(b).range);
        let movers = ranges::top_movers(&base, &later, tenant.as_deref()).await;
        let Some(base_id) = open_range(state, &s, a).await else { return busy.set(false) };
        let Some(compare_id) = open_range(state, &s, b).await else { return busy.set(false) };
        match movers {
            Ok(list) => state.range_movers.set(Some((base_id, compare_id, list))),
            Err(e) => state.report(format!("top movers: {e}")),
        }
        // The diff opens when both are parsed (now, when both were open already).
        state.pending_compare.set_value(Some((base_id, compare_id)));
        state.compare_pending();
        busy.set(false);
        h.close();
    });
}

/// The ranges selected as chips, and the buttons acting on them.
#[component]
pub(super) fn RangeActions(history: History) -> impl IntoView {
    let h = history;
    let History { selections, busy, .. } = h;
    move || {
        let s = h.current()?;
        let list = selections.get();
        let chips = list
            .iter()
            .zip(["A", "B"])
            .map(|(&r, slot)| view! { <span class="chip">{slot} ": " {s.name(r)}</span> })
            .collect_view();
        Some(view! {
            <div class="range-actions">
                {if list.is_empty() { Some(view! { <span class="hint">"Drag on the timeline to select a range; a second range compares."</span> }) } else { None }}
                {chips}
                <button data-testid="range-open" disabled=move || busy.get() || selections.with(Vec::is_empty) on:click=move |_| open_selected(h, 0)>
                    "Open A"
                </button>
                <button data-testid="range-open-b" disabled=move || busy.get() || selections.with(|l| l.len() < 2) on:click=move |_| open_selected(h, 1)>
                    "Open B"
                </button>
                <button data-testid="range-compare" disabled=move || busy.get() || selections.with(|l| l.len() < 2) on:click=move |_| compare(h)>
                    "Compare A → B"
                </button>
                <button data-testid="range-clear" disabled=move || selections.with(Vec::is_empty) on:click=move |_| selections.set(Vec::new())>
                    "Clear"
                </button>
                {move || busy.get().then(|| view! { <span class="busy">"fetching…"</span> })}
            </div>
        })
    }
}
