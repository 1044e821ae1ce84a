//! The bridge from profile locations to report nodes. A location expands to one node per
//! inline line (innermost first), keyed at the chosen granularity, with pprof's
//! focus/ignore/hide/show and tag filters applied. Top, tree and diff all walk samples
//! through it.

use std::borrow::Cow;

use rustc_hash::FxHashMap as HashMap;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::filters::compile_regex;
pub use super::filters::Filters;
use super::labels::{with_label_frames, CompiledTagFilters, TagVerdicts};
use crate::model::{Line, Location, LocationId, Profile, SampleRef};
use crate::Result;

/// What one report node stands for, as pprof's `-granularity`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    #[default]
    Functions,
    /// Function and source file.
    Filefunctions,
    /// Function, file and line.
    Lines,
    /// Each address (with its symbol where known).
    Addresses,
}

impl Granularity {
    const NAMES: [(Granularity, &'static str); 4] = [
        (Self::Functions, "functions"),
        (Self::Filefunctions, "filefunctions"),
        (Self::Lines, "lines"),
        (Self::Addresses, "addresses"),
    ];
}

impl std::fmt::Display for Granularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = Self::NAMES.iter().find(|(g, _)| g == self).map_or("", |(_, name)| name);
        f.write_str(name)
    }
}

impl std::str::FromStr for Granularity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(g, _)| *g)
            .ok_or_else(|| format!("unknown granularity '{s}' (functions, filefunctions, lines, addresses)"))
    }
}

/// The package of a function name: Go's `compress/flate.(*compressor).deflate` →
/// `compress/flate`, `main.main` → `main`; C++'s and Rust's first `::` segment,
/// `std::vector<int>::push_back` → `std`, `core::ptr::drop_in_place<T>` → `core`;
/// names without one give "".
pub fn package_of(name: &str) -> &str {
    if let Some(colons) = name.find("::") {
        // A namespace or crate, unless the `::` is inside a template or argument list.
        return if name[..colons].contains(['<', '(', ' ']) { "" } else { &name[..colons] };
    }
    let start = name.rfind('/').map_or(0, |slash| slash + 1);
    match name[start..].find('.') {
        Some(dot) => &name[..start + dot],
        None if start > 0 => &name[..start - 1],
        None => "",
    }
}

/// [`Filters`] with their regexes compiled: once per prepared query, then shared by every
/// frame table and filter pass of it.
pub struct CompiledFilters {
    source: Filters,
    focus: Option<Regex>,
    ignore: Option<Regex>,
    hide: Option<Regex>,
    show: Option<Regex>,
    pub(crate) tags: CompiledTagFilters,
}

impl CompiledFilters {
    /// The filters as written.
    pub fn filters(&self) -> &Filters {
        &self.source
    }

    /// pprof's focus/ignore verdict for a location: `Some(true)` focused (or no focus),
    /// `Some(false)` ignored, `None` neither.
    pub(crate) fn location_verdict(&self, profile: &Profile, location: &Location) -> Option<bool> {
        let matches = |re: &Option<Regex>| re.as_ref().is_some_and(|re| location_matches(profile, location, re));
        if matches(&self.ignore) {
            Some(false)
        } else if self.focus.is_none() || matches(&self.focus) {
            Some(true)
        } else {
            None
        }
    }

    /// Which of a location's lines hide/show keep, innermost first. As pprof: a binary
    /// matching `hide` hides all of its frames, one matching `show` shows all of them;
    /// otherwise each line's function name or file decides.
    pub(crate) fn visible_lines<'a>(
        &'a self,
        profile: &'a Profile,
        location: &'a Location,
    ) -> impl Iterator<Item = bool> + 'a {
        let binary_hidden = self.hide.as_ref().is_some_and(|re| mapping_matches(profile, location, re));
        let binary_shown = self.show.as_ref().is_some_and(|re| mapping_matches(profile, location, re));
        location.lines.iter().map(move |line| {
            let function = profile.function(line.function);
            let (name, file) = (profile.str(function.name), profile.str(function.filename));
            let visible = |re: &Regex| re.is_match(name) || re.is_match(file);
            !(binary_hidden
                || self.hide.as_ref().is_some_and(visible)
                || (!binary_shown && self.show.as_ref().is_some_and(|re| !visible(re))))
        })
    }

    /// Whether a location without lines stays: as pprof, `show` keeps a location's
    /// matching lines, and one without lines has none to keep, even when its binary matches.
    pub(crate) fn keeps_unsymbolized(&self, profile: &Profile, location: &Location) -> bool {
        !(self.hide.as_ref().is_some_and(|re| mapping_matches(profile, location, re)) || self.show.is_some())
    }

    pub(crate) fn has_focus(&self) -> bool {
        self.focus.is_some()
    }

    pub(crate) fn has_ignore(&self) -> bool {
        self.ignore.is_some()
    }
}

impl Filters {
    pub fn compile(&self) -> Result<CompiledFilters> {
        Ok(CompiledFilters {
            source: self.clone(),
            focus: compile_regex("focus", &self.focus)?,
            ignore: compile_regex("ignore", &self.ignore)?,
            hide: compile_regex("hide", &self.hide)?,
            show: compile_regex("show", &self.show)?,
            tags: CompiledTagFilters::new(self)?,
        })
    }
}

/// [`FrameTable::single`] of a location with no node or several.
const SEVERAL: u32 = u32::MAX;

/// Per-location node lists and filter verdicts for one profile, as the filters see it
/// (with their label frames: walk [`FrameTable::profile`]'s samples, not the original's).
pub struct FrameTable<'a> {
    profile: Cow<'a, Profile>,
    names: Vec<String>,
    /// The source file of each node's function ("" when unknown).
    files: Vec<String>,
    /// Where each node was first met: a location and the index of the line there (`None`
    /// for a location without lines), to read the node's address, function and line back.
    origins: Vec<(LocationId, Option<u32>)>,
    /// For each location: (start, len) of its nodes in `nodes`.
    locations: Vec<(u32, u32)>,
    /// For each location: its node when it has exactly one (not inlined: the usual
    /// case, walked without reading `nodes`), else [`SEVERAL`].
    single: Vec<u32>,
    nodes: Vec<u32>,
    /// Whether each node in `nodes` is an inlined call (not the location's outermost line).
    inlined: Vec<bool>,
    focus_hit: Vec<bool>,
    ignore_hit: Vec<bool>,
    has_focus: bool,
    has_ignore: bool,
    tags: TagVerdicts,
    /// Whether hide/show left some location without frames: pprof then drops the
    /// samples left without any.
    hides_locations: bool,
}

impl<'a> FrameTable<'a> {
    pub fn new(original: &'a Profile, granularity: Granularity, f: &CompiledFilters) -> Result<Self> {
        let labelled = with_label_frames(original, f.filters());
        let profile = &*labelled;
        let mut index: HashMap<String, u32> = HashMap::default();
        let mut table = FrameTable {
            profile: Cow::Borrowed(original),
            names: Vec::new(),
            files: Vec::new(),
            origins: Vec::new(),
            locations: Vec::with_capacity(profile.locations.len()),
            single: Vec::with_capacity(profile.locations.len()),
            nodes: Vec::with_capacity(profile.locations.len()),
            inlined: Vec::with_capacity(profile.locations.len()),
            focus_hit: Vec::with_capacity(profile.locations.len()),
            ignore_hit: Vec::with_capacity(profile.locations.len()),
            has_focus: f.has_focus(),
            has_ignore: f.has_ignore(),
            tags: f.tags.verdicts(profile),
            hides_locations: false,
        };
        let mut key = String::new();
        for (location_index, location) in profile.locations.iter().enumerate() {
            let location_id = LocationId(location_index as u32);
            let verdict = f.location_verdict(profile, location);
            table.focus_hit.push(f.has_focus() && verdict == Some(true));
            table.ignore_hit.push(verdict == Some(false));
            let start = table.nodes.len() as u32;
            let n_lines = location.lines.len();
            if n_lines == 0 && f.keeps_unsymbolized(profile, location) {
                write_node_name(&mut key, profile, location, None, granularity);
                let node = table.intern(&mut index, &key, "", (location_id, None));
                table.nodes.push(node);
                table.inlined.push(false);
            }
            for (line_index, (line, visible)) in
                location.lines.iter().zip(f.visible_lines(profile, location)).enumerate()
            {
                if !visible {
                    continue;
                }
                write_node_name(&mut key, profile, location, Some(line), granularity);
                let file = profile.str(profile.function(line.function).filename);
                let node = table.intern(&mut index, &key, file, (location_id, Some(line_index as u32)));
                table.nodes.push(node);
                table.inlined.push(true);
            }
            // The outermost line left after hide/show is the call; the others are inlined
            // into it (pprof marks by position among the lines it kept).
            if n_lines > 0 && table.nodes.len() > start as usize {
                *table.inlined.last_mut().expect("a line was kept") = false;
            }
            table.hides_locations |= table.nodes.len() == start as usize;
            let len = table.nodes.len() as u32 - start;
            table.locations.push((start, len));
            table.single.push(if len == 1 { table.nodes[start as usize] } else { SEVERAL });
        }
        table.profile = labelled;
        Ok(table)
    }

    /// The profile the table was built for, with the filters' label frames.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn node_count(&self) -> usize {
        self.names.len()
    }

    pub fn name(&self, node: u32) -> &str {
        &self.names[node as usize]
    }

    pub fn file(&self, node: u32) -> &str {
        &self.files[node as usize]
    }

    /// Where `node` was first met: its location, and the index of its line there (`None`
    /// when the location has no lines).
    pub fn origin(&self, node: u32) -> (LocationId, Option<usize>) {
        let (location, line) = self.origins[node as usize];
        (location, line.map(|l| l as usize))
    }

    fn intern(
        &mut self,
        index: &mut HashMap<String, u32>,
        key: &str,
        file: &str,
        origin: (LocationId, Option<u32>),
    ) -> u32 {
        if let Some(&n) = index.get(key) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.push(key.to_owned());
        self.files.push(file.to_owned());
        self.origins.push(origin);
        index.insert(key.to_owned(), n);
        n
    }

    /// Nodes of a location, innermost first, with their "inlined call" flag.
    pub fn nodes(&self, location: u32) -> impl DoubleEndedIterator<Item = (u32, bool)> + '_ {
        let (start, len) = self.locations[location as usize];
        let range = start as usize..(start + len) as usize;
        self.nodes[range.clone()].iter().copied().zip(self.inlined[range].iter().copied())
    }

    /// A location of [`FrameTable::profile`]'s lines that became nodes, each with its
    /// node, innermost first: `new` makes one node per line that hide/show keep.
    /// `filters` must be those the table was built with.
    pub(crate) fn line_nodes<'t>(
        &'t self,
        filters: &'t CompiledFilters,
        location: LocationId,
    ) -> impl Iterator<Item = (&'t Line, u32)> + 't {
        let location_lines = self.profile.location(location);
        let visible = filters.visible_lines(&self.profile, location_lines);
        let kept = location_lines.lines.iter().zip(visible).filter_map(|(line, visible)| visible.then_some(line));
        kept.zip(self.nodes(location.0).map(|(node, _)| node))
    }

    /// pprof's verdict on a sample of [`FrameTable::profile`]: focus/ignore, then
    /// tagfocus/tagignore, and whether hide/show left it any frame.
    pub fn keeps(&self, sample: SampleRef<'_>) -> bool {
        if self.has_ignore && sample.locations.iter().any(|l| self.ignore_hit[l.0 as usize]) {
            return false;
        }
        if self.has_focus && !sample.locations.iter().any(|l| self.focus_hit[l.0 as usize]) {
            return false;
        }
        self.tags.keeps(sample)
            && (!self.hides_locations || sample.locations.iter().any(|l| self.locations[l.0 as usize].1 > 0))
    }

    /// The samples of [`FrameTable::profile`] that [`FrameTable::keeps`].
    pub fn kept_samples(&self) -> impl Iterator<Item = SampleRef<'_>> {
        self.profile.samples.iter().filter(|&s| self.keeps(s))
    }

    /// Calls `visit(node, inlined)` for a sample's frames from the root to the leaf.
    pub fn walk_root_first(&self, sample: SampleRef<'_>, mut visit: impl FnMut(u32, bool)) {
        for location in sample.locations.iter().rev() {
            match self.single[location.0 as usize] {
                SEVERAL => self.nodes(location.0).rev().for_each(|(node, inlined)| visit(node, inlined)),
                node => visit(node, false),
            }
        }
    }
}

/// Names every function by its raw symbol (`system_name`, falling back to `name`): the
/// mangled names importers demangled (`stacklens top --raw-names`). pprof files mostly
/// have equal names, so their reports do not change.
pub fn use_raw_names(profile: &mut Profile) {
    for f in &mut profile.functions {
        if !profile.strings.get(f.system_name).is_empty() {
            f.name = f.system_name;
        }
    }
}

/// A node's name as pprof's `NodeInfo.NameComponents` writes it after aggregating at
/// `granularity`: the address (for `Addresses`, when not 0), the function's name, then
/// `file:line`, the file, or, with neither a name nor a file, the binary (`[name]`) or
/// `<unknown>`. `line` is `None` for a location without lines.
fn write_node_name(
    key: &mut String,
    profile: &Profile,
    location: &Location,
    line: Option<&Line>,
    granularity: Granularity,
) {
    let (name, file, line_number) = line.map_or(("", "", 0), |line| {
        let function = profile.function(line.function);
        (profile.str(function.name), profile.str(function.filename), line.line)
    });
    let (file, line_number) = match granularity {
        Granularity::Functions => ("", 0),
        Granularity::Filefunctions => (file, 0),
        Granularity::Lines | Granularity::Addresses => (file, line_number),
    };
    key.clear();
    if granularity == Granularity::Addresses && location.address != 0 {
        key.push_str(&format!("{:016x} ", location.address));
    }
    key.push_str(name);
    let space = if name.is_empty() { "" } else { " " };
    if line_number != 0 {
        key.push_str(&format!("{space}{file}:{line_number}"));
    } else if !file.is_empty() {
        key.push_str(space);
        key.push_str(file);
    } else if name.is_empty() {
        key.push_str(&profile.unsymbolized_name(location));
    }
}

fn mapping_matches(profile: &Profile, location: &Location, re: &Regex) -> bool {
    location.mapping.is_some_and(|m| re.is_match(profile.str(profile.mapping(m).filename)))
}

/// pprof's `Location.matchesName`: any line's function name or file, or the binary.
fn location_matches(profile: &Profile, location: &Location, re: &Regex) -> bool {
    location.lines.iter().any(|line| {
        let f = profile.function(line.function);
        re.is_match(profile.str(f.name)) || re.is_match(profile.str(f.filename))
    }) || mapping_matches(profile, location, re)
}

/// A reusable "seen in this sample" set over node ids: O(1) reset per sample.
pub(crate) struct Stamps {
    marks: Vec<u32>,
    current: u32,
}

impl Stamps {
    pub fn new(n: usize) -> Self {
        Self { marks: vec![0; n], current: 0 }
    }

    pub fn next_sample(&mut self) {
        self.current = self.current.wrapping_add(1);
        if self.current == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.current = 1;
        }
    }

    /// True the first time `node` is seen in the current sample.
    pub fn first_visit(&mut self, node: u32) -> bool {
        let m = &mut self.marks[node as usize];
        let first = *m != self.current;
        *m = self.current;
        first
    }
}
