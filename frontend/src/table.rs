//! Tables: top functions (sortable, filterable, keyboard-navigable), diff deltas and
//! goroutine groups. Values come from core reports; only formatting happens here.

use leptos::prelude::*;
use stacklens_core::analysis::diff::{DiffReport, FunctionDelta};
use stacklens_core::analysis::goroutines::{GoroutineComparison, GoroutineGroup, GoroutineReport};
use stacklens_core::analysis::top::TopReport;
use stacklens_core::units::{format_value_in, percentage, report_unit};

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
                            let sandwich_name = f.name.clone();
                            view! {
                                <tr
                                    data-testid="top-row"
                                    class:selected=move || selected.get() == i
                                    aria-selected=move || (selected.get() == i).to_string()
                                    on:click=move |_| {
                                        selected.set(i);
                                        on_select.run(name.clone());
                                    }
                                >
                                    <td data-col="flat" data-value=f.flat.to_string()>{v(f.flat)}</td>
                                    <td>{percentage(f.flat, total)}</td>
                                    <td data-col="cum" data-value=f.cum.to_string()>{v(f.cum)}</td>
                                    <td>{percentage(f.cum, total)}</td>
                                    <td data-col="name" data-value=f.name.clone()>
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

fn group_view(g: &GoroutineGroup, extra: Option<String>) -> impl IntoView {
    let frames = g
        .frames
        .iter()
        .zip(&g.locations)
        .map(|(f, at)| view! { <li>{f.clone()} <span class="at">{at.clone()}</span></li> })
        .collect_view();
    let wait = g.max_wait_minutes.map(|m| format!(", up to {m} min"));
    view! {
        <div class="group-card" data-testid="goroutine-group">
            <div class="group-head">
                <b>{g.count}</b> " × [" {g.state.clone()} {wait} "]" {extra}
                {g.created_by.clone().map(|c| view! { <span class="created">" created by " {c}</span> })}
            </div>
            <ol class="frames">{frames}</ol>
        </div>
    }
}

#[component]
pub fn GoroutineView(report: GoroutineReport, growth: Option<GoroutineComparison>) -> impl IntoView {
    let mut states: Vec<(String, u64)> = report.by_state.clone().into_iter().collect();
    states.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let state_rows = states.into_iter().map(|(s, n)| view! { <tr><td>{n}</td><td>{s}</td></tr> }).collect_view();
    let growth_view = growth.map(|c| {
        let rate = c.goroutine_growth_rate.map_or("n/a".to_owned(), |r| format!("{r:.2}×"));
        let new_groups = c.new_stacks.iter().take(50).map(|g| group_view(g, Some(" new".to_owned()))).collect_view();
        let grown = c.grown_stacks.iter().take(50).map(|g| group_view(&g.group, Some(format!(" +{} (from {})", g.delta, g.base_count)))).collect_view();
        view! {
            <section data-testid="goroutine-growth">
                <h3>"Growth: " {c.base_count} " → " {c.compare_count} " (" <b data-testid="growth-count">{format!("{:+}", c.growth_count)}</b> ", " {rate} ")"</h3>
                <h4>"Grown stacks (" {c.grown_stacks.len()} ")"</h4>
                {grown}
                <h4>"New stacks (" {c.new_stacks.len()} ")"</h4>
                {new_groups}
            </section>
        }
    });
    let groups = report.top_stacks.iter().map(|g| group_view(g, None)).collect_view();
    let blocked = report.blocked_goroutines.iter().take(50).map(|g| group_view(g, None)).collect_view();
    view! {
        <section class="goroutines">
            <h3>"Goroutines: " <span data-testid="goroutine-count">{report.goroutine_count}</span>
                " · blocked " <span data-testid="blocked-count">{report.blocked_count}</span>
                {report.states_inferred.then_some(" (states inferred from frames)")}
            </h3>
            <table class="data states" data-testid="goroutine-states"><tbody>{state_rows}</tbody></table>
            {growth_view}
            <details data-testid="blocked-goroutines">
                <summary>"Blocked (" {report.blocked_count} " in " {report.blocked_goroutines.len()} " groups: chan, select, locks, I/O, sleep)"</summary>
                {blocked}
            </details>
            <h4>"Stacks (" {report.group_count} " groups)"</h4>
            {groups}
        </section>
    }
}
