//! The history view: a service's captures over time, one small trend chart per profile
//! type (the profile's total per capture), with links to each captured profile.

use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::units::format_value;
use stacklens_core::ProfileKind;

use stacklens_core::api::HistoryPoint;

use crate::app::share;

const WIDTH: f64 = 360.0;
const HEIGHT: f64 = 90.0;

/// Milliseconds since the epoch of an RFC 3339 time.
fn millis(rfc3339: &str) -> f64 {
    js_sys::Date::parse(rfc3339)
}

/// An SVG polyline of totals over time.
fn trend(points: &[HistoryPoint]) -> impl IntoView {
    let values: Vec<(f64, f64)> =
        points.iter().filter_map(|p| p.total.map(|t| (millis(&p.started_at), t as f64))).collect();
    let (t0, t1) = values.iter().fold((f64::MAX, f64::MIN), |(a, b), &(t, _)| (a.min(t), b.max(t)));
    let top = values.iter().map(|v| v.1).fold(0.0, f64::max).max(1.0);
    let x = move |t: f64| if t1 > t0 { 4.0 + (t - t0) / (t1 - t0) * (WIDTH - 8.0) } else { WIDTH / 2.0 };
    let y = move |v: f64| HEIGHT - 4.0 - v / top * (HEIGHT - 8.0);
    let line = values.iter().map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v))).collect::<Vec<_>>().join(" ");
    let dots = values
        .iter()
        .map(|&(t, v)| view! { <circle cx=format!("{:.1}", x(t)) cy=format!("{:.1}", y(v)) r="2.5" data-testid="trend-point"></circle> })
        .collect_view();
    view! {
        <svg class="trend" width=WIDTH height=HEIGHT viewBox=format!("0 0 {WIDTH} {HEIGHT}") data-testid="trend-chart">
            <polyline points=line fill="none" stroke="#c4571b" stroke-width="1.5"></polyline>
            {dots}
        </svg>
    }
}

#[component]
pub fn HistoryView(tenant: Option<String>) -> impl IntoView {
    let tenant = StoredValue::new(tenant);
    let service = RwSignal::new(String::new());
    let charts = RwSignal::new(None::<Result<Vec<(String, Vec<HistoryPoint>)>, String>>);
    let load = move || {
        let name = service.get_untracked().trim().to_owned();
        if name.is_empty() {
            return;
        }
        let tenant = tenant.get_value();
        charts.set(None);
        spawn_local(async move {
            let mut found = Vec::new();
            for kind in ProfileKind::CAPTURED.iter().map(|k| k.as_str()) {
                match share::history(&name, kind, tenant.as_deref()).await {
                    Ok(points) if !points.is_empty() => found.push((kind.to_owned(), points)),
                    Ok(_) => {}
                    Err(e) => return charts.set(Some(Err(e))),
                }
            }
            charts.set(Some(Ok(found)));
        });
    };
    let body = move || {
        charts.get().map(|result| match result {
            Err(e) => view! { <p class="error" data-testid="error">{e}</p> }.into_any(),
            Ok(found) if found.is_empty() => {
                view! { <p class="hint">"No captures of this service yet."</p> }.into_any()
            }
            Ok(found) => found
                .into_iter()
                .map(|(kind, points)| {
                    let rows = points
                        .iter()
                        .rev()
                        .map(|p| {
                            let total = match (p.total, &p.unit) {
                                (Some(t), Some(u)) => format_value(t, u),
                                _ => String::new(),
                            };
                            let hottest =
                                p.top_functions.first().map(|f| format!("{} ({:.1}%)", f.func_name, f.self_pct));
                            let link = p
                                .session_id
                                .clone()
                                .map(|s| view! { <a href=format!("/#/s/{s}") target="_blank">"open"</a> });
                            view! {
                                <tr data-testid="history-row">
                                    <td>{p.started_at.clone()}</td>
                                    <td>{p.status.clone()}</td>
                                    <td>{total}</td>
                                    <td>{hottest}</td>
                                    <td>{link}</td>
                                </tr>
                            }
                        })
                        .collect_view();
                    view! {
                        <section class="history-type" data-testid="history-type" data-type=kind.clone()>
                            <h4>{kind.clone()} " — " {points.len()} " captures"</h4>
                            {trend(&points)}
                            <table class="data">{rows}</table>
                        </section>
                    }
                })
                .collect_view()
                .into_any(),
        })
    };
    view! {
        <div class="history" data-testid="history">
            <input
                placeholder="service"
                data-testid="history-service"
                on:input=move |ev| service.set(event_target_value(&ev))
                on:keydown=move |ev: web_sys::KeyboardEvent| if ev.key() == "Enter" { load() }
            />
            <button data-testid="history-load" on:click=move |_| load()>"Show history"</button>
            {body}
        </div>
    }
}
