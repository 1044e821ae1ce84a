//! The Time order view (Firefox Profiler's "Stack Chart", speedscope's "Time Order"):
//! each lane's (thread's) stacks over time on a HiDPI canvas, from core's stack chart,
//! under an activity histogram of the whole time span. The buttons or Ctrl+wheel zoom
//! the chart in time (the worker draws the new window); a drag across either canvas
//! chooses the time range every other view reads (`State::range`), drawn on both; a
//! click on a box selects its function (the details panel).

use leptos::ev;
use leptos::prelude::*;
use stacklens_core::analysis::timeline::{ChartViewport, Histogram, StackChart};
use stacklens_core::units::format_value;
use wasm_bindgen::prelude::Closure;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, MouseEvent, ResizeObserver, WheelEvent};

use super::flame::paint::{package_colour, paint_boxes, sized_context, PaintedBox};
use crate::app::state::State;
use crate::worker::protocol::{Request, Response, Shape, Timeline};
use crate::worker::session::MAX_ROWS;

/// Heights in CSS pixels: a stack row, a lane's name above its rows, the space between
/// lanes, the time axis above the chart and the histogram.
const ROW: f64 = 16.0;
const LANE_HEAD: f64 = 18.0;
const LANE_GAP: f64 = 6.0;
const AXIS: f64 = 18.0;
const TRACK: f64 = 56.0;
/// A drag shorter than this is a click, not a range.
const DRAG_PX: f64 = 3.0;
/// The narrowest window the chart zooms to, in nanoseconds.
pub const MIN_SPAN: i64 = 1_000;
/// Canvases taller than this many device pixels fail to allocate; taller charts are
/// drawn at a lower resolution instead.
const MAX_CANVAS_PX: f64 = 32_000.0;
const SELECTION_FILL: &str = "rgba(30, 110, 230, 0.22)";
const SELECTION_EDGE: &str = "rgb(30, 110, 230)";
const GRID: &str = "rgba(128, 128, 128, 0.35)";
const AXIS_TEXT: &str = "#888";

/// A time span in nanoseconds laid across `width` CSS pixels.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Scale {
    pub start: i64,
    pub end: i64,
    pub width: f64,
}

impl Scale {
    fn span(&self) -> f64 {
        (self.end - self.start).max(1) as f64
    }

    pub fn x(&self, t: i64) -> f64 {
        (t - self.start) as f64 / self.span() * self.width
    }

    /// The time at `x`, within the span.
    pub fn time(&self, x: f64) -> i64 {
        self.start + (x.clamp(0.0, self.width) / self.width.max(1.0) * self.span()).round() as i64
    }

    /// Multiples of a 1, 2 or 5 × 10ⁿ ns step in the span, about one per `every` px.
    pub fn ticks(&self, every: f64) -> Vec<i64> {
        let rough = self.span() * every / self.width.max(1.0);
        let magnitude = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|&s| s >= rough).unwrap_or(rough);
        let step = (step as i64).max(1);
        let first = self.start.div_euclid(step) * step + if self.start.rem_euclid(step) == 0 { 0 } else { step };
        (0..).map(|i| first + i * step).take_while(|&t| t <= self.end).collect()
    }
}

/// `window` zoomed by `factor` (below 1 zooms in) about the time `at`, kept inside
/// `whole` and at least [`MIN_SPAN`] long; `None` when that is the whole span.
pub fn zoomed(window: (i64, i64), whole: (i64, i64), at: i64, factor: f64) -> Option<(i64, i64)> {
    let whole_span = whole.1 - whole.0;
    let span = (((window.1 - window.0) as f64 * factor).round() as i64).clamp(MIN_SPAN.min(whole_span), whole_span);
    if span >= whole_span {
        return None;
    }
    let left = (at - window.0) as f64 / (window.1 - window.0).max(1) as f64;
    let start = ((at as f64 - left * span as f64).round() as i64).clamp(whole.0, whole.1 - span);
    Some((start, start + span))
}

/// Where each lane's first stack row starts (its name is in the band above), and the
/// chart's height.
pub fn lane_tops(chart: &StackChart) -> (Vec<f64>, f64) {
    let mut y = AXIS;
    let tops = chart
        .lanes
        .iter()
        .map(|lane| {
            let top = y + LANE_HEAD;
            y = top + f64::from(lane.depth) * ROW + LANE_GAP;
            top
        })
        .collect();
    (tops, y)
}

/// The index of the box drawn at (x, y) of a chart laid out by [`lane_tops`], if any.
pub fn box_at(chart: &StackChart, tops: &[f64], scale: &Scale, x: f64, y: f64) -> Option<usize> {
    let lane = tops.iter().rposition(|&top| top <= y)?;
    let depth = ((y - tops[lane]) / ROW) as u32;
    if depth >= chart.lanes[lane].depth {
        return None;
    }
    let t = scale.start as f64 + x / scale.width.max(1.0) * scale.span();
    let row = (lane as u32, depth);
    // Boxes are sorted by lane, depth and start, and one row's do not overlap.
    let after =
        chart.boxes.partition_point(|b| (b.lane, b.depth) < row || ((b.lane, b.depth) == row && b.start as f64 <= t));
    let i = after.checked_sub(1)?;
    let b = &chart.boxes[i];
    ((b.lane, b.depth) == row && t < b.end as f64).then_some(i)
}

/// A chart the worker drew, with what painting it needs.
struct Shown {
    profile: u32,
    chart: StackChart,
    histogram: Histogram,
    tops: Vec<f64>,
    height: f64,
    colours: Vec<String>,
}

impl Shown {
    fn new(profile: u32, chart: StackChart, histogram: Histogram) -> Self {
        let (tops, height) = lane_tops(&chart);
        let colours = chart.names.iter().map(|n| package_colour(n)).collect();
        Shown { profile, chart, histogram, tops, height, colours }
    }

    fn whole(&self) -> (i64, i64) {
        (self.histogram.start, self.histogram.end)
    }

    fn window(&self) -> (i64, i64) {
        (self.chart.start, self.chart.end)
    }
}

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

#[derive(Clone, PartialEq)]
enum Status {
    Waiting,
    Drawn,
    Unavailable(String),
    Failed(String),
}

/// The canvas sized for its CSS width and `css_height` at the screen's pixel ratio, cleared;
/// and its CSS width.
fn sized(canvas: &HtmlCanvasElement, css_height: f64) -> Option<(CanvasRenderingContext2d, f64)> {
    let css_width = f64::from(canvas.client_width().max(300));
    let ctx = sized_context(canvas, css_width, css_height, MAX_CANVAS_PX / css_height.max(1.0))?;
    Some((ctx, css_width))
}

/// Shades the time range `range` across a canvas `height` high, with its edges.
fn paint_selection(ctx: &CanvasRenderingContext2d, scale: &Scale, range: Option<(i64, i64)>, height: f64) {
    let Some((from, to)) = range else { return };
    let (x0, x1) = (scale.x(from).max(-1.0), scale.x(to).min(scale.width + 1.0));
    if x1 < 0.0 || x0 > scale.width {
        return;
    }
    ctx.set_fill_style_str(SELECTION_FILL);
    ctx.fill_rect(x0, 0.0, (x1 - x0).max(1.0), height);
    ctx.set_fill_style_str(SELECTION_EDGE);
    ctx.fill_rect(x0, 0.0, 1.0, height);
    ctx.fill_rect(x1 - 1.0, 0.0, 1.0, height);
}

/// The activity over the whole span as bars, the chart's window outlined when zoomed.
fn paint_histogram(canvas: &HtmlCanvasElement, shown: &Shown, selection: Option<(i64, i64)>) {
    let Some((ctx, width)) = sized(canvas, TRACK) else { return };
    let h = &shown.histogram;
    let scale = Scale { start: h.start, end: h.end, width };
    let largest = h.values.iter().copied().fold(0.0, f64::max);
    if largest > 0.0 {
        let bar = width / h.values.len() as f64;
        ctx.set_fill_style_str("hsl(24, 72%, 52%)");
        for (i, v) in h.values.iter().enumerate() {
            let height = v / largest * (TRACK - 4.0);
            ctx.fill_rect(i as f64 * bar, TRACK - height, (bar - 0.3).max(0.5), height);
        }
    }
    if shown.window() != shown.whole() {
        let (x0, x1) = (scale.x(shown.chart.start), scale.x(shown.chart.end));
        ctx.set_fill_style_str("rgba(128, 128, 128, 0.3)");
        ctx.fill_rect(0.0, 0.0, x0, TRACK);
        ctx.fill_rect(x1, 0.0, width - x1, TRACK);
    }
    paint_selection(&ctx, &scale, selection, TRACK);
}

/// The stack chart: a time axis, each lane's band and its boxes, then the selection.
fn paint_chart(canvas: &HtmlCanvasElement, shown: &Shown, selection: Option<(i64, i64)>) {
    let Some((ctx, width)) = sized(canvas, shown.height) else { return };
    let chart = &shown.chart;
    let scale = Scale { start: chart.start, end: chart.end, width };
    ctx.set_font("11px system-ui, sans-serif");
    for t in scale.ticks(110.0) {
        let x = scale.x(t).round() + 0.5;
        ctx.set_fill_style_str(GRID);
        ctx.fill_rect(x, 0.0, 1.0, shown.height);
        ctx.set_fill_style_str(AXIS_TEXT);
        let _ = ctx.fill_text(&format_value(t, "nanoseconds"), x + 3.0, AXIS - 5.0);
    }
    ctx.set_fill_style_str("rgba(128, 128, 128, 0.12)");
    for top in &shown.tops {
        ctx.fill_rect(0.0, top - LANE_HEAD, width, LANE_HEAD - 2.0);
    }
    let boxes: Vec<PaintedBox> = chart
        .boxes
        .iter()
        .map(|b| {
            let x = scale.x(b.start.max(chart.start));
            let width = (scale.x(b.end.min(chart.end)) - x - 0.5).max(0.5);
            PaintedBox {
                x,
                y: shown.tops[b.lane as usize] + f64::from(b.depth) * ROW,
                width,
                label_width: width,
                fill: &shown.colours[b.name as usize],
                label: &chart.names[b.name as usize],
            }
        })
        .collect();
    paint_boxes(&ctx, &boxes, ROW - 1.0, ROW - 4.0);
    paint_selection(&ctx, &scale, selection, shown.height);
}

/// The canvas's span and its left edge in client coordinates, for a drag starting on it.
fn drag_on(canvas: &HtmlCanvasElement, start: i64, end: i64, ev: &MouseEvent) -> Drag {
    let left = canvas.get_bounding_client_rect().left();
    let x = f64::from(ev.client_x()) - left;
    Drag { scale: Scale { start, end, width: f64::from(canvas.client_width().max(1)) }, left, from_x: x, to_x: x }
}

/// The chart of a drawn timeline, with its controls, lane names and tooltip.
fn chart_panel(state: State, shown: RwSignal<Option<Shown>>, window: RwSignal<Option<(u32, i64, i64)>>) -> AnyView {
    let track_ref = NodeRef::<leptos::html::Canvas>::new();
    let chart_ref = NodeRef::<leptos::html::Canvas>::new();
    let drag = RwSignal::new(None::<Drag>);
    let hovered = RwSignal::new(None::<(usize, f64, f64)>);
    let selection = move || drag.get().and_then(|d| d.range()).or_else(|| state.range.get());

    Effect::new(move |_| {
        let Some(canvas) = track_ref.get() else { return };
        let selection = selection();
        shown.with(|s| {
            if let Some(s) = s {
                paint_histogram(&canvas, s, selection);
            }
        });
    });
    Effect::new(move |_| {
        let Some(canvas) = chart_ref.get() else { return };
        let selection = selection();
        shown.with(|s| {
            if let Some(s) = s {
                paint_chart(&canvas, s, selection);
            }
        });
    });

    // A drag goes on outside the canvas it began on, until the button is released.
    let moved = window_event_listener(ev::mousemove, move |ev| {
        if let Some(d) = drag.get_untracked() {
            drag.set(Some(Drag { to_x: f64::from(ev.client_x()) - d.left, ..d }));
        }
    });
    // The click that ends a drag selects nothing.
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

    let zoom_to = move |target: Option<(i64, i64)>| {
        let profile = shown.with_untracked(|s| s.as_ref().map(|s| s.profile));
        window.set(target.zip(profile).map(|((start, end), id)| (id, start, end)));
    };
    // Zooms by `factor` about the time at `x` on the chart (its middle without one).
    let zoom_by = move |factor: f64, x: Option<f64>| {
        let target = shown.with_untracked(|s| {
            let s = s.as_ref()?;
            // The window asked for last (none: the whole profile), which the chart may not
            // show yet: quick clicks add up rather than all zooming the shown window.
            let asked = window.get_untracked().filter(|w| w.0 == s.profile).map_or(s.whole(), |(_, a, b)| (a, b));
            let at = match x {
                // The cursor points at a time of the chart as it is drawn.
                Some(x) => {
                    let (start, end) = s.window();
                    Scale { start, end, width: chart_width(chart_ref) }.time(x)
                }
                None => asked.0 + (asked.1 - asked.0) / 2,
            };
            zoomed(asked, s.whole(), at, factor)
        });
        zoom_to(target);
    };
    let on_wheel = move |ev: WheelEvent| {
        if ev.ctrl_key() || ev.meta_key() {
            ev.prevent_default();
            zoom_by(if ev.delta_y() > 0.0 { 1.25 } else { 0.8 }, Some(f64::from(ev.offset_x())));
        } else if ev.shift_key() || ev.delta_x().abs() > ev.delta_y().abs() {
            // Sideways scrolling pans the window.
            ev.prevent_default();
            let pixels = if ev.delta_x() != 0.0 { ev.delta_x() } else { ev.delta_y() };
            let target = shown.with_untracked(|s| {
                let s = s.as_ref()?;
                let (start, end) = s.window();
                let by = (pixels / chart_width(chart_ref) * (end - start) as f64) as i64;
                zoomed((start + by, end + by), s.whole(), start + by, 1.0)
            });
            if target.is_some() {
                zoom_to(target);
            }
        }
    };
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

    let tooltip = move || {
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
    };
    let lane_labels = move || {
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
    };
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
    let chart_height = move || shown.with(|s| s.as_ref().map_or(0.0, |s| s.height));

    view! {
        <div class="timeline-controls">
            <button data-testid="timeline-zoom-in" title="zoom in (Ctrl+wheel)" on:click=move |_| zoom_by(0.5, None)>"+"</button>
            <button data-testid="timeline-zoom-out" title="zoom out (Ctrl+wheel)" disabled=move || !zoomed_in() on:click=move |_| zoom_by(2.0, None)>
                "−"
            </button>
            <button data-testid="timeline-zoom-all" disabled=move || !zoomed_in() on:click=move |_| zoom_to(None)>"whole profile"</button>
            <button
                data-testid="timeline-zoom-range"
                disabled=move || state.range.get().is_none()
                on:click=move |_| {
                    let target = state.range.get_untracked().and_then(|(from, to)| {
                        shown.with_untracked(|s| s.as_ref().and_then(|s| zoomed((from, to), s.whole(), from, 1.0)))
                    });
                    zoom_to(target);
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
                on:wheel=on_wheel
            ></canvas>
            {lane_labels}
            {tooltip}
        </div>
    }
    .into_any()
}

fn chart_width(chart: NodeRef<leptos::html::Canvas>) -> f64 {
    chart.get_untracked().map_or(1000.0, |c| f64::from(c.client_width().max(1)))
}

/// A lane's name; samples that name no thread share one lane.
fn lane_label(name: &str) -> String {
    if name.is_empty() {
        "all samples".to_owned()
    } else {
        name.to_owned()
    }
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
            Some(Request::Timeline {
                id: e.id,
                sample: state.sample_index.get(),
                filters: state.filters.get(),
                // Every sample: the range is drawn on the chart, not applied to it.
                shape: Shape { transforms: state.transforms.get(), range: None },
                window: window.get().filter(|w| w.0 == e.id).map(|(_, start, end)| (start, end)),
                viewport: ChartViewport { width_px: width, min_width_px: 0.5, max_depth: MAX_ROWS - 1 },
                buckets: (width / 3.0).clamp(1.0, 4096.0) as usize,
            })
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
