//! A function's trend over time, opened from the details panel when the active profile
//! was merged from a time range: the server's self and total share of the function per
//! step over the timeline's window.

use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::api::FunctionHistory;

use super::axes::{clock, needs_date, nice_ceiling, x_axis, y_axis, Plot};
use crate::app::ranges::{self, RangeRef};
use crate::app::state::State;

fn chart(h: &FunctionHistory, step_ms: u64) -> AnyView {
    let (t0, t1) = (h.points.first().map_or(0, |p| p.t), h.points.last().map_or(1, |p| p.t + step_ms));
    let max = h.points.iter().map(|p| p.cum_share_pct).fold(0.0, f64::max);
    let plot = Plot {
        width: 320.0,
        height: 150.0,
        left: 40.0,
        right: 8.0,
        top: 8.0,
        bottom: 22.0,
        t0: t0 as f64,
        t1: t1 as f64,
        max: nice_ceiling(max).min(100.0),
    };
    let mid = |t: u64| plot.x((t + step_ms / 2) as f64);
    let with_data = || h.points.iter().filter(|p| p.profiles > 0);
    let line = |share: fn(&stacklens_core::api::FunctionPoint) -> f64| {
        with_data().map(|p| format!("{:.1},{:.1}", mid(p.t), plot.y(share(p)))).collect::<Vec<_>>().join(" ")
    };
    let with_date = needs_date(plot.t1 - plot.t0);
    let dots = h
        .points
        .iter()
        .map(|p| {
            let title = format!(
                "{}: self {:.2}%, total {:.2}% ({} profiles)",
                clock(p.t as f64, with_date),
                p.self_share_pct,
                p.cum_share_pct,
                p.profiles
            );
            view! {
                <circle
                    data-testid="trend-point"
                    class:empty=p.profiles == 0
                    cx=format!("{:.1}", mid(p.t))
                    cy=format!("{:.1}", plot.y(p.self_share_pct))
                    r=if p.profiles == 0 { "1" } else { "2.5" }
                    data-t=p.t.to_string()
                    data-self=p.flat.to_string()
                    data-cum=p.cum.to_string()
                    data-self-pct=p.self_share_pct.to_string()
                    data-profiles=p.profiles.to_string()
                >
                    <title>{title}</title>
                </circle>
            }
        })
        .collect_view();
    view! {
        <svg class="function-trend" data-testid="function-trend" role="img" viewBox=plot.view_box()
            aria-label=format!("{}: self and total share per {} s", h.function, h.step_seconds)>
            {y_axis(plot, "trend-axis-y", |v| format!("{v:.0}%"))}
            {x_axis(plot, "trend-axis-x")}
            <polyline class="cum" points=line(|p| p.cum_share_pct)></polyline>
            <polyline class="self" points=line(|p| p.self_share_pct)></polyline>
            {dots}
        </svg>
        <p class="hint">"self share (solid, dots) and total share (dashed) of " {h.sample_type.clone()} " per step"</p>
    }
    .into_any()
}

/// The "trend over time" button and, once asked, the chart.
#[component]
pub fn FunctionTrend(name: String) -> impl IntoView {
    let state = expect_context::<State>();
    let answer = RwSignal::new(None::<Result<(FunctionHistory, u64), String>>);
    let asked = RwSignal::new(false);
    let source = Memo::new(move |_| {
        let id = state.active.get()?;
        state.range_profiles.with(|l| l.iter().find(|(i, _)| *i == id).map(|(_, p)| p.clone()))
    });
    let name = StoredValue::new(name);
    let ask = move |_| {
        let Some(p) = source.get_untracked() else { return };
        asked.set(true);
        answer.set(None);
        spawn_local(async move {
            let window = RangeRef { from: p.window.0, to: p.window.1, ..p.range };
            let tenant = state.tenant.get_value();
            let found = ranges::function_history(&name.get_value(), &window, p.step_ms, tenant.as_deref()).await;
            answer.try_set(Some(found.map(|h| (h, p.step_ms))));
        });
    };
    move || {
        source.get()?;
        Some(view! {
            <button data-testid="details-trend" title="this function's share in each step of the timeline's window" on:click=ask>
                "trend over time"
            </button>
            {move || asked.get().then(|| match answer.get() {
                None => view! { <p class="busy">"fetching…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" data-testid="error">{e}</p> }.into_any(),
                Some(Ok((h, step))) => chart(&h, step),
            })}
        })
    }
}
