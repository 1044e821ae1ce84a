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
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::tree::Side;
use stacklens_core::analysis::Filters;
use stacklens_core::export::ExportFormat;
use stacklens_core::layout::graph::GraphLayout;

/// What a tree request asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TreeKind {
    Plain,
    /// A diff tree of `id` against this base profile.
    DiffAgainst(u32),
    Sandwich(String, Side),
}

/// What the worker changes in a profile before analysing it: the Firefox Profiler's
/// stack transforms, in order, and the time range chosen in the timeline (samples that
/// start in `[from, to)`). Filters, by contrast, are pprof's and part of each report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub transforms: Vec<Transform>,
    pub range: Option<(i64, i64)>,
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
    Top {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
    },
    /// A window of the tree zoomed at `zoom` (frame names from the root), with the
    /// value `search` matches in the whole tree.
    Tree {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        kind: TreeKind,
        zoom: Vec<String>,
        search: String,
    },
    Diff {
        base: u32,
        compare: u32,
        sample: usize,
        filters: Filters,
        /// Both profiles get the transforms; a time range belongs to one profile, so none.
        shape: Shape,
        normalize: bool,
    },
    Goroutines {
        id: u32,
        filter: String,
        earlier: Option<u32>,
    },
    /// Per-line values of the functions `functions` (a regex) matches, as pprof's `-list`.
    Source {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        functions: String,
    },
    /// pprof's call graph (its `-dot` nodes and edges at these settings), laid out.
    Graph {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        pruning: GraphPruning,
    },
    /// The details panel's function: its values, callers, callees, files and labels.
    Details {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        function: String,
    },
    /// Label keys and values with their shares of the sample type.
    Labels {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
    },
    /// The stack chart of `window` (the whole time span when `None`) and the activity
    /// histogram of the whole span. The page sends a shape without a range: the chart
    /// shows every sample, with the range drawn on it.
    Timeline {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        window: Option<(i64, i64)>,
        viewport: ChartViewport,
        buckets: usize,
    },
    /// The profile written as `format` (with `filters` applied; empty ones for none).
    Export {
        id: u32,
        sample: usize,
        filters: Filters,
        shape: Shape,
        format: ExportFormat,
    },
    /// What the profile gives away (paths, build ids, comments, labels), for the share panel.
    Inventory {
        id: u32,
    },
    /// The profile without what `options` removes: its top rows (the panel's preview)
    /// and, after the message, its gzipped pprof bytes (what Share uploads).
    Sanitize {
        id: u32,
        sample: usize,
        options: SanitizeOptions,
    },
}

impl Request {
    /// What the request asks, as the worker's User Timing names it (`stacklens tree`).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Parse { .. } => "parse",
            Request::Remove { .. } => "remove",
            Request::Top { .. } => "top",
            Request::Tree { .. } => "tree",
            Request::Diff { .. } => "diff",
            Request::Goroutines { .. } => "goroutines",
            Request::Source { .. } => "source",
            Request::Graph { .. } => "graph",
            Request::Details { .. } => "details",
            Request::Labels { .. } => "labels",
            Request::Timeline { .. } => "timeline",
            Request::Export { .. } => "export",
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
    pub sample: usize,
    pub filters: Filters,
    pub shape: Shape,
    pub kind: TreeKind,
}

impl TreeKey {
    pub fn involves(&self, profile: u32) -> bool {
        self.id == profile || self.kind == TreeKind::DiffAgainst(profile)
    }
}

/// About a window sent with a `Tree` response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WindowMeta {
    /// The zoomed node's index in the window.
    pub zoom: u32,
    /// The search and the value it matches in the whole tree (at least that much when
    /// the tree is pruned).
    pub matched: Option<(String, i64)>,
    /// The worker's tree left out subtrees narrower than this (0: it has every node).
    pub pruned_below: i64,
    /// Whether the window has every frame it would have from the whole tree.
    pub complete: bool,
}

/// What the page learns about a parsed profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// What it measures, as the API names profile types (cpu, memory, goroutine, …).
    pub kind: String,
    pub sample_types: Vec<String>,
    pub default_sample: usize,
    pub goroutine: bool,
    pub meta: ProfileMeta,
}

/// The page's first flame graph of a profile, as far as it is known before the profile
/// is: the sample type by name ([`Summary::sample_index`]), the filters and the shape.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FirstTree {
    pub wanted_sample: String,
    pub filters: Filters,
    pub shape: Shape,
}

impl FirstTree {
    /// The key of the tree the page will ask for, unless the profile opens in another
    /// view.
    pub fn key(&self, id: u32, summary: &Summary) -> Option<TreeKey> {
        summary.opens_in_flame_graph(&self.wanted_sample).then(|| TreeKey {
            id,
            sample: summary.sample_index(&self.wanted_sample),
            filters: self.filters.clone(),
            shape: self.shape.clone(),
            kind: TreeKind::Plain,
        })
    }
}

impl Summary {
    /// The sample type the page shows: the one named `wanted` (a link's), else the
    /// profile's default.
    pub fn sample_index(&self, wanted: &str) -> usize {
        self.sample_types.iter().position(|t| t == wanted).unwrap_or(self.default_sample)
    }

    /// Whether the page opens this profile in the view it is on rather than the
    /// goroutine report (a goroutine profile, unless a link names a sample type).
    pub fn opens_in_flame_graph(&self, wanted: &str) -> bool {
        !(self.goroutine && wanted.is_empty())
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
