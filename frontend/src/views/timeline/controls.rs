//! Zooming the Time order chart in time (buttons, Ctrl+wheel, sideways scrolling): the
//! window asked of the worker, and the bar of buttons above the chart.

use leptos::prelude::*;
use stacklens_core::units::format_value;
use web_sys::WheelEvent;

use super::paint::{chart_width, Shown};
use super::scale::{zoomed, Scale};
use crate::app::state::State;

/// The chart's zoom: the window asked of the worker for the profile shown (none: the
/// whole profile), and the chart canvas whose width the cursor is read against.
#[derive(Copy, Clone)]
pub(super) struct ChartZoom {
    pub shown: RwSignal<Option<Shown>>,
    pub window: RwSignal<Option<(u32, i64, i64)>>,
    pub chart_ref: NodeRef<leptos::html::Canvas>,
}

impl ChartZoom {
    /// Asks for the window `target` (the whole profile without one).
    fn to(self, target: Option<(i64, i64)>) {
        let profile = self.shown.with_untracked(|s| s.as_ref().map(|s| s.profile));
        self.window.set(target.zip(profile).map(|((start, end), id)| (id, start, end)));
    }

    /// Zooms by `factor` about the time at `x` on the chart (its middle without one).
    fn by(self, factor: f64, x: Option<f64>) {
        let target = self.shown.with_untracked(|s| {
            let s = s.as_ref()?;
            // The window asked for last (none: the whole profile), which the chart may not
            // show yet: quick clicks add up rather than all zooming the shown window.
            let asked = self.window.get_untracked().filter(|w| w.0 == s.profile).map_or(s.whole(), |(_, a, b)| (a, b));
            let at = match x {
                // The cursor points at a time of the chart as it is drawn.
                Some(x) => {
                    let (start, end) = s.window();
                    Scale { start, end, width: chart_width(self.chart_ref) }.time(x)
                }
                None => asked.0 + (asked.1 - asked.0) / 2,
            };
            zoomed(asked, s.whole(), at, factor)
        });
        self.to(target);
    }

    /// Ctrl+wheel zooms about the cursor; sideways scrolling (or Shift+wheel) pans.
    pub fn wheel(self, ev: WheelEvent) {
        if ev.ctrl_key() || ev.meta_key() {
            ev.prevent_default();
            self.by(if ev.delta_y() > 0.0 { 1.25 } else { 0.8 }, Some(f64::from(ev.offset_x())));
        } else if ev.shift_key() || ev.delta_x().abs() > ev.delta_y().abs() {
            // Sideways scrolling pans the window.
            ev.prevent_default();
            let pixels = if ev.delta_x() != 0.0 { ev.delta_x() } else { ev.delta_y() };
            let target = self.shown.with_untracked(|s| {
                let s = s.as_ref()?;
                let (start, end) = s.window();
                let by = (pixels / chart_width(self.chart_ref) * (end - start) as f64) as i64;
                zoomed((start + by, end + by), s.whole(), start + by, 1.0)
            });
            if target.is_some() {
                self.to(target);
            }
        }
    }
}

/// The zoom buttons and the window shown, above the chart.
#[component]
pub(super) fn ChartControls(state: State, zoom: ChartZoom) -> impl IntoView {
    let shown = zoom.shown;
    let window_text = move || {
        shown.with(|s| {
            s.as_ref().map(|s| {
                let t = |ns: i64| format_value(ns, "nanoseconds");
                format!(
                    "{} – {} of {} – {}",
                    t(s.chart.start),
                    t(s.chart.end),
                    t(s.histogram.start),
                    t(s.histogram.end)
                )
            })
        })
    };
    let window_edge =
        move |edge: fn((i64, i64)) -> i64| shown.with(|s| s.as_ref().map(|s| edge(s.window()).to_string()));
    let zoomed_in = move || shown.with(|s| s.as_ref().is_some_and(|s| s.window() != s.whole()));

    view! {
        <div class="timeline-controls">
            <button data-testid="timeline-zoom-in" title="zoom in (Ctrl+wheel)" on:click=move |_| zoom.by(0.5, None)>"+"</button>
            <button data-testid="timeline-zoom-out" title="zoom out (Ctrl+wheel)" disabled=move || !zoomed_in() on:click=move |_| zoom.by(2.0, None)>
                "−"
            </button>
            <button data-testid="timeline-zoom-all" disabled=move || !zoomed_in() on:click=move |_| zoom.to(None)>"whole profile"</button>
            <button
                data-testid="timeline-zoom-range"
                disabled=move || state.range.get().is_none()
                on:click=move |_| {
                    let target = state.range.get_untracked().and_then(|(from, to)| {
                        shown.with_untracked(|s| s.as_ref().and_then(|s| zoomed((from, to), s.whole(), from, 1.0)))
                    });
                    zoom.to(target);
                }
            >
                "zoom to range"
            </button>
            <span
                class="hint"
                data-testid="timeline-window"
                data-start=move || window_edge(|w| w.0)
                data-end=move || window_edge(|w| w.1)
            >
                {window_text}
            </span>
            <span class="hint">"drag to choose a time range for every view; Ctrl+wheel zooms, Shift+wheel pans"</span>
        </div>
    }
}
