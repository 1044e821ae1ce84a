//! The capture history: a timeline of a service's profiles of one type (captures,
//! uploads and pushes, as the server's time index holds them), its total per step with
//! time and value axes. Dragging selects a range; the range's merged profile opens as a
//! profile tab, and a second range opens the diff of the two with the server's top movers.

use std::collections::BTreeMap;

use leptos::html;
use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::api::{SeriesName, SeriesPoint};
use stacklens_core::units::format_value;

use super::axes::{clock, needs_date, nice_ceiling, x_axis, y_axis, Plot};
use crate::app::ranges::{self, label_text, RangeProfile, RangeRef};
use crate::app::state::{State, ViewKind};

/// The windows the timeline shows (ending now): name, span and step in ms.
const WINDOWS: [(&str, u64, u64); 4] = [
    ("last hour", 3_600_000, 60_000),
    ("last 6 hours", 21_600_000, 300_000),
    ("last 24 hours", 86_400_000, 900_000),
    ("last 7 days", 604_800_000, 7_200_000),
];

/// A drag shorter than this (px of the chart) is a click, not a range.
const MIN_DRAG: f64 = 3.0;

/// What the timeline shows: one series over a window.
#[derive(Clone, PartialEq)]
struct Shown {
    range: RangeRef,
    step_ms: u64,
    unit: String,
    sample_type: String,
    points: Vec<SeriesPoint>,
}

impl Shown {
    fn plot(&self) -> Plot {
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
    fn snap(&self, a: f64, b: f64) -> (u64, u64) {
        let (from0, step) = (self.range.from as f64, self.step_ms as f64);
        let (lo, hi) = (a.min(b), a.max(b));
        let from = ((lo - from0) / step).floor().max(0.0) * step + from0;
        let to = (((hi - from0) / step).ceil() * step + from0).max(from + step).min(self.range.to as f64);
        (from as u64, to as u64)
    }

    fn point_at(&self, t: f64) -> Option<usize> {
        let i = ((t - self.range.from as f64) / self.step_ms as f64).floor();
        (i >= 0.0 && (i as usize) < self.points.len()).then_some(i as usize)
    }

    /// A range of this series as the tab name shows it: "checkout cpu 14:00–15:00".
    fn name(&self, (from, to): (u64, u64)) -> String {
        let with_date = needs_date((self.range.to - self.range.from) as f64);
        let labels = if self.range.labels.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", label_text(&self.range.labels))
        };
        let (service, kind) = (&self.range.service, &self.range.profile_type);
        format!("{service} {kind}{labels} {}–{}", clock(from as f64, with_date), clock(to as f64, false))
    }

    fn profile(&self, (from, to): (u64, u64)) -> RangeProfile {
        RangeProfile {
            range: RangeRef { from, to, ..self.range.clone() },
            window: (self.range.from, self.range.to),
            step_ms: self.step_ms,
        }
    }
}

/// The chart's x (in its own units) of a mouse event.
fn chart_x(svg: NodeRef<html::Div>, plot: &Plot, ev: &web_sys::MouseEvent) -> Option<f64> {
    let rect = svg.get_untracked()?.get_bounding_client_rect();
    (rect.width() > 0.0).then(|| (f64::from(ev.client_x()) - rect.left()) * plot.width / rect.width())
}

/// Fetches a range's merged profile and opens it as a tab; its id. A range already open
/// (and not closed) is not fetched again.
async fn open_range(state: State, shown: &Shown, range: (u64, u64)) -> Option<u32> {
    let profile = shown.profile(range);
    let open = state.range_profiles.with_untracked(|l| {
        l.iter().filter(|(_, p)| p.range == profile.range).map(|&(id, _)| id).find(|id| {
            state.entries.with_untracked(|e| e.iter().any(|x| x.id == *id))
                || state.loading.with_untracked(|l| l.iter().any(|x| x.id == *id))
        })
    });
    if open.is_some() {
        return open;
    }
    let bytes = ranges::merged(&profile.range, state.tenant.get_value().as_deref()).await;
    let id = state.add_bytes(shown.name(range), bytes, false)?;
    state.range_profiles.update(|l| l.push((id, profile)));
    Some(id)
}

/// The bars, the hovered step, the selections and the axes.
fn chart(shown: &Shown, hover: Option<usize>, selections: &[(u64, u64)], dragging: Option<(f64, f64)>) -> AnyView {
    let plot = shown.plot();
    let step = shown.step_ms as f64;
    let bar_width = (plot.x(plot.t0 + step) - plot.x(plot.t0)).max(1.0);
    let bars = shown
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.profiles > 0)
        .map(|(i, p)| {
            let (x, y) = (plot.x(p.t as f64), plot.y(p.value as f64));
            view! {
                <rect
                    class="range-bar"
                    class:hovered=hover == Some(i)
                    data-t=p.t.to_string()
                    data-value=p.value.to_string()
                    x=format!("{x:.1}")
                    y=format!("{y:.1}")
                    width=format!("{:.1}", (bar_width - 1.0).max(1.0))
                    height=format!("{:.1}", (plot.height - plot.bottom - y).max(0.5))
                ></rect>
            }
        })
        .collect_view();
    let band = |from: f64, to: f64, class: &'static str| {
        let (x0, x1) = (plot.x(from.min(to)), plot.x(from.max(to)));
        (x0, format!("{:.1}", (x1 - x0).max(1.0)), class)
    };
    let selected = selections
        .iter()
        .zip(["a", "b"])
        .map(|(&(from, to), slot)| {
            let (x, width, _) = band(from as f64, to as f64, "");
            view! {
                <rect
                    class=format!("range-sel range-sel-{slot}")
                    data-testid="range-selection"
                    data-slot=slot
                    data-from=from.to_string()
                    data-to=to.to_string()
                    x=format!("{x:.1}")
                    y=plot.top
                    width=width
                    height=plot.height - plot.top - plot.bottom
                ></rect>
                <text class="range-sel-name" x=x + 3.0 y=plot.top + 12.0>{slot.to_uppercase()}</text>
            }
        })
        .collect_view();
    let preview = dragging.map(|(a, b)| {
        let (x, width, class) = band(a, b, "range-sel range-drag");
        view! { <rect class=class x=format!("{x:.1}") y=plot.top width=width height=plot.height - plot.top - plot.bottom></rect> }
    });
    let unit = shown.unit.clone();
    view! {
        {y_axis(plot, "range-axis-y", move |v| format_value(v as i64, &unit))}
        {x_axis(plot, "range-axis-x")}
        <g class="range-bars">{bars}</g>
        {selected}
        {preview}
    }
    .into_any()
}

/// The value under the mouse: the hovered step's time, total and profile count.
fn hover_line(shown: &Shown, i: usize) -> Option<impl IntoView> {
    let p = shown.points.get(i)?.clone();
    let with_date = needs_date((shown.range.to - shown.range.from) as f64);
    let when = format!("{}–{}", clock(p.t as f64, with_date), clock((p.t + shown.step_ms) as f64, false));
    let profiles = if p.profiles == 1 { "1 profile".to_owned() } else { format!("{} profiles", p.profiles) };
    Some(view! {
        <p class="range-hover" data-testid="range-hover" data-t=p.t.to_string() data-value=p.value.to_string() data-profiles=p.profiles.to_string()>
            <b>{when}</b> " · " {shown.sample_type.clone()} " " {format_value(p.value, &shown.unit)} " · " {profiles}
        </p>
    })
}

#[component]
pub fn HistoryView() -> impl IntoView {
    let state = expect_context::<State>();
    let tenant = move || state.tenant.get_value();
    let opened = RwSignal::new(false);
    let details_ref = NodeRef::<html::Details>::new();
    let services = RwSignal::new(None::<Result<Vec<SeriesName>, String>>);
    let chosen = RwSignal::new(0usize);
    let window = RwSignal::new(1usize);
    let label = RwSignal::new(String::new());
    let label_values = RwSignal::new(Vec::<(String, usize)>::new());
    let shown = RwSignal::new(None::<Result<Shown, String>>);
    let asked = StoredValue::new(0u64);
    let hover = RwSignal::new(None::<usize>);
    let drag = RwSignal::new(None::<(f64, f64)>);
    let selections = RwSignal::new(Vec::<(u64, u64)>::new());
    let busy = RwSignal::new(false);
    let svg_ref = NodeRef::<html::Div>::new();

    let load_services = move || {
        services.set(None);
        spawn_local(async move { services.set(Some(ranges::services(tenant().as_deref()).await)) });
    };
    // The series, again whenever the services (a refresh), service, window or label change.
    Effect::new(move |_| {
        let Some(Ok(list)) = services.get() else { return };
        let Some(name) = list.get(chosen.get()).cloned() else { return };
        let (_, span, step) = WINDOWS[window.get()];
        let labels: BTreeMap<String, String> =
            label.get().split_once('=').map(|(k, v)| [(k.to_owned(), v.to_owned())].into()).unwrap_or_default();
        let to = (js_sys::Date::now() as u64).div_ceil(step) * step;
        let range = RangeRef {
            service: name.service,
            profile_type: name.profile_type.as_str().to_owned(),
            labels,
            from: to - span,
            to,
        };
        let mine = asked.get_value() + 1;
        asked.set_value(mine);
        shown.set(None);
        hover.set(None);
        drag.set(None);
        spawn_local(async move {
            let tenant = tenant();
            // No line when the window holds no profile: a zero for every step then.
            let zeros =
                || (range.from..range.to).step_by(step as usize).map(|t| SeriesPoint { t, value: 0, profiles: 0 });
            let answer = ranges::series(&range, step, tenant.as_deref()).await.map(|s| Shown {
                points: s.series.into_iter().next().map(|l| l.points).unwrap_or_else(|| zeros().collect()),
                range: range.clone(),
                step_ms: step,
                unit: s.unit,
                sample_type: s.sample_type,
            });
            // Label values of the whole series, not only of the chosen label's profiles.
            let all = RangeRef { labels: BTreeMap::new(), ..range };
            let values = ranges::label_values(&all, tenant.as_deref()).await.unwrap_or_default();
            if asked.get_value() == mine {
                label_values.set(values);
                shown.set(Some(answer));
            }
        });
    });

    let on_toggle = move |_| {
        let open = details_ref.get_untracked().is_some_and(|d| d.open());
        if open && !opened.get_untracked() {
            opened.set(true);
            load_services();
        }
    };

    let current = move || shown.with(|s| s.as_ref().and_then(|r| r.as_ref().ok()).cloned());
    let on_down = move |ev: web_sys::MouseEvent| {
        let Some(s) = current() else { return };
        let plot = s.plot();
        if let Some(x) = chart_x(svg_ref, &plot, &ev) {
            ev.prevent_default();
            let t = plot.t_at(x);
            drag.set(Some((t, t)));
        }
    };
    let on_move = move |ev: web_sys::MouseEvent| {
        let Some(s) = current() else { return };
        let plot = s.plot();
        let Some(x) = chart_x(svg_ref, &plot, &ev) else { return };
        let t = plot.t_at(x);
        hover.set(s.point_at(t));
        if drag.with_untracked(Option::is_some) {
            drag.update(|d| {
                if let Some(d) = d {
                    d.1 = t;
                }
            });
        }
    };
    // A first range, then a second to compare with; a third starts over.
    let select = move |range: (u64, u64)| {
        selections.update(|l| {
            if l.len() >= 2 {
                l.clear();
            }
            l.push(range);
        })
    };
    let on_up = move |_| {
        let Some((a, b)) = drag.get_untracked() else { return };
        drag.set(None);
        let Some(s) = current() else { return };
        let plot = s.plot();
        if (plot.x(a) - plot.x(b)).abs() >= MIN_DRAG {
            select(s.snap(a, b));
        }
    };
    // The keyboard's way: arrows move through the steps, Enter marks where a range
    // starts and then where it ends, Escape lets go.
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let Some(s) = current().filter(|s| !s.points.is_empty()) else { return };
        let last = s.points.len() - 1;
        let at = |i: usize| (s.range.from + i as u64 * s.step_ms) as f64 + s.step_ms as f64 / 2.0;
        let step = match ev.key().as_str() {
            "ArrowLeft" => Some(-1),
            "ArrowRight" => Some(1),
            _ => None,
        };
        if let Some(step) = step {
            ev.prevent_default();
            let i = hover.get_untracked().map_or(last, |i| i.saturating_add_signed(step).min(last));
            hover.set(Some(i));
            drag.update(|d| {
                if let Some(d) = d {
                    d.1 = at(i);
                }
            });
            return;
        }
        match (ev.key().as_str(), drag.get_untracked(), hover.get_untracked()) {
            ("Enter" | " ", None, Some(i)) => drag.set(Some((at(i), at(i)))),
            ("Enter" | " ", Some((a, b)), _) => {
                drag.set(None);
                select(s.snap(a, b));
            }
            ("Escape", Some(_), _) => drag.set(None),
            _ => return,
        }
        ev.prevent_default();
    };

    let close = move || {
        if let Some(d) = details_ref.get_untracked() {
            d.set_open(false);
        }
    };
    let open_first = move |slot: usize| {
        let (Some(s), Some(&range)) = (current(), selections.get_untracked().get(slot)) else { return };
        busy.set(true);
        spawn_local(async move {
            if let Some(id) = open_range(state, &s, range).await {
                state.active.set(Some(id));
                state.view_kind.set(ViewKind::Flame);
                close();
            }
            busy.set(false);
        });
    };
    let compare = move |_| {
        let Some(s) = current() else { return };
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
            close();
        });
    };

    let series_picker = move || {
        let list = services.get()?.ok()?;
        if list.is_empty() {
            return Some(
                view! { <p class="hint" data-testid="range-empty">"No stored profiles yet: captures, uploads with a service and pushes (/ingest) appear here."</p> }
                    .into_any(),
            );
        }
        let options = list
            .iter()
            .enumerate()
            .map(|(i, n)| view! { <option value=i.to_string() selected=move || chosen.get() == i>{format!("{} · {}", n.service, n.profile_type.as_str())}</option> })
            .collect_view();
        Some(
            view! {
                <select aria-label="service and profile type" data-testid="range-series-select" on:change=move |ev| {
                    chosen.set(event_target_value(&ev).parse().unwrap_or(0));
                    label.set(String::new());
                    selections.set(Vec::new());
                }>{options}</select>
            }
            .into_any(),
        )
    };
    let window_picker = move || {
        let options = WINDOWS
            .iter()
            .enumerate()
            .map(|(i, (name, _, _))| view! { <option value=i.to_string() selected=move || window.get() == i>{*name}</option> })
            .collect_view();
        view! {
            <select aria-label="time window" data-testid="range-window" on:change=move |ev| {
                window.set(event_target_value(&ev).parse().unwrap_or(1));
                selections.set(Vec::new());
            }>{options}</select>
        }
    };
    let label_picker = move || {
        let options = label_values
            .get()
            .into_iter()
            .map(|(kv, n)| {
                let value = kv.clone();
                view! { <option value=value.clone() selected=move || label.get() == value>{format!("{kv} ({n})")}</option> }
            })
            .collect_view();
        view! {
            <select aria-label="label" data-testid="range-label-select" on:change=move |ev| label.set(event_target_value(&ev))>
                <option value="" selected=move || label.get().is_empty()>"all labels"</option>
                {options}
            </select>
        }
    };
    let body = move || {
        let s = match shown.get() {
            None => {
                return services
                    .with(|s| matches!(s, Some(Ok(l)) if !l.is_empty()))
                    .then(|| view! { <p class="busy">"loading…"</p> }.into_any())
            }
            Some(Err(e)) => return Some(view! { <p class="error" data-testid="error">{e}</p> }.into_any()),
            Some(Ok(s)) => s,
        };
        let plot = s.plot();
        let chart_s = s.clone();
        let hover_s = s.clone();
        let total: i64 = s.points.iter().map(|p| p.value).sum();
        let profiles: usize = s.points.iter().map(|p| p.profiles).sum();
        Some(
            view! {
                <div class="range-chart" node_ref=svg_ref>
                    <svg
                        data-testid="range-timeline"
                        role="application"
                        tabindex="0"
                        aria-label=format!(
                            "{} per {} s over time: drag to select a range, or arrows and Enter at its start and end",
                            s.sample_type,
                            s.step_ms / 1000
                        )
                        on:keydown=on_key
                        viewBox=plot.view_box()
                        data-from=s.range.from.to_string()
                        data-to=s.range.to.to_string()
                        data-total=total.to_string()
                        data-profiles=profiles.to_string()
                        on:mousedown=on_down
                        on:mousemove=on_move
                        on:mouseup=on_up
                        on:mouseleave=move |ev| {
                            hover.set(None);
                            on_up(ev);
                        }
                    >
                        {move || chart(&chart_s, hover.get(), &selections.get(), drag.get())}
                    </svg>
                </div>
                {move || hover.get().and_then(|i| hover_line(&hover_s, i))}
                {(profiles == 0).then(|| view! { <p class="hint">"No profiles in this window."</p> })}
            }
            .into_any(),
        )
    };
    let chips = move || {
        let s = current()?;
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
                <button data-testid="range-open" disabled=move || busy.get() || selections.with(Vec::is_empty) on:click=move |_| open_first(0)>
                    "Open A"
                </button>
                <button data-testid="range-open-b" disabled=move || busy.get() || selections.with(|l| l.len() < 2) on:click=move |_| open_first(1)>
                    "Open B"
                </button>
                <button data-testid="range-compare" disabled=move || busy.get() || selections.with(|l| l.len() < 2) on:click=compare>
                    "Compare A → B"
                </button>
                <button data-testid="range-clear" disabled=move || selections.with(Vec::is_empty) on:click=move |_| selections.set(Vec::new())>
                    "Clear"
                </button>
                {move || busy.get().then(|| view! { <span class="busy">"fetching…"</span> })}
            </div>
        })
    };
    view! {
        <details class="history-menu" data-testid="history-menu" node_ref=details_ref on:toggle=on_toggle>
            <summary>"Capture history"</summary>
            <div class="history" data-testid="history">
                <div class="range-pickers">
                    {move || match services.get() {
                        None => Some(view! { <span class="busy">"loading…"</span> }.into_any()),
                        Some(Err(e)) => Some(view! { <p class="error" data-testid="error">{e}</p> }.into_any()),
                        Some(Ok(_)) => series_picker(),
                    }}
                    {window_picker}
                    {label_picker}
                    <button data-testid="range-refresh" on:click=move |_| load_services()>"Refresh"</button>
                </div>
                {body}
                {chips}
            </div>
        </details>
    }
}
