//! The page's state: every signal the panels and views share, in one `Copy` struct
//! given to them as a Leptos context, and the worker's answers to it.

use std::rc::Rc;

use leptos::prelude::*;
use stacklens_core::analysis::diff::Mover;
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::{Filters, Query, SampleType};

use super::ranges::RangeProfile;

use super::url_state::HashState;
use crate::worker::client::Client;
use crate::worker::protocol::{FirstTree, Request, Response, Summary, SymbolFileInfo};
use web_sys::Blob;

/// A parsed profile, as the page knows it.
#[derive(Clone, PartialEq)]
pub struct Entry {
    pub id: u32,
    pub name: String,
    pub summary: Summary,
}

/// A profile being parsed.
#[derive(Clone, PartialEq)]
pub struct Loading {
    pub id: u32,
    pub name: String,
    pub stage: String,
    pub fraction: f64,
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ViewKind {
    Flame,
    Top,
    Diff,
    Goroutines,
    Sandwich,
    Labels,
    Source,
    Graph,
    Timeline,
}

impl ViewKind {
    pub const ALL: [(ViewKind, &'static str); 9] = [
        (ViewKind::Flame, "Flame graph"),
        (ViewKind::Top, "Top"),
        (ViewKind::Graph, "Graph"),
        (ViewKind::Sandwich, "Sandwich"),
        (ViewKind::Diff, "Diff"),
        (ViewKind::Goroutines, "Goroutines"),
        (ViewKind::Labels, "Labels"),
        (ViewKind::Source, "Source"),
        (ViewKind::Timeline, "Time order"),
    ];

    pub fn key(self) -> &'static str {
        match self {
            ViewKind::Flame => "flame",
            ViewKind::Top => "top",
            ViewKind::Diff => "diff",
            ViewKind::Goroutines => "goroutines",
            ViewKind::Sandwich => "sandwich",
            ViewKind::Labels => "labels",
            ViewKind::Source => "source",
            ViewKind::Graph => "graph",
            ViewKind::Timeline => "timeline",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.iter().map(|&(k, _)| k).find(|k| k.key() == key)
    }
}

/// A worker's answer to one view's question: none yet, the report, or why not.
pub type Answer<T> = RwSignal<Option<Result<T, String>>>;

/// Everything the page's parts share. Signals are handles, so the struct is `Copy`.
#[derive(Copy, Clone)]
pub struct State {
    pub client: StoredValue<Rc<Client>, LocalStorage>,
    /// Parsed profiles in the order they were loaded, and those still parsing.
    pub entries: RwSignal<Vec<Entry>>,
    pub loading: RwSignal<Vec<Loading>>,
    pub active: RwSignal<Option<u32>>,
    pub next_id: StoredValue<u32>,
    pub errors: RwSignal<Vec<String>>,
    pub view_kind: RwSignal<ViewKind>,
    pub sample_index: RwSignal<usize>,
    pub focus: RwSignal<String>,
    pub ignore: RwSignal<String>,
    pub hide: RwSignal<String>,
    /// pprof's `-tagfocus` and `-tagignore`, and the label keys at the root of stacks (`-tagroot`).
    pub tag_focus: RwSignal<String>,
    pub tag_ignore: RwSignal<String>,
    pub tag_root: RwSignal<Vec<String>>,
    pub search: RwSignal<String>,
    /// The flame graph's zoom (shared with the diff's), as frame names from the root.
    pub zoom: RwSignal<Vec<String>>,
    /// The part of the zoomed frame's span the flame graph shows (`+`, `-`, arrows).
    pub span: RwSignal<(f64, f64)>,
    pub icicle: RwSignal<bool>,
    /// The flame view with the top table beside it (Pyroscope's "both"), and the table's
    /// share of the width.
    pub with_table: RwSignal<bool>,
    pub split: RwSignal<f64>,
    pub normalize: RwSignal<bool>,
    pub base_id: RwSignal<Option<u32>>,
    pub compare_id: RwSignal<Option<u32>>,
    pub goroutine_filter: RwSignal<String>,
    pub selected_row: RwSignal<usize>,
    /// The keyboard shortcuts list (`?`).
    pub shortcuts_open: RwSignal<bool>,
    /// The selected function (a click in a view): the details panel's, the sandwich's and
    /// the source view's.
    pub selected_fn: RwSignal<Option<String>>,
    /// Source files the user dropped on the source view: (path as given, text).
    pub source_files: RwSignal<Vec<(String, String)>>,
    pub callers_zoom: RwSignal<Vec<String>>,
    pub callees_zoom: RwSignal<Vec<String>>,
    /// The sample type the address asks for, applied when a profile arrives.
    pub wanted_sample: StoredValue<SampleType>,
    /// The address's zoom applies to the profiles it names, until the user zooms.
    pub wanted_zoom: StoredValue<Vec<String>>,
    /// URLs the loaded profiles were fetched from (kept in the address).
    pub sources: RwSignal<Vec<String>>,
    /// The tenant a share link names.
    pub tenant: StoredValue<Option<String>>,
    /// A diff to open once both profiles are parsed: (base id, compared id) ("Compare
    /// with baseline", or two ranges of the capture history).
    pub pending_compare: StoredValue<Option<(u32, u32)>>,
    /// The Firefox Profiler's stack transforms, in the order they were applied.
    pub transforms: RwSignal<Vec<Transform>>,
    /// The time range chosen in the timeline (the active profile's sample times).
    pub range: RwSignal<Option<(i64, i64)>>,
    /// Profiles merged from a time range of the server's (the capture history's
    /// timeline), by profile id: a function's trend over time is offered for them.
    pub range_profiles: RwSignal<Vec<(u32, RangeProfile)>>,
    /// The server's top movers between two ranges opened as (base id, compare id).
    pub range_movers: RwSignal<Option<(u32, u32, Vec<Mover>)>>,
    /// Binaries and debug files dropped into the page, which the worker keeps for names.
    pub symbol_files: RwSignal<Vec<SymbolFileInfo>>,
    pub current: Memo<Option<Entry>>,
    /// What every view asks of the active profile: the sample type, pprof's filters, the
    /// transforms and the time range.
    pub query: Memo<Query>,
}

impl State {
    /// The state the address asks for, with a started analysis worker.
    pub fn new(initial: &HashState, tenant: Option<String>) -> Self {
        let entries = RwSignal::new(Vec::<Entry>::new());
        let active = RwSignal::new(None::<u32>);
        let wanted = &initial.query;
        let text = |filter: &Option<String>| RwSignal::new(filter.clone().unwrap_or_default());
        let (focus, ignore, hide) =
            (text(&wanted.filters.focus), text(&wanted.filters.ignore), text(&wanted.filters.hide));
        let (tag_focus, tag_ignore, tag_root) = (
            text(&wanted.filters.tag_focus),
            text(&wanted.filters.tag_ignore),
            RwSignal::new(wanted.filters.tag_root.clone()),
        );
        let (transforms, range) = (RwSignal::new(wanted.transforms.clone()), RwSignal::new(wanted.range));
        let sample_index = RwSignal::new(0);
        let client = Client::new();
        let state = State {
            client: StoredValue::new_local(client.clone()),
            entries,
            loading: RwSignal::new(Vec::new()),
            active,
            next_id: StoredValue::new(0),
            errors: RwSignal::new(Vec::new()),
            view_kind: RwSignal::new(ViewKind::from_key(&initial.view).unwrap_or(ViewKind::Flame)),
            sample_index,
            focus,
            ignore,
            hide,
            tag_focus,
            tag_ignore,
            tag_root,
            search: RwSignal::new(initial.search.clone()),
            zoom: RwSignal::new(Vec::new()),
            span: RwSignal::new((0.0, 1.0)),
            icicle: RwSignal::new(false),
            with_table: RwSignal::new(false),
            split: RwSignal::new(0.45),
            normalize: RwSignal::new(false),
            base_id: RwSignal::new(None),
            compare_id: RwSignal::new(None),
            goroutine_filter: RwSignal::new(String::new()),
            selected_row: RwSignal::new(0),
            shortcuts_open: RwSignal::new(false),
            selected_fn: RwSignal::new(None),
            source_files: RwSignal::new(Vec::new()),
            callers_zoom: RwSignal::new(Vec::new()),
            callees_zoom: RwSignal::new(Vec::new()),
            wanted_sample: StoredValue::new(wanted.sample.clone()),
            wanted_zoom: StoredValue::new(initial.zoom.clone()),
            sources: RwSignal::new(Vec::new()),
            tenant: StoredValue::new(tenant),
            pending_compare: StoredValue::new(None),
            transforms,
            range,
            range_profiles: RwSignal::new(Vec::new()),
            range_movers: RwSignal::new(None),
            symbol_files: RwSignal::new(Vec::new()),
            current: Memo::new(move |_| {
                let id = active.get()?;
                entries.with(|e| e.iter().find(|x| x.id == id).cloned())
            }),
            query: Memo::new(move |_| Query {
                sample: sample_index.get().into(),
                filters: Filters {
                    focus: Some(focus.get()),
                    ignore: Some(ignore.get()),
                    hide: Some(hide.get()),
                    tag_focus: Some(tag_focus.get()),
                    tag_ignore: Some(tag_ignore.get()),
                    tag_root: tag_root.get(),
                    ..Filters::default()
                },
                transforms: transforms.get(),
                range: range.get(),
                ..Query::default()
            }),
        };
        client.start(move |event| state.on_worker_event(event));
        state
    }

    /// Bumped when the worker restarts: what depends on it asks again.
    pub fn generation(&self) -> RwSignal<u32> {
        self.client.with_value(|c| c.generation)
    }

    pub fn report(&self, error: String) {
        self.errors.update(|l| l.push(error));
    }

    /// Back to the whole graph, without asking again when it already shows it.
    pub fn reset(zoom: RwSignal<Vec<String>>) {
        if zoom.with_untracked(|z| !z.is_empty()) {
            zoom.set(Vec::new());
        }
    }

    /// Selects `function` (or none). Choosing the one already selected changes nothing:
    /// the details panel, the sandwich and the source view would otherwise ask the
    /// worker again and build themselves anew (a zoom into a frame selects it).
    pub fn select(&self, function: Option<String>) {
        self.selected_fn.maybe_update(|f| {
            let changed = *f != function;
            if changed {
                *f = function;
            }
            changed
        });
    }

    /// Asks the worker and stores the answer in `target`, unless a newer question was
    /// asked meanwhile (`token` counts questions per target) or the view that asked is
    /// gone (its signals disposed).
    pub fn ask<T: Send + Sync + 'static>(
        &self,
        token: StoredValue<u64>,
        target: Answer<T>,
        request: Request,
        decode: impl FnOnce(Response, Option<Vec<u8>>) -> Option<Result<T, String>> + 'static,
    ) {
        let mine = token.get_value() + 1;
        token.set_value(mine);
        self.client.with_value(|c| {
            c.request(request, move |response, bytes| {
                if token.try_get_value() == Some(mine) {
                    target.try_set(decode(response, bytes));
                }
            })
        });
    }

    /// Adds a stack transform (once). The zoom goes: it names frames of the old stacks.
    pub fn apply(&self, transform: Transform) {
        if self.transforms.with_untracked(|t| t.contains(&transform)) {
            return;
        }
        self.transforms.update(|t| t.push(transform));
        Self::reset(self.zoom);
    }

    /// Hands a profile's bytes to the worker; returns its id. Files opened here (not
    /// fetched) are kept in the browser so a reload brings them back.
    /// Opens bytes made or fetched in the page (copied once into a `Blob`).
    pub fn add_bytes(&self, name: String, bytes: Result<Vec<u8>, String>, keep_locally: bool) -> Option<u32> {
        let source = bytes.and_then(|b| {
            super::download::blob(&b, "application/octet-stream").map_err(|e| format!("{name}: cannot keep it: {e:?}"))
        });
        self.add(name, source, keep_locally)
    }

    /// Opens a profile: its tab shows progress until the worker has parsed it.
    pub fn add(&self, name: String, source: Result<Blob, String>, keep_locally: bool) -> Option<u32> {
        let source = match source {
            Ok(b) => b,
            Err(e) => {
                self.report(e);
                return None;
            }
        };
        // Two files of the same name (base/cpu.pb.gz, compare/cpu.pb.gz) get distinct tabs.
        let taken = self.entries.with_untracked(|e| {
            e.iter().filter(|x| x.name == name || x.name.starts_with(&format!("{name} #"))).count()
        }) + self.loading.with_untracked(|l| l.iter().filter(|x| x.name == name).count());
        let name = if taken == 0 { name } else { format!("{name} #{}", taken + 1) };
        let id = self.next_id.get_value();
        self.next_id.set_value(id + 1);
        let size = source.size() / 1_048_576.0;
        self.loading.update(|l| {
            l.push(Loading { id, name: name.clone(), stage: format!("sending {size:.1} MB"), fraction: 0.02 })
        });
        if keep_locally {
            super::local_store::keep(name.clone(), source.clone());
        }
        // Opened in the flame graph (not in a comparison a link asks for), its tree is the
        // first the page asks for: the worker builds it ahead (see `Request::Parse`).
        let in_flame_graph =
            self.view_kind.get_untracked() == ViewKind::Flame && self.pending_compare.get_value().is_none();
        let first_tree = in_flame_graph.then(|| FirstTree {
            query: Query { sample: self.wanted_sample.get_value(), ..self.query.get_untracked() },
        });
        self.client.with_value(|c| c.parse(id, &name, source, first_tree));
        Some(id)
    }

    /// Closes a profile: its tab, the worker's copy and the browser's.
    pub fn remove(&self, id: u32) {
        let name = self.entries.with_untracked(|l| l.iter().find(|x| x.id == id).map(|x| x.name.clone()));
        self.entries.update(|list| list.retain(|x| x.id != id));
        self.client.with_value(|c| c.remove(id));
        if let Some(name) = name {
            super::local_store::forget(name);
        }
        if self.active.get_untracked() == Some(id) {
            self.active.set(self.entries.with_untracked(|l| l.last().map(|x| x.id)));
        }
    }

    /// Opens the diff of the pending pair once both are parsed; true when it did.
    pub fn compare_pending(&self) -> bool {
        let Some((baseline, compared)) = self.pending_compare.get_value() else { return false };
        if !self.entries.with_untracked(|e| [baseline, compared].iter().all(|id| e.iter().any(|x| x.id == *id))) {
            return false;
        }
        self.pending_compare.set_value(None);
        self.base_id.set(Some(baseline));
        self.compare_id.set(Some(compared));
        self.active.set(Some(compared));
        self.view_kind.set(ViewKind::Diff);
        true
    }

    fn on_worker_event(self, event: Response) {
        match event {
            Response::Progress { id, stage, fraction } => self.loading.update(|l| {
                if let Some(x) = l.iter_mut().find(|x| x.id == id) {
                    x.stage = stage;
                    x.fraction = fraction;
                }
            }),
            Response::Parsed { id, summary } => self.parsed(id, summary),
            Response::SymbolFile { id, file } => {
                self.loading.update(|l| l.retain(|x| x.id != id));
                self.symbol_files.update(|f| f.push(file));
            }
            // The views ask again: the entry they read changed.
            Response::Symbolized { id, summary } => self.entries.update(|e| {
                if let Some(entry) = e.iter_mut().find(|x| x.id == id) {
                    entry.summary = summary;
                }
            }),
            Response::Failed { id, message } => {
                // A file that does not parse is not worth restoring.
                let failed = self.loading.with_untracked(|l| l.iter().find(|x| x.id == id).map(|x| x.name.clone()));
                if let Some(failed) = failed {
                    super::local_store::forget(failed);
                }
                self.loading.update(|l| l.retain(|x| x.id != id));
                self.report(message);
            }
            _ => {}
        }
    }

    fn parsed(self, id: u32, summary: Summary) {
        // A profile re-sent to a restarted worker is already an entry.
        let Some(done) = self.loading.with_untracked(|l| l.iter().find(|x| x.id == id).cloned()) else { return };
        self.loading.update(|l| l.retain(|x| x.id != id));
        let wanted = self.wanted_sample.get_value();
        self.sample_index.set(summary.sample_index(&wanted));
        let in_flame_graph = summary.opens_in_flame_graph(&wanted);
        self.entries.update(|e| e.push(Entry { id, name: done.name, summary }));
        // Two profiles loaded: the earlier is the base, the newer is compared.
        let ids: Vec<u32> = self.entries.with_untracked(|e| e.iter().map(|e| e.id).collect());
        if ids.len() >= 2 {
            self.base_id.set(Some(ids[ids.len() - 2]));
            self.compare_id.set(Some(id));
        }
        self.active.set(Some(id));
        if self.pending_compare.get_value().is_some_and(|(b, c)| b == id || c == id) {
            self.compare_pending();
        }
        self.zoom.set(self.wanted_zoom.get_value());
        if !in_flame_graph {
            self.view_kind.set(ViewKind::Goroutines);
        }
    }
}
