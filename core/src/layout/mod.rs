//! Geometry for the page to draw: flame-graph rectangles ([`flame`], re-exported here)
//! and the call graph's layered layout ([`graph`]).

pub mod flame;
pub mod graph;

pub use flame::{hit, layout, Rect, Viewport};
