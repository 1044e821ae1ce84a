//! Pure analysis functions over [`crate::Profile`].

pub mod details;
pub mod diff;
pub mod filters;
pub mod frames;
pub mod gate;
pub mod goroutines;
pub mod graph;
pub mod labels;
pub mod merge;
pub mod query;
pub mod sanitize;
pub mod source;
pub mod summary;
pub mod tags;
pub mod timeline;
pub mod top;
pub mod transforms;
pub mod tree;

pub use details::{details, FunctionDetails};
pub use diff::{diff, DiffOptions, DiffReport};
pub use filters::Filters;
pub use frames::Granularity;
pub use goroutines::{analyze as analyze_goroutines, compare as compare_goroutines, GoroutineOptions};
pub use graph::{call_graph, CallGraph, GraphOptions};
pub use labels::LabelSummary;
pub use query::{Prepared, Query, SampleType};
pub use sanitize::SanitizeOptions;
pub use tags::label_summary;
pub use top::{top, TopOptions, TopReport};
pub use tree::{CallTree, TreeOptions};
