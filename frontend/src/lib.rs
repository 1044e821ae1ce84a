//! The stacklens page. Everything is analysed in the page by stacklens-core compiled to
//! WASM; this crate holds view state and renders, and never re-implements analysis.

pub mod app;
mod client;
mod flame;
mod protocol;
mod table;
mod url_state;
pub mod worker;

use std::sync::Arc;

use stacklens_core::analysis::diff::{diff, DiffOptions, DiffReport};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineComparison, GoroutineOptions, GoroutineReport};
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::tree::{CallTree, Side, TreeOptions};
use stacklens_core::analysis::Filters;
use stacklens_core::Profile;

/// A profile the user loaded, under the name they gave it.
pub struct Loaded {
    pub name: String,
    pub profile: Profile,
}

/// A call tree shared by the views; equal when it is the same tree.
#[derive(Clone)]
pub struct SharedTree(pub Arc<CallTree>);

impl PartialEq for SharedTree {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Loaded {
    /// Parses bytes; the error names the file and says what is wrong with it.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Self, String> {
        Self::parse_reporting(name, bytes, &mut |_, _| {})
    }

    /// [`Loaded::parse`], reporting progress.
    pub fn parse_reporting(
        name: &str,
        bytes: &[u8],
        progress: stacklens_core::import::Progress<'_>,
    ) -> Result<Self, String> {
        stacklens_core::parse_with_progress(bytes, &stacklens_core::ParseOptions::default(), progress)
            .map(|profile| Loaded { name: name.to_owned(), profile })
            .map_err(|e| format!("{name}: {e}"))
    }

    /// Sample type names, and the index pprof would show by default.
    pub fn sample_types(&self) -> (Vec<String>, usize) {
        let p = &self.profile;
        ((0..p.sample_types.len()).map(|i| p.sample_type_name(i).to_owned()).collect(), p.default_sample_index())
    }

    pub fn is_goroutine(&self) -> bool {
        !self.profile.goroutines.is_empty()
            || (0..self.profile.sample_types.len()).any(|i| self.profile.sample_type_name(i) == "goroutine")
    }

    pub fn top(&self, sample_index: usize, filters: &Filters) -> Result<TopReport, String> {
        let options =
            TopOptions { sample_index: sample_index.to_string(), filters: filters.clone(), ..TopOptions::default() };
        top(&self.profile, &options).map_err(|e| e.to_string())
    }

    pub fn tree(&self, sample_index: usize, filters: &Filters) -> Result<SharedTree, String> {
        let options =
            TreeOptions { sample_index: sample_index.to_string(), filters: filters.clone(), ..TreeOptions::default() };
        CallTree::build(&self.profile, &options).map(|t| SharedTree(Arc::new(t))).map_err(|e| e.to_string())
    }

    /// Callers or callees of one function (the sandwich view).
    pub fn sandwich(
        &self,
        sample_index: usize,
        filters: &Filters,
        function: &str,
        side: Side,
    ) -> Result<SharedTree, String> {
        let options =
            TreeOptions { sample_index: sample_index.to_string(), filters: filters.clone(), ..TreeOptions::default() };
        CallTree::sandwich(&self.profile, &options, function, side)
            .map(|t| SharedTree(Arc::new(t)))
            .map_err(|e| e.to_string())
    }

    pub fn goroutines(&self, filter: &str) -> Result<GoroutineReport, String> {
        let options = GoroutineOptions { filter: Some(filter.to_owned()), max_stacks: Some(200) };
        analyze(&self.profile, &options).map_err(|e| e.to_string())
    }
}

/// The diff of `compare` against `base` for the compared profile's sample type.
pub fn diff_profiles(
    base: &Loaded,
    compare: &Loaded,
    sample_index: usize,
    filters: &Filters,
    normalize: bool,
) -> Result<DiffReport, String> {
    let options = DiffOptions {
        sample_index: sample_index.to_string(),
        filters: filters.clone(),
        normalize,
        ..DiffOptions::default()
    };
    diff(&base.profile, &compare.profile, &options).map_err(|e| e.to_string())
}

pub fn diff_tree(
    base: &Loaded,
    compare: &Loaded,
    sample_index: usize,
    filters: &Filters,
) -> Result<SharedTree, String> {
    let options =
        TreeOptions { sample_index: sample_index.to_string(), filters: filters.clone(), ..TreeOptions::default() };
    CallTree::build_diff(&base.profile, &compare.profile, &options)
        .map(|t| SharedTree(Arc::new(t)))
        .map_err(|e| e.to_string())
}

pub fn goroutine_growth(base: &Loaded, later: &Loaded) -> Result<GoroutineComparison, String> {
    compare(&base.profile, &later.profile).map_err(|e| e.to_string())
}
