//! Profiles from frames named by a function and a module (DTrace, macOS `sample`, VTune
//! and Visual Studio CSV): one location per distinct (module, function), the module as
//! the location's mapping; call trees printed one node per row; CSV fields.

use rustc_hash::FxHashMap as HashMap;

use super::demangle::add_printed_symbol_function;
use super::text::{self, text_error};
use super::{ParseOptions, Room};
use crate::model::{Label, Line, LocationId, MappingId, Profile, Sample, SourceFormat};
use crate::Result;

/// Builds a profile from frames named by function and module.
pub(crate) struct NamedFrames {
    pub profile: Profile,
    /// Given to the samples added from now on.
    pub labels: Vec<Label>,
    locations: HashMap<(String, String), LocationId>,
    modules: HashMap<String, MappingId>,
    room: Room,
}

impl NamedFrames {
    /// A profile with these (type, unit) sample types, growing within `options`.
    pub fn new(source: SourceFormat, sample_types: &[(&str, &str)], options: &ParseOptions) -> Self {
        let mut profile = Profile::new(source);
        for (kind, unit) in sample_types {
            let vt = profile.value_type(kind, unit);
            profile.sample_types.push(vt);
        }
        let (locations, modules, room) = (HashMap::default(), HashMap::default(), Room::new(options));
        Self { profile, labels: Vec::new(), locations, modules, room }
    }

    /// The location of `function` in `module` (`""`: no module).
    pub fn frame(&mut self, function: &str, module: &str) -> LocationId {
        let key = (module.to_owned(), function.to_owned());
        if let Some(&l) = self.locations.get(&key) {
            return l;
        }
        let p = &mut self.profile;
        let function = add_printed_symbol_function(p, function);
        let l = p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        if !module.is_empty() {
            let mapping = *self.modules.entry(key.0.clone()).or_insert_with(|| p.add_module_mapping(module));
            p.locations[l.0 as usize].mapping = Some(mapping);
        }
        self.locations.insert(key, l);
        l
    }

    /// Adds a sample unless all its values are zero.
    pub fn sample(&mut self, leaf_first: Vec<LocationId>, values: Vec<i64>) -> Result<()> {
        if values.iter().all(|&v| v == 0) {
            return Ok(());
        }
        let sample = Sample { locations: leaf_first, values, labels: self.labels.clone() };
        self.room.push(&mut self.profile.samples, sample)
    }
}

/// The path from the root to the current node of a call tree printed depth-first, one
/// node per row with its depth.
#[derive(Default)]
pub(crate) struct TreePath {
    path: Vec<LocationId>,
}

impl TreePath {
    /// Moves to a node at `depth` (0 for roots); `None` when it skips a level.
    pub fn enter(&mut self, depth: usize, frame: LocationId) -> Option<()> {
        if depth > self.path.len() {
            return None;
        }
        self.path.truncate(depth);
        self.path.push(frame);
        Some(())
    }

    /// The current node's stack, leaf first.
    pub fn stack(&self) -> Vec<LocationId> {
        self.path.iter().rev().copied().collect()
    }
}

/// The fields of one CSV row: comma-separated, a field in double quotes may hold commas
/// and `""` for a quote.
pub(crate) fn csv_fields(row: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}

/// One node of a call tree with its self values.
pub(crate) struct TreeRow<'a> {
    /// 0 for roots.
    pub depth: usize,
    pub function: &'a str,
    pub module: &'a str,
    pub self_values: Vec<i64>,
}

/// A profile from a call tree given as rows (1-based line number, node) in depth-first
/// order: each node with a self value becomes a sample on its path from the root.
pub(crate) fn call_tree_profile<'a>(
    format: &'static str,
    source: SourceFormat,
    sample_types: &[(&str, &str)],
    rows: impl Iterator<Item = Result<(usize, TreeRow<'a>)>>,
    options: &ParseOptions,
) -> Result<Profile> {
    let mut frames = NamedFrames::new(source, sample_types, options);
    let mut path = TreePath::default();
    let mut nodes = 0;
    for row in rows {
        let (n, row) = row?;
        let frame = frames.frame(row.function, row.module);
        path.enter(row.depth, frame).ok_or_else(|| text_error(format, n, "the row skips a level of the call tree"))?;
        frames.sample(path.stack(), row.self_values)?;
        nodes += 1;
    }
    if nodes == 0 {
        return Err(text_error(format, 1, "no rows after the header"));
    }
    Ok(frames.profile)
}

/// The lines of a CSV export with their numbers, without a UTF-8 byte order mark, and
/// the header's column names.
pub(crate) fn csv_lines(text: &str) -> (Vec<String>, impl Iterator<Item = (usize, &str)>) {
    let mut lines = text::numbered(text.trim_start_matches('\u{feff}'));
    let header = lines.next().map(|(_, l)| csv_fields(l)).unwrap_or_default();
    (header, lines.filter(|(_, l)| !l.trim().is_empty()))
}

/// The index of the column named `name`, or a typed error naming it.
pub(crate) fn column(header: &[String], name: &str, format: &'static str) -> Result<usize> {
    header.iter().position(|c| c.trim() == name).ok_or_else(|| text_error(format, 1, format!("no '{name}' column")))
}
