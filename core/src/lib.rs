//! stacklens core: one profile model, importers for every supported format, and pure
//! analysis functions over it (top, call tree, diff, goroutines, flame-graph layout).
//! No I/O and no async, so the same code runs natively and in the browser (wasm32).

pub mod analysis;
pub mod api;
mod error;
pub mod export;
pub mod ids;
pub mod import;
mod kind;
pub mod layout;
pub mod model;
mod parallel;
pub mod proto_json;
pub mod report;
pub mod symbols;
pub mod timestamp;
pub mod units;

pub use error::{Error, Result};
pub use import::{parse, parse_owned, parse_with, parse_with_progress, ParseOptions, Stage};
pub use kind::ProfileKind;
pub use model::Profile;
