//! The analysis worker: runs in a Web Worker (the page's own WASM module, started by
//! `worker.js`), owns the parsed profiles and answers the page's requests, so parsing
//! and analysis never block the page.

use std::cell::RefCell;
use std::collections::HashMap;

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use stacklens_core::analysis::details::{details, DetailsOptions};
use stacklens_core::analysis::labels::label_summary;
use stacklens_core::analysis::source::{source, SourceOptions};
use stacklens_core::analysis::summary::meta;
use stacklens_core::export::{export, ExportOptions};
use stacklens_core::{ProfileKind, Stage};

pub mod client;
pub mod protocol;
pub mod session;

use protocol::{Envelope, Request, Response, Shape, Summary, TreeKey, TreeKind, WindowMeta};
use session::{diff_profiles, diff_tree, flame_window, goroutine_growth, Loaded, TreeCache};

thread_local! {
    static PROFILES: RefCell<HashMap<u32, Loaded>> = RefCell::new(HashMap::new());
    static TREES: RefCell<TreeCache<TreeKey>> = const { RefCell::new(TreeCache::new()) };
    static MEASURED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn post(seq: u64, body: &Response, bytes: Option<Vec<u8>>) {
    let json = serde_json::to_string(&Envelope { seq, body }).expect("responses serialize");
    let message = Array::of1(&JsValue::from_str(&json));
    let transfer = Array::new();
    if let Some(bytes) = bytes {
        let array = Uint8Array::from(bytes.as_slice());
        transfer.push(&array.buffer());
        message.push(&array);
    }
    let _ = scope().post_message_with_transfer(&message, &transfer);
}

fn with<T>(id: u32, f: impl FnOnce(&Loaded) -> Result<T, String>) -> Result<T, String> {
    PROFILES.with(|p| p.borrow().get(&id).map_or_else(|| Err(format!("profile {id} is not loaded")), f))
}

/// Core's report `f` on profile `id` as `shape` makes it; its error as text.
fn with_shaped<T>(
    id: u32,
    shape: &Shape,
    f: impl FnOnce(&stacklens_core::Profile) -> stacklens_core::Result<T>,
) -> Result<T, String> {
    with(id, |l| f(&*l.shaped(shape)?).map_err(|e| e.to_string()))
}

fn with_two<T>(a: u32, b: u32, f: impl FnOnce(&Loaded, &Loaded) -> Result<T, String>) -> Result<T, String> {
    PROFILES.with(|p| {
        let p = p.borrow();
        match (p.get(&a), p.get(&b)) {
            (Some(x), Some(y)) => f(x, y),
            _ => Err("a compared profile is not loaded".to_owned()),
        }
    })
}

/// A diff's shape: the transforms, as a time range belongs to one profile.
fn transforms_only(shape: &Shape) -> Shape {
    Shape { transforms: shape.transforms.clone(), range: None }
}

fn handle(seq: u64, request: Request, bytes: Option<Vec<u8>>) {
    match request {
        Request::Parse { id, name } => {
            let bytes = bytes.unwrap_or_default();
            let size = bytes.len() as f64 / 1_048_576.0;
            post(seq, &Response::Progress { id, stage: format!("parsing {size:.1} MB"), fraction: 0.05 }, None);
            // Inflating fills the bar to one half, decoding to 95%; building the
            // first view does the rest.
            let mut last = 0.0;
            let mut report = |stage: Stage, fraction: f64| {
                let (label, overall) = match stage {
                    Stage::Inflating => ("inflating", 0.05 + 0.45 * fraction),
                    Stage::Decoding => ("decoding", 0.5 + 0.45 * fraction),
                };
                if overall - last >= 0.02 {
                    last = overall;
                    post(
                        seq,
                        &Response::Progress { id, stage: format!("{label} {size:.1} MB"), fraction: overall },
                        None,
                    );
                }
            };
            match Loaded::parse_reporting(&name, &bytes, &mut report) {
                Ok(loaded) => {
                    let (sample_types, default_sample) = loaded.sample_types();
                    let kind = ProfileKind::of(&loaded.profile);
                    let goroutine = kind == ProfileKind::Goroutine;
                    let meta = meta(&loaded.profile);
                    let summary =
                        Summary { kind: kind.as_str().to_owned(), sample_types, default_sample, goroutine, meta };
                    PROFILES.with(|p| p.borrow_mut().insert(id, loaded));
                    post(seq, &Response::Parsed { id, summary }, None);
                }
                Err(message) => post(seq, &Response::Failed { id, message }, None),
            }
        }
        Request::Remove { id } => {
            PROFILES.with(|p| p.borrow_mut().remove(&id));
            TREES.with(|t| t.borrow_mut().retain(|k| !k.involves(id)));
        }
        Request::Top { id, sample, filters, shape } => {
            post(seq, &Response::Top(with(id, |l| l.top(&shape, sample, &filters))), None)
        }
        Request::Tree { id, sample, filters, shape, kind, zoom, search } => {
            let key = TreeKey { id, sample, filters: filters.clone(), shape: shape.clone(), kind: kind.clone() };
            let whole = TREES.with(|t| {
                t.borrow_mut().get_or_build(key, || match kind {
                    TreeKind::Plain => with(id, |l| l.tree(&shape, sample, &filters)),
                    TreeKind::DiffAgainst(base) => {
                        with_two(base, id, |b, c| diff_tree(b, c, &transforms_only(&shape), sample, &filters))
                    }
                    TreeKind::Sandwich(function, side) => {
                        with(id, |l| l.sandwich(&shape, sample, &filters, &function, side))
                    }
                })
            });
            match whole.map(|tree| flame_window(&tree, &zoom, &search)) {
                Ok((window, zoom, matched)) => {
                    post(seq, &Response::Tree(Ok(WindowMeta { zoom, matched })), Some(window.to_bytes()))
                }
                Err(e) => post(seq, &Response::Tree(Err(e)), None),
            }
        }
        Request::Diff { base, compare, sample, filters, shape, normalize } => {
            let shape = transforms_only(&shape);
            let report = with_two(base, compare, |b, c| diff_profiles(b, c, &shape, sample, &filters, normalize));
            post(seq, &Response::Diff(report), None);
        }
        Request::Goroutines { id, filter, earlier } => {
            let report = with(id, |l| {
                let report = l.goroutines(&filter)?;
                let growth = match earlier {
                    Some(e) => with_two(e, id, goroutine_growth).ok(),
                    None => None,
                };
                Ok((report, growth))
            });
            post(seq, &Response::Goroutines(report), None);
        }
        Request::Graph { id, sample, filters, shape, pruning } => {
            let graph = with(id, |l| session::call_graph_laid_out(&*l.shaped(&shape)?, sample, filters, pruning));
            post(seq, &Response::Graph(graph), None);
        }
        Request::Details { id, sample, filters, shape, function } => {
            let options = DetailsOptions { function, filters, sample_index: sample.to_string(), ..Default::default() };
            let report = with_shaped(id, &shape, |p| details(p, &options));
            post(seq, &Response::Details(report), None);
        }
        Request::Labels { id, sample, filters, shape } => {
            let summary = with_shaped(id, &shape, |p| label_summary(p, &sample.to_string(), &filters));
            post(seq, &Response::Labels(summary), None);
        }
        Request::Source { id, sample, filters, shape, functions } => {
            let options =
                SourceOptions { functions, sample_index: sample.to_string(), filters, ..SourceOptions::default() };
            let report = with_shaped(id, &shape, |p| source(p, &options));
            post(seq, &Response::Source(report), None);
        }
        Request::Timeline { id, sample, filters, shape, window, viewport, buckets } => {
            let report = with(id, |l| l.timeline(&shape, sample, filters, window, &viewport, buckets));
            post(seq, &Response::Timeline(report), None);
        }
        Request::Export { id, sample, filters, shape, format } => {
            let options = ExportOptions { sample_index: sample.to_string(), filters, ..ExportOptions::default() };
            match with_shaped(id, &shape, |p| export(p, format, &options)) {
                Ok(bytes) => post(seq, &Response::Export(Ok(())), Some(bytes)),
                Err(e) => post(seq, &Response::Export(Err(e)), None),
            }
        }
    }
}

/// Runs `f` as a User Timing measure named `stacklens NAME`, so DevTools' Performance
/// panel and scripts/bench-browser.mjs see how long the worker took for each request.
fn measured(name: &str, f: impl FnOnce()) {
    let Some(performance) = scope().performance() else { return f() };
    let start = format!("stacklens {name} started");
    let _ = performance.mark(&start);
    f();
    let _ = performance.measure_with_start_mark(&format!("stacklens {name}"), &start);
    performance.clear_marks_with_mark_name(&start);
    // The timeline keeps every entry: keep the last thousand at most.
    if MEASURED.with(|n| n.replace(n.get() + 1)) % 1000 == 999 {
        performance.clear_measures();
    }
}

/// Installs the message handler; called once by `worker.js` after the module loads.
pub fn run() {
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(|e: MessageEvent| {
        let data: Array = e.data().unchecked_into();
        let Some(json) = data.get(0).as_string() else { return };
        let bytes = data.get(1).dyn_into::<Uint8Array>().ok().map(|a| a.to_vec());
        match serde_json::from_str::<Envelope<Request>>(&json) {
            Ok(envelope) => measured(envelope.body.name(), || handle(envelope.seq, envelope.body, bytes)),
            Err(e) => post(0, &Response::Failed { id: u32::MAX, message: format!("bad request: {e}") }, None),
        }
    });
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    post(0, &Response::Ready, None);
    measured("warm-up", session::warm_up);
}
