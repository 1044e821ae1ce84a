//! What the capture history shows and what its parts share: the windows it offers, the
//! series shown over one of them, and the signals of the pickers, chart and actions.

use leptos::html;
use leptos::prelude::*;
use stacklens_core::api::{SeriesName, SeriesPoint};

use crate::app::ranges::{label_text, RangeProfile, RangeRef};
use crate::app::state::State;
use crate::views::axes::{clock, needs_date, nice_ceiling, Plot};

/// The windows the timeline shows (ending now): name, span and step in ms.
pub(super) const WINDOWS: [(&str, u64, u64); 4] = [
    ("last hour", 3_600_000, 60_000),
    ("last 6 hours", 21_600_000, 300_000),
    ("last 24 hours", 86_400_000, 900_000),
    ("last 7 days", 604_800_000, 7_200_000),
];

/// What the timeline shows: one series over a window.
#[derive(Clone, PartialEq)]
pub(super) struct Shown {
    pub range: RangeRef,
    pub step_ms: u64,
    pub unit: String,
    pub sample_type: String,
    pub points: Vec<SeriesPoint>,
}

impl Shown {
    pub fn plot(&self) -> Plot {
        let max = self.points.iter().map(|p| p.value).max().unwrap_or(0) as f64;
        Plot {
            width: 880.0,
            height: 220.0,
            left: 72.0,
            right: 16.0,
            top: 10.0,
            bottom: 24.0,
            t0: self.range.from as f64,
            t1: self.range.to as f64,
            max: nice_ceiling(max),
        }
    }

    /// `[from, to)` snapped out to whole steps, at least one.
    pub fn snap(&self, a: f64, b: f64) -> (u64, u64) {
        let (from0, step) = (self.range.from as f64, self.step_ms as f64);
        let (lo, hi) = (a.min(b), a.max(b));
        let from = ((lo - from0) / step).floor().max(0.0) * step + from0;
        let to = (((hi - from0) / step).ceil() * step + from0).max(from + step).min(self.range.to as f64);
        (from as u64, to as u64)
    }

    pub fn point_at(&self, t: f64) -> Option<usize> {
        let i = ((t - self.range.from as f64) / self.step_ms as f64).floor();
        (i >= 0.0 && (i as usize) < self.points.len()).then_some(i as usize)
    }

    /// A range of this series as the tab name shows it: "checkout cpu 14:00–15:00".
    pub fn name(&self, (from, to): (u64, u64)) -> String {
        let with_date = needs_date((self.range.to - self.range.from) as f64);
        let labels = if self.range.labels.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", label_text(&self.range.labels))
        };
        let (service, kind) = (&self.range.service, &self.range.profile_type);
        format!("{service} {kind}{labels} {}–{}", clock(from as f64, with_date), clock(to as f64, false))
    }

    pub fn profile(&self, (from, to): (u64, u64)) -> RangeProfile {
        RangeProfile {
            range: RangeRef { from, to, ..self.range.clone() },
            window: (self.range.from, self.range.to),
            step_ms: self.step_ms,
        }
    }
}

/// The signals the capture history's parts share. Signals are handles, so it is `Copy`.
#[derive(Copy, Clone)]
pub(super) struct History {
    pub state: State,
    /// The `<details>` the history opens in.
    pub details: NodeRef<html::Details>,
    /// The stored series (service and profile type), once fetched.
    pub services: RwSignal<Option<Result<Vec<SeriesName>, String>>>,
    /// The chosen series, window (of [`WINDOWS`]) and label (`key=value`, or empty for all).
    pub chosen: RwSignal<usize>,
    pub window: RwSignal<usize>,
    pub label: RwSignal<String>,
    /// The label values of the series, with their profile counts.
    pub label_values: RwSignal<Vec<(String, usize)>>,
    pub shown: RwSignal<Option<Result<Shown, String>>>,
    /// The step under the mouse (or the keyboard's cursor).
    pub hover: RwSignal<Option<usize>>,
    /// A range being dragged (or marked with the keyboard): where it began and is now.
    pub drag: RwSignal<Option<(f64, f64)>>,
    /// The ranges selected: A, then B to compare with.
    pub selections: RwSignal<Vec<(u64, u64)>>,
    /// Whether a range is being fetched.
    pub busy: RwSignal<bool>,
}

impl History {
    pub fn new(state: State) -> Self {
        History {
            state,
            details: NodeRef::new(),
            services: RwSignal::new(None),
            chosen: RwSignal::new(0),
            window: RwSignal::new(1),
            label: RwSignal::new(String::new()),
            label_values: RwSignal::new(Vec::new()),
            shown: RwSignal::new(None),
            hover: RwSignal::new(None),
            drag: RwSignal::new(None),
            selections: RwSignal::new(Vec::new()),
            busy: RwSignal::new(false),
        }
    }

    /// The series shown, once it arrived.
    pub fn current(&self) -> Option<Shown> {
        self.shown.with(|s| s.as_ref().and_then(|r| r.as_ref().ok()).cloned())
    }

    /// A first range, then a second to compare with; a third starts over.
    pub fn select(&self, range: (u64, u64)) {
        self.selections.update(|l| {
            if l.len() >= 2 {
                l.clear();
            }
            l.push(range);
        })
    }

    /// Closes the history's `<details>`.
    pub fn close(&self) {
        if let Some(d) = self.details.get_untracked() {
            d.set_open(false);
        }
    }
}
