//! Where profiles come from: files (chosen or dropped), pasted text, URLs in the address,
//! share links, and the files of this tab before a reload. Each ends in [`State::add`].

use leptos::ev;
use leptos::prelude::*;
use leptos::task::spawn_local;
use web_sys::{DragEvent, FileList, HtmlInputElement};

use super::encrypted::{self, Link};
use super::share::Route;
use super::state::{State, ViewKind};
use super::url_state::{self, HashState};
use super::{local_store, share};

/// Adds each browser file (kept in the browser for a reload). The page never reads it:
/// the worker does, from the file itself.
fn add_files(state: State, files: FileList) {
    for i in 0..files.length() {
        let Some(file) = files.get(i) else { continue };
        state.add(file.name(), Ok(file.into()), true);
    }
}

/// Fetches an encrypted link's blob and opens it in the page; the link goes in the
/// address as a source (the key stays in the fragment), so a reload opens it again.
fn open_encrypted(state: State, link: Link) {
    spawn_local(async move {
        let tenant = state.tenant.get_value();
        let opened = match share::blob(&link.blob, tenant.as_deref()).await {
            Ok(sealed) => encrypted::open(&sealed, &link.key).await,
            Err(e) => Err(e),
        };
        match opened {
            Ok((name, bytes)) => {
                state.sources.update(|s| s.push(link.source()));
                state.add_bytes(name, Ok(bytes), false);
            }
            Err(e) => state.report(format!("the encrypted link: {e}")),
        }
    });
}

/// Fetches what a share link names from the server, in order (a diff's base first);
/// the raw bytes' URLs then go in the address like any `url=` source.
fn open_link(state: State, link: Route) {
    if let (Some(key), [blob]) = (&link.key, link.targets.as_slice()) {
        return open_encrypted(state, Link { blob: blob.clone(), key: key.clone() });
    }
    spawn_local(async move {
        let tenant = state.tenant.get_value();
        let mut fetched = Vec::new();
        for target in &link.targets {
            match share::resolve(target, tenant.as_deref()).await {
                Ok((name, url)) => fetched.push((name, url.clone(), url_state::fetch(&url).await)),
                Err(e) => return state.report(format!("{target}: {e}")),
            }
        }
        for (name, url, bytes) in fetched {
            state.sources.update(|s| s.push(url));
            state.add(name, bytes, false);
        }
        if link.diff {
            state.view_kind.set(ViewKind::Diff);
        }
    });
}

/// Opens what the address names: a share link, this tab's files before a reload, and
/// `url=` sources; and makes the whole page a drop target.
pub fn open_initial(state: State, initial: &HashState, link: Option<Route>) {
    if let Some(link) = link {
        open_link(state, link);
    }
    if !initial.profiles.is_empty() {
        let names = initial.profiles.clone();
        spawn_local(async move {
            for (name, source) in local_store::restore(&names).await {
                state.add(name, Ok(source), false);
            }
        });
    }
    for url in initial.urls.clone() {
        if let Some(link) = Link::from_source(&url) {
            open_encrypted(state, link);
            continue;
        }
        state.sources.update(|s| s.push(url.clone()));
        spawn_local(async move {
            let name = url.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(&url).to_owned();
            state.add(name, url_state::fetch(&url).await, false);
        });
    }
    let _ = window_event_listener(ev::dragover, |e: DragEvent| e.prevent_default());
    let _ = window_event_listener(ev::drop, move |e: DragEvent| {
        e.prevent_default();
        if let Some(files) = e.data_transfer().and_then(|d| d.files()) {
            add_files(state, files);
        }
    });
}

/// The "Open profiles" file chooser.
#[component]
pub fn FileInput() -> impl IntoView {
    let state = expect_context::<State>();
    let on_change = move |ev: ev::Event| {
        let input: HtmlInputElement = event_target(&ev);
        if let Some(files) = input.files() {
            add_files(state, files);
        }
        input.set_value("");
    };
    view! {
        <label class="file">
            "Open profiles " <input type="file" multiple data-testid="file-input" on:change=on_change />
        </label>
    }
}

/// Text pasted into the page: a goroutine dump, a debug=1 profile, folded stacks, perf script.
#[component]
pub fn PastePanel() -> impl IntoView {
    let state = expect_context::<State>();
    let text = RwSignal::new(String::new());
    view! {
        <details class="paste">
            <summary>"Paste text (goroutine dump, debug=1 profile, folded stacks, perf script)"</summary>
            <textarea data-testid="paste-input" aria-label="profile text" rows="6" on:input=move |ev| text.set(event_target_value(&ev))></textarea>
            <button
                data-testid="paste-load"
                on:click=move |_| {
                    let text = text.get_untracked();
                    if !text.trim().is_empty() {
                        state.add_bytes("pasted text".to_owned(), Ok(text.into_bytes()), true);
                    }
                }
            >
                "Analyse pasted text"
            </button>
        </details>
    }
}
