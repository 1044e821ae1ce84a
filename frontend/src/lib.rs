//! The stacklens page. Everything is analysed in the page by stacklens-core compiled to
//! WASM; this crate only holds view state and renders.

pub mod app;

use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::Profile;

/// A profile the user loaded, under the name they gave it.
pub struct Loaded {
    pub name: String,
    pub profile: Profile,
}

impl Loaded {
    /// Parses bytes; the error names the file and says what is wrong with it.
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Self, String> {
        stacklens_core::parse(bytes)
            .map(|profile| Loaded { name: name.to_owned(), profile })
            .map_err(|e| format!("{name}: {e}"))
    }

    /// Sample type names, and the index pprof would show by default.
    pub fn sample_types(&self) -> (Vec<String>, usize) {
        let p = &self.profile;
        ((0..p.sample_types.len()).map(|i| p.sample_type_name(i).to_owned()).collect(), p.default_sample_index())
    }

    pub fn top(&self, sample_index: usize) -> Result<TopReport, String> {
        top(&self.profile, &TopOptions { sample_index: sample_index.to_string(), ..TopOptions::default() })
            .map_err(|e| e.to_string())
    }
}
