//! The page: loaded profiles as tabs, and the views over the active one. Parsing and
//! analysis run in the analysis worker (`client`); this module only keeps view state,
//! asks for reports and renders them.

use std::rc::Rc;
use std::sync::Arc;

use leptos::ev;
use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::analysis::diff::DiffReport;
use stacklens_core::analysis::goroutines::{GoroutineComparison, GoroutineReport};
use stacklens_core::analysis::top::TopReport;
use stacklens_core::analysis::tree::{CallTree, Side};
use stacklens_core::analysis::Filters;
use web_sys::{DragEvent, HtmlInputElement};

use crate::client::Client;
use crate::download::{Current, DownloadMenu};
use crate::flame::{FlameGraph, FlameSettings};
use crate::protocol::{Request, Response, Summary, TreeKey, TreeKind};
use crate::table::{DiffTable, GoroutineView, TopTable};
use crate::{share, url_state, FlameData, SharedTree};

/// A parsed profile, as the page knows it.
#[derive(Clone, PartialEq)]
struct Entry {
    id: u32,
    name: String,
    summary: Summary,
}

/// A profile being parsed.
#[derive(Clone, PartialEq)]
struct Loading {
    id: u32,
    name: String,
    stage: String,
    fraction: f64,
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum ViewKind {
    Flame,
    Top,
    Diff,
    Goroutines,
    Sandwich,
}

impl ViewKind {
    const ALL: [(ViewKind, &'static str); 5] = [
        (ViewKind::Flame, "Flame graph"),
        (ViewKind::Top, "Top"),
        (ViewKind::Sandwich, "Sandwich"),
        (ViewKind::Diff, "Diff"),
        (ViewKind::Goroutines, "Goroutines"),
    ];

    fn key(self) -> &'static str {
        match self {
            ViewKind::Flame => "flame",
            ViewKind::Top => "top",
            ViewKind::Diff => "diff",
            ViewKind::Goroutines => "goroutines",
            ViewKind::Sandwich => "sandwich",
        }
    }

    fn from_key(key: &str) -> Option<Self> {
        Self::ALL.iter().map(|&(k, _)| k).find(|k| k.key() == key)
    }
}

type Answer<T> = RwSignal<Option<Result<T, String>>>;

/// Asks the worker and stores the answer in `target`, unless a newer question was
/// asked meanwhile (`token` counts questions per target).
fn ask<T: Send + Sync + 'static>(
    client: &Rc<Client>,
    token: StoredValue<u64>,
    target: Answer<T>,
    request: Request,
    decode: impl FnOnce(Response, Option<Vec<u8>>) -> Option<Result<T, String>> + 'static,
) {
    let mine = token.get_value() + 1;
    token.set_value(mine);
    client.request(request, move |response, bytes| {
        if token.get_value() == mine {
            target.set(decode(response, bytes));
        }
    });
}

fn decode_tree(response: Response, bytes: Option<Vec<u8>>) -> Option<Result<FlameData, String>> {
    match response {
        Response::Tree(Ok(meta)) => Some(
            bytes
                .and_then(|b| CallTree::from_bytes(&b))
                .map(|t| FlameData { tree: SharedTree(Arc::new(t)), zoom: meta.zoom, matched: meta.matched })
                .ok_or_else(|| "the worker sent an unreadable tree".to_owned()),
        ),
        Response::Tree(Err(e)) => Some(Err(e)),
        _ => None,
    }
}

/// Reads a browser file and hands its bytes to `done`.
fn read_file(file: web_sys::File, done: impl FnOnce(String, Result<Vec<u8>, String>) + 'static) {
    let file = gloo::file::File::from(file);
    spawn_local(async move {
        let name = file.name();
        let bytes =
            gloo::file::futures::read_as_bytes(&file).await.map_err(|e| format!("{name}: cannot read the file: {e}"));
        done(name, bytes);
    });
}

/// Back to the whole graph, without asking again when it already shows it.
fn reset(zoom: RwSignal<Vec<String>>) {
    if zoom.with_untracked(|z| !z.is_empty()) {
        zoom.set(Vec::new());
    }
}

fn error_view(err: String) -> AnyView {
    view! { <p class="error" data-testid="error">{err}</p> }.into_any()
}

fn busy_view() -> AnyView {
    view! { <p class="busy" data-testid="busy">"analysing…"</p> }.into_any()
}

#[component]
pub fn App() -> impl IntoView {
    let entries = RwSignal::new(Vec::<Entry>::new());
    let loading = RwSignal::new(Vec::<Loading>::new());
    let active = RwSignal::new(None::<u32>);
    let next_id = StoredValue::new(0u32);
    let errors = RwSignal::new(Vec::<String>::new());
    let view_kind = RwSignal::new(ViewKind::Flame);
    let sample_index = RwSignal::new(0usize);
    let focus = RwSignal::new(String::new());
    let ignore = RwSignal::new(String::new());
    let hide = RwSignal::new(String::new());
    let search = RwSignal::new(String::new());
    // Zooms as frame names from the root: the flame graph's (shared with the diff's)
    // and the sandwich's two halves.
    let zoom = RwSignal::new(Vec::<String>::new());
    let icicle = RwSignal::new(false);
    let normalize = RwSignal::new(false);
    let base_id = RwSignal::new(None::<u32>);
    let compare_id = RwSignal::new(None::<u32>);
    let goroutine_filter = RwSignal::new(String::new());
    let selected_row = RwSignal::new(0usize);
    let search_input = NodeRef::<leptos::html::Input>::new();
    let sandwich_fn = RwSignal::new(None::<String>);
    let callers_zoom = RwSignal::new(Vec::<String>::new());
    let callees_zoom = RwSignal::new(Vec::<String>::new());

    // What the address asks for: applied now, or when the profile it needs arrives.
    let initial = url_state::current();
    if let Some(v) = ViewKind::from_key(&initial.view) {
        view_kind.set(v);
    }
    focus.set(initial.focus.clone());
    ignore.set(initial.ignore.clone());
    hide.set(initial.hide.clone());
    search.set(initial.search.clone());
    let wanted_sample = StoredValue::new(initial.sample.clone());
    // The address's zoom applies to the profiles it names, until the user zooms.
    let wanted_zoom = StoredValue::new(initial.zoom.clone());
    let sources = RwSignal::new(Vec::<String>::new());
    // A share link (`#/s/…`, `#/b/…`, `#/diff/…/…`) and the tenant it names.
    let link = web_sys::window().and_then(|w| w.location().hash().ok()).and_then(|h| share::route(&h));
    let tenant = StoredValue::new(link.as_ref().and_then(|l| l.tenant.clone()));
    // "Compare with baseline": (the baseline's profile id, the profile compared with it).
    let pending_compare = StoredValue::new(None::<(u32, u32)>);

    let on_event = move |event: Response| match event {
        Response::Progress { id, stage, fraction } => loading.update(|l| {
            if let Some(x) = l.iter_mut().find(|x| x.id == id) {
                x.stage = stage;
                x.fraction = fraction;
            }
        }),
        Response::Parsed { id, summary } => {
            // A profile re-sent to a restarted worker is already an entry.
            let Some(done) = loading.with_untracked(|l| l.iter().find(|x| x.id == id).cloned()) else { return };
            loading.update(|l| l.retain(|x| x.id != id));
            let wanted = wanted_sample.get_value();
            sample_index.set(summary.sample_types.iter().position(|t| *t == wanted).unwrap_or(summary.default_sample));
            let goroutine = summary.goroutine;
            entries.update(|e| e.push(Entry { id, name: done.name, summary }));
            // Two profiles loaded: the earlier is the base, the newer is compared.
            let ids: Vec<u32> = entries.with_untracked(|e| e.iter().map(|e| e.id).collect());
            if ids.len() >= 2 {
                base_id.set(Some(ids[ids.len() - 2]));
                compare_id.set(Some(id));
            }
            active.set(Some(id));
            if let Some((baseline, compared)) = pending_compare.get_value().filter(|&(b, _)| b == id) {
                pending_compare.set_value(None);
                base_id.set(Some(baseline));
                compare_id.set(Some(compared));
                active.set(Some(compared));
                view_kind.set(ViewKind::Diff);
            }
            zoom.set(wanted_zoom.get_value());
            if goroutine && wanted.is_empty() {
                view_kind.set(ViewKind::Goroutines);
            }
        }
        Response::Failed { id, message } => {
            // A file that does not parse is not worth restoring.
            if let Some(failed) = loading.with_untracked(|l| l.iter().find(|x| x.id == id).map(|x| x.name.clone())) {
                crate::local_store::forget(failed);
            }
            loading.update(|l| l.retain(|x| x.id != id));
            errors.update(|list| list.push(message));
        }
        _ => {}
    };
    let client = StoredValue::new_local(Client::new(on_event));
    let generation = client.with_value(|c| c.generation);

    // Hands a file's bytes to the worker; returns the profile's id. Files opened here
    // (not fetched) are kept in the browser so a reload brings them back.
    let add = move |name: String, bytes: Result<Vec<u8>, String>, keep_locally: bool| -> Option<u32> {
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => {
                errors.update(|list| list.push(e));
                return None;
            }
        };
        // Two files of the same name (base/cpu.pb.gz, compare/cpu.pb.gz) get distinct tabs.
        let taken = entries.with_untracked(|e| {
            e.iter().filter(|x| x.name == name || x.name.starts_with(&format!("{name} #"))).count()
        }) + loading.with_untracked(|l| l.iter().filter(|x| x.name == name).count());
        let name = if taken == 0 { name } else { format!("{name} #{}", taken + 1) };
        let id = next_id.get_value();
        next_id.set_value(id + 1);
        let size = bytes.len() as f64 / 1_048_576.0;
        loading.update(|l| {
            l.push(Loading { id, name: name.clone(), stage: format!("sending {size:.1} MB"), fraction: 0.02 })
        });
        if keep_locally {
            crate::local_store::keep(name.clone(), bytes.clone());
        }
        client.with_value(|c| c.parse(id, &name, bytes));
        Some(id)
    };

    let entry = move |id: Option<u32>| id.and_then(|id| entries.with(|e| e.iter().find(|x| x.id == id).cloned()));
    let current = Memo::new(move |_| entry(active.get()));
    let filters = Memo::new(move |_| Filters {
        focus: Some(focus.get()),
        ignore: Some(ignore.get()),
        hide: Some(hide.get()),
        show: None,
    });

    // Answers from the worker, one per view.
    let tree: Answer<FlameData> = RwSignal::new(None);
    let top_report: Answer<TopReport> = RwSignal::new(None);
    let diff_report: Answer<DiffReport> = RwSignal::new(None);
    let diff_tree: Answer<FlameData> = RwSignal::new(None);
    let goroutines: Answer<(GoroutineReport, Option<GoroutineComparison>)> = RwSignal::new(None);
    let callers: Answer<FlameData> = RwSignal::new(None);
    let callees: Answer<FlameData> = RwSignal::new(None);
    let report_tokens: [StoredValue<u64>; 3] = std::array::from_fn(|_| StoredValue::new(0));
    let window_tokens: [StoredValue<u64>; 4] = std::array::from_fn(|_| StoredValue::new(0));
    // The whole tree each flame graph's window is cut from: another tree blanks the
    // graph until it arrives; another zoom or search keeps the old window meanwhile.
    let shown: [StoredValue<Option<TreeKey>>; 4] = std::array::from_fn(|_| StoredValue::new(None));

    // Reports: top, diff, goroutines.
    Effect::new(move |_| {
        generation.get();
        let (Some(e), view) = (current.get(), view_kind.get()) else { return };
        let (sample, filters) = (sample_index.get(), filters.get());
        let c = client.get_value();
        match view {
            ViewKind::Top => {
                top_report.set(None);
                ask(&c, report_tokens[0], top_report, Request::Top { id: e.id, sample, filters }, |r, _| match r {
                    Response::Top(t) => Some(t),
                    _ => None,
                });
            }
            ViewKind::Diff => {
                let (Some(base), Some(compare)) = (base_id.get(), compare_id.get()) else { return };
                let normalize = normalize.get();
                diff_report.set(None);
                let request = Request::Diff { base, compare, sample, filters, normalize };
                ask(&c, report_tokens[1], diff_report, request, |r, _| match r {
                    Response::Diff(d) => Some(d),
                    _ => None,
                });
            }
            ViewKind::Goroutines => {
                let filter = goroutine_filter.get();
                // Another goroutine snapshot loaded earlier is the baseline for growth.
                let earlier =
                    entries.with(|l| l.iter().rev().find(|x| x.id < e.id && x.summary.goroutine).map(|x| x.id));
                goroutines.set(None);
                let request = Request::Goroutines { id: e.id, filter, earlier };
                ask(&c, report_tokens[2], goroutines, request, |r, _| match r {
                    Response::Goroutines(g) => Some(g),
                    _ => None,
                });
            }
            ViewKind::Flame | ViewKind::Sandwich => {}
        }
    });

    // Flame graph windows, asked again when the zoom or the search changes.
    Effect::new(move |_| {
        generation.get();
        let (Some(e), view) = (current.get(), view_kind.get()) else { return };
        let (sample, filters, needle) = (sample_index.get(), filters.get(), search.get());
        let c = client.get_value();
        let window = |slot: usize, target: Answer<FlameData>, kind: TreeKind, id: u32, zoom: Vec<String>| {
            let key = TreeKey { id, sample, filters: filters.clone(), kind };
            if shown[slot].with_value(|k| k.as_ref() != Some(&key)) {
                target.set(None);
                shown[slot].set_value(Some(key.clone()));
            }
            let TreeKey { id, sample, filters, kind } = key;
            let request = Request::Tree { id, sample, filters, kind, zoom, search: needle.clone() };
            ask(&c, window_tokens[slot], target, request, decode_tree);
        };
        match view {
            ViewKind::Flame => window(0, tree, TreeKind::Plain, e.id, zoom.get()),
            ViewKind::Diff => {
                let (Some(base), Some(compare)) = (base_id.get(), compare_id.get()) else { return };
                window(1, diff_tree, TreeKind::DiffAgainst(base), compare, zoom.get());
            }
            ViewKind::Sandwich => {
                let Some(function) = sandwich_fn.get() else { return };
                window(2, callers, TreeKind::Sandwich(function.clone(), Side::Callers), e.id, callers_zoom.get());
                window(3, callees, TreeKind::Sandwich(function, Side::Callees), e.id, callees_zoom.get());
            }
            ViewKind::Top | ViewKind::Goroutines => {}
        }
    });

    // A share link: fetch what it names from the server, in order (a diff's base first);
    // the raw bytes' URLs then go in the address like any `url=` source.
    if let Some(link) = link {
        spawn_local(async move {
            let tenant = tenant.get_value();
            let mut fetched = Vec::new();
            for target in &link.targets {
                match share::resolve(target, tenant.as_deref()).await {
                    Ok((name, url)) => fetched.push((name, url.clone(), url_state::fetch(&url).await)),
                    Err(e) => return errors.update(|l| l.push(format!("{target}: {e}"))),
                }
            }
            for (name, url, bytes) in fetched {
                sources.update(|s| s.push(url));
                add(name, bytes, false);
            }
            if link.diff {
                view_kind.set(ViewKind::Diff);
            }
        });
    }
    // Files opened in this tab before a reload.
    if !initial.profiles.is_empty() {
        let names = initial.profiles.clone();
        spawn_local(async move {
            for (name, bytes) in crate::local_store::restore(&names).await {
                add(name, Ok(bytes), false);
            }
        });
    }
    for url in initial.urls.clone() {
        sources.update(|s| s.push(url.clone()));
        spawn_local(async move {
            let name = url.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(&url).to_owned();
            add(name, url_state::fetch(&url).await, false);
        });
    }
    // The address follows the view.
    Effect::new(move |_| {
        let sample = current.get().and_then(|e| e.summary.sample_types.get(sample_index.get()).cloned());
        url_state::store(&url_state::HashState {
            view: view_kind.get().key().to_owned(),
            sample: sample.unwrap_or_else(|| wanted_sample.get_value()),
            focus: focus.get(),
            ignore: ignore.get(),
            hide: hide.get(),
            search: search.get(),
            zoom: zoom.get(),
            profiles: entries.with(|e| e.iter().map(|x| x.name.clone()).collect()),
            urls: sources.get(),
        });
    });

    // Page-wide drop target and keyboard shortcuts.
    let _ = window_event_listener(ev::dragover, |e: DragEvent| e.prevent_default());
    let _ = window_event_listener(ev::drop, move |e: DragEvent| {
        e.prevent_default();
        let Some(files) = e.data_transfer().and_then(|d| d.files()) else { return };
        for i in 0..files.length() {
            if let Some(f) = files.get(i) {
                read_file(f, move |name, bytes| {
                    add(name, bytes, true);
                });
            }
        }
    });
    let _ = window_event_listener(ev::keydown, move |e: web_sys::KeyboardEvent| {
        let typing = e
            .target()
            .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
            .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
        match e.key().as_str() {
            "/" if !typing => {
                e.prevent_default();
                if let Some(input) = search_input.get() {
                    let _ = input.focus();
                }
            }
            "Escape" => reset(zoom),
            "ArrowDown" | "ArrowUp" | "Enter" if !typing && view_kind.get_untracked() == ViewKind::Top => {
                let Ok(rows) = document().query_selector_all("[data-testid=top-row]") else { return };
                let last = rows.length().saturating_sub(1) as usize;
                let at = match e.key().as_str() {
                    "ArrowDown" => (selected_row.get_untracked() + 1).min(last),
                    "ArrowUp" => selected_row.get_untracked().saturating_sub(1),
                    _ => selected_row.get_untracked(),
                };
                e.prevent_default();
                selected_row.set(at);
                let row =
                    rows.item(at as u32).and_then(|n| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlElement>(n).ok());
                if let Some(row) = row {
                    if e.key() == "Enter" {
                        // Focus the flame graph on the selected function, like a click.
                        row.click();
                    } else {
                        row.scroll_into_view_with_bool(false);
                    }
                }
            }
            _ => {}
        }
    });

    let on_files = move |ev: ev::Event| {
        let input: HtmlInputElement = event_target(&ev);
        if let Some(files) = input.files() {
            for i in 0..files.length() {
                if let Some(f) = files.get(i) {
                    read_file(f, move |name, bytes| {
                        add(name, bytes, true);
                    });
                }
            }
        }
        input.set_value("");
    };
    let paste_text = RwSignal::new(String::new());

    let tabs = move || {
        entries
            .get()
            .into_iter()
            .map(|e| {
                let id = e.id;
                let default_sample = e.summary.default_sample;
                let name = e.name.clone();
                view! {
                    <span class="tab" class:active=move || active.get() == Some(id) data-testid="profile-tab">
                        <button
                            class="tab-name"
                            on:click=move |_| {
                                active.set(Some(id));
                                reset(zoom);
                                sample_index.set(default_sample);
                            }
                        >
                            {e.name.clone()}
                        </button>
                        <button
                            class="tab-close"
                            title="remove"
                            on:click=move |_| {
                                entries.update(|list| list.retain(|x| x.id != id));
                                client.with_value(|c| c.remove(id));
                                crate::local_store::forget(name.clone());
                                if active.get_untracked() == Some(id) {
                                    active.set(entries.with_untracked(|l| l.last().map(|x| x.id)));
                                }
                            }
                        >
                            "×"
                        </button>
                    </span>
                }
            })
            .collect_view()
    };

    let progress = move || {
        loading
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
                                loading.update(|list| list.retain(|x| x.id != id));
                                client.with_value(|c| c.cancel(id));
                            }
                        >
                            "Cancel"
                        </button>
                    </div>
                }
            })
            .collect_view()
    };

    let sample_select = move || {
        current.get().map(|e| {
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
                            sample_index.set(event_target_value(&ev).parse().unwrap_or(0));
                            reset(zoom);
                        }
                        prop:value=move || sample_index.get().to_string()
                    >
                        {options}
                    </select>
                </label>
            }
        })
    };

    // A base or compare picker for the diff view.
    let picker = move |label: &'static str, testid: &'static str, selected: RwSignal<Option<u32>>| {
        let options = move || {
            entries
                .get()
                .into_iter()
                .map(|e| view! { <option value=e.id.to_string() selected=move || selected.get() == Some(e.id)>{e.name.clone()}</option> })
                .collect_view()
        };
        view! {
            <label>
                {label}
                <select data-testid=testid on:change=move |ev| selected.set(event_target_value(&ev).parse().ok())>
                    <option value="">"—"</option>
                    {options}
                </select>
            </label>
        }
    };

    let flame = move |data: Answer<FlameData>, zoom: RwSignal<Vec<String>>, icicle: Signal<bool>, diff: bool| {
        let data = Signal::derive(move || data.get().and_then(Result::ok));
        let settings =
            Signal::derive(move || FlameSettings { icicle: icicle.get(), diff, normalize: diff && normalize.get() });
        let on_zoom = Callback::new(move |path: Vec<String>| {
            wanted_zoom.set_value(Vec::new());
            zoom.set(path);
        });
        view! { <FlameGraph data=data search=Signal::derive(move || search.get()) settings=settings on_zoom=on_zoom /> }
    };

    let download_current = Signal::derive(move || {
        current.get().map(|e| Current { id: e.id, name: e.name, sample: sample_index.get(), filters: filters.get() })
    });

    // Share and baselines: the only things that talk to the server, and only on a click.
    let share_link = RwSignal::new(None::<String>);
    let baseline_saved = RwSignal::new(None::<String>);
    let baseline_list = RwSignal::new(None::<Vec<share::Baseline>>);
    let (baseline_label, baseline_description, baseline_tags) =
        (RwSignal::new(String::new()), RwSignal::new(String::new()), RwSignal::new(String::new()));
    let report = move |e: String| errors.update(|l| l.push(e));
    // Uploads the active profile (idempotent: the same bytes are the same session).
    let with_session = move |then: Box<dyn FnOnce(share::Session)>| {
        let Some(e) = current.get_untracked() else { return };
        let Some(bytes) = client.with_value(|c| c.bytes(e.id)) else { return };
        spawn_local(async move {
            match share::upload(&bytes, &e.name, tenant.get_value().as_deref()).await {
                Ok(session) => then(session),
                Err(err) => report(format!("{}: cannot share: {err}", e.name)),
            }
        });
    };
    let share_now = move |_| {
        with_session(Box::new(move |session| {
            share_link.set(Some(session.share_url.clone()));
            if let Some(w) = web_sys::window() {
                let _ = w.navigator().clipboard().write_text(&session.share_url);
            }
        }))
    };
    let save_baseline = move |_| {
        let label = baseline_label.get_untracked();
        if label.trim().is_empty() {
            return report("a baseline needs a label".to_owned());
        }
        let description = baseline_description.get_untracked();
        let tags: Vec<String> =
            baseline_tags.get_untracked().split(',').map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect();
        with_session(Box::new(move |session| {
            spawn_local(async move {
                match share::save_baseline(&session, &label, &description, tags, tenant.get_value().as_deref()).await {
                    Ok(b) => {
                        baseline_saved.set(Some(format!("saved baseline '{}' ({})", b.baseline_label, b.profile_type)))
                    }
                    Err(err) => report(format!("cannot save the baseline: {err}")),
                }
            });
        }))
    };
    let list_baselines = move |_| {
        spawn_local(async move {
            match share::baselines(None, false, tenant.get_value().as_deref()).await {
                Ok(list) => baseline_list.set(Some(list)),
                Err(err) => report(format!("cannot list baselines: {err}")),
            }
        });
    };
    let compare_with_baseline = move |_| {
        let Some(e) = current.get_untracked() else { return };
        spawn_local(async move {
            let t = tenant.get_value();
            let latest = match share::baselines(Some(&e.summary.kind), true, t.as_deref()).await {
                Ok(list) => list.into_iter().next(),
                Err(err) => return report(format!("cannot list baselines: {err}")),
            };
            let Some(b) = latest else {
                return report(format!("no {} baseline has been saved yet: save one first", e.summary.kind));
            };
            let url = share::raw_url(&b.session_id, t.as_deref());
            let bytes = url_state::fetch(&url).await;
            if bytes.is_ok() {
                sources.update(|s| s.push(url));
            }
            if let Some(id) = add(format!("baseline {}", b.baseline_label), bytes, false) {
                pending_compare.set_value(Some((id, e.id)));
            }
        });
    };
    let share_panel = move || {
        let link = move || {
            share_link.get().map(|url| {
                view! {
                    <input class="share-url" readonly data-testid="share-url" prop:value=url.clone() />
                    <a href=url target="_blank">"open"</a>
                }
            })
        };
        let rows = move || {
            baseline_list.get().map(|list| {
                let rows = list
                    .into_iter()
                    .map(|b| {
                        view! {
                            <tr data-testid="baseline-row">
                                <td>{b.created_at}</td>
                                <td>{b.profile_type}</td>
                                <td>{b.service}</td>
                                <td>{if b.is_latest { "latest" } else { "" }}</td>
                                <td>
                                    <a href=b.share_url target="_blank">{b.baseline_label}</a>
                                </td>
                            </tr>
                        }
                    })
                    .collect_view();
                view! {
                    <table class="data" data-testid="baselines">
                        <tr><th>"created"</th><th>"type"</th><th>"service"</th><th></th><th>"label"</th></tr>
                        {rows}
                    </table>
                }
            })
        };
        let text_input = |placeholder: &'static str, testid: &'static str, value: RwSignal<String>| {
            view! { <input placeholder=placeholder data-testid=testid on:input=move |ev| value.set(event_target_value(&ev)) /> }
        };
        view! {
            <div class="share">
                <button data-testid="share" title="upload this profile to the server and copy a link to it" on:click=share_now>
                    "Share"
                </button>
                {link}
                <details class="baseline-menu" data-testid="baseline-menu">
                    <summary>"Baselines"</summary>
                    {text_input("label", "baseline-label", baseline_label)}
                    {text_input("description", "baseline-description", baseline_description)}
                    {text_input("tags, comma-separated", "baseline-tags", baseline_tags)}
                    <button data-testid="save-baseline" on:click=save_baseline>"Save as baseline"</button>
                    {move || baseline_saved.get().map(|m| view! { <span data-testid="baseline-saved">{m}</span> })}
                    <button data-testid="compare-baseline" on:click=compare_with_baseline>"Compare with latest baseline"</button>
                    <button data-testid="list-baselines" on:click=list_baselines>"List baselines"</button>
                    {rows}
                </details>
            </div>
        }
    };

    let main_view = move || {
        if current.get().is_none() {
            return view! {
                <div class="empty">
                    <p>"Drop profiles anywhere on this page, choose files, or paste a goroutine dump."</p>
                    {(!initial.profiles.is_empty() && initial.urls.is_empty())
                        .then(|| {
                            view! {
                                <p data-testid="reopen-hint">
                                    "This link's view was for: " {initial.profiles.join(", ")}
                                    ". Open the same files to restore it."
                                </p>
                            }
                        })}
                    <p class="hint">
                        "pprof (cpu, heap, allocs, block, mutex, goroutine), Go debug=1 texts and goroutine dumps, gperftools/Java legacy profiles, Firefox Profiler and samply JSON, old Firefox DevTools recordings, Linux perf script, folded stacks (FlameGraph, inferno, py-spy), Chrome and Node .cpuprofile, .heapprofile and performance traces, speedscope JSON, valgrind callgrind, Python cProfile .pstats, Java Flight Recorder .jfr (JDK, async-profiler), Ruby stackprof, GHC -pj profiles, FreeBSD pmcstat callgraphs, Xcode Instruments deep copies, Safari timeline recordings, V8 --prof tick logs. Everything is analysed in this page; nothing is uploaded."
                    </p>
                </div>
            }
            .into_any();
        }
        match view_kind.get() {
            ViewKind::Flame => match tree.get() {
                Some(Ok(_)) => flame(tree, zoom, Signal::derive(move || icicle.get()), false).into_any(),
                Some(Err(err)) => error_view(err),
                None => busy_view(),
            },
            ViewKind::Top => match top_report.get() {
                Some(Ok(report)) => {
                    let on_select = Callback::new(move |name: String| {
                        focus.set(format!("^{}$", regex::escape(&name)));
                        reset(zoom);
                        view_kind.set(ViewKind::Flame);
                    });
                    let on_sandwich = Callback::new(move |name: String| {
                        sandwich_fn.set(Some(name));
                        reset(callers_zoom);
                        reset(callees_zoom);
                        view_kind.set(ViewKind::Sandwich);
                    });
                    view! { <TopTable report=report on_select=on_select on_sandwich=on_sandwich selected=selected_row /> }.into_any()
                }
                Some(Err(err)) => error_view(err),
                None => busy_view(),
            },
            ViewKind::Sandwich => {
                let Some(function) = sandwich_fn.get() else {
                    return view! { <p class="hint">"Pick a function with ⇅ in the Top view to see its callers and callees."</p> }
                        .into_any();
                };
                view! {
                    <h3 data-testid="sandwich-function">{function}</h3>
                    <h4>"Callers"</h4>
                    <div data-testid="sandwich-callers">{flame(callers, callers_zoom, Signal::derive(|| false), false)}</div>
                    <h4>"Callees"</h4>
                    <div data-testid="sandwich-callees">{flame(callees, callees_zoom, Signal::derive(|| true), false)}</div>
                }
                .into_any()
            }
            ViewKind::Diff => {
                let pickers = view! {
                    <div class="diff-pick">
                        {picker("base ", "diff-base", base_id)}
                        {picker(" compare ", "diff-compare", compare_id)}
                        <label>
                            <input type="checkbox" data-testid="normalize" on:change=move |ev| normalize.set(event_target_checked(&ev)) />
                            " normalize"
                        </label>
                    </div>
                };
                let body = if base_id.get().is_none() || compare_id.get().is_none() {
                    view! { <p class="hint">"Load two profiles of the same type and pick a base and a compare profile."</p> }.into_any()
                } else {
                    match diff_report.get() {
                        Some(Ok(report)) => view! {
                            {flame(diff_tree, zoom, Signal::derive(move || icicle.get()), true)}
                            <DiffTable report=report />
                        }
                        .into_any(),
                        Some(Err(err)) => error_view(err),
                        None => busy_view(),
                    }
                };
                view! {
                    {pickers}
                    {body}
                }
                .into_any()
            }
            ViewKind::Goroutines => {
                let filter_box = view! {
                    <input
                        type="search"
                        placeholder="filter stacks, states, creators"
                        data-testid="goroutine-filter"
                        on:input=move |ev| goroutine_filter.set(event_target_value(&ev))
                        prop:value=move || goroutine_filter.get_untracked()
                    />
                };
                let body = move || match goroutines.get() {
                    Some(Ok((report, growth))) => view! { <GoroutineView report=report growth=growth /> }.into_any(),
                    Some(Err(err)) => error_view(err),
                    None => busy_view(),
                };
                view! {
                    {filter_box}
                    {body}
                }
                .into_any()
            }
        }
    };

    view! {
        <header>
            <h1>"stacklens"</h1>
            <label class="file">
                "Open profiles " <input type="file" multiple data-testid="file-input" on:change=on_files />
            </label>
            <nav class="tabs">{tabs}</nav>
            <details class="history-menu" data-testid="history-menu">
                <summary>"Capture history"</summary>
                <crate::history::HistoryView tenant=tenant.get_value() />
            </details>
        </header>
        {progress}
        <details class="paste">
            <summary>"Paste text (goroutine dump, debug=1 profile, folded stacks, perf script)"</summary>
            <textarea data-testid="paste-input" rows="6" on:input=move |ev| paste_text.set(event_target_value(&ev))></textarea>
            <button
                data-testid="paste-load"
                on:click=move |_| {
                    let text = paste_text.get_untracked();
                    if !text.trim().is_empty() {
                        add("pasted text".to_owned(), Ok(text.into_bytes()), true);
                    }
                }
            >
                "Analyse pasted text"
            </button>
        </details>
        <div class="errors">
            {move || {
                errors
                    .get()
                    .into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        view! {
                            <p class="error" data-testid="error" role="alert">
                                {e}
                                <button
                                    class="dismiss"
                                    on:click=move |_| {
                                        errors
                                            .update(|l| {
                                                l.remove(i);
                                            })
                                    }
                                >
                                    "×"
                                </button>
                            </p>
                        }
                    })
                    .collect_view()
            }}
        </div>
        <Show when=move || current.get().is_some()>
            <div class="toolbar">
                <nav class="views">
                    {ViewKind::ALL
                        .iter()
                        .map(|&(k, label)| {
                            view! {
                                <button
                                    class:active=move || view_kind.get() == k
                                    data-testid=format!("view-{}", k.key())
                                    on:click=move |_| view_kind.set(k)
                                >
                                    {label}
                                </button>
                            }
                        })
                        .collect_view()}
                </nav>
                {sample_select}
                <input
                    type="search"
                    placeholder="search (/)"
                    data-testid="search"
                    node_ref=search_input
                    on:input=move |ev| search.set(event_target_value(&ev))
                    prop:value=move || search.get()
                />
                <label>
                    <input type="checkbox" data-testid="icicle" on:change=move |ev| icicle.set(event_target_checked(&ev)) />
                    " icicle"
                </label>
                {share_panel}
                <DownloadMenu client=client current=download_current on_error=Callback::new(report) />
            </div>
            <div class="filters">
                {[("focus regex", "focus", focus), ("ignore regex", "ignore", ignore), ("hide regex", "hide", hide)]
                    .into_iter()
                    .map(|(placeholder, testid, value)| {
                        view! {
                            <input
                                placeholder=placeholder
                                data-testid=testid
                                on:change=move |ev| value.set(event_target_value(&ev))
                                prop:value=move || value.get()
                            />
                        }
                    })
                    .collect_view()}
            </div>
        </Show>
        <main>{main_view}</main>
    }
}
