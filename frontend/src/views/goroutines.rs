//! The goroutines view: counts by state, growth against an earlier snapshot, blocked
//! goroutines and grouped stacks, as core's goroutine analysis reports them.

use leptos::prelude::*;
use stacklens_core::analysis::goroutines::{GoroutineComparison, GoroutineGroup, GoroutineReport};
use stacklens_core::ProfileKind;

use crate::app::state::State;
use crate::worker::protocol::{Request, Response};

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

/// The goroutines view of the active profile; another goroutine snapshot loaded
/// earlier is the baseline for growth.
#[component]
pub fn GoroutinesView() -> impl IntoView {
    let state = expect_context::<State>();
    let answer = super::report_on_active(
        state,
        move |e| {
            let earlier = state.entries.with(|l| {
                l.iter().rev().find(|x| x.id < e.id && x.summary.kind == ProfileKind::Goroutine).map(|x| x.id)
            });
            Some(Request::Goroutines { id: e.id, filter: state.goroutine_filter.get(), earlier })
        },
        |r| match r {
            Response::Goroutines(g) => Some(g),
            _ => None,
        },
    );
    view! {
        <input
            type="search"
            placeholder="filter stacks, states, creators"
            aria-label="filter goroutines"
            data-testid="goroutine-filter"
            on:input=move |ev| state.goroutine_filter.set(event_target_value(&ev))
            prop:value=move || state.goroutine_filter.get_untracked()
        />
        {move || super::answered(answer, |(report, growth)| view! { <GoroutineView report=report growth=growth /> }.into_any())}
    }
}
