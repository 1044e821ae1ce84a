//! pprof's filters as the user writes them (`-focus`, `-ignore`, `-hide`, `-show` and the
//! `-tag*` options), and the one way their regexes are compiled. Below both the frame
//! table and the label filters, which each compile their part.

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// pprof's filters. `focus`, `ignore`, `hide` and `show` are regexes matching a frame's
/// function name or file, or its binary's name; the `tag_*` options work on sample
/// labels (see [`super::labels`]). The default filters nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Filters {
    /// Keep only samples with a frame matching this.
    pub focus: Option<String>,
    /// Drop samples with a frame matching this.
    pub ignore: Option<String>,
    /// Remove matching frames from stacks.
    pub hide: Option<String>,
    /// Keep only matching frames in stacks.
    pub show: Option<String>,
    /// Keep only samples with a matching label (`-tagfocus`): `key=regex[,regex…]` (any
    /// regex matches one of the key's string values), a bare `regex[,regex…]` (each
    /// matches some `key:value`), or a numeric range with units, `[key=]32kb`, `:64kb`,
    /// `4mb:`, `12kb:64mb` (`key=` narrows it to one key).
    pub tag_focus: Option<String>,
    /// Drop samples with a matching label (`-tagignore`), written as `tag_focus`.
    pub tag_ignore: Option<String>,
    /// Label keys that tag reports show (`-tagshow`): those matching this regex.
    pub tag_show: Option<String>,
    /// Label keys that tag reports leave out (`-taghide`).
    pub tag_hide: Option<String>,
    /// Label keys whose values become frames at the root of every stack (`-tagroot`),
    /// the first key outermost.
    pub tag_root: Vec<String>,
    /// Label keys whose values become frames at the leaf of every stack (`-tagleaf`),
    /// the last key innermost.
    pub tag_leaf: Vec<String>,
}

pub(crate) fn compile_regex(option: &'static str, re: &Option<String>) -> Result<Option<Regex>> {
    match re.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(re) => Regex::new(re).map(Some).map_err(|e| Error::InvalidRegex { option, reason: e.to_string() }),
    }
}
