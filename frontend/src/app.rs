//! The page: loaded profiles as tabs, and the views over the active one.

use std::sync::Arc;

use leptos::ev;
use leptos::prelude::*;
use leptos::task::spawn_local;
use stacklens_core::analysis::tree::{Side, ROOT};
use stacklens_core::analysis::Filters;
use web_sys::{DragEvent, HtmlInputElement};

use crate::flame::{FlameGraph, FlameSettings};
use crate::table::{DiffTable, GoroutineView, TopTable};
use crate::{diff_profiles, diff_tree, goroutine_growth, url_state, Loaded};

/// A loaded profile; equal when it is the same load.
#[derive(Clone)]
struct Entry {
    id: u32,
    loaded: Arc<Loaded>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
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

    const ALL: [(ViewKind, &'static str); 5] = [
        (ViewKind::Flame, "Flame graph"),
        (ViewKind::Top, "Top"),
        (ViewKind::Sandwich, "Sandwich"),
        (ViewKind::Diff, "Diff"),
        (ViewKind::Goroutines, "Goroutines"),
    ];
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

#[component]
pub fn App() -> impl IntoView {
    let entries = RwSignal::new(Vec::<Entry>::new());
    let active = RwSignal::new(None::<u32>);
    let next_id = StoredValue::new(0u32);
    let errors = RwSignal::new(Vec::<String>::new());
    let view_kind = RwSignal::new(ViewKind::Flame);
    let sample_index = RwSignal::new(0usize);
    let focus = RwSignal::new(String::new());
    let ignore = RwSignal::new(String::new());
    let hide = RwSignal::new(String::new());
    let search = RwSignal::new(String::new());
    let zoom = RwSignal::new(ROOT);
    let icicle = RwSignal::new(false);
    let normalize = RwSignal::new(false);
    let base_id = RwSignal::new(None::<u32>);
    let compare_id = RwSignal::new(None::<u32>);
    let goroutine_filter = RwSignal::new(String::new());
    let selected_row = RwSignal::new(0usize);
    let search_input = NodeRef::<leptos::html::Input>::new();
    let sandwich_fn = RwSignal::new(None::<String>);
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
    let pending_zoom = RwSignal::new(initial.zoom.clone());
    let sources = RwSignal::new(Vec::<String>::new());
    let callers_zoom = RwSignal::new(ROOT);
    let callees_zoom = RwSignal::new(ROOT);

    let add = move |name: String, bytes: Result<Vec<u8>, String>| {
        // Two files of the same name (base/cpu.pb.gz, compare/cpu.pb.gz) get distinct tabs.
        let taken = entries.with_untracked(|e| {
            e.iter().filter(|x| x.loaded.name == name || x.loaded.name.starts_with(&format!("{name} #"))).count()
        });
        let name = if taken == 0 { name } else { format!("{name} #{}", taken + 1) };
        match bytes.and_then(|b| Loaded::parse(&name, &b)) {
            Ok(loaded) => {
                let id = next_id.get_value();
                next_id.set_value(id + 1);
                let goroutine = loaded.is_goroutine();
                let (types, default) = loaded.sample_types();
                let wanted = wanted_sample.get_value();
                sample_index.set(types.iter().position(|t| *t == wanted).unwrap_or(default));
                entries.update(|e| e.push(Entry { id, loaded: Arc::new(loaded) }));
                // Two profiles loaded: the earlier is the base, the newer is compared.
                let ids: Vec<u32> = entries.with_untracked(|e| e.iter().map(|e| e.id).collect());
                if ids.len() >= 2 {
                    base_id.set(Some(ids[ids.len() - 2]));
                    compare_id.set(Some(id));
                }
                active.set(Some(id));
                zoom.set(ROOT);
                if goroutine && wanted.is_empty() {
                    view_kind.set(ViewKind::Goroutines);
                }
            }
            Err(e) => errors.update(|list| list.push(e)),
        }
    };

    let entry = move |id: Option<u32>| id.and_then(|id| entries.with(|e| e.iter().find(|x| x.id == id).cloned()));
    let current = Memo::new(move |_| entry(active.get()));
    let filters = Memo::new(move |_| Filters {
        focus: Some(focus.get()),
        ignore: Some(ignore.get()),
        hide: Some(hide.get()),
        show: None,
    });
    let tree = Memo::new(move |_| {
        let e = current.get()?;
        Some(e.loaded.tree(sample_index.get(), &filters.get()))
    });
    // A zoom path from the address is applied once the tree it names exists.
    Effect::new(move |_| {
        let path = pending_zoom.get();
        if path.is_empty() {
            return;
        }
        let Some(Ok(t)) = tree.get() else { return };
        let mut node = ROOT;
        for name in &path {
            match t.0.children(node).find(|&c| t.0.name(c) == name) {
                Some(c) => node = c,
                None => break,
            }
        }
        zoom.set(node);
        pending_zoom.set(Vec::new());
    });
    for url in initial.urls.clone() {
        sources.update(|s| s.push(url.clone()));
        spawn_local(async move {
            let name = url.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(&url).to_owned();
            add(name, url_state::fetch(&url).await);
        });
    }
    // The address follows the view.
    Effect::new(move |_| {
        let zoom_path = match (tree.get(), zoom.get()) {
            (Some(Ok(t)), z) if z != ROOT => t.0.path(z).into_iter().map(|n| t.0.name(n).to_owned()).collect(),
            _ => pending_zoom.get(),
        };
        let sample =
            current.get().map(|e| e.loaded.sample_types().0.get(sample_index.get()).cloned().unwrap_or_default());
        url_state::store(&url_state::HashState {
            view: view_kind.get().key().to_owned(),
            sample: sample.unwrap_or_else(|| wanted_sample.get_value()),
            focus: focus.get(),
            ignore: ignore.get(),
            hide: hide.get(),
            search: search.get(),
            zoom: zoom_path,
            profiles: entries.with(|e| e.iter().map(|x| x.loaded.name.clone()).collect()),
            urls: sources.get(),
        });
    });
    let diff_pair = Memo::new(move |_| Some((entry(base_id.get())?, entry(compare_id.get())?)));
    let diff_tree_memo = Memo::new(move |_| {
        if view_kind.get() != ViewKind::Diff {
            return None;
        }
        let (b, c) = diff_pair.get()?;
        Some(diff_tree(&b.loaded, &c.loaded, sample_index.get(), &filters.get()))
    });

    // Page-wide drop target and keyboard shortcuts.
    let _ = window_event_listener(ev::dragover, |e: DragEvent| e.prevent_default());
    let _ = window_event_listener(ev::drop, move |e: DragEvent| {
        e.prevent_default();
        let Some(files) = e.data_transfer().and_then(|d| d.files()) else { return };
        for i in 0..files.length() {
            if let Some(f) = files.get(i) {
                read_file(f, add);
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
            "Escape" => zoom.set(ROOT),
            "ArrowDown" if !typing && view_kind.get_untracked() == ViewKind::Top => selected_row.update(|r| *r += 1),
            "ArrowUp" if !typing && view_kind.get_untracked() == ViewKind::Top => {
                selected_row.update(|r| *r = r.saturating_sub(1))
            }
            _ => {}
        }
    });

    let on_files = move |ev: ev::Event| {
        let input: HtmlInputElement = event_target(&ev);
        if let Some(files) = input.files() {
            for i in 0..files.length() {
                if let Some(f) = files.get(i) {
                    read_file(f, add);
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
                let name = e.loaded.name.clone();
                view! {
                    <span class="tab" class:active=move || active.get() == Some(id) data-testid="profile-tab">
                        <button class="tab-name" on:click=move |_| {
                            active.set(Some(id));
                            zoom.set(ROOT);
                            if let Some(e) = entry(Some(id)) {
                                sample_index.set(e.loaded.sample_types().1);
                            }
                        }>{name}</button>
                        <button class="tab-close" title="remove" on:click=move |_| {
                            entries.update(|list| list.retain(|x| x.id != id));
                            if active.get_untracked() == Some(id) {
                                active.set(entries.with_untracked(|l| l.last().map(|x| x.id)));
                            }
                        }>"×"</button>
                    </span>
                }
            })
            .collect_view()
    };

    let sample_select = move || {
        current.get().map(|e| {
            let (names, _) = e.loaded.sample_types();
            let options = names
                .into_iter()
                .enumerate()
                .map(|(i, n)| view! { <option value=i.to_string()>{n}</option> })
                .collect_view();
            view! {
                <label>"sample "
                    <select
                        data-testid="sample-type"
                        on:change=move |ev| {
                            sample_index.set(event_target_value(&ev).parse().unwrap_or(0));
                            zoom.set(ROOT);
                        }
                        prop:value=move || sample_index.get().to_string()
                    >
                        {options}
                    </select>
                </label>
            }
        })
    };

    let entry_options = move |selected: RwSignal<Option<u32>>| {
        entries
            .get()
            .into_iter()
            .map(|e| view! { <option value=e.id.to_string() selected=move || selected.get() == Some(e.id)>{e.loaded.name.clone()}</option> })
            .collect_view()
    };

    let main_view = move || {
        let Some(e) = current.get() else {
            return view! {
                <div class="empty">
                    <p>"Drop profiles anywhere on this page, choose files, or paste a goroutine dump."</p>
                    {(!initial.profiles.is_empty() && initial.urls.is_empty()).then(|| view! {
                        <p data-testid="reopen-hint">"This link's view was for: " {initial.profiles.join(", ")} ". Open the same files to restore it."</p>
                    })}
                    <p class="hint">"pprof (cpu, heap, allocs, block, mutex, goroutine), Go debug=1 texts, goroutine dumps, gperftools/Java legacy profiles. Everything is analysed in this page; nothing is uploaded."</p>
                </div>
            }
            .into_any();
        };
        match view_kind.get() {
            ViewKind::Flame => match tree.get() {
                Some(Ok(_)) => {
                    let tree_signal = Signal::derive(move || tree.get().and_then(Result::ok));
                    view! {
                        <FlameGraph
                            tree=tree_signal
                            zoom=zoom
                            search=Signal::derive(move || search.get())
                            settings=Signal::derive(move || FlameSettings { icicle: icicle.get(), diff: false })
                        />
                    }
                    .into_any()
                }
                Some(Err(err)) => view! { <p class="error" data-testid="error">{err}</p> }.into_any(),
                None => ().into_any(),
            },
            ViewKind::Top => match e.loaded.top(sample_index.get(), &filters.get()) {
                Ok(report) => {
                    let on_select = Callback::new(move |name: String| {
                        focus.set(format!("^{}$", regex::escape(&name)));
                        zoom.set(ROOT);
                        view_kind.set(ViewKind::Flame);
                    });
                    let on_sandwich = Callback::new(move |name: String| {
                        sandwich_fn.set(Some(name));
                        callers_zoom.set(ROOT);
                        callees_zoom.set(ROOT);
                        view_kind.set(ViewKind::Sandwich);
                    });
                    view! { <TopTable report=report on_select=on_select on_sandwich=on_sandwich selected=selected_row /> }.into_any()
                }
                Err(err) => view! { <p class="error" data-testid="error">{err}</p> }.into_any(),
            },
            ViewKind::Sandwich => {
                let Some(function) = sandwich_fn.get() else {
                    return view! { <p class="hint">"Pick a function with ⇅ in the Top view to see its callers and callees."</p> }.into_any();
                };
                let half = |side: Side, zoom: RwSignal<u32>, icicle: bool| {
                    let function = function.clone();
                    // A memo: the flame graph reads its tree from several places.
                    let tree = Memo::new(move |_| {
                        current
                            .get()
                            .and_then(|e| e.loaded.sandwich(sample_index.get(), &filters.get(), &function, side).ok())
                    });
                    let tree = Signal::from(tree);
                    view! {
                        <FlameGraph
                            tree=tree
                            zoom=zoom
                            search=Signal::derive(move || search.get())
                            settings=Signal::derive(move || FlameSettings { icicle, diff: false })
                        />
                    }
                };
                view! {
                    <h3 class="sandwich-title" data-testid="sandwich-function">{function.clone()}</h3>
                    <h4>"Callers"</h4>
                    <div data-testid="sandwich-callers">{half(Side::Callers, callers_zoom, false)}</div>
                    <h4>"Callees"</h4>
                    <div data-testid="sandwich-callees">{half(Side::Callees, callees_zoom, true)}</div>
                }
                .into_any()
            }
            ViewKind::Diff => {
                let pickers = view! {
                    <div class="diff-pick">
                        <label>"base "
                            <select data-testid="diff-base" on:change=move |ev| base_id.set(event_target_value(&ev).parse().ok())>
                                <option value="">"—"</option>
                                {entry_options(base_id)}
                            </select>
                        </label>
                        <label>" compare "
                            <select data-testid="diff-compare" on:change=move |ev| compare_id.set(event_target_value(&ev).parse().ok())>
                                <option value="">"—"</option>
                                {entry_options(compare_id)}
                            </select>
                        </label>
                        <label><input type="checkbox" data-testid="normalize" on:change=move |ev| normalize.set(event_target_checked(&ev)) />" normalize"</label>
                    </div>
                };
                let body = match diff_pair.get() {
                    None => view! { <p class="hint">"Load two profiles of the same type and pick a base and a compare profile."</p> }.into_any(),
                    Some((b, c)) => match diff_profiles(&b.loaded, &c.loaded, sample_index.get(), &filters.get(), normalize.get()) {
                        Ok(report) => {
                            let diff_signal = Signal::derive(move || diff_tree_memo.get().and_then(Result::ok));
                            view! {
                                <FlameGraph
                                    tree=diff_signal
                                    zoom=zoom
                                    search=Signal::derive(move || search.get())
                                    settings=Signal::derive(move || FlameSettings { icicle: icicle.get(), diff: true })
                                />
                                <DiffTable report=report />
                            }
                            .into_any()
                        }
                        Err(err) => view! { <p class="error" data-testid="error">{err}</p> }.into_any(),
                    },
                };
                view! { {pickers} {body} }.into_any()
            }
            ViewKind::Goroutines => {
                let report = e.loaded.goroutines(&goroutine_filter.get());
                // Another goroutine snapshot loaded earlier is the baseline for growth.
                let earlier = entries.with(|list| {
                    list.iter().rev().find(|x| x.id != e.id && x.id < e.id && x.loaded.is_goroutine()).cloned()
                });
                let growth = earlier.and_then(|b| goroutine_growth(&b.loaded, &e.loaded).ok());
                let filter_box = view! {
                    <input type="search" placeholder="filter stacks, states, creators" data-testid="goroutine-filter"
                        on:input=move |ev| goroutine_filter.set(event_target_value(&ev)) prop:value=move || goroutine_filter.get() />
                };
                match report {
                    Ok(r) => view! { {filter_box} <GoroutineView report=r growth=growth /> }.into_any(),
                    Err(err) => view! { <p class="error" data-testid="error">{err}</p> }.into_any(),
                }
            }
        }
    };

    view! {
        <header>
            <h1>"stacklens"</h1>
            <label class="file">"Open profiles "
                <input type="file" multiple data-testid="file-input" on:change=on_files />
            </label>
            <nav class="tabs">{tabs}</nav>
        </header>
        <details class="paste">
            <summary>"Paste text (goroutine dump, debug=1 profile)"</summary>
            <textarea data-testid="paste-input" rows="6" on:input=move |ev| paste_text.set(event_target_value(&ev))></textarea>
            <button data-testid="paste-load" on:click=move |_| {
                let text = paste_text.get_untracked();
                if !text.trim().is_empty() {
                    add("pasted text".to_owned(), Ok(text.into_bytes()));
                }
            }>"Analyse pasted text"</button>
        </details>
        <div class="errors">
            {move || errors.get().into_iter().enumerate().map(|(i, e)| view! {
                <p class="error" data-testid="error" role="alert">{e}
                    <button class="dismiss" on:click=move |_| errors.update(|l| { l.remove(i); })>"×"</button>
                </p>
            }).collect_view()}
        </div>
        <Show when=move || current.get().is_some()>
            <div class="toolbar">
                <nav class="views">
                    {ViewKind::ALL.iter().map(|&(k, label)| view! {
                        <button class:active=move || view_kind.get() == k data-testid=format!("view-{:?}", k).to_lowercase()
                            on:click=move |_| view_kind.set(k)>{label}</button>
                    }).collect_view()}
                </nav>
                {sample_select}
                <input type="search" placeholder="search (/)" data-testid="search" node_ref=search_input
                    on:input=move |ev| search.set(event_target_value(&ev)) prop:value=move || search.get() />
                <label><input type="checkbox" data-testid="icicle" on:change=move |ev| icicle.set(event_target_checked(&ev)) />" icicle"</label>
            </div>
            <div class="filters">
                <input placeholder="focus regex" data-testid="focus" on:change=move |ev| focus.set(event_target_value(&ev)) prop:value=move || focus.get() />
                <input placeholder="ignore regex" data-testid="ignore" on:change=move |ev| ignore.set(event_target_value(&ev)) prop:value=move || ignore.get() />
                <input placeholder="hide regex" data-testid="hide" on:change=move |ev| hide.set(event_target_value(&ev)) prop:value=move || hide.get() />
            </div>
        </Show>
        <main>{main_view}</main>
    }
}
