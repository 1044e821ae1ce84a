//! The Time order view's chart once drawn: the histogram and the stack chart canvases,
//! dragging a time range across either, the lane names, and the hovered box's tooltip.

use leptos::ev;
use leptos::prelude::*;
use stacklens_core::units::format_value;
use web_sys::{HtmlCanvasElement, MouseEvent};

use super::controls::{ChartControls, ChartZoom};
use super::paint::{chart_width, paint_chart, paint_histogram, Shown, TRACK};
use super::scale::{box_at, Scale, LANE_HEAD};
use crate::app::state::State;

/// A drag shorter than this is a click, not a range.
const DRAG_PX: f64 = 3.0;

/// A drag across one of the canvases: its span at the start, the canvas's left edge in
/// the page's client coordinates, and where the drag began and is now.
#[derive(Copy, Clone)]
struct Drag {
    scale: Scale,
    left: f64,
    from_x: f64,
    to_x: f64,
}

impl Drag {
    /// The time range dragged over, once the drag is long enough to be one.
    fn range(&self) -> Option<(i64, i64)> {
        let (a, b) = (self.scale.time(self.from_x), self.scale.time(self.to_x));
        ((self.to_x - self.from_x).abs() >= DRAG_PX && a != b).then(|| (a.min(b), a.max(b)))
    }
}

/// The canvas's span and its left edge in client coordinates, for a drag starting on it.
fn drag_on(canvas: &HtmlCanvasElement, start: i64, end: i64, ev: &MouseEvent) -> Drag {
    let left = canvas.get_bounding_client_rect().left();
    let x = f64::from(ev.client_x()) - left;
    Drag { scale: Scale { start, end, width: f64::from(canvas.client_width().max(1)) }, left, from_x: x, to_x: x }
}

/// Follows a drag outside the canvas it began on, until the button is released: then
/// its range becomes the page's time range. True (in the value given back) while the
/// click that ends a drag is to select nothing.
fn follow_drag(state: State, drag: RwSignal<Option<Drag>>) -> StoredValue<bool> {
    let moved = window_event_listener(ev::mousemove, move |ev| {
        if let Some(d) = drag.get_untracked() {
            drag.set(Some(Drag { to_x: f64::from(ev.client_x()) - d.left, ..d }));
        }
    });
    let dragged = StoredValue::new(false);
    let released = window_event_listener(ev::mouseup, move |_| {
        let range = drag.get_untracked().and_then(|d| d.range());
        if let Some(range) = range {
            state.range.set(Some(range));
        }
        dragged.set_value(range.is_some());
        drag.set(None);
    });
    on_cleanup(move || {
        moved.remove();
        released.remove();
    });
    dragged
}

/// The chart of a drawn timeline, with its controls, lane names and tooltip.
pub(super) fn chart_panel(
    state: State,
    shown: RwSignal<Option<Shown>>,
    window: RwSignal<Option<(u32, i64, i64)>>,
) -> AnyView {
    let track_ref = NodeRef::<leptos::html::Canvas>::new();
    let chart_ref = NodeRef::<leptos::html::Canvas>::new();
    let drag = RwSignal::new(None::<Drag>);
    let hovered = RwSignal::new(None::<(usize, f64, f64)>);
    let selection = move || drag.get().and_then(|d| d.range()).or_else(|| state.range.get());

    // Each canvas is painted again when the chart or the selection changes.
    let paint_on = move |canvas: NodeRef<leptos::html::Canvas>,
                         paint: fn(&HtmlCanvasElement, &Shown, Option<(i64, i64)>)| {
        Effect::new(move |_| {
            let Some(canvas) = canvas.get() else { return };
            let selection = selection();
            shown.with(|s| {
                if let Some(s) = s {
                    paint(&canvas, s, selection);
                }
            });
        });
    };
    paint_on(track_ref, paint_histogram);
    paint_on(chart_ref, paint_chart);
    let dragged = follow_drag(state, drag);

    let zoom = ChartZoom { shown, window, chart_ref };
    let start_drag = move |canvas: NodeRef<leptos::html::Canvas>, span: fn(&Shown) -> (i64, i64), ev: MouseEvent| {
        if ev.button() != 0 {
            return;
        }
        // No text selection while dragging.
        ev.prevent_default();
        let Some(canvas) = canvas.get_untracked() else { return };
        let Some((start, end)) = shown.with_untracked(|s| s.as_ref().map(span)) else { return };
        hovered.set(None);
        drag.set(Some(drag_on(&canvas, start, end, &ev)));
    };
    let locate = move |ev: &MouseEvent| {
        let (x, y) = (f64::from(ev.offset_x()), f64::from(ev.offset_y()));
        let width = chart_width(chart_ref);
        shown.with_untracked(|s| {
            let s = s.as_ref()?;
            let scale = Scale { start: s.chart.start, end: s.chart.end, width };
            box_at(&s.chart, &s.tops, &scale, x, y).map(|i| (i, x, y))
        })
    };
    let chart_height = move || shown.with(|s| s.as_ref().map_or(0.0, |s| s.height));

    view! {
        <ChartControls state=state zoom=zoom />
        <canvas
            node_ref=track_ref
            class="timeline-track"
            data-testid="timeline-histogram"
            style:height=format!("{TRACK}px")
            on:mousedown=move |ev| start_drag(track_ref, Shown::whole, ev)
        ></canvas>
        <div class="timeline-chart">
            <canvas
                node_ref=chart_ref
                data-testid="timeline"
                style:height=move || format!("{}px", chart_height())
                on:mousedown=move |ev| start_drag(chart_ref, Shown::window, ev)
                on:mousemove=move |ev| {
                    if drag.with_untracked(Option::is_none) {
                        hovered.set(locate(&ev));
                    }
                }
                on:mouseleave=move |_| hovered.set(None)
                on:click=move |ev| {
                    if dragged.get_value() {
                        return;
                    }
                    let name = locate(&ev).and_then(|(i, _, _)| {
                        shown.with_untracked(|s| s.as_ref().map(|s| s.chart.names[s.chart.boxes[i].name as usize].clone()))
                    });
                    if name.is_some() {
                        state.select(name);
                    }
                }
                on:wheel=move |ev| zoom.wheel(ev)
            ></canvas>
            <LaneLabels shown=shown />
            <ChartTooltip shown=shown hovered=hovered chart_ref=chart_ref />
        </div>
    }
    .into_any()
}

/// Each lane's name, in the band above its rows.
#[component]
fn LaneLabels(shown: RwSignal<Option<Shown>>) -> impl IntoView {
    move || {
        shown.with(|s| {
            s.as_ref().map(|s| {
                s.chart
                    .lanes
                    .iter()
                    .zip(&s.tops)
                    .map(|(lane, top)| {
                        view! {
                            <div class="lane-label" data-testid="lane-label" style=format!("top:{}px", top - LANE_HEAD + 1.0)>
                                {lane_label(&lane.name)}
                            </div>
                        }
                    })
                    .collect_view()
            })
        })
    }
}

/// The hovered box's function, file, duration, start and lane.
#[component]
fn ChartTooltip(
    shown: RwSignal<Option<Shown>>,
    hovered: RwSignal<Option<(usize, f64, f64)>>,
    chart_ref: NodeRef<leptos::html::Canvas>,
) -> impl IntoView {
    move || {
        let (i, x, y) = hovered.get()?;
        let left = (x + 14.0).min(chart_width(chart_ref) - 320.0).max(0.0);
        shown.with(|s| {
            let s = s.as_ref()?;
            let b = s.chart.boxes.get(i)?;
            let file = s.chart.files[b.name as usize].clone();
            let lane = lane_label(&s.chart.lanes[b.lane as usize].name);
            Some(view! {
                <div class="tooltip" data-testid="timeline-tooltip" style=format!("left:{left}px;top:{}px", y + 14.0)>
                    <div class="tt-name">{s.chart.names[b.name as usize].clone()}</div>
                    {(!file.is_empty()).then(|| view! { <div class="tt-file">{file}</div> })}
                    <div>{format_value(b.end - b.start, "nanoseconds")} " from " {format_value(b.start, "nanoseconds")}</div>
                    <div class="tt-file">{lane}</div>
                </div>
            })
        })
    }
}

/// A lane's name; samples that name no thread share one lane.
fn lane_label(name: &str) -> String {
    if name.is_empty() {
        "all samples".to_owned()
    } else {
        name.to_owned()
    }
}
