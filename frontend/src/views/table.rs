//! Tables: top functions (sortable, filterable, keyboard-navigable) and diff deltas. Values come from core reports; only formatting happens here.

use leptos::prelude::*;
use stacklens_core::analysis::diff::{DiffReport, FunctionDelta};
use stacklens_core::analysis::top::{Inlining, TopReport};
use stacklens_core::units::{format_value_in, percentage, report_unit};

use crate::app::state::{State, ViewKind};
use crate::worker::protocol::{Ask, Request, Response};

/// pprof's "(inline)" or "(partial-inline)" after a function's name, when its row has one.
pub fn inline_mark(inline: Option<Inlining>) -> impl IntoView {
    inline.map(|i| view! { <span class="inline-mark">{format!(" ({})", i.as_str())}</span> })
}

#[derive(Copy, Clone, PartialEq, Eq)]
pub enum SortBy {
    Flat,
    Cum,
    Name,
}

#[component]
pub fn TopTable(
    report: TopReport,
    on_select: Callback<String>,
    on_focus: Callback<String>,
    on_sandwich: Callback<String>,
    selected: RwSignal<usize>,
) -> impl IntoView {
    let sort = RwSignal::new(SortBy::Flat);
    let filter = RwSignal::new(String::new());
    let unit = report_unit(report.functions.iter().map(|f| (f.flat, f.cum)), report.total, &report.unit);
    let total = report.total;
    let sample_unit = report.unit.clone();
    let functions = StoredValue::new(report.functions);
    let rows = move || {
        let needle = filter.get().to_lowercase();
        let mut rows: Vec<_> = functions.with_value(|f| {
            f.iter().filter(|r| needle.is_empty() || r.name.to_lowercase().contains(&needle)).cloned().collect()
        });
        match sort.get() {
            SortBy::Flat => {}
            SortBy::Cum => rows.sort_by(|a, b| b.cum.abs().cmp(&a.cum.abs()).then_with(|| a.name.cmp(&b.name))),
            SortBy::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        rows
    };
    let header = move |label: &'static str, by: SortBy| {
        view! {
            <th class:sorted=move || sort.get() == by on:click=move |_| sort.set(by) data-testid=format!("sort-{label}")>{label}</th>
        }
    };
    view! {
        <div class="table-tools">
            <input
                type="search"
                placeholder="filter functions"
                data-testid="top-filter"
                on:input=move |ev| filter.set(event_target_value(&ev))
            />
        </div>
        <table data-testid="top-table" class="data">
            <thead>
                <tr>
                    {header("flat", SortBy::Flat)}
                    <th>"flat%"</th>
                    {header("cum", SortBy::Cum)}
                    <th>"cum%"</th>
                    {header("name", SortBy::Name)}
                </tr>
            </thead>
            <tbody>
                {move || {
                    let unit = unit.clone();
                    let sample_unit = sample_unit.clone();
                    rows()
                        .into_iter()
                        .enumerate()
                        .map(|(i, f)| {
                            let v = |x: i64| format_value_in(x, &sample_unit, &unit);
                            let name = f.name.clone();
                            let focused = f.name.clone();
                            let sandwich_name = f.name.clone();
                            view! {
                                <tr
                                    data-testid="top-row"
                                    class:selected=move || selected.get() == i
                                    aria-selected=move || (selected.get() == i).to_string()
                                    title="click: details; double-click or Enter: focus the flame graph on it"
                                    on:click=move |_| {
                                        selected.set(i);
                                        on_select.run(name.clone());
                                    }
                                    on:dblclick=move |_| on_focus.run(focused.clone())
                                >
                                    <td data-col="flat" data-value=f.flat.to_string()>{v(f.flat)}</td>
                                    <td>{percentage(f.flat, total)}</td>
                                    <td data-col="cum" data-value=f.cum.to_string()>{v(f.cum)}</td>
                                    <td>{percentage(f.cum, total)}</td>
                                    <td data-col="name" data-value=f.name.clone() data-inline=f.inline.map(|i| i.as_str())>
                                        <button
                                            class="row-action"
                                            title="callers and callees"
                                            data-testid="sandwich-button"
                                            on:click=move |ev| {
                                                ev.stop_propagation();
                                                on_sandwich.run(sandwich_name.clone());
                                            }
                                        >
                                            "⇅"
                                        </button>
                                        {f.name.clone()}
                                        {inline_mark(f.inline)}
                                    </td>
                                </tr>
                            }
                        })
                        .collect_view()
                }}
            </tbody>
        </table>
    }
}

fn delta_rows(list: &[FunctionDelta], unit: &str, shown: &str) -> impl IntoView {
    list.iter()
        .map(|f| {
            let v = |x: i64| format_value_in(x, unit, shown);
            view! {
                <tr data-testid="diff-row">
                    <td data-col="flat" data-value=f.flat_delta.to_string()>{v(f.flat_delta)}</td>
                    <td>{format!("{:+.2}%", f.flat_delta_pct)}</td>
                    <td data-col="cum" data-value=f.cum_delta.to_string()>{v(f.cum_delta)}</td>
                    <td>{format!("{:+.2}%", f.cum_delta_pct)}</td>
                    <td>{v(f.base_flat)} " → " {v(f.compare_flat)}</td>
                    <td data-col="name" data-value=f.name.clone()>{f.name.clone()}</td>
                </tr>
            }
        })
        .collect_view()
}

#[component]
pub fn DiffTable(report: DiffReport) -> impl IntoView {
    let shown =
        report_unit(report.functions.iter().map(|f| (f.flat_delta, f.cum_delta)), report.base_total, &report.unit);
    let unit = report.unit.clone();
    let v = |x: i64| format_value_in(x, &unit, &shown);
    let stack_list = |title: &'static str,
                      testid: &'static str,
                      stacks: &[stacklens_core::analysis::diff::StackDelta],
                      count: usize| {
        let items = stacks
            .iter()
            .take(20)
            .map(|s| view! { <li><b>{v(s.delta)}</b> " " {s.frames.join(" › ")}</li> })
            .collect_view();
        view! {
            <details data-testid=testid>
                <summary>{title} " (" {count} ")"</summary>
                <ul class="stacks">{items}</ul>
            </details>
        }
    };
    view! {
        <p class="summary" data-testid="diff-summary">
            "total " {v(report.base_total)} " → " {v(report.compare_total)} " ("
            <b data-testid="overall-delta">{format!("{:+.2}%", report.overall_delta_pct)}</b> ")"
            {report.normalized.then_some(" · normalized")}
            " · unchanged (±" {v(report.noise_threshold)} "): " {report.unchanged}
        </p>
        <table data-testid="diff-table" class="data">
            <thead>
                <tr><th>"Δ flat"</th><th>"Δ flat%"</th><th>"Δ cum"</th><th>"Δ cum%"</th><th>"self before → after"</th><th>"name"</th></tr>
            </thead>
            <tbody>
                <tr class="group"><td colspan="6">"Regressions (" {report.regressions.len()} ")"</td></tr>
                {delta_rows(&report.regressions, &unit, &shown)}
                <tr class="group"><td colspan="6">"Improvements (" {report.improvements.len()} ")"</td></tr>
                {delta_rows(&report.improvements, &unit, &shown)}
            </tbody>
        </table>
        {stack_list("New stacks", "new-stacks", &report.new_stacks, report.new_stack_count)}
        {stack_list("Removed stacks", "removed-stacks", &report.removed_stacks, report.removed_stack_count)}
    }
}

/// Focuses the flame graph on one function (pprof's `-focus`) and shows it.
pub fn focus_flame(state: State, name: &str) {
    state.focus.set(format!("^{}$", regex::escape(name)));
    State::reset(state.zoom);
    // Beside the table, the flame graph is already in view.
    if !state.with_table.get_untracked() {
        state.view_kind.set(ViewKind::Flame);
    }
}

/// The top view of the active profile: a click selects a function (the details panel),
/// a double click focuses the flame graph on it, ⇅ opens its sandwich.
#[component]
pub fn TopView() -> impl IntoView {
    let state = expect_context::<State>();
    let report = super::report_on_active(
        state,
        move |e| Some(Request::Ask { profile: e.id, query: state.query.get(), ask: Ask::Top }),
        |r| match r {
            Response::Top(t) => Some(t),
            _ => None,
        },
    );
    let on_select = Callback::new(move |name: String| state.select(Some(name)));
    let on_focus = Callback::new(move |name: String| focus_flame(state, &name));
    let on_sandwich = Callback::new(move |name: String| {
        state.select(Some(name));
        State::reset(state.callers_zoom);
        State::reset(state.callees_zoom);
        state.view_kind.set(ViewKind::Sandwich);
    });
    move || {
        super::answered(report, |report| {
            view! { <TopTable report=report on_select=on_select on_focus=on_focus on_sandwich=on_sandwich selected=state.selected_row /> }
                .into_any()
        })
    }
}
