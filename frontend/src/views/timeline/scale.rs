//! The Time order chart's geometry: a time span across pixels, zooming a window inside
//! the whole span, where each lane's rows go and which box is at a point.

use stacklens_core::analysis::timeline::StackChart;

/// Heights in CSS pixels: a stack row, a lane's name above its rows, the space between
/// lanes and the time axis above the chart.
pub(super) const ROW: f64 = 16.0;
pub(super) const LANE_HEAD: f64 = 18.0;
const LANE_GAP: f64 = 6.0;
pub(super) const AXIS: f64 = 18.0;
/// The narrowest window the chart zooms to, in nanoseconds.
pub const MIN_SPAN: i64 = 1_000;

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
