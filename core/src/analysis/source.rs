//! Values per source line of the functions a regex names: the data behind pprof's
//! `-list` (`internal/report/source.go`). pprof builds a graph at line granularity, keeps
//! the nodes whose function name matches, and per function and file shows every line
//! from the function's start (or 5 lines before its first sampled line) to 5 lines after
//! its last one. The page draws these rows, with the code when the user gives the file;
//! [`crate::report::list`] prints them as pprof does.

use std::borrow::Cow;
use std::collections::BTreeMap;

use regex::Regex;
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::filters::Filters;
use super::frames::Stamps;
use super::query::Prepared;
use crate::model::{Location, Profile};
use crate::{Error, Result};

/// Lines pprof shows before the first and after the last sampled line of a function.
const MARGIN: i64 = 5;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SourceOptions {
    /// Regular expression for the function names to list (pprof's `-list` argument);
    /// [`SourceOptions::function`] builds one that names a single function.
    pub functions: String,
    /// pprof's `-trim_path`: `:`-separated prefixes removed from file names.
    pub trim_path: String,
    /// pprof's `-source_path`, as far as it names files: where a file name contains the
    /// base name of one of these `:`-separated folders, it is trimmed to what follows.
    pub source_path: String,
}

impl SourceOptions {
    /// Options that list exactly the function `name`.
    pub fn function(name: &str) -> Self {
        Self { functions: format!("^{}$", regex::escape(name)), ..Self::default() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceReport {
    pub sample_type: String,
    pub unit: String,
    /// pprof's total: the sum of |value| over every sample, before filters.
    pub total: i64,
    /// The matching functions with a non-zero value, by name.
    pub functions: Vec<FunctionSource>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionSource {
    pub name: String,
    /// One listing per source file the function's frames name, by file name; empty when
    /// none names one (pprof: "No source information").
    pub files: Vec<SourceFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFile {
    /// The file as the profile names it, cleaned and trimmed as pprof does.
    pub file: String,
    /// The function's first line as the profile records it (0 when it does not).
    pub start_line: i64,
    /// Summed over the function's lines, as pprof's header: a sample through two lines
    /// of the function (recursion) counts in `cum` twice.
    pub flat: i64,
    pub cum: i64,
    /// The lines pprof shows, `first_line..=last_line`; a listing stops early where the
    /// file ends.
    pub first_line: i64,
    pub last_line: i64,
    /// The lines with a value, ascending.
    pub lines: Vec<LineValues>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineValues {
    pub line: i64,
    pub flat: i64,
    pub cum: i64,
}

/// A pprof graph node at line granularity (its `NodeInfo` once addresses are
/// aggregated away): function, file (an index into [`LineNodes::files`]), start line,
/// line and binary.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
struct NodeKey<'p> {
    name: &'p str,
    file: u32,
    start_line: i64,
    line: i64,
    objfile: &'p str,
}

/// Marks a frame whose function does not match.
const UNLISTED: u32 = u32::MAX;

/// The nodes of the matching functions and, per location, the node of each line
/// (innermost first; [`UNLISTED`] for other functions).
struct LineNodes<'p> {
    keys: Vec<NodeKey<'p>>,
    /// File names as pprof shows them (cleaned and trimmed); "" first, for no file.
    files: Vec<String>,
    /// Per location: (start, len) in `frames`.
    locations: Vec<(u32, u32)>,
    frames: Vec<u32>,
}

impl<'p> LineNodes<'p> {
    fn new(profile: &'p Profile, symbol: &Regex, options: &SourceOptions) -> Self {
        let mut nodes =
            LineNodes { keys: Vec::new(), files: vec![String::new()], locations: Vec::new(), frames: Vec::new() };
        let mut node_index: HashMap<NodeKey<'p>, u32> = HashMap::default();
        let mut file_index: HashMap<String, u32> = HashMap::from_iter([(String::new(), 0)]);
        // Per function, worked out once: its file's index when it matches.
        let mut functions: Vec<Option<Option<u32>>> = vec![None; profile.functions.len()];
        let unsymbolized_matches = symbol.is_match("");
        for location in &profile.locations {
            let start = nodes.frames.len() as u32;
            let objfile = objfile(profile, location);
            if location.lines.is_empty() {
                // pprof makes an unnamed node of a location without lines.
                let key = NodeKey { name: "", file: 0, start_line: 0, line: 0, objfile };
                let node = if unsymbolized_matches { nodes.intern(&mut node_index, key) } else { UNLISTED };
                nodes.frames.push(node);
            }
            for line in &location.lines {
                let function = profile.function(line.function);
                let name = profile.str(function.name);
                let file = *functions[line.function.0 as usize].get_or_insert_with(|| {
                    symbol.is_match(name).then(|| {
                        let file = profile.str(function.filename);
                        let file = trim_source_path(file, &options.trim_path, &options.source_path);
                        let shown = if file.is_empty() { String::new() } else { clean_path(file) };
                        *file_index.entry(shown).or_insert_with_key(|shown| {
                            nodes.files.push(shown.clone());
                            nodes.files.len() as u32 - 1
                        })
                    })
                });
                let node = match file {
                    Some(file) => {
                        let key = NodeKey { name, file, start_line: function.start_line, line: line.line, objfile };
                        nodes.intern(&mut node_index, key)
                    }
                    None => UNLISTED,
                };
                nodes.frames.push(node);
            }
            nodes.locations.push((start, nodes.frames.len() as u32 - start));
        }
        nodes
    }

    fn intern(&mut self, index: &mut HashMap<NodeKey<'p>, u32>, key: NodeKey<'p>) -> u32 {
        *index.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.keys.len() as u32 - 1
        })
    }

    fn of(&self, location: u32) -> &[u32] {
        let (start, len) = self.locations[location as usize];
        &self.frames[start as usize..(start + len) as usize]
    }
}

fn objfile<'p>(profile: &'p Profile, location: &Location) -> &'p str {
    location.mapping.map_or("", |m| profile.str(profile.mapping(m).filename))
}

/// Per-line values of the functions `options.functions` matches, as `go tool pprof
/// -list` computes them. No function with a value matching is an error, as in pprof.
/// Lines are always the unit here; the prepared granularity does not apply.
pub fn source(prepared: &Prepared, options: &SourceOptions) -> Result<SourceReport> {
    let (profile, index) = (prepared.profile(), prepared.sample_index);
    let symbol =
        Regex::new(&options.functions).map_err(|e| Error::InvalidRegex { option: "list", reason: e.to_string() })?;
    let filtered: Cow<Profile> = if *prepared.filters().filters() == Filters::default() {
        Cow::Borrowed(profile)
    } else {
        Cow::Owned(profile.filter_compiled(prepared.filters()))
    };
    let nodes = LineNodes::new(&filtered, &symbol, options);
    let (mut flat, mut cum) = (vec![0i64; nodes.keys.len()], vec![0i64; nodes.keys.len()]);
    let mut seen = Stamps::new(nodes.keys.len());
    for sample in &filtered.samples {
        let value = sample.values.get(index).copied().unwrap_or(0);
        if value == 0 {
            continue;
        }
        seen.next_sample();
        for location in sample.locations {
            for &node in nodes.of(location.0).iter().filter(|&&n| n != UNLISTED) {
                if seen.first_visit(node) {
                    cum[node as usize] = cum[node as usize].saturating_add(value);
                }
            }
        }
        // The leaf node (innermost line of the first location) takes the flat value.
        if let Some(&leaf) = sample.locations.first().and_then(|l| nodes.of(l.0).first()) {
            if leaf != UNLISTED {
                flat[leaf as usize] = flat[leaf as usize].saturating_add(value);
            }
        }
    }

    // Function name → file → nodes (pprof leaves out nodes without any value).
    let mut by_function: BTreeMap<&str, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
    for (n, key) in nodes.keys.iter().enumerate() {
        if flat[n] == 0 && cum[n] == 0 {
            continue;
        }
        let files = by_function.entry(key.name).or_default();
        let file = &nodes.files[key.file as usize];
        if !file.is_empty() {
            files.entry(file).or_default().push(n);
        }
    }
    if by_function.is_empty() {
        return Err(Error::NoMatchingFunction { regex: options.functions.clone() });
    }
    let functions = by_function
        .into_iter()
        .map(|(name, files)| FunctionSource {
            name: name.to_owned(),
            files: files
                .into_iter()
                .map(|(file, mut file_nodes)| {
                    // pprof's order here is a map's; recorded start lines first makes it fixed.
                    file_nodes.sort_by_key(|&n| {
                        let key = &nodes.keys[n];
                        (key.start_line == 0, key.start_line, key.line)
                    });
                    source_file(file, &file_nodes, &nodes.keys, &flat, &cum)
                })
                .collect(),
        })
        .collect();
    Ok(SourceReport {
        sample_type: profile.sample_type_name(index).to_owned(),
        unit: profile.sample_type_unit(index).to_owned(),
        total: profile.total(index),
        functions,
    })
}

/// One function's listing of one file: pprof's `getSourceFromFile` without the file.
fn source_file(file: &str, file_nodes: &[usize], keys: &[NodeKey], flat: &[i64], cum: &[i64]) -> SourceFile {
    let first = &keys[file_nodes[0]];
    let mut start = if first.start_line != 0 { first.start_line } else { first.line.saturating_sub(MARGIN) };
    let mut end = first.line.saturating_add(MARGIN);
    let mut lines: BTreeMap<i64, LineValues> = BTreeMap::new();
    for &n in file_nodes {
        let key = &keys[n];
        let node_start = if key.start_line != 0 { key.start_line } else { key.line.saturating_sub(MARGIN) };
        let node_end = key.line.saturating_add(MARGIN);
        // As pprof: a node that starts earlier does not also extend the end.
        if node_start < start {
            start = node_start;
        } else if node_end > end {
            end = node_end;
        }
        let row = lines.entry(key.line).or_insert(LineValues { line: key.line, flat: 0, cum: 0 });
        row.flat = row.flat.saturating_add(flat[n]);
        row.cum = row.cum.saturating_add(cum[n]);
    }
    let sum = |values: &[i64]| file_nodes.iter().map(|&n| values[n]).fold(0i64, i64::saturating_add);
    let first_line = start.max(1);
    SourceFile {
        file: file.to_owned(),
        start_line: first.start_line,
        flat: sum(flat),
        cum: sum(cum),
        first_line,
        last_line: end,
        lines: lines.into_values().filter(|l| (first_line..=end).contains(&l.line)).collect(),
    }
}

/// pprof's `trimPath`: a file name with `trim_path`'s prefixes (and `/proc/self/cwd/`)
/// removed, or, when `trim_path` is empty, with everything up to the base name of a
/// `source_path` folder removed (`/build/proj/pkg/a.go` with folder `~/proj` → `pkg/a.go`).
pub fn trim_source_path<'a>(path: &'a str, trim_path: &str, source_path: &str) -> &'a str {
    if trim_path.is_empty() {
        for dir in split_list(source_path) {
            let want = format!("/{}/", base_name(dir));
            if let Some(found) = path.find(&want) {
                return &path[found + want.len()..];
            }
        }
    }
    let configured = split_list(trim_path);
    for prefix in configured.chain(["/proc/self/cwd/./", "/proc/self/cwd/"]) {
        let stripped = match prefix.strip_suffix('/') {
            Some(_) => path.strip_prefix(prefix),
            None => path.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('/')),
        };
        if let Some(rest) = stripped {
            return rest;
        }
    }
    path
}

/// Go's `filepath.SplitList`: nothing for "", else the `:`-separated parts.
fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(':').filter(move |_| !list.is_empty())
}

/// Go's `filepath.Base`.
fn base_name(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Go's `filepath.Clean`: the shortest equivalent path, by lexical processing.
fn clean_path(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|&p| p != "..") => {
                parts.pop();
            }
            ".." if rooted => {}
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_go() {
        for (path, clean) in [
            ("", "."),
            ("a/./b/../c", "a/c"),
            ("/../a//b/", "/a/b"),
            ("../../a", "../../a"),
            ("a/../..", ".."),
            ("/", "/"),
        ] {
            assert_eq!(clean_path(path), clean, "{path}");
        }
        assert_eq!((base_name(""), base_name("/"), base_name("/a/gen/")), (".", "/", "gen"));
        assert_eq!(split_list("").count(), 0);
        assert_eq!(split_list("a::b").collect::<Vec<_>>(), ["a", "", "b"]);
    }

    #[test]
    fn trimming_follows_pprof() {
        let path = "/src/proj/gen/workload.go";
        assert_eq!(trim_source_path(path, "", "/home/me/gen"), "workload.go");
        assert_eq!(trim_source_path(path, "", "/x:/home/proj"), "gen/workload.go");
        // A configured trim path turns the heuristic off.
        assert_eq!(trim_source_path(path, "/src/proj", "/home/me/gen"), "gen/workload.go");
        assert_eq!(trim_source_path(path, "/src/pro", ""), path);
        assert_eq!(trim_source_path("/proc/self/cwd/./a.go", "", ""), "a.go");
        // An empty element of the list trims the root.
        assert_eq!(trim_source_path(path, "x::y", ""), "src/proj/gen/workload.go");
    }
}
