//! "Download as": the current profile written by core's exporters in the worker, and
//! saved as a file by the browser. Nothing goes to the server.

use std::rc::Rc;

use leptos::prelude::*;
use stacklens_core::analysis::{Filters, Query};
use stacklens_core::export::ExportFormat;
use wasm_bindgen::JsCast;

use crate::worker::client::Client;
use crate::worker::protocol::{Ask, Request, Response};

/// What a download needs to know about the profile on screen.
#[derive(Clone, PartialEq)]
pub struct Current {
    pub id: u32,
    pub name: String,
    /// The page's query: the sample type leads the file, and a filtered download keeps
    /// its filters, transforms and range.
    pub query: Query,
}

#[component]
pub fn DownloadMenu(
    client: StoredValue<Rc<Client>, LocalStorage>,
    current: Signal<Option<Current>>,
    on_error: Callback<String>,
) -> impl IntoView {
    let format = RwSignal::new(ExportFormat::Pprof);
    let filtered = RwSignal::new(true);
    let download = move |_| {
        let Some(current) = current.get_untracked() else { return };
        let format = format.get_untracked();
        let query = match filtered.get_untracked() {
            true => current.query,
            false => Query { sample: current.query.sample, filters: Filters::default(), ..Query::default() },
        };
        let file_name = format!("{}.{}", stem(&current.name), format.extension());
        let request = Request::Ask { profile: current.id, query, ask: Ask::Export { format } };
        client.get_value().request(request, move |response, bytes| match (response, bytes) {
            (Response::Export(Ok(())), Some(bytes)) => {
                if let Err(e) = save(&bytes, &file_name, format.media_type()) {
                    on_error.run(format!("{file_name}: the browser did not save the file ({e:?})"));
                }
            }
            (Response::Export(Err(e)), _) => on_error.run(format!("cannot write {file_name}: {e}")),
            _ => on_error.run(format!("cannot write {file_name}: the worker gave no file")),
        });
    };
    let options = ExportFormat::ALL
        .into_iter()
        .map(|f| view! { <option value=f.name() selected=move || format.get() == f>{label(f)}</option> })
        .collect_view();
    view! {
        <details class="download" data-testid="download-menu">
            <summary>"Download as"</summary>
            <select
                data-testid="download-format"
                aria-label="download format"
                on:change=move |ev| {
                    if let Ok(f) = event_target_value(&ev).parse() {
                        format.set(f);
                    }
                }
            >
                {options}
            </select>
            <label>
                <input
                    type="checkbox"
                    data-testid="download-filtered"
                    prop:checked=move || filtered.get()
                    on:change=move |ev| filtered.set(event_target_checked(&ev))
                />
                "with the current filters"
            </label>
            <button data-testid="download" disabled=move || current.get().is_none() on:click=download>
                "Download"
            </button>
        </details>
    }
}

fn label(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Pprof => "pprof (.pb.gz)",
        ExportFormat::Folded => "folded stacks (.folded)",
        ExportFormat::Speedscope => "speedscope (.speedscope.json)",
        ExportFormat::Svg => "flame graph (.svg)",
        ExportFormat::Html => "report page (.html)",
        ExportFormat::Otlp => "OpenTelemetry profiles (.otlp.pb)",
    }
}

/// A profile's name without the endings profiles are usually named with.
fn stem(name: &str) -> &str {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let mut stem = base;
    for ending in [".gz", ".pb", ".pprof", ".json", ".txt", ".folded", ".cpuprofile", ".prof"] {
        stem = stem.strip_suffix(ending).unwrap_or(stem);
    }
    if stem.is_empty() {
        "profile"
    } else {
        stem
    }
}

/// Saves `bytes` as a file through a temporary object URL and a download link.
/// `bytes` as a browser `Blob` (one copy, out of the page's WebAssembly memory).
pub fn blob(bytes: &[u8], mime: &str) -> Result<web_sys::Blob, wasm_bindgen::JsValue> {
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    web_sys::Blob::new_with_u8_array_sequence_and_options(&parts, &options)
}

fn save(bytes: &[u8], name: &str, mime: &str) -> Result<(), wasm_bindgen::JsValue> {
    let blob = blob(bytes, mime)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let link: web_sys::HtmlAnchorElement = document.create_element("a")?.dyn_into()?;
    link.set_href(&url);
    link.set_download(name);
    link.click();
    // The download has its own reference to the blob once it started.
    let revoke = wasm_bindgen::closure::Closure::once_into_js(move || {
        let _ = web_sys::Url::revoke_object_url(&url);
    });
    web_sys::window()
        .ok_or("no window")?
        .set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 60_000)?;
    Ok(())
}
