//! The page's bars: loaded profiles as tabs, parses in progress, errors, and the
//! toolbar (views, sample type, search, filters, share and download).

use leptos::prelude::*;
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::units::format_value;

use super::download::{Current, DownloadMenu};
use super::share_panel::SharePanel;
use super::state::{State, ViewKind};

#[component]
pub fn Tabs() -> impl IntoView {
    let state = expect_context::<State>();
    let tab = move |id: u32, name: String, default_sample: usize| {
        view! {
            <span class="tab" class:active=move || state.active.get() == Some(id) data-testid="profile-tab">
                <button
                    class="tab-name"
                    on:click=move |_| {
                        state.active.set(Some(id));
                        State::reset(state.zoom);
                        state.sample_index.set(default_sample);
                    }
                >
                    {name.clone()}
                </button>
                <button class="tab-close" title="remove" aria-label=format!("close {name}") on:click=move |_| state.remove(id)>
                    "×"
                </button>
            </span>
        }
    };
    view! {
        <nav class="tabs">
            {move || {
                state
                    .entries
                    .get()
                    .into_iter()
                    .map(|e| tab(e.id, e.name, e.summary.default_sample))
                    .collect_view()
            }}
        </nav>
    }
}

#[component]
pub fn Progress() -> impl IntoView {
    let state = expect_context::<State>();
    move || {
        state
            .loading
            .get()
            .into_iter()
            .map(|l| {
                let id = l.id;
                view! {
                    <div class="loading" data-testid="loading">
                        <span>{l.name} " — " {l.stage}</span>
                        <progress max="1" value=l.fraction.to_string()></progress>
                        <button
                            data-testid="cancel-parse"
                            on:click=move |_| {
                                state.loading.update(|list| list.retain(|x| x.id != id));
                                state.client.with_value(|c| c.cancel(id));
                            }
                        >
                            "Cancel"
                        </button>
                    </div>
                }
            })
            .collect_view()
    }
}

#[component]
pub fn Errors() -> impl IntoView {
    let state = expect_context::<State>();
    let dismiss = move |i: usize| {
        state.errors.update(|l| {
            l.remove(i);
        })
    };
    view! {
        <div class="errors">
            {move || {
                state
                    .errors
                    .get()
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        view! {
                            <p class="error" data-testid="error" role="alert">
                                {e}
                                <button class="dismiss" aria-label="dismiss" on:click=move |_| dismiss(i)>"×"</button>
                            </p>
                        }
                    })
                    .collect_view()
            }}
        </div>
    }
}

/// A transform as its chip says it.
fn describe(transform: &Transform) -> String {
    match transform {
        Transform::MergeFunction { name } => format!("merged {name}"),
        Transform::CollapseRecursion { name } => format!("recursion collapsed: {name}"),
        Transform::CollapsePackage { prefix } => format!("package collapsed: {prefix}"),
        Transform::DropFunction { name } => format!("dropped samples with {name}"),
        Transform::FocusSubtree { path } => format!("subtree: {}", path.join(" › ")),
        Transform::Invert => "inverted".to_owned(),
    }
}

/// The stack transforms in effect, in order; × removes one.
#[component]
fn TransformChips() -> impl IntoView {
    let state = expect_context::<State>();
    move || {
        state
            .transforms
            .get()
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let text = describe(&t);
                view! {
                    <span class="chip transform" data-testid="transform-chip" data-transform=t.to_string()>
                        {text.clone()}
                        <button
                            aria-label=format!("remove the transform: {text}")
                            on:click=move |_| {
                                state.transforms.update(|list| {
                                    list.remove(i);
                                });
                                State::reset(state.zoom);
                            }
                        >
                            "×"
                        </button>
                    </span>
                }
            })
            .collect_view()
    }
}

fn sample_select(state: State) -> impl IntoView {
    move || {
        state.current.get().map(|e| {
            let options = e
                .summary
                .sample_types
                .iter()
                .enumerate()
                .map(|(i, n)| view! { <option value=i.to_string()>{n.clone()}</option> })
                .collect_view();
            view! {
                <label>
                    "sample "
                    <select
                        data-testid="sample-type"
                        on:change=move |ev| {
                            state.sample_index.set(event_target_value(&ev).parse().unwrap_or(0));
                            State::reset(state.zoom);
                        }
                        prop:value=move || state.sample_index.get().to_string()
                    >
                        {options}
                    </select>
                </label>
            }
        })
    }
}

#[component]
pub fn Toolbar() -> impl IntoView {
    let state = expect_context::<State>();
    let views = ViewKind::ALL
        .iter()
        .map(|&(k, label)| {
            view! {
                <button
                    class:active=move || state.view_kind.get() == k
                    data-testid=format!("view-{}", k.key())
                    on:click=move |_| state.view_kind.set(k)
                >
                    {label}
                </button>
            }
        })
        .collect_view();
    let filters = [
        ("focus regex", "focus", state.focus),
        ("ignore regex", "ignore", state.ignore),
        ("hide regex", "hide", state.hide),
        ("tagfocus (key=regex)", "tagfocus", state.tag_focus),
        ("tagignore (key=regex)", "tagignore", state.tag_ignore),
    ]
    .into_iter()
    .map(|(placeholder, testid, value)| {
        view! {
            <input
                placeholder=placeholder
                aria-label=placeholder
                data-testid=testid
                on:change=move |ev| value.set(event_target_value(&ev))
                prop:value=move || value.get()
            />
        }
    })
    .collect_view();
    let download_current = Signal::derive(move || {
        state.current.get().map(|e| Current { id: e.id, name: e.name, query: state.query.get() })
    });
    view! {
        <div class="toolbar">
            <nav class="views">{views}</nav>
            {sample_select(state)}
            <input
                type="search"
                placeholder="search (/)"
                aria-label="search frames"
                data-testid="search"
                on:input=move |ev| state.search.set(event_target_value(&ev))
                prop:value=move || state.search.get()
            />
            <label title="bottom-up: the leaves are the roots">
                <input
                    type="checkbox"
                    data-testid="invert"
                    prop:checked=move || state.transforms.with(|t| t.contains(&Transform::Invert))
                    on:change=move |ev| {
                        if event_target_checked(&ev) {
                            state.apply(Transform::Invert);
                        } else {
                            state.transforms.update(|t| t.retain(|x| *x != Transform::Invert));
                            State::reset(state.zoom);
                        }
                    }
                />
                " invert"
            </label>
            <label>
                <input type="checkbox" data-testid="icicle" on:change=move |ev| state.icicle.set(event_target_checked(&ev)) />
                " icicle"
            </label>
            <SharePanel />
            <DownloadMenu client=state.client current=download_current on_error=Callback::new(move |e| state.report(e)) />
        </div>
        <div class="filters">
            {filters}
            {move || {
                state
                    .tag_root
                    .get()
                    .into_iter()
                    .map(|key| {
                        view! {
                            <span class="chip" data-testid="tagroot-chip">
                                "grouped by " {key.clone()}
                                <button aria-label=format!("stop grouping by {key}") on:click=move |_| state.tag_root.set(Vec::new())>"×"</button>
                            </span>
                        }
                    })
                    .collect_view()
            }}
            <RangeChip />
            <TransformChips />
        </div>
    }
}

/// The time range chosen in the Time order view, which every view reads; × clears it.
#[component]
fn RangeChip() -> impl IntoView {
    let state = expect_context::<State>();
    let time = |ns: i64| format_value(ns, "nanoseconds");
    move || {
        state.range.get().map(|(from, to)| {
            view! {
                <span class="chip" data-testid="range-chip" title="only the samples that start in this time range">
                    "time " {time(from)} " – " {time(to)} " (" {time(to - from)} ")"
                    <button aria-label="clear the time range" on:click=move |_| state.range.set(None)>"×"</button>
                </span>
            }
        })
    }
}
