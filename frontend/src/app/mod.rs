//! The page: state and wiring. `state` holds what the parts share, `sources` brings
//! profiles in, `toolbar` and `share_panel` are the bars, and the views draw the active
//! profile; parsing and analysis run in the analysis worker.

mod api_urls;
mod clipboard;
mod download;
pub mod encrypted;
mod keys;
mod local_store;
mod meta;
pub(crate) mod ranges;
mod sanitize_panel;
pub(crate) mod share;
mod share_panel;
mod sources;
pub mod state;
mod symbols_panel;
mod toolbar;
mod url_state;

use leptos::prelude::*;
use stacklens_core::analysis::{Query, SampleType};

use crate::views::details::DetailsPanel;
use crate::views::diff::DiffView;
use crate::views::flame::FlameView;
use crate::views::goroutines::GoroutinesView;
use crate::views::graph::GraphView;
use crate::views::history::HistoryView;
use crate::views::labels::LabelsView;
use crate::views::sandwich::SandwichView;
use crate::views::source::SourceView;
use crate::views::table::TopView;
use crate::views::timeline::TimelineView;
use crate::worker::session::example_profile;
use sources::{FileInput, PastePanel};
use state::{State, ViewKind};
use toolbar::{Errors, Progress, Tabs, Toolbar};

/// What the page shows before a profile is loaded.
fn landing(state: State, initial: &url_state::HashState) -> AnyView {
    let reopen = (!initial.profiles.is_empty() && initial.urls.is_empty()).then(|| {
        view! {
            <p data-testid="reopen-hint">
                "This link's view was for: " {initial.profiles.join(", ")} ". Open the same files to restore it."
            </p>
        }
    });
    view! {
        <div class="empty">
            <p>"Drop profiles anywhere on this page, choose files, or paste a goroutine dump."</p>
            {reopen}
            <p>
                <button
                    class="try-example"
                    data-testid="try-example"
                    on:click=move |_| {
                        state.add_bytes("example: web service cpu".to_owned(), Ok(example_profile()), false);
                    }
                >
                    "Try an example"
                </button>
                " — a CPU profile of a small Go web service, built into this page."
            </p>
            <p class="hint">
                "pprof (cpu, heap, allocs, block, mutex, goroutine), Go debug=1 texts and goroutine dumps, gperftools/Java legacy profiles, Firefox Profiler and samply JSON, old Firefox DevTools recordings, Linux perf script, folded stacks (FlameGraph, inferno, py-spy), Chrome and Node .cpuprofile, .heapprofile and performance traces, speedscope JSON, valgrind callgrind, Python cProfile .pstats, Java Flight Recorder .jfr (JDK, async-profiler), Ruby stackprof, GHC -pj profiles, FreeBSD pmcstat callgraphs, Xcode Instruments deep copies, Safari timeline recordings, V8 --prof tick logs. Everything is analysed in this page; nothing is uploaded."
            </p>
        </div>
    }
    .into_any()
}

/// Keeps the address in step with the view, so a reload or a copied link restores it.
/// A change of zoom or search alone is written at most every [`ADDRESS_EVERY`], in an
/// idle moment (and when the page is hidden): `history.replaceState` takes 1–8 ms, which
/// a zoom click's frame cannot spare, and Chrome throttles a page that calls it hundreds
/// of times in a few seconds (a search typed, keys held down). Any other change is
/// written at once, so a reload right after it (a tab closed, a transform applied)
/// restores it.
fn follow_in_address(state: State) {
    let written = StoredValue::new(None::<url_state::HashState>);
    let waiting = StoredValue::new(None::<url_state::HashState>);
    let write = move |address: url_state::HashState| {
        url_state::store(&address);
        written.set_value(Some(address));
    };
    let write_waiting = move || {
        if let Some(Some(address)) = waiting.try_update_value(Option::take) {
            write(address);
        }
    };
    Effect::new(move |_| {
        // The sample type by name: a link opens another profile of the same kind.
        let sample = state.current.get().and_then(|e| e.summary.sample_types.get(state.sample_index.get()).cloned());
        let sample = sample.map_or_else(|| state.wanted_sample.get_value(), SampleType::Named);
        let address = url_state::HashState {
            view: state.view_kind.get().key().to_owned(),
            query: Query { sample, ..state.query.get() },
            search: state.search.get(),
            zoom: state.zoom.get(),
            profiles: state.entries.with(|e| e.iter().map(|x| x.name.clone()).collect()),
            urls: state.sources.get(),
        };
        let zoom_or_search_only = written.with_value(|w| {
            w.as_ref().is_some_and(|w| {
                url_state::HashState { zoom: address.zoom.clone(), search: address.search.clone(), ..w.clone() }
                    == address
            })
        });
        if zoom_or_search_only {
            if waiting.with_value(Option::is_none) {
                set_timeout(move || when_idle(write_waiting), ADDRESS_EVERY);
            }
            waiting.set_value(Some(address));
        } else {
            waiting.set_value(None);
            write(address);
        }
    });
    let _ = window_event_listener(leptos::ev::pagehide, move |_| write_waiting());
}

/// How often the address follows the zoom and the search while they change.
const ADDRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs `work` when the page is idle, and within [`IDLE_AT_MOST_MS`] in any case: Chrome
/// runs idle callbacks only around frames, and held one back for as long as nothing was
/// painted (over 20 s in an e2e test). Without `requestIdleCallback` (Safari) it runs at
/// once.
fn when_idle(work: impl FnOnce() + 'static) {
    let Some(window) = web_sys::window() else { return };
    if !js_sys::Reflect::has(&window, &"requestIdleCallback".into()).unwrap_or(false) {
        return work();
    }
    let options = web_sys::IdleRequestOptions::new();
    options.set_timeout(IDLE_AT_MOST_MS);
    let work = wasm_bindgen::closure::Closure::once_into_js(work);
    let _ = window.request_idle_callback_with_options(wasm_bindgen::JsCast::unchecked_ref(&work), &options);
}

/// How long [`when_idle`] waits for an idle moment at most.
const IDLE_AT_MOST_MS: u32 = 300;

/// Clears the time range when another profile becomes active: times are per profile.
/// The first profile keeps the range the address gave.
fn range_per_profile(state: State) {
    Effect::new(move |before: Option<Option<u32>>| {
        let active = state.active.get();
        if before.flatten().is_some_and(|b| Some(b) != active) {
            state.range.set(None);
        }
        active
    });
}

#[component]
pub fn App() -> impl IntoView {
    // What the address asks for: applied now, or when the profile it needs arrives.
    let initial = url_state::current();
    // A share link (`#/s/…`, `#/b/…`, `#/diff/…/…`) and the tenant it names.
    let link = web_sys::window().and_then(|w| w.location().hash().ok()).and_then(|h| share::route(&h));
    let state = State::new(&initial, link.as_ref().and_then(|l| l.tenant.clone()));
    provide_context(state);
    sources::open_initial(state, &initial, link);
    follow_in_address(state);
    range_per_profile(state);
    keys::install(state);

    let loaded = Memo::new(move |_| state.current.with(Option::is_some));
    let main_view = move || {
        if !loaded.get() {
            return landing(state, &initial);
        }
        match state.view_kind.get() {
            ViewKind::Flame => view! { <FlameView /> }.into_any(),
            ViewKind::Top => view! { <TopView /> }.into_any(),
            ViewKind::Sandwich => view! { <SandwichView /> }.into_any(),
            ViewKind::Diff => view! { <DiffView /> }.into_any(),
            ViewKind::Goroutines => view! { <GoroutinesView /> }.into_any(),
            ViewKind::Labels => view! { <LabelsView /> }.into_any(),
            ViewKind::Source => view! { <SourceView /> }.into_any(),
            ViewKind::Graph => view! { <GraphView /> }.into_any(),
            ViewKind::Timeline => view! { <TimelineView /> }.into_any(),
        }
    };
    view! {
        <header>
            <h1>"stacklens"</h1>
            <button class="help" aria-label="keyboard shortcuts" title="keyboard shortcuts (?)" data-testid="shortcuts-open" on:click=move |_| state.shortcuts_open.update(|o| *o = !*o)>
                "?"
            </button>
            <FileInput />
            <Tabs />
            <HistoryView />
        </header>
        <keys::ShortcutsHelp />
        <Progress />
        <PastePanel />
        <Errors />
        <Show when=move || loaded.get()>
            <meta::ProfileMetaBar />
            <symbols_panel::SymbolsPanel />
            <Toolbar />
        </Show>
        <main class:with-details=move || loaded.get() && state.selected_fn.with(Option::is_some)>
            <div class="view">{main_view}</div>
            <Show when=move || loaded.get()>
                <DetailsPanel />
            </Show>
        </main>
    }
}
