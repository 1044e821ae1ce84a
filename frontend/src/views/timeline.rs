//! The Time order view (Firefox Profiler's "Stack Chart", speedscope's "Time Order"):
//! each lane's (thread's) stacks over time on a HiDPI canvas, from core's stack chart,
//! under an activity histogram of the whole time span. The buttons or Ctrl+wheel zoom
//! the chart in time (the worker draws the new window); a drag across either canvas
//! chooses the time range every other view reads (`State::range`), drawn on both; a
//! click on a box selects its function (the details panel).

mod chart;
mod controls;
mod paint;
mod scale;

use leptos::prelude::*;
use stacklens_core::analysis::timeline::ChartViewport;
use wasm_bindgen::prelude::Closure;
use wasm_bindgen::JsCast;
use web_sys::ResizeObserver;

use self::chart::chart_panel;
use self::paint::Shown;
pub use self::scale::{box_at, lane_tops, zoomed, Scale, MIN_SPAN};
use crate::app::state::State;
use crate::worker::protocol::{Ask, Request, Response, Timeline};
use stacklens_core::analysis::tree::window::MAX_ROWS;

#[derive(Clone, PartialEq)]
enum Status {
    Waiting,
    Drawn,
    Unavailable(String),
    Failed(String),
}

/// Keeps `width` the element's width while it is on the page (the details panel opens
/// and closes beside the view), so the worker draws for the width shown.
fn follow_width(element: NodeRef<leptos::html::Div>, width: RwSignal<Option<f64>>) {
    let observer = StoredValue::new_local(None::<(ResizeObserver, Closure<dyn FnMut()>)>);
    Effect::new(move |_| {
        let Some(el) = element.get() else { return };
        let target = el.clone();
        let measure = Closure::<dyn FnMut()>::new(move || {
            let now = Some(f64::from(el.client_width().max(300)));
            if width.get_untracked() != now {
                width.set(now);
            }
        });
        // Observing reports the first size at once.
        if let Ok(o) = ResizeObserver::new(measure.as_ref().unchecked_ref()) {
            o.observe(&target);
            observer.set_value(Some((o, measure)));
        }
    });
    on_cleanup(move || {
        observer.try_update_value(|o| {
            if let Some((o, _)) = o.take() {
                o.disconnect();
            }
        });
    });
}

/// The Time order view of the active profile.
#[component]
pub fn TimelineView() -> impl IntoView {
    let state = expect_context::<State>();
    let root = NodeRef::<leptos::html::Div>::new();
    // The width asked for, once the view is on the page.
    let width = RwSignal::new(None::<f64>);
    // The chart's window, for the profile it was chosen on; the whole span without one.
    let window = RwSignal::new(None::<(u32, i64, i64)>);
    let answer = super::report_on_active(
        state,
        move |e| {
            let width = width.get()?;
            let ask = Ask::Timeline {
                window: window.get().filter(|w| w.0 == e.id).map(|(_, start, end)| (start, end)),
                viewport: ChartViewport { width_px: width, min_width_px: 0.5, max_depth: MAX_ROWS - 1 },
                buckets: (width / 3.0).clamp(1.0, 4096.0) as usize,
            };
            // Every sample: the range is drawn on the chart, not applied to it.
            Some(Request::Ask { profile: e.id, query: state.query.get().without_range(), ask })
        },
        |r| match r {
            Response::Timeline(t) => Some(t),
            _ => None,
        },
    );
    follow_width(root, width);
    // The last chart drawn stays while a new window is on its way.
    let shown = RwSignal::new(None::<Shown>);
    Effect::new(move |_| {
        answer.with(|a| {
            if let (Some(Ok(Timeline::Drawn { chart, histogram })), Some(e)) = (a, state.current.get_untracked()) {
                shown.set(Some(Shown::new(e.id, chart.clone(), histogram.clone())));
            }
        })
    });
    let status = Memo::new(move |_| {
        let active = state.current.with(|e| e.as_ref().map(|e| e.id));
        answer.with(|a| match a {
            Some(Err(e)) => Status::Failed(e.clone()),
            Some(Ok(Timeline::Unavailable(why))) => Status::Unavailable(why.clone()),
            _ if shown.with(|s| s.as_ref().map(|s| s.profile)) == active && active.is_some() => Status::Drawn,
            _ => Status::Waiting,
        })
    });
    let pending = move || answer.with(Option::is_none) && status.get() == Status::Drawn;
    let body = move || match status.get() {
        Status::Drawn => chart_panel(state, shown, window),
        Status::Unavailable(why) => {
            let why =
                why.chars().next().map_or(String::new(), |c| c.to_uppercase().chain(why.chars().skip(1)).collect());
            view! {
                <p class="hint" data-testid="timeline-unavailable">
                    {why} ". The time order draws samples where they were taken."
                </p>
            }
            .into_any()
        }
        Status::Failed(err) => super::error_view(err),
        Status::Waiting => super::busy_view(),
    };
    view! {
        <div class="timeline" node_ref=root>
            <Show when=pending>
                <span class="busy timeline-pending">"drawing…"</span>
            </Show>
            {body}
        </div>
    }
}
