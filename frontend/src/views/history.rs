//! The capture history: a timeline of a service's profiles of one type (captures,
//! uploads and pushes, as the server's time index holds them), its total per step with
//! time and value axes. Dragging selects a range; the range's merged profile opens as a
//! profile tab, and a second range opens the diff of the two with the server's top movers.

mod actions;
mod chart;
mod fetch;
mod pickers;
mod shown;

use leptos::prelude::*;

use self::actions::RangeActions;
use self::chart::RangeChart;
use self::fetch::{follow_series, load_services};
use self::pickers::RangePickers;
use self::shown::History;
use crate::app::state::State;

#[component]
pub fn HistoryView() -> impl IntoView {
    let h = History::new(expect_context::<State>());
    let opened = RwSignal::new(false);
    follow_series(h);
    // The series are fetched when the history is first opened.
    let on_toggle = move |_| {
        let open = h.details.get_untracked().is_some_and(|d| d.open());
        if open && !opened.get_untracked() {
            opened.set(true);
            load_services(h);
        }
    };
    view! {
        <details class="history-menu" data-testid="history-menu" node_ref=h.details on:toggle=on_toggle>
            <summary>"Capture history"</summary>
            <div class="history" data-testid="history">
                <RangePickers history=h />
                <RangeChart history=h />
                <RangeActions history=h />
            </div>
        </details>
    }
}
