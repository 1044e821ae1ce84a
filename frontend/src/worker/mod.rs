//! The analysis worker: runs in a Web Worker (the page's own WASM module, started by
//! `worker.js`), owns the parsed profiles and answers the page's requests, so parsing
//! and analysis never block the page.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use js_sys::{Array, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, DedicatedWorkerGlobalScope, MessageEvent};

use stacklens_core::analysis::details::details;
use stacklens_core::analysis::sanitize::inventory;
use stacklens_core::analysis::source::{source, SourceOptions};
use stacklens_core::analysis::summary::meta;
use stacklens_core::analysis::tags::label_summary;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::tree::cache::{TreeCache, MAX_TREE_NODES, MIN_DETAIL_NODES};
use stacklens_core::analysis::tree::window::WindowMeta;
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::export::export;
use stacklens_core::import::IncrementalParse;
use stacklens_core::symbols::{looks_like_symbol_file, MappingReport};
use stacklens_core::{ProfileKind, Stage};

pub mod client;
pub mod protocol;
mod reading;
pub mod session;
mod symbols;

use protocol::{Ask, Envelope, FirstTree, Request, Response, Summary, TreeKey, TreeKind};
use session::{diff_profiles, diff_tree, goroutine_growth, Loaded};

thread_local! {
    static PROFILES: RefCell<HashMap<u32, Loaded>> = RefCell::new(HashMap::new());
    /// What the last symbolization of each profile said of its mappings.
    static SYMBOLIZED: RefCell<HashMap<u32, Vec<MappingReport>>> = RefCell::new(HashMap::new());
    /// Whole trees, and zoomed subtrees built alone (keyed by their path; empty: whole).
    static TREES: RefCell<TreeCache<(TreeKey, Vec<String>)>> = const { RefCell::new(TreeCache::new()) };
    static MEASURED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Messages that came while a parse waits on the browser ([`receive`]); `None` when
    /// none waits.
    static WAITING: RefCell<Option<VecDeque<Message>>> = const { RefCell::new(None) };
}

/// A message from the page: its JSON, and the file it hands over, if any.
type Message = (String, Option<Blob>);

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

/// Core's answer `f` of profile `id` prepared for `query`; its error as text.
fn with_prepared<T>(
    id: u32,
    query: &Query,
    f: impl FnOnce(&Prepared) -> stacklens_core::Result<T>,
) -> Result<T, String> {
    with(id, |l| l.prepared(query, f))
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

/// Progress of a parse, sent to the page when it moved by 2% at least and 50 ms have
/// passed (each message costs the page's thread a render, which competes with this one
/// and the browser's inflate for the cores; 20 a second move the bar smoothly enough):
/// reading fills the bar to a tenth, inflating to one half, decoding to 95% (folded
/// stacks, read line by line, go from reading to 95%; a gzip file the browser inflates
/// is decoded as it comes, both to 92%); building the first view does the rest.
struct ParseProgress {
    seq: u64,
    id: u32,
    megabytes: f64,
    last: f64,
    last_at: f64,
}

impl ParseProgress {
    fn new(seq: u64, id: u32, blob: &Blob) -> Self {
        ParseProgress { seq, id, megabytes: blob.size() / 1_048_576.0, last: 0.0, last_at: 0.0 }
    }

    fn report(&mut self, label: &str, overall: f64) {
        if overall - self.last < 0.02 {
            return;
        }
        let now = scope().performance().map_or(f64::INFINITY, |p| p.now());
        if now - self.last_at >= 50.0 {
            (self.last, self.last_at) = (overall, now);
            let stage = format!("{label} {:.1} MB", self.megabytes);
            post(self.seq, &Response::Progress { id: self.id, stage, fraction: overall }, None);
        }
    }
}

/// Reads and parses a profile, all in WebAssembly.
fn parse(seq: u64, id: u32, name: &str, blob: &Blob, first_tree: Option<FirstTree>) {
    let mut progress = ParseProgress::new(seq, id, blob);
    let loaded = match reading::is_folded(blob) {
        Ok(true) => {
            reading::parse_folded(blob, &mut |done| progress.report("reading folded stacks", 0.02 + 0.93 * done))
                .map(|profile| Loaded::new(name, profile))
                .map_err(|e| format!("{name}: {e}"))
        }
        Ok(false) => {
            let reading = Mark::new("reading");
            let read = reading::read_all(blob, &mut |done| progress.report("reading", 0.02 + 0.08 * done));
            drop(reading);
            read.map_err(|e| format!("{name}: {e}"))
                .and_then(|bytes| decode(name, IncrementalParse::new(), &bytes, &mut progress))
        }
        Err(e) => Err(format!("{name}: {e}")),
    };
    parsed(seq, id, loaded, first_tree);
}

/// Parses a gzip file the browser inflates (see [`reading::inflate_in_browser`]); one it
/// cannot goes to [`parse`].
async fn parse_gzip(seq: u64, id: u32, name: &str, blob: &Blob, first_tree: Option<FirstTree>) {
    let mut progress = ParseProgress::new(seq, id, blob);
    let inflating = Mark::new("inflating in the browser");
    let limit = stacklens_core::ParseOptions::default().max_inflated_bytes;
    // Decoded as it comes: the browser inflates on another thread meanwhile.
    let mut incremental = IncrementalParse::new();
    let inflated = reading::inflate_in_browser(
        blob,
        limit,
        &mut |done| progress.report("inflating and decoding", 0.02 + 0.9 * done),
        &mut |so_far| incremental.advance(so_far),
    )
    .await;
    drop(inflating);
    match inflated {
        Ok(Some(bytes)) => parsed(seq, id, decode(name, incremental, &bytes, &mut progress), first_tree),
        Ok(None) => parse(seq, id, name, blob, first_tree),
        Err(e) => parsed(seq, id, Err(format!("{name}: {e}")), None),
    }
}

/// Core's parse of a file's bytes, `parse` having been fed any part of them, with a
/// measure of each stage.
fn decode(name: &str, parse: IncrementalParse, bytes: &[u8], progress: &mut ParseProgress) -> Result<Loaded, String> {
    let (mut inflating, mut decoding) = (None, None);
    let loaded = Loaded::parse_reporting(name, parse, bytes, &mut |stage: Stage, fraction: f64| match stage {
        Stage::Inflating => {
            inflating.get_or_insert_with(|| Mark::new("inflating"));
            progress.report("inflating", 0.1 + 0.4 * fraction)
        }
        Stage::Decoding => {
            inflating = None;
            decoding.get_or_insert_with(|| Mark::new("decoding"));
            progress.report("decoding", 0.5 + 0.45 * fraction)
        }
    });
    drop(decoding);
    loaded
}

/// Keeps a parsed profile and tells the page, or tells it why there is none; then
/// builds the page's first tree, if it said which.
fn parsed(seq: u64, id: u32, loaded: Result<Loaded, String>, first_tree: Option<FirstTree>) {
    match loaded {
        Ok(mut loaded) => {
            if let Some(profile) = std::rc::Rc::get_mut(&mut loaded.profile) {
                let reports = symbols::symbolize(profile);
                SYMBOLIZED.with(|s| s.borrow_mut().insert(id, reports));
            }
            let summary = summary(id, &loaded);
            // A file already waiting behind this one is the one the page will show.
            let another_waits = WAITING.with(|w| w.borrow().as_ref().is_some_and(|q| q.iter().any(|m| m.1.is_some())));
            let ahead = first_tree.filter(|_| !another_waits).and_then(|first| first.key(id, &summary));
            PROFILES.with(|p| p.borrow_mut().insert(id, loaded));
            post(seq, &Response::Parsed { id, summary }, None);
            if let Some(key) = ahead {
                // An error is the page's to see when it asks.
                measured("tree ahead", || drop(whole_tree(&key)));
            }
        }
        Err(message) => post(seq, &Response::Failed { id, message }, None),
    }
}

/// What the page learns of a parsed profile.
fn summary(id: u32, loaded: &Loaded) -> Summary {
    let (sample_types, default_sample) = loaded.sample_types();
    let mappings =
        SYMBOLIZED.with(|s| symbols::mapping_statuses(&loaded.profile, s.borrow().get(&id).map_or(&[], Vec::as_slice)));
    Summary {
        kind: ProfileKind::of(&loaded.profile),
        sample_types,
        default_sample,
        meta: meta(&loaded.profile),
        mappings,
    }
}

/// Keeps a dropped binary or debug file, then names what it can of the profiles
/// already open; each that gained names is sent again.
fn add_symbol_file(seq: u64, id: u32, name: &str, blob: &Blob) {
    let file = match measured_value("symbol file", || symbols::add(name, blob)) {
        Ok(file) => file,
        Err(message) => return post(seq, &Response::Failed { id, message }, None),
    };
    post(seq, &Response::SymbolFile { id, file }, None);
    let ids: Vec<u32> = PROFILES.with(|p| p.borrow().keys().copied().collect());
    for profile_id in ids {
        // Only a profile with addresses still unnamed is copied and looked at again.
        let unnamed = with(profile_id, |l| Ok(l.profile.unnamed_locations().is_empty())).ok() == Some(false);
        let Some(mut profile) = with(profile_id, |l| Ok((*l.profile).clone())).ok().filter(|_| unnamed) else {
            continue;
        };
        let reports = measured_value("symbolize", || symbols::symbolize(&mut profile));
        let named: usize = reports
            .iter()
            .map(|r| match r.outcome {
                stacklens_core::symbols::Outcome::Symbolized { locations, .. } => locations,
                _ => 0,
            })
            .sum();
        if named == 0 {
            continue;
        }
        let loaded = PROFILES.with(|p| {
            let mut profiles = p.borrow_mut();
            let name = profiles.get(&profile_id).map(|l| l.name.clone()).unwrap_or_default();
            let loaded = measured_value("symbolized profile", || Loaded::new(&name, profile));
            let summary = summary_with(profile_id, &loaded, reports);
            profiles.insert(profile_id, loaded);
            summary
        });
        TREES.with(|t| t.borrow_mut().retain(|k| !k.0.involves(profile_id)));
        post(seq, &Response::Symbolized { id: profile_id, summary: loaded }, None);
    }
    symbols::forget_parsed();
}

/// [`summary`] after a symbolization that said `reports`.
fn summary_with(id: u32, loaded: &Loaded, reports: Vec<MappingReport>) -> Summary {
    SYMBOLIZED.with(|s| s.borrow_mut().insert(id, reports));
    summary(id, loaded)
}

/// Handles a message now, or, while a parse waits on the browser, once it is done: the
/// page's requests are answered in the order it sent them.
fn receive(json: String, blob: Option<Blob>) {
    let now = WAITING.with(|w| match w.borrow_mut().as_mut() {
        Some(queue) => {
            queue.push_back((json, blob));
            None
        }
        None => Some((json, blob)),
    });
    let Some((json, blob)) = now else { return };
    match (serde_json::from_str::<Envelope<Request>>(&json), blob) {
        (Ok(Envelope { seq, body: Request::Parse { id, name, first_tree } }), Some(blob))
            if browser_inflates(&blob) =>
        {
            WAITING.with(|w| *w.borrow_mut() = Some(VecDeque::new()));
            let mark = Mark::new("parse");
            wasm_bindgen_futures::spawn_local(async move {
                parse_gzip(seq, id, &name, &blob, first_tree).await;
                drop(mark);
                let waiting = WAITING.with(|w| w.borrow_mut().take()).unwrap_or_default();
                for (json, blob) in waiting {
                    receive(json, blob);
                }
            });
        }
        (Ok(envelope), blob) => measured(envelope.body.name(), || handle(envelope.seq, envelope.body, blob)),
        (Err(e), _) => post(0, &Response::Failed { id: u32::MAX, message: format!("bad request: {e}") }, None),
    }
}

/// Whether the browser inflates this file for [`parse_gzip`]: a gzip file of a MiB or
/// more (a small one inflates in WebAssembly in under a millisecond, and the stream's
/// round trips made a 54 KB profile's page 10–15 % slower to paint).
fn browser_inflates(blob: &Blob) -> bool {
    blob.size() >= 1_048_576.0 && reading::browser_inflates() && reading::is_gzip(blob).unwrap_or(false)
}

/// The whole tree `key` names, from the cache or built.
fn whole_tree(key: &TreeKey) -> Result<std::sync::Arc<CallTree>, String> {
    let TreeKey { id, query, kind } = key;
    TREES.with(|t| {
        t.borrow_mut().get_or_build((key.clone(), Vec::new()), || match kind {
            TreeKind::Plain => with(*id, |l| l.tree_below(query, Vec::new(), MAX_TREE_NODES)),
            TreeKind::DiffAgainst(base) => with_two(*base, *id, |b, c| diff_tree(b, c, query)),
            TreeKind::Sandwich(function, side) => with_prepared(*id, query, |p| {
                CallTree::sandwich(
                    p,
                    &TreeOptions { max_nodes: Some(MAX_TREE_NODES), ..TreeOptions::default() },
                    function,
                    *side,
                )
            }),
        })
    })
}

/// A window of the tree `key` names, zoomed at `zoom`: cut from the whole tree, or, zoomed
/// past what a pruned tree kept, from the zoomed subtree built alone.
fn tree_window(key: TreeKey, zoom: &[String], search: &str) -> Result<(CallTree, WindowMeta), String> {
    let whole = whole_tree(&key)?;
    let (window, meta) = whole.flame_window(zoom, search);
    let Some(path) = whole.detail_path(zoom, &meta).filter(|_| key.kind == TreeKind::Plain) else {
        return Ok((window, meta));
    };
    let budget = MAX_TREE_NODES.saturating_sub(whole.nodes.len()).max(MIN_DETAIL_NODES);
    let (id, query) = (key.id, key.query.clone());
    let detail = TREES.with(|t| {
        t.borrow_mut().get_or_build_keeping((key, path.clone()), whole.nodes.len(), || {
            with(id, |l| l.tree_below(&query, path.clone(), budget))
        })
    })?;
    Ok(whole.detail_window(&detail, &path, zoom, meta))
}

fn handle(seq: u64, request: Request, profile_bytes: Option<Blob>) {
    match request {
        Request::Parse { id, name, first_tree } => match profile_bytes {
            // A line's worth: kallsyms is known by its first line, the others by magic.
            Some(blob) if reading::head(&blob, 128.0).is_ok_and(|h| looks_like_symbol_file(&h)) => {
                add_symbol_file(seq, id, &name, &blob)
            }
            Some(blob) => parse(seq, id, &name, &blob, first_tree),
            None => post(seq, &Response::Failed { id, message: format!("{name}: no bytes came with it") }, None),
        },
        Request::Remove { id } => {
            PROFILES.with(|p| p.borrow_mut().remove(&id));
            SYMBOLIZED.with(|s| s.borrow_mut().remove(&id));
            TREES.with(|t| t.borrow_mut().retain(|k| !k.0.involves(id)));
        }
        Request::Ask { profile, query, ask } => answer(seq, profile, query, ask),
        Request::Diff { base, compare, query, normalize } => {
            let report = with_two(base, compare, |b, c| diff_profiles(b, c, &query, normalize));
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
        Request::Inventory { id } => {
            post(seq, &Response::Inventory(with(id, |l| Ok(inventory(&l.profile)))), None);
        }
        Request::Sanitize { id, sample, options } => {
            let sanitized = with(id, |l| {
                let clean = l.profile.sanitize(&options).map_err(|e| e.to_string())?;
                let query = Query { sample: sample.into(), ..Query::default() };
                let report = query.prepare(&clean).and_then(|p| top(&p, &TopOptions::default()));
                Ok((report.map_err(|e| e.to_string())?, stacklens_core::export::pprof::write(&clean)))
            });
            match sanitized {
                Ok((report, bytes)) => post(seq, &Response::Sanitized(Ok(report)), Some(bytes)),
                Err(e) => post(seq, &Response::Sanitized(Err(e)), None),
            }
        }
    }
}

/// Answers one [`Request::Ask`].
fn answer(seq: u64, id: u32, query: Query, ask: Ask) {
    match ask {
        Ask::Top => {
            let report = with_prepared(id, &query, |p| top(p, &TopOptions::default()));
            post(seq, &Response::Top(report), None)
        }
        Ask::Tree { kind, zoom, search } => match tree_window(TreeKey { id, query, kind }, &zoom, &search) {
            Ok((window, meta)) => post(seq, &Response::Tree(Ok(meta)), Some(window.to_bytes())),
            Err(e) => post(seq, &Response::Tree(Err(e)), None),
        },
        Ask::Graph { pruning } => {
            let graph = with_prepared(id, &query, |p| session::call_graph_laid_out(p, pruning));
            post(seq, &Response::Graph(graph), None);
        }
        Ask::Details { function } => {
            post(seq, &Response::Details(with_prepared(id, &query, |p| details(p, &function))), None);
        }
        Ask::Labels => post(seq, &Response::Labels(with_prepared(id, &query, label_summary)), None),
        Ask::Source { functions } => {
            let options = SourceOptions { functions, ..SourceOptions::default() };
            post(seq, &Response::Source(with_prepared(id, &query, |p| source(p, &options))), None);
        }
        Ask::Timeline { window, viewport, buckets } => {
            let report = with(id, |l| l.timeline(&query, window, &viewport, buckets));
            post(seq, &Response::Timeline(report), None);
        }
        Ask::Export { format } => match with_prepared(id, &query, |p| export(p, format)) {
            Ok(bytes) => post(seq, &Response::Export(Ok(())), Some(bytes)),
            Err(e) => post(seq, &Response::Export(Err(e)), None),
        },
    }
}

/// Runs `f` as a User Timing measure named `stacklens NAME`, so DevTools' Performance
/// panel and scripts/bench-browser.mjs see how long the worker took for each request.
fn measured(name: &str, f: impl FnOnce()) {
    measured_value(name, f)
}

/// [`measured`], for work with a result.
fn measured_value<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let mark = Mark::new(name);
    let value = f();
    drop(mark);
    value
}

/// A User Timing measure `stacklens NAME` from its making to its drop.
struct Mark {
    name: String,
}

impl Mark {
    fn new(name: &str) -> Self {
        if let Some(performance) = scope().performance() {
            let _ = performance.mark(&format!("stacklens {name} started"));
        }
        Mark { name: name.to_owned() }
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        let Some(performance) = scope().performance() else { return };
        let start = format!("stacklens {} started", self.name);
        let _ = performance.measure_with_start_mark(&format!("stacklens {}", self.name), &start);
        performance.clear_marks_with_mark_name(&start);
        // The timeline keeps every entry: keep the last thousand at most.
        if MEASURED.with(|n| n.replace(n.get() + 1)) % 1000 == 999 {
            performance.clear_measures();
        }
    }
}

/// Passes messages through the worker's code as the first file's would, for the same
/// reason as [`session::warm_up`]: WebAssembly compiles a function the first time it
/// runs, and [`receive`] (with [`handle`] and serde's code in it) took 20–40 ms to
/// compile when the user's first file came. The message it handles removes a profile
/// that does not exist, which answers nothing; the answers written are those of a tiny
/// gzip file, inflated here as a small file is.
fn warm_up_messages() {
    let json = |body: &Request| serde_json::to_string(&Envelope { seq: 0, body }).expect("requests serialize");
    receive(json(&Request::Remove { id: u32::MAX }), None);
    let tree = Request::Ask {
        profile: 0,
        query: Query::default(),
        ask: Ask::Tree { kind: TreeKind::Plain, zoom: Vec::new(), search: String::new() },
    };
    let _ = serde_json::from_str::<Envelope<Request>>(&json(&tree));
    if let Ok(loaded) = Loaded::parse("warm-up", &session::tiny_cpu_profile()) {
        let query = Query { sample: 1.into(), ..Query::default() };
        let tree = loaded.tree_below(&query, Vec::new(), MAX_TREE_NODES).map(|t| t.flame_window(&[], "").1);
        for body in [Response::Parsed { id: 0, summary: summary(0, &loaded) }, Response::Tree(tree)] {
            let _ = serde_json::to_string(&Envelope { seq: 0, body });
        }
    }
}

/// Installs the message handler; called once by `worker.js` after the module loads.
pub fn run() {
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(|e: MessageEvent| {
        let data: Array = e.data().unchecked_into();
        let Some(json) = data.get(0).as_string() else { return };
        receive(json, data.get(1).dyn_into::<Blob>().ok());
    });
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    // Ready once warm: a request sent before would only wait for the warm-up anyway.
    measured("warm-up", || {
        session::warm_up();
        warm_up_messages();
    });
    post(0, &Response::Ready, None);
}
