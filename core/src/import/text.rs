//! Shared pieces of the text formats (decoding, headers, numbered lines, errors,
//! decimals), below the importers; detection is [`super::detect_text`], above them. And
//! a builder for profiles whose stacks are lists of return addresses, optionally named
//! by Go's `#` comment lines and placed in binaries by a `--- Memory map: ---` section.

use crate::model::{Label, LabelValue, Line, LocationId, Mapping, MappingId, Profile, SourceFormat};
use crate::{Error, Result};
use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;

pub(crate) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

pub(crate) fn is_space_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// Whether the start of `bytes` has control characters that no text format has
/// (protobuf's field tags and lengths do). Checked before any text is decoded, so
/// binary input never pays for decoding itself as text.
pub(crate) fn starts_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(512).any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
}

/// `int[.frac]` times 10^`decimals`, exactly; `None` when it is not such a number, has
/// more decimals, or overflows.
pub(crate) fn scaled_decimal(number: &str, decimals: u32) -> Option<i64> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let frac = frac.trim_end_matches('0');
    let mut digits = int.bytes().chain(frac.bytes());
    if int.is_empty() || frac.len() > decimals as usize || !digits.clone().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = digits.try_fold(0i64, |v, b| v.checked_mul(10)?.checked_add(i64::from(b - b'0')))?;
    value.checked_mul(10i64.checked_pow(decimals - frac.len() as u32)?)
}

pub(crate) fn text_error(format: &'static str, line: usize, reason: impl Into<String>) -> Error {
    Error::Text { format, line, reason: reason.into() }
}

/// Parses the whitespace-separated `0x…` addresses after `@`.
pub(crate) fn parse_addresses(s: &str, format: &'static str, line: usize) -> Result<Vec<u64>> {
    s.split_whitespace()
        .map(|w| {
            w.strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| text_error(format, line, format!("'{w}' is not a hex address")))
        })
        .collect()
}

/// One `#\t0x4c48ee\tcompress/flate.NewWriter+0x2e\t/usr/lib/go/src/.../deflate.go:666` line.
struct NoteFrame {
    name: String,
    file: String,
    line: i64,
}

/// Longest memory map line kept after `$name` substitution (real entries are a path
/// and a few numbers).
const MAX_MAP_LINE: usize = 16 << 10;

/// A memory map's `$name` variables, substituted as pprof's `strings.Replacer` does: in
/// one pass, left to right, the earliest definition winning where names overlap, and
/// substituted text never scanned again. Values may still hold earlier values, so each
/// definition can double a line: a line that outgrows any real entry is dropped.
#[derive(Default)]
struct MapVariables {
    /// name (with its `$`) → (definition order, value); a name's first definition stays.
    values: HashMap<String, (usize, String)>,
    /// The names' lengths, so a `$` costs one lookup per distinct length.
    lengths: std::collections::BTreeSet<usize>,
}

impl MapVariables {
    fn define(&mut self, name: String, value: &str) {
        self.lengths.insert(name.len());
        let order = self.values.len();
        self.values.entry(name).or_insert_with(|| (order, value.to_owned()));
    }

    /// `line` with its variables substituted; None when that would exceed MAX_MAP_LINE.
    fn expand<'a>(&self, line: &'a str) -> Option<Cow<'a, str>> {
        if self.values.is_empty() || !line.contains('$') {
            return Some(Cow::Borrowed(line));
        }
        let mut out = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let earliest = self
                .lengths
                .iter()
                .filter_map(|&n| self.values.get_key_value(rest.get(..n)?))
                .min_by_key(|(_, (order, _))| *order);
            let taken = match earliest {
                Some((name, (_, value))) => {
                    out.push_str(value);
                    name.len()
                }
                None => {
                    out.push('$');
                    1
                }
            };
            rest = &rest[taken..];
            if out.len() > MAX_MAP_LINE {
                return None;
            }
        }
        out.push_str(rest);
        (out.len() <= MAX_MAP_LINE).then_some(Cow::Owned(out))
    }
}

/// Builds a profile from address stacks, deduplicating locations by address.
pub(crate) struct AddressProfile {
    pub profile: Profile,
    by_address: HashMap<u64, LocationId>,
    notes: HashMap<u64, Vec<NoteFrame>>,
    room: super::Room,
}

impl AddressProfile {
    pub fn new(source: SourceFormat, options: &super::ParseOptions) -> Self {
        let (by_address, notes) = (HashMap::default(), HashMap::default());
        Self { profile: Profile::new(source), by_address, notes, room: super::Room::new(options) }
    }

    /// Return addresses point after each call; pprof (as of Go 1.19) moves every frame
    /// back by one byte to land on the call, and so do we, so addresses match its output.
    /// Java profiles carry frame ids rather than return addresses: no adjustment.
    pub fn stack(&mut self, addresses: &[u64], adjust: bool) -> Vec<LocationId> {
        addresses
            .iter()
            .map(|&a| {
                let address = if adjust { a.wrapping_sub(1) } else { a };
                *self.by_address.entry(address).or_insert_with(|| self.profile.add_location(address, Vec::new()))
            })
            .collect()
    }

    pub fn push_sample(&mut self, locations: Vec<LocationId>, values: Vec<i64>, labels: Vec<Label>) -> Result<()> {
        self.room.push(&mut self.profile.samples, crate::model::Sample { locations, values, labels })
    }

    /// Records a Go `#` comment line naming an address; other comments are ignored.
    pub fn note(&mut self, line: &str) {
        let Some(rest) = line.trim_start().strip_prefix('#') else { return };
        let mut fields = rest.split_whitespace();
        let (Some(addr), Some(name)) = (fields.next(), fields.next()) else { return };
        let Some(address) = addr.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()) else {
            return;
        };
        let name = name.rsplit_once("+0x").map_or(name, |(n, _)| n);
        let (file, line) = match fields.last().and_then(|fl| fl.rsplit_once(':')) {
            Some((f, l)) => (f, l.parse().unwrap_or(0)),
            None => ("", 0),
        };
        self.name_address(address, name, file, line);
    }

    /// Names the frame at `address`; several names for one address form an inline
    /// chain, innermost first.
    pub fn name_address(&mut self, address: u64, name: &str, file: &str, line: i64) {
        let frame = NoteFrame { name: name.to_owned(), file: file.to_owned(), line };
        self.notes.entry(address).or_default().push(frame);
    }

    /// `# labels: {"endpoint":"/api", "tenant":"a"}` in Go's debug=1 goroutine texts.
    pub fn labels_from_comment(&mut self, line: &str) -> Option<Vec<Label>> {
        let body = line.trim_start().strip_prefix('#')?.trim_start().strip_prefix("labels:")?.trim();
        let inner = body.strip_prefix('{')?.strip_suffix('}')?;
        let mut labels = Vec::new();
        for pair in split_label_pairs(inner) {
            if let Some((k, v)) = pair.split_once(':') {
                let key = self.profile.strings.intern(unquote(k));
                let value = self.profile.strings.intern(unquote(v));
                labels.push(Label { key, value: LabelValue::Str(value) });
            }
        }
        Some(labels)
    }

    /// Parses a memory map section (`/proc/self/maps` lines or `start-limit: file`).
    /// `name=value` lines define `$name` for the lines after them, as in pprof.
    pub fn memory_map<'a>(&mut self, lines: impl Iterator<Item = &'a str>) {
        let mut vars = MapVariables::default();
        for line in lines {
            let Some(line) = vars.expand(line.trim()) else { continue };
            match parse_mapping_entry(&line) {
                Some(m) => {
                    let filename = self.profile.strings.intern(&m.2);
                    let id = self.profile.mappings.len() as u64 + 1;
                    self.profile.mappings.push(Mapping {
                        id,
                        memory_start: m.0,
                        memory_limit: m.1,
                        file_offset: m.3,
                        filename,
                        ..Mapping::default()
                    });
                }
                None => {
                    if let Some((name, value)) = line.split_once('=') {
                        vars.define(format!("${}", name.trim()), value.trim());
                    }
                }
            }
        }
    }

    /// Names locations from the `#` notes and attaches locations to mappings.
    pub fn finish(mut self) -> Profile {
        let mut functions: HashMap<(String, String), crate::model::FunctionId> = HashMap::default();
        for i in 0..self.profile.locations.len() {
            let address = self.profile.locations[i].address;
            let Some(frames) = self.notes.get(&address) else { continue };
            let mut lines = Vec::with_capacity(frames.len());
            for frame in frames {
                let key = (frame.name.clone(), frame.file.clone());
                let function = match functions.get(&key) {
                    Some(&f) => f,
                    None => {
                        let f = self.profile.add_function(&frame.name, &frame.name, &frame.file, 0);
                        functions.insert(key, f);
                        f
                    }
                };
                lines.push(Line { function, line: frame.line, column: 0 });
            }
            self.profile.locations[i].lines = lines;
        }
        massage_mappings(&mut self.profile);
        self.profile
    }
}

fn split_label_pairs(s: &str) -> Vec<&str> {
    // Values are Go-quoted strings; split on commas outside quotes.
    let mut out = Vec::new();
    let (mut start, mut in_quotes, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => in_quotes = !in_quotes,
            ',' if !in_quotes => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(s)
}

static_regex!(
    proc_maps,
    r"^([[:xdigit:]]+)-([[:xdigit:]]+)\s+([-rwxp]+)\s+([[:xdigit:]]+)\s+([[:xdigit:]]+):([[:xdigit:]]+)\s+([[:digit:]]+)\s*(\S+)?"
);

static_regex!(brief_maps, r"^\s*([[:xdigit:]]+)-([[:xdigit:]]+):\s*(\S+)(\s.*@)?([[:xdigit:]]+)?");

/// (start, limit, file, offset); non-executable `/proc/maps` entries are skipped.
fn parse_mapping_entry(line: &str) -> Option<(u64, u64, String, u64)> {
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    if let Some(c) = proc_maps().captures(line) {
        if !c[3].contains('x') {
            return None;
        }
        let file = c.get(8).map_or("", |m| m.as_str()).to_owned();
        return Some((hex(&c[1])?, hex(&c[2])?, file, hex(&c[4])?));
    }
    let c = brief_maps().captures(line)?;
    let offset = c.get(5).and_then(|m| hex(m.as_str())).unwrap_or(0);
    Some((hex(&c[1])?, hex(&c[2])?, c[3].to_owned(), offset))
}

/// pprof's `remapMappingIDs` heuristics: drop a leading `/anon_hugepage`, normalise a
/// main binary mapped at 0x400000, attach locations by address, and give unmapped
/// addresses one fake mapping.
fn massage_mappings(p: &mut Profile) {
    if p.mappings.len() > 1
        && p.str(p.mappings[0].filename).starts_with("/anon_hugepage")
        && p.mappings[0].memory_limit == p.mappings[1].memory_start
    {
        p.mappings.remove(0);
    }
    if let Some(m) = p.mappings.first_mut() {
        if m.memory_start.wrapping_sub(m.file_offset) == 0x400000 {
            m.memory_start = 0x400000;
            m.file_offset = 0;
        }
    }
    if p.mappings.is_empty() {
        return;
    }
    let mut fake: Option<MappingId> = None;
    for i in 0..p.locations.len() {
        let a = p.locations[i].address;
        if p.locations[i].mapping.is_some() || a == 0 {
            continue;
        }
        let found = p.mappings.iter().position(|m| m.memory_start <= a && a < m.memory_limit).or_else(|| {
            let j = p.mappings.iter().position(|m| {
                m.file_offset != 0 && m.memory_start.wrapping_sub(m.file_offset) <= a && a < m.memory_start
            })?;
            let m = &mut p.mappings[j];
            m.memory_start -= m.file_offset;
            m.file_offset = 0;
            Some(j)
        });
        let id = match found {
            Some(j) => MappingId(j as u32),
            None => *fake.get_or_insert_with(|| {
                p.mappings.push(Mapping { memory_limit: u64::MAX, ..Mapping::default() });
                MappingId(p.mappings.len() as u32 - 1)
            }),
        };
        p.locations[i].mapping = Some(id);
    }
    for (i, m) in p.mappings.iter_mut().enumerate() {
        m.id = i as u64 + 1;
    }
}

/// The first non-blank line and its number: a text profile's header.
pub(crate) fn header<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    format: &'static str,
) -> Result<(usize, &'a str)> {
    lines.find(|(_, l)| !l.trim().is_empty()).ok_or_else(|| text_error(format, 1, "no header"))
}

/// Iterates lines with 1-based numbers.
pub(crate) fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l))
}

/// True for the lines that start a memory map section.
pub(crate) fn is_memory_map_trigger(line: &str) -> bool {
    line.contains("--- Memory map: ---") || line.contains("MAPPED_LIBRARIES:")
}
