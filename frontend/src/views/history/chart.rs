//! The capture history's chart: the series' bars over time with its axes, the step
//! hovered and the ranges selected, chosen by dragging or with the keyboard.

use leptos::html;
use leptos::prelude::*;
use stacklens_core::units::format_value;

use super::shown::{History, Shown};
use crate::views::axes::{clock, needs_date, x_axis, y_axis, Plot};

/// A drag shorter than this (px of the chart) is a click, not a range.
const MIN_DRAG: f64 = 3.0;

/// The chart's x (in its own units) of a mouse event.
fn chart_x(svg: NodeRef<html::Div>, plot: &Plot, ev: &web_sys::MouseEvent) -> Option<f64> {
    let rect = svg.get_untracked()?.get_bounding_client_rect();
    (rect.width() > 0.0).then(|| (f64::from(ev.client_x()) - rect.left()) * plot.width / rect.width())
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

/// A drag starts at the time under the mouse.
fn start_drag(h: History, svg: NodeRef<html::Div>, ev: web_sys::MouseEvent) {
    let Some(s) = h.current() else { return };
    let plot = s.plot();
    if let Some(x) = chart_x(svg, &plot, &ev) {
        ev.prevent_default();
        let t = plot.t_at(x);
        h.drag.set(Some((t, t)));
    }
}

/// The step under the mouse is hovered, and a drag follows it.
fn follow_mouse(h: History, svg: NodeRef<html::Div>, ev: web_sys::MouseEvent) {
    let Some(s) = h.current() else { return };
    let plot = s.plot();
    let Some(x) = chart_x(svg, &plot, &ev) else { return };
    let t = plot.t_at(x);
    h.hover.set(s.point_at(t));
    if h.drag.with_untracked(Option::is_some) {
        h.drag.update(|d| {
            if let Some(d) = d {
                d.1 = t;
            }
        });
    }
}

/// A drag long enough selects its range, snapped to whole steps.
fn end_drag(h: History) {
    let Some((a, b)) = h.drag.get_untracked() else { return };
    h.drag.set(None);
    let Some(s) = h.current() else { return };
    let plot = s.plot();
    if (plot.x(a) - plot.x(b)).abs() >= MIN_DRAG {
        h.select(s.snap(a, b));
    }
}

/// The keyboard's way: arrows move through the steps, Enter marks where a range starts
/// and then where it ends, Escape lets go.
fn on_key(h: History, ev: web_sys::KeyboardEvent) {
    let History { hover, drag, .. } = h;
    let Some(s) = h.current().filter(|s| !s.points.is_empty()) else { return };
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
            h.select(s.snap(a, b));
        }
        ("Escape", Some(_), _) => drag.set(None),
        _ => return,
    }
    ev.prevent_default();
}

/// The chart of the series shown, with the hovered step's line under it; "loading…"
/// or the error meanwhile.
#[component]
pub(super) fn RangeChart(history: History) -> impl IntoView {
    let h = history;
    let History { services, shown, hover, drag, selections, .. } = h;
    let svg_ref = NodeRef::<html::Div>::new();
    move || {
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
                        on:keydown=move |ev| on_key(h, ev)
                        viewBox=plot.view_box()
                        data-from=s.range.from.to_string()
                        data-to=s.range.to.to_string()
                        data-total=total.to_string()
                        data-profiles=profiles.to_string()
                        on:mousedown=move |ev| start_drag(h, svg_ref, ev)
                        on:mousemove=move |ev| follow_mouse(h, svg_ref, ev)
                        on:mouseup=move |_| end_drag(h)
                        on:mouseleave=move |_| {
                            hover.set(None);
                            end_drag(h);
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
    }
}
