//! The stacklens page. Everything is analysed in the page by stacklens-core compiled to
//! WASM, in a worker: `app` holds the page's state, sources and panels, `views` draws
//! each view from core's reports, and `worker` runs the analysis.

pub mod app;
pub mod views;
pub mod worker;
