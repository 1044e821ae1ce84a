//! Painting the Time order view's two canvases: the activity histogram over the whole
//! span and the stack chart of the window shown, each with the time range chosen.

use leptos::prelude::*;
use stacklens_core::analysis::timeline::{Histogram, StackChart};
use stacklens_core::units::format_value;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use super::scale::{lane_tops, Scale, AXIS, LANE_HEAD, ROW};
use crate::views::flame::paint::{package_colour, paint_boxes, sized_context, PaintedBox};

/// The histogram's height in CSS pixels.
pub(super) const TRACK: f64 = 56.0;
/// Canvases taller than this many device pixels fail to allocate; taller charts are
/// drawn at a lower resolution instead.
const MAX_CANVAS_PX: f64 = 32_000.0;
const SELECTION_FILL: &str = "rgba(30, 110, 230, 0.22)";
const SELECTION_EDGE: &str = "rgb(30, 110, 230)";
const GRID: &str = "rgba(128, 128, 128, 0.35)";
const AXIS_TEXT: &str = "#888";

/// A chart the worker drew, with what painting it needs.
pub(super) struct Shown {
    pub profile: u32,
    pub chart: StackChart,
    pub histogram: Histogram,
    pub tops: Vec<f64>,
    pub height: f64,
    colours: Vec<String>,
}

impl Shown {
    pub fn new(profile: u32, chart: StackChart, histogram: Histogram) -> Self {
        let (tops, height) = lane_tops(&chart);
        let colours = chart.names.iter().map(|n| package_colour(n)).collect();
        Shown { profile, chart, histogram, tops, height, colours }
    }

    pub fn whole(&self) -> (i64, i64) {
        (self.histogram.start, self.histogram.end)
    }

    pub fn window(&self) -> (i64, i64) {
        (self.chart.start, self.chart.end)
    }
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
pub(super) fn paint_histogram(canvas: &HtmlCanvasElement, shown: &Shown, selection: Option<(i64, i64)>) {
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
pub(super) fn paint_chart(canvas: &HtmlCanvasElement, shown: &Shown, selection: Option<(i64, i64)>) {
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

/// The chart canvas's CSS width (1000 before it is on the page).
pub(super) fn chart_width(chart: NodeRef<leptos::html::Canvas>) -> f64 {
    chart.get_untracked().map_or(1000.0, |c| f64::from(c.client_width().max(1)))
}
