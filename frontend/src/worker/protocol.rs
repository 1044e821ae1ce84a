//! Messages between the page and its analysis worker. Each message is a JSON text,
//! optionally followed by raw bytes (a profile going in, a call tree coming out).

use serde::{Deserialize, Serialize};
use stacklens_core::analysis::details::FunctionDetails;
use stacklens_core::analysis::diff::DiffReport;
use stacklens_core::analysis::goroutines::{GoroutineComparison, GoroutineReport};
use stacklens_core::analysis::graph::CallGraph;
use stacklens_core::analysis::labels::LabelSummary;
use stacklens_core::analysis::sanitize::{Inventory, SanitizeOptions};
use stacklens_core::analysis::source::SourceReport;
use stacklens_core::analysis::summary::ProfileMeta;
use stacklens_core::analysis::timeline::{ChartViewport, Histogram, StackChart};
use stacklens_core::analysis::top::TopReport;
use stacklens_core::analysis::tree::window::WindowMeta;
use stacklens_core::analysis::tree::Side;
use stacklens_core::analysis::{Query, SampleType};
use stacklens_core::export::ExportFormat;
use stacklens_core::layout::graph::GraphLayout;
use stacklens_core::ProfileKind;

/// What a tree request asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TreeKind {
    Plain,
    /// A diff tree of `id` against this base profile.
    DiffAgainst(u32),
    Sandwich(String, Side),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// The profile's bytes follow the message. `first_tree`: the flame graph the page
    /// will ask for first, built as soon as the profile is parsed (while the page takes
    /// in the Parsed answer, and before it asks).
    Parse {
        id: u32,
        name: String,
        first_tree: Option<FirstTree>,
    },
    Remove {
        id: u32,
    },
    /// One question about one profile, asked with the page's query (sample type,
    /// filters, transforms and time range).
    Ask {
        profile: u32,
        query: Query,
        ask: Ask,
    },
    /// Both profiles get the query's transforms; a time range belongs to one profile, so
    /// the page sends none.
    Diff {
        base: u32,
        compare: u32,
        query: Query,
        normalize: bool,
    },
    Goroutines {
        id: u32,
        filter: String,
        earlier: Option<u32>,
    },
    /// What the profile gives away (paths, build ids, comments, labels), for the share panel.
    Inventory {
        id: u32,
    },
    /// The profile without what `options` removes: its top rows in the sample type
    /// `sample` (the panel's preview) and, after the message, its gzipped pprof bytes
    /// (what Share uploads).
    Sanitize {
        id: u32,
        sample: usize,
        options: SanitizeOptions,
    },
}

/// What a [`Request::Ask`] asks of its profile.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Ask {
    Top,
    /// A window of the tree zoomed at `zoom` (frame names from the root), with the
    /// value `search` matches in the whole tree.
    Tree {
        kind: TreeKind,
        zoom: Vec<String>,
        search: String,
    },
    /// Per-line values of the functions `functions` (a regex) matches, as pprof's `-list`.
    Source {
        functions: String,
    },
    /// pprof's call graph (its `-dot` nodes and edges at these settings), laid out.
    Graph {
        pruning: GraphPruning,
    },
    /// The details panel's function: its values, callers, callees, files and labels.
    Details {
        function: String,
    },
    /// Label keys and values with their shares of the sample type.
    Labels,
    /// The stack chart of `window` (the whole time span when `None`) and the activity
    /// histogram of the whole span. The page asks with a query without a range: the
    /// chart shows every sample, with the range drawn on it.
    Timeline {
        window: Option<(i64, i64)>,
        viewport: ChartViewport,
        buckets: usize,
    },
    /// The profile written as `format`.
    Export {
        format: ExportFormat,
    },
}

impl Request {
    /// What the request asks, as the worker's User Timing names it (`stacklens tree`).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Parse { .. } => "parse",
            Request::Remove { .. } => "remove",
            Request::Ask { ask, .. } => match ask {
                Ask::Top => "top",
                Ask::Tree { .. } => "tree",
                Ask::Source { .. } => "source",
                Ask::Graph { .. } => "graph",
                Ask::Details { .. } => "details",
                Ask::Labels => "labels",
                Ask::Timeline { .. } => "timeline",
                Ask::Export { .. } => "export",
            },
            Request::Diff { .. } => "diff",
            Request::Goroutines { .. } => "goroutines",
            Request::Inventory { .. } => "inventory",
            Request::Sanitize { .. } => "sanitize",
        }
    }
}

/// pprof's `-nodefraction`, `-edgefraction` and `-nodecount`, and the node the graph
/// is focused on (only the samples through it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphPruning {
    pub node_fraction: f64,
    pub edge_fraction: f64,
    pub node_count: usize,
    pub focus: Option<String>,
}

/// A call graph, core's drawing of it, and pprof's legend for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaidOutGraph {
    pub graph: CallGraph,
    pub layout: GraphLayout,
    pub legend: Vec<String>,
}

/// Which whole tree a window is cut from (the worker's cache key).
#[derive(Clone, Debug, PartialEq)]
pub struct TreeKey {
    pub id: u32,
    pub query: Query,
    pub kind: TreeKind,
}

impl TreeKey {
    pub fn involves(&self, profile: u32) -> bool {
        self.id == profile || self.kind == TreeKind::DiffAgainst(profile)
    }
}

/// What the page learns about a parsed profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// What it measures, as the API names profile types (cpu, memory, goroutine, …).
    pub kind: ProfileKind,
    pub sample_types: Vec<String>,
    pub default_sample: usize,
    pub meta: ProfileMeta,
    /// The binaries it maps, and whether their addresses have names.
    pub mappings: Vec<MappingStatus>,
}

/// One mapping of a profile, for the symbols panel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MappingStatus {
    pub file: String,
    /// Lowercase hex; empty when the profile gives none.
    pub build_id: String,
    pub locations: usize,
    /// Locations with names.
    pub named: usize,
    /// What the last symbolization said of it (found where, not found, another build).
    pub said: Option<String>,
}

/// A binary or debug file dropped into the page, as the worker read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SymbolFileInfo {
    pub name: String,
    pub build_id: Option<String>,
    pub debug_link: Option<String>,
    /// Whether its code is here (a binary) or only its debug information.
    pub has_code: bool,
    /// Whether it names anything (DWARF or a symbol table).
    pub has_names: bool,
    /// Whether it is the kernel's kallsyms, which names only kernel frames.
    #[serde(default)]
    pub kernel: bool,
}

/// The page's first flame graph of a profile, as far as it is known before the profile
/// is: its query, whose sample type is the one the address names ([`Summary::sample_index`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FirstTree {
    pub query: Query,
}

impl FirstTree {
    /// The key of the tree the page will ask for, unless the profile opens in another
    /// view.
    pub fn key(&self, id: u32, summary: &Summary) -> Option<TreeKey> {
        summary.opens_in_flame_graph(&self.query.sample).then(|| TreeKey {
            id,
            query: Query { sample: summary.sample_index(&self.query.sample).into(), ..self.query.clone() },
            kind: TreeKind::Plain,
        })
    }
}

impl Summary {
    /// The sample type the page shows: the one `wanted` names (a link's), else the
    /// profile's default.
    pub fn sample_index(&self, wanted: &SampleType) -> usize {
        wanted.resolve_in(&self.sample_types, self.default_sample).unwrap_or(self.default_sample)
    }

    /// Whether the page opens this profile in the view it is on rather than the
    /// goroutine report (a goroutine profile, unless a link names a sample type).
    pub fn opens_in_flame_graph(&self, wanted: &SampleType) -> bool {
        !(self.kind == ProfileKind::Goroutine && *wanted == SampleType::Default)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    Ready,
    Progress {
        id: u32,
        stage: String,
        fraction: f64,
    },
    Parsed {
        id: u32,
        summary: Summary,
    },
    Failed {
        id: u32,
        message: String,
    },
    /// The file sent to parse as `id` is a binary or debug file: kept for symbols.
    SymbolFile {
        id: u32,
        file: SymbolFileInfo,
    },
    /// Profile `id` gained names from a file that came after it.
    Symbolized {
        id: u32,
        summary: Summary,
    },
    /// For `Tree`, the window's bytes follow the message.
    Tree(Result<WindowMeta, String>),
    Top(Result<TopReport, String>),
    Diff(Result<DiffReport, String>),
    Goroutines(Result<(GoroutineReport, Option<GoroutineComparison>), String>),
    Labels(Result<LabelSummary, String>),
    Graph(Result<LaidOutGraph, String>),
    Details(Result<FunctionDetails, String>),
    Source(Result<SourceReport, String>),
    /// For `Export`, the file's bytes follow the message.
    Export(Result<(), String>),
    Timeline(Result<Timeline, String>),
    Inventory(Result<Inventory, String>),
    /// The sanitized profile's top rows; its gzipped pprof bytes follow the message.
    Sanitized(Result<TopReport, String>),
}

/// The timeline view's answer: what it draws, or why the profile has no timeline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Timeline {
    Drawn {
        chart: StackChart,
        histogram: Histogram,
    },
    /// Core's reason (its format records no sample times).
    Unavailable(String),
}

/// A request or response on the wire: (sequence number, message).
#[derive(Serialize, Deserialize)]
pub struct Envelope<T> {
    pub seq: u64,
    pub body: T,
}
