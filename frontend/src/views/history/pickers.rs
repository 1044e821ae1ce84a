//! The capture history's pickers: the series (service and profile type), the time
//! window and the label, and the button that fetches the series again.

use leptos::prelude::*;

use super::fetch::load_services;
use super::shown::{History, WINDOWS};

/// The row of pickers above the chart.
#[component]
pub(super) fn RangePickers(history: History) -> impl IntoView {
    let h = history;
    let services = h.services;
    view! {
        <div class="range-pickers">
            {move || match services.get() {
                None => Some(view! { <span class="busy">"loading…"</span> }.into_any()),
                Some(Err(e)) => Some(view! { <p class="error" data-testid="error">{e}</p> }.into_any()),
                Some(Ok(_)) => series_picker(h),
            }}
            {window_picker(h)}
            {label_picker(h)}
            <button data-testid="range-refresh" on:click=move |_| load_services(h)>"Refresh"</button>
        </div>
    }
}

/// The stored series to choose from, or a hint when there is none yet.
fn series_picker(h: History) -> Option<AnyView> {
    let History { services, chosen, label, selections, .. } = h;
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
}

/// The windows of [`WINDOWS`] to choose from.
fn window_picker(h: History) -> impl Fn() -> AnyView {
    let History { window, selections, .. } = h;
    move || {
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
        .into_any()
    }
}

/// The series' label values (with their profile counts) to choose from, or all.
fn label_picker(h: History) -> impl Fn() -> AnyView {
    let label = h.label;
    move || {
        let options = h
            .label_values
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
        .into_any()
    }
}
