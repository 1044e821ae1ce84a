//! Time and value axes for the page's SVG charts over time (the range timeline and a
//! function's trend): a plot area inside margins, ticks at round times and values.

use leptos::prelude::*;

/// Where a chart draws: its size and the plot area inside the axes' margins.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Plot {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    /// The times shown (ms since the epoch) and the largest value.
    pub t0: f64,
    pub t1: f64,
    pub max: f64,
}

impl Plot {
    pub fn x(&self, t: f64) -> f64 {
        self.left + (t - self.t0) / (self.t1 - self.t0).max(1.0) * (self.width - self.left - self.right)
    }

    pub fn y(&self, v: f64) -> f64 {
        self.height - self.bottom - v / self.max.max(f64::MIN_POSITIVE) * (self.height - self.top - self.bottom)
    }

    /// The time at x (clamped to the plot).
    pub fn t_at(&self, x: f64) -> f64 {
        let plot = (self.width - self.left - self.right).max(1.0);
        self.t0 + ((x - self.left) / plot).clamp(0.0, 1.0) * (self.t1 - self.t0)
    }

    pub fn view_box(&self) -> String {
        format!("0 0 {} {}", self.width, self.height)
    }
}

/// Tick spacings for a time axis, in ms: 1 min up to a week.
const TIME_TICKS: [u64; 12] = [
    60_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    604_800_000,
];

/// A time as the page shows it: local `HH:MM`, with the date (`MM-DD`) when `with_date`.
pub fn clock(t: f64, with_date: bool) -> String {
    let d = js_sys::Date::new(&t.into());
    let time = format!("{:02}:{:02}", d.get_hours(), d.get_minutes());
    if with_date {
        format!("{:02}-{:02} {time}", d.get_month() + 1, d.get_date())
    } else {
        time
    }
}

/// Whether times of a span of `ms` need their date.
pub fn needs_date(ms: f64) -> bool {
    ms >= 86_400_000.0
}

/// The round times to tick (at most about 8), in ms.
fn time_ticks(t0: f64, t1: f64) -> Vec<f64> {
    let span = (t1 - t0).max(1.0);
    let every = TIME_TICKS.iter().map(|&s| s as f64).find(|&s| span / s <= 8.0).unwrap_or(604_800_000.0);
    // Round in local time: shift by the zone's offset (minutes, positive west of UTC).
    let offset = js_sys::Date::new(&t0.into()).get_timezone_offset() * 60_000.0;
    let first = ((t0 - offset) / every).ceil() * every + offset;
    (0..).map(|i| first + i as f64 * every).take_while(|&t| t <= t1).collect()
}

/// 1, 2 or 5 times a power of ten: a round step giving about `n` ticks up to `max`.
fn nice_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|&s| s >= raw).unwrap_or(10.0 * power)
}

/// The time axis along the plot's bottom.
pub fn x_axis(plot: Plot, testid: &'static str) -> impl IntoView {
    let base = plot.height - plot.bottom;
    let with_date = needs_date(plot.t1 - plot.t0);
    let ticks = time_ticks(plot.t0, plot.t1)
        .into_iter()
        .map(|t| {
            let x = format!("{:.1}", plot.x(t));
            view! {
                <line x1=x.clone() x2=x.clone() y1=base y2=base + 4.0></line>
                <text x=x y=base + 16.0 text-anchor="middle" data-t=t.to_string()>{clock(t, with_date)}</text>
            }
        })
        .collect_view();
    view! {
        <g class="axis" data-testid=testid>
            <line x1=plot.left x2=plot.width - plot.right y1=base y2=base></line>
            {ticks}
        </g>
    }
}

/// The value axis along the plot's left, labelled by `label`.
pub fn y_axis(plot: Plot, testid: &'static str, label: impl Fn(f64) -> String) -> impl IntoView {
    let step = nice_step(plot.max, 4.0);
    let ticks = (0..)
        .map(|i| i as f64 * step)
        .take_while(|&v| v <= plot.max * 1.000_001)
        .map(|v| {
            let y = format!("{:.1}", plot.y(v));
            view! {
                <line class="grid" x1=plot.left x2=plot.width - plot.right y1=y.clone() y2=y.clone()></line>
                <text x=plot.left - 6.0 y=y dy="0.35em" text-anchor="end" data-value=v.to_string()>{label(v)}</text>
            }
        })
        .collect_view();
    view! {
        <g class="axis" data-testid=testid>
            <line x1=plot.left x2=plot.left y1=plot.top y2=plot.height - plot.bottom></line>
            {ticks}
        </g>
    }
}

/// `max` rounded up to a whole tick of the value axis, so the top line is labelled.
pub fn nice_ceiling(max: f64) -> f64 {
    let max = max.max(1.0);
    let step = nice_step(max, 4.0);
    (max / step).ceil() * step
}
