//! Folded (collapsed) stacks, as Brendan Gregg's `stackcollapse-*.pl`, inferno's
//! `collapse-*`, py-spy (`record -f raw`) and many other tools write them: one line per
//! distinct stack, root first, frames separated by `;`, then a count:
//!
//! ```text
//! main;run;compute 123
//! <module> (workload.py:53);main (workload.py:46) 391
//! java;start_thread_[k];Interpreter_[j] 7
//! main;f 10 12
//! ```
//!
//! * Several counts per line (inferno's `difffolded` writes `stack before after`) become
//!   one sample type each: `samples_1`, `samples_2`, …; a single count is `samples`.
//!   The number of count columns is the fewest trailing numbers any line has, so a
//!   frame name that happens to end in ` 5` does not add a column.
//! * Counts may be decimal. They are kept exactly: a column whose counts have at most
//!   `d` decimals is stored in units of 10^-d counts (unit `count/1000` for `d = 3`)
//!   and a profile comment says so. More than 9 decimals is an error.
//! * py-spy frames `name (file.py:12)` become function `name` in file `file.py`, at line
//!   12 of the location.
//! * inferno/FlameGraph annotations are stripped from names and kept in the model:
//!   `_[i]` (inlined) makes the frame an inline line of its caller's location (pprof's
//!   representation of inlining: one location, innermost line first); `_[k]` (kernel)
//!   and `_[j]` (JIT) place the frame's location in a `[kernel.kallsyms]` or `[jit]`
//!   mapping, the names `perf` gives those code regions.
//! * Mangled Rust and C++ names are demangled, the raw name kept as the function's
//!   `system_name` ([`super::demangle`]).
//! * Empty frames (`a;;b`) are skipped; blank lines are ignored.

use rustc_hash::FxHashMap as HashMap;

use super::demangle::add_native_function;
use super::text::{scaled_decimal, text_error};
use crate::model::{FunctionId, Line, LocationId, Mapping, MappingId, Profile, Sample, SourceFormat, StrId};
use crate::Result;

const FORMAT: &str = "folded stacks";

/// At most this many decimals are kept exactly (10^9 still leaves room in an i64).
const MAX_DECIMALS: usize = 9;

/// How many lines detection looks at.
const DETECT_LINES: usize = 16;

#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum Region {
    User,
    Kernel,
    Jit,
}

fn is_count(token: &str) -> bool {
    let (int, frac) = token.split_once('.').unwrap_or((token, "0"));
    !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// Splits the last whitespace-separated token off `s` (already trimmed at the end).
fn split_last(s: &str) -> Option<(&str, &str)> {
    // Unicode whitespace (U+2007 figure space, …) is wider than one byte.
    let (at, space) = s.char_indices().rev().find(|&(_, c)| c.is_whitespace())?;
    Some((s[..at].trim_end(), &s[at + space.len_utf8()..]))
}

/// The number of count tokens at the end of a line. A line of counts only is an empty
/// stack (py-spy writes ` 6` for samples it caught outside any Python frame).
fn trailing_counts(line: &str) -> usize {
    let mut rest = line.trim();
    let mut n = 0;
    loop {
        let (stack, last) = split_last(rest).unwrap_or(("", rest));
        if !is_count(last) {
            return n;
        }
        n += 1;
        if stack.is_empty() {
            return n;
        }
        rest = stack;
    }
}

/// `line` without its last `n` tokens.
fn strip_counts(line: &str, n: usize) -> &str {
    let mut stack = line.trim();
    for _ in 0..n {
        stack = split_last(stack).map_or("", |(s, _)| s);
    }
    stack
}

/// Whether the start of a text is folded stacks: its first line and at least three in
/// four of its first 16 lines end in counts (a stray line still gets its typed error
/// from the parser), and some line has a stack with something other than numbers in
/// it. `text` may be a window cut mid-line; a last line without its newline is not
/// judged.
pub(crate) fn looks_folded(text: &str) -> bool {
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(DETECT_LINES + 1).collect();
    if lines.len() > DETECT_LINES || (lines.len() > 1 && !text.ends_with('\n')) {
        lines.pop();
    }
    let counts: Vec<usize> = lines.iter().map(|l| trailing_counts(l)).collect();
    let folded = counts.iter().filter(|&&n| n > 0).count();
    let Some(columns) = counts.iter().copied().filter(|&n| n > 0).min() else { return false };
    counts[0] > 0
        && folded * 4 >= lines.len() * 3
        && lines.iter().any(|l| {
            strip_counts(l, columns).bytes().any(|b| !(b.is_ascii_digit() || b.is_ascii_whitespace() || b == b'.'))
        })
}

/// `int.frac` scaled by 10^decimals, exactly (`decimals` is at least the count's own).
fn scaled(token: &str, decimals: usize, line: usize) -> Result<i64> {
    u32::try_from(decimals)
        .ok()
        .and_then(|decimals| scaled_decimal(token, decimals))
        .ok_or_else(|| text_error(FORMAT, line, format!("count {token} is too large")))
}

/// A parsed frame: its name, py-spy file and line, and annotation.
struct Frame<'a> {
    name: &'a str,
    file: &'a str,
    line: i64,
    region: Region,
    inlined: bool,
}

fn parse_frame(raw: &str) -> Frame<'_> {
    let (mut name, mut region, mut inlined) = (raw, Region::User, false);
    if let Some(stem) = raw.strip_suffix("_[k]") {
        (name, region) = (stem, Region::Kernel);
    } else if let Some(stem) = raw.strip_suffix("_[j]") {
        (name, region) = (stem, Region::Jit);
    } else if let Some(stem) = raw.strip_suffix("_[i]") {
        (name, inlined) = (stem, true);
    }
    let (name, file, line) = py_spy_frame(name).unwrap_or((name, "", 0));
    Frame { name, file, line, region, inlined }
}

/// `JSONDecoder.decode (json/decoder.py:337)` → (`JSONDecoder.decode`, `json/decoder.py`, 337).
fn py_spy_frame(frame: &str) -> Option<(&str, &str, i64)> {
    let inner = frame.strip_suffix(')')?;
    let open = inner.rfind(" (")?;
    let (file, line) = inner[open + 2..].rsplit_once(':')?;
    if file.is_empty() || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let name = inner[..open].trim_end();
    Some((if name.is_empty() { frame } else { name }, file, line.parse().ok()?))
}

/// A frame's text as it resolved: its function, line, region and annotation.
#[derive(Copy, Clone)]
struct Resolved {
    function: FunctionId,
    line: i64,
    region: Region,
    inlined: bool,
}

#[derive(Default)]
struct Builder {
    /// Each distinct frame text, resolved once: a stack repeats its callers' frames, and
    /// one lookup of the text costs less than parsing it and interning its name and file.
    frames: HashMap<Box<str>, Resolved>,
    functions: HashMap<(StrId, StrId), FunctionId>,
    /// Locations of one line (no inlining), the usual case: found without building a key.
    single: HashMap<(FunctionId, i64, Region), LocationId>,
    /// (lines innermost first, region) → location, for frames with inlined callees.
    inlined: HashMap<(Vec<(FunctionId, i64)>, Region), LocationId>,
    regions: HashMap<Region, MappingId>,
    /// Scratch: the physical frame being read, its lines root first.
    group: Vec<(FunctionId, i64)>,
}

impl Builder {
    fn resolve(&mut self, p: &mut Profile, raw: &str) -> Resolved {
        if let Some(&resolved) = self.frames.get(raw) {
            return resolved;
        }
        let frame = parse_frame(raw);
        let key = (p.strings.intern(frame.name), p.strings.intern(frame.file));
        let function = *self.functions.entry(key).or_insert_with(|| add_native_function(p, frame.name, frame.file, 0));
        let resolved = Resolved { function, line: frame.line, region: frame.region, inlined: frame.inlined };
        self.frames.insert(raw.into(), resolved);
        resolved
    }
    fn mapping(&mut self, p: &mut Profile, region: Region) -> Option<MappingId> {
        let file = match region {
            Region::User => return None,
            Region::Kernel => "[kernel.kallsyms]",
            Region::Jit => "[jit]",
        };
        Some(*self.regions.entry(region).or_insert_with(|| {
            let id = MappingId(p.mappings.len() as u32);
            let filename = p.strings.intern(file);
            p.mappings.push(Mapping { id: u64::from(id.0) + 1, filename, has_functions: true, ..Mapping::default() });
            id
        }))
    }

    /// The location of the physical frame in `self.group` (lines root first).
    fn location(&mut self, p: &mut Profile, region: Region) -> LocationId {
        let found = match *self.group.as_slice() {
            [(function, line)] => self.single.get(&(function, line, region)),
            _ => {
                self.group.reverse(); // innermost first, as pprof stores inlining
                self.inlined.get(&(self.group.clone(), region))
            }
        };
        if let Some(&l) = found {
            return l;
        }
        let model_lines = self.group.iter().map(|&(function, line)| Line { function, line, column: 0 }).collect();
        let l = p.add_location(0, model_lines);
        p.locations[l.0 as usize].mapping = self.mapping(p, region);
        match *self.group.as_slice() {
            [(function, line)] => self.single.insert((function, line, region), l),
            _ => self.inlined.insert((self.group.clone(), region), l),
        };
        l
    }

    /// A root-first stack → leaf-first locations, inlined frames joined to their callers.
    fn stack(&mut self, p: &mut Profile, stack: &str) -> Vec<LocationId> {
        let mut locations = Vec::new();
        let mut region = Region::User;
        self.group.clear();
        for raw in stack.split(';').filter(|raw| !raw.is_empty()) {
            let frame = self.resolve(p, raw);
            // An inlined frame joins its caller's physical frame; any other starts one.
            if !frame.inlined || self.group.is_empty() {
                if !self.group.is_empty() {
                    locations.push(self.location(p, region));
                }
                self.group.clear();
                region = frame.region;
            }
            self.group.push((frame.function, frame.line));
        }
        if !self.group.is_empty() {
            locations.push(self.location(p, region));
        }
        locations.reverse();
        locations
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    parse_twice(|_, feed| feed(bytes), |e| e, options)
}

/// How much of the start of an input [`starts_folded`] needs.
pub const HEAD: usize = 1 << 20;

/// Whether an input starting with `head` (its first [`HEAD`] bytes, or all of it) is
/// uncompressed folded stacks, which [`parse_twice`] reads in pieces without holding it.
pub fn starts_folded(head: &[u8]) -> bool {
    super::detect(head) == super::Format::Of(SourceFormat::Folded)
}

/// Folded stacks from input read twice in pieces ([`FoldedScan`], then its
/// [`FoldedBuild`]): `read` is called for pass 0, then pass 1, and gives every piece, in
/// order, to `feed`; `error` turns the parser's errors into the reader's.
pub fn parse_twice<E>(
    mut read: impl FnMut(usize, &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>) -> std::result::Result<(), E>,
    error: impl Fn(crate::Error) -> E,
    options: &super::ParseOptions,
) -> std::result::Result<Profile, E> {
    let mut scan = FoldedScan::default();
    read(0, &mut |piece| scan.feed(piece).map_err(&error))?;
    let mut build = scan.finish(options).map_err(&error)?;
    read(1, &mut |piece| build.feed(piece).map_err(&error))?;
    build.finish().map_err(&error)
}

/// Splits bytes fed in pieces into numbered lines (a line cut between two pieces is
/// joined), decoded as UTF-8 with invalid bytes replaced.
#[derive(Default)]
struct Lines {
    /// The start of a line whose end is in a later piece.
    partial: Vec<u8>,
    number: usize,
}

impl Lines {
    fn feed(&mut self, mut chunk: &[u8], each: &mut impl FnMut(usize, &str) -> Result<()>) -> Result<()> {
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.line(&chunk[..end], each)?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&chunk[..end]);
                self.line(&line, each)?;
            }
            chunk = &chunk[end + 1..];
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    fn finish(&mut self, each: &mut impl FnMut(usize, &str) -> Result<()>) -> Result<()> {
        let last = std::mem::take(&mut self.partial);
        if last.is_empty() {
            return Ok(());
        }
        self.line(&last, each)
    }

    fn line(&mut self, bytes: &[u8], each: &mut impl FnMut(usize, &str) -> Result<()>) -> Result<()> {
        self.number += 1;
        let line = String::from_utf8_lossy(bytes);
        let line = line.trim();
        if line.is_empty() {
            return Ok(());
        }
        each(self.number, line)
    }
}

/// The first of two passes over folded stacks fed in pieces, for input too large to hold
/// at once (the page reads a 1 GiB file in slices): which trailing tokens are counts is
/// known only once every line is seen, so the bytes are read twice. [`parse`] is both
/// passes over one buffer.
#[derive(Default)]
pub struct FoldedScan {
    lines: Lines,
    /// The fewest trailing counts of any line, once a line was seen.
    columns: Option<usize>,
    /// Per trailing count from the end (0 = last): its most decimals on any line, and
    /// the first line (and count) where it has more than [`MAX_DECIMALS`].
    decimals_from_end: Vec<(usize, Option<(usize, String)>)>,
}

impl FoldedScan {
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        let Self { lines, columns, decimals_from_end } = self;
        lines.feed(chunk, &mut |n, line| scan_line(columns, decimals_from_end, n, line))
    }

    /// The count columns and their decimals; the bytes then go, from the start again,
    /// to the returned [`FoldedBuild`].
    pub fn finish(mut self, options: &super::ParseOptions) -> Result<FoldedBuild> {
        let Self { lines, columns, decimals_from_end } = &mut self;
        lines.finish(&mut |n, line| scan_line(columns, decimals_from_end, n, line))?;
        let columns = columns.ok_or_else(|| text_error(FORMAT, 1, "no stacks"))?;
        // Column i of `columns` is the (columns - 1 - i)-th count from the end.
        let used = &decimals_from_end[..columns];
        if let Some((line, count)) = used.iter().filter_map(|d| d.1.as_ref()).min_by_key(|bad| bad.0) {
            return Err(text_error(FORMAT, *line, format!("count {count} has more than {MAX_DECIMALS} decimals")));
        }
        let decimals: Vec<usize> = used.iter().rev().map(|d| d.0).collect();
        let mut profile = Profile::new(SourceFormat::Folded);
        for (i, &d) in decimals.iter().enumerate() {
            let kind = if columns == 1 { "samples".to_owned() } else { format!("samples_{}", i + 1) };
            let unit = if d == 0 { "count".to_owned() } else { format!("count/{}", 10u64.pow(d as u32)) };
            let vt = profile.value_type(&kind, &unit);
            profile.sample_types.push(vt);
            if d > 0 {
                let comment =
                    format!("{kind}: decimal counts, stored exactly in units of 1/{} count", 10u64.pow(d as u32));
                let id = profile.strings.intern(&comment);
                profile.comments.push(id);
            }
        }
        let (lines, builder, room) = (Lines::default(), Builder::default(), super::Room::new(options));
        Ok(FoldedBuild { lines, decimals, profile, builder, room })
    }
}

fn scan_line(
    columns: &mut Option<usize>,
    decimals_from_end: &mut Vec<(usize, Option<(usize, String)>)>,
    n: usize,
    line: &str,
) -> Result<()> {
    let counts = trailing_counts(line);
    if counts == 0 {
        return Err(text_error(FORMAT, n, "expected 'frame;frame;… count' (no count at the end of the line)"));
    }
    *columns = Some(columns.map_or(counts, |c| c.min(counts)));
    if decimals_from_end.len() < counts {
        decimals_from_end.resize(counts, (0, None));
    }
    let mut rest = line;
    for (d, first_bad) in decimals_from_end.iter_mut().take(counts) {
        let (stack, count) = split_last(rest).unwrap_or(("", rest));
        // Its decimal digits, trailing zeros left out.
        let frac = count.split_once('.').map_or("", |(_, f)| f).trim_end_matches('0').len();
        if frac > MAX_DECIMALS && first_bad.is_none() {
            *first_bad = Some((n, count.to_owned()));
        }
        *d = (*d).max(frac);
        rest = stack;
    }
    Ok(())
}

/// The second pass of [`FoldedScan`]: the same bytes again, from the start.
pub struct FoldedBuild {
    lines: Lines,
    decimals: Vec<usize>,
    profile: Profile,
    builder: Builder,
    room: super::Room,
}

impl FoldedBuild {
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        let Self { lines, decimals, profile, builder, room } = self;
        lines.feed(chunk, &mut |n, line| build_line(decimals, profile, builder, room, n, line))
    }

    pub fn finish(mut self) -> Result<Profile> {
        let Self { lines, decimals, profile, builder, room } = &mut self;
        lines.finish(&mut |n, line| build_line(decimals, profile, builder, room, n, line))?;
        Ok(self.profile)
    }
}

fn build_line(
    decimals: &[usize],
    p: &mut Profile,
    builder: &mut Builder,
    room: &mut super::Room,
    n: usize,
    line: &str,
) -> Result<()> {
    let stack = strip_counts(line, decimals.len());
    let values =
        line[stack.len()..].split_whitespace().zip(decimals).map(|(c, &d)| scaled(c, d, n)).collect::<Result<_>>()?;
    let locations = builder.stack(p, stack);
    room.push(&mut p.samples, Sample { locations, values, labels: Vec::new() })
}
