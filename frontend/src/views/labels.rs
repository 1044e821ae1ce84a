//! The labels view (pprof's tags): every label key with its values and their shares of
//! the sample type. A value can be focused on or ignored (pprof's `-tagfocus` and
//! `-tagignore`, applied to every view), and a key can group the flame graph
//! (`-tagroot`).

use leptos::prelude::*;
use stacklens_core::analysis::labels::{LabelKeySummary, LabelSummary};
use stacklens_core::units::{format_value, percentage};

use crate::app::state::{State, ViewKind};
use crate::worker::protocol::{Ask, Request, Response};

/// A tag filter matching exactly `value` of `key`.
fn exactly(key: &str, value: &str) -> String {
    format!("{key}=^{}$", regex::escape(value))
}

fn key_view(state: State, key: LabelKeySummary, unit: String) -> impl IntoView {
    let name = key.key.clone();
    let key_total = key.total;
    let rows = key
        .values
        .into_iter()
        .map(|v| {
            let filter = exactly(&name, &v.value);
            let ignore = filter.clone();
            // Of the key's total, as pprof's -tags shows it; the profile's share beside it.
            let share = percentage(v.total, key_total);
            view! {
                <tr data-testid="label-value" data-key=name.clone() data-value=v.value.clone() data-share=share.trim().trim_end_matches('%').to_owned()>
                    <td>{format_value(v.total, &unit)}</td>
                    <td>{share.clone()}</td>
                    <td class="hint" title="of the whole profile">{format!("{:.2}% of all", v.total_pct)}</td>
                    <td>
                        <button class="row-action" title="show only these samples (tagfocus)" data-testid="label-focus" on:click=move |_| state.tag_focus.set(filter.clone())>
                            "focus"
                        </button>
                        <button class="row-action" title="leave these samples out (tagignore)" data-testid="label-ignore" on:click=move |_| state.tag_ignore.set(ignore.clone())>
                            "ignore"
                        </button>
                    </td>
                    <td>{v.value.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    let group = name.clone();
    view! {
        <section class="label-key" data-testid="label-key" data-key=name.clone()>
            <h4>
                {name.clone()}
                <button
                    class="row-action"
                    data-testid="label-group"
                    title="put this label at the root of the flame graph (tagroot)"
                    on:click=move |_| {
                        state.tag_root.set(vec![group.clone()]);
                        state.view_kind.set(ViewKind::Flame);
                    }
                >
                    " group the flame graph by it"
                </button>
            </h4>
            <table class="data">{rows}</table>
            {(key.missing != 0).then(|| view! { <p class="hint">{format!("{:.2}% of the samples have no {name}", key.missing_pct)}</p> })}
        </section>
    }
}

fn summary_view(state: State, summary: LabelSummary) -> AnyView {
    if summary.keys.is_empty() {
        return view! { <p class="hint" data-testid="no-labels">"This profile's samples carry no labels."</p> }
            .into_any();
    }
    let unit = summary.unit.clone();
    summary.keys.into_iter().map(|k| key_view(state, k, unit.clone())).collect_view().into_any()
}

#[component]
pub fn LabelsView() -> impl IntoView {
    let state = expect_context::<State>();
    let answer = super::report_on_active(
        state,
        move |e| Some(Request::Ask { profile: e.id, query: state.query.get(), ask: Ask::Labels }),
        |r| match r {
            Response::Labels(l) => Some(l),
            _ => None,
        },
    );
    view! {
        <div class="label-panel" data-testid="label-panel">
            {move || super::answered(answer, move |summary| summary_view(state, summary))}
        </div>
    }
}
