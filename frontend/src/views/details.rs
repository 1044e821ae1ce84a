//! The details panel beside every view, for the selected function: its self and total
//! in every sample type, its callers and callees with their shares (a click selects
//! one), where it lives, the labels on its samples, and the transforms that apply to it.

use leptos::prelude::*;
use stacklens_core::analysis::details::{CallWeight, FunctionDetails};
use stacklens_core::analysis::summary::package_of;
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::units::{format_value, percentage};

use super::trend::FunctionTrend;
use crate::app::state::{State, ViewKind};
use crate::worker::protocol::{Ask, Request, Response};

fn calls(
    state: State,
    title: &'static str,
    testid: &'static str,
    list: Vec<CallWeight>,
    unit: String,
) -> impl IntoView {
    let rows = list
        .into_iter()
        .map(|c| {
            let name = c.name.clone();
            view! {
                <li data-testid=testid data-name=c.name.clone() data-value=c.value.to_string()>
                    <button class="link" title="select it" on:click=move |_| state.select(Some(name.clone()))>
                        {c.name.clone()}
                    </button>
                    " " {format_value(c.value, &unit)} " (" {format!("{:.1}%", c.share * 100.0)} ")"
                    <span class="share-bar" style=format!("width:{:.0}%", (c.share * 100.0).clamp(0.0, 100.0))></span>
                </li>
            }
        })
        .collect_view();
    view! {
        <h4>{title}</h4>
        <ul class="calls">{rows}</ul>
    }
}

/// The transforms the panel offers for `name` (Firefox Profiler's context menu).
fn transform_buttons(state: State, name: &str) -> impl IntoView {
    let package = package_of(name);
    let mut offered = vec![
        (
            "merge",
            "remove it from stacks: its self time goes to its callers",
            Transform::MergeFunction { name: name.to_owned() },
        ),
        ("drop samples", "drop every sample whose stack has it", Transform::DropFunction { name: name.to_owned() }),
        (
            "collapse recursion (r)",
            "a run of it calling itself becomes one frame",
            Transform::CollapseRecursion { name: name.to_owned() },
        ),
    ];
    if !package.is_empty() {
        offered.push((
            "collapse package",
            "the package's frames in a row become one frame",
            Transform::CollapsePackage { prefix: package.to_owned() },
        ));
    }
    offered
        .into_iter()
        .map(|(label, title, transform)| {
            let testid = format!("transform-{}", label.split(' ').next().unwrap_or(label));
            view! {
                <button data-testid=testid title=title on:click=move |_| state.apply(transform.clone())>{label}</button>
            }
        })
        .collect_view()
}

fn details_view(state: State, d: FunctionDetails) -> AnyView {
    let values = d
        .values
        .iter()
        .map(|v| {
            view! {
                <tr data-testid="details-value" data-type=v.sample_type.clone() data-flat=v.flat.to_string() data-cum=v.cum.to_string()>
                    <td>{v.sample_type.clone()}</td>
                    <td>{format_value(v.flat, &v.unit)} " " <span class="hint">{percentage(v.flat, v.total).trim().to_owned()}</span></td>
                    <td>{format_value(v.cum, &v.unit)} " " <span class="hint">{percentage(v.cum, v.total).trim().to_owned()}</span></td>
                </tr>
            }
        })
        .collect_view();
    let files = d
        .files
        .iter()
        .map(|f| {
            let lines = if f.first_line == f.last_line {
                format!(":{}", f.first_line)
            } else {
                format!(":{}–{}", f.first_line, f.last_line)
            };
            view! { <li data-testid="details-file">{f.file.clone()}{lines}</li> }
        })
        .collect_view();
    let mappings = d
        .mappings
        .iter()
        .map(|m| view! { <li data-testid="details-mapping">{m.file.clone()} {(!m.build_id.is_empty()).then(|| format!(" ({})", m.build_id))}</li> })
        .collect_view();
    let labels = d
        .labels
        .iter()
        .map(|k| {
            let top: Vec<String> =
                k.values.iter().take(5).map(|v| format!("{} {:.1}%", v.value, v.total_pct)).collect();
            view! { <li data-testid="details-label" data-key=k.key.clone()><b>{k.key.clone()}</b> ": " {top.join(", ")}</li> }
        })
        .collect_view();
    let unit = d.unit.clone();
    view! {
        <table class="data compact">
            <thead><tr><th>"sample type"</th><th>"self"</th><th>"total"</th></tr></thead>
            <tbody>{values}</tbody>
        </table>
        {calls(state, "Callers", "details-caller", d.callers, unit.clone())}
        {calls(state, "Callees", "details-callee", d.callees, unit)}
        <h4>"Source and binary"</h4>
        <ul>{files}{mappings}</ul>
        {(!d.labels.is_empty()).then(|| view! { <h4>"Labels on its samples"</h4><ul>{labels}</ul> })}
    }
    .into_any()
}

#[component]
pub fn DetailsPanel() -> impl IntoView {
    let state = expect_context::<State>();
    let answer = super::report_on_active(
        state,
        move |e| {
            let function = state.selected_fn.get()?;
            Some(Request::Ask { profile: e.id, query: state.query.get(), ask: Ask::Details { function } })
        },
        |r| match r {
            Response::Details(d) => Some(d),
            _ => None,
        },
    );
    let open_view = move |kind: ViewKind| {
        State::reset(state.callers_zoom);
        State::reset(state.callees_zoom);
        state.view_kind.set(kind);
    };
    move || {
        let name = state.selected_fn.get()?;
        Some(view! {
            <aside class="details-panel" data-testid="details-panel" aria-label="details of the selected function">
                <header>
                    <h3 data-testid="details-name">{name.clone()}</h3>
                    <button class="dismiss" aria-label="close the details" data-testid="details-close" on:click=move |_| state.select(None)>"×"</button>
                </header>
                <div class="details-actions">
                    <button data-testid="details-sandwich" on:click=move |_| open_view(ViewKind::Sandwich)>"callers & callees"</button>
                    <button data-testid="details-source" on:click=move |_| open_view(ViewKind::Source)>"lines"</button>
                    {transform_buttons(state, &name)}
                </div>
                <FunctionTrend name=name.clone() />
                {move || super::answered(answer, move |d| details_view(state, d))}
            </aside>
        })
    }
}
