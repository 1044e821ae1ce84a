//! Geometry for the page to draw: flame-graph rectangles ([`flame`], re-exported here),
//! the call graph's layered layout ([`graph`]), and flame graphs in Pyroscope's layout
//! ([`flamebearer`]).

pub mod flame;
pub mod flamebearer;
pub mod graph;

pub use flame::{hit, layout, Rect, Viewport};
