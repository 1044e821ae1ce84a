//! FreeBSD `pmcstat -G` callgraph text: per event a section headed
//! `@ inst_retired.any [35705 samples]`, then one caller tree per sampled function:
//!
//! ```text
//! 14.44%  [5156]     fletcher_2_native @ /boot/kernel/zfs.ko
//!  50.62%  [2610]      arc_cksum_verify
//!   66.02%  [1723]       arc_buf_thaw
//! ```
//!
//! An unindented line is a function where samples landed, with its sample count; each
//! line indented one space further is a caller of the line above it with the samples
//! that came through it. The object (`@ file`) is printed only when it changes, so it
//! holds for the lines after it.
//!
//! Every node of a tree whose callers account for fewer samples than it has (pmcstat
//! leaves out callers it cannot attribute) keeps the rest as a sample with the stack
//! that far: so each function's self count is its unindented lines' counts, and the
//! total is their sum. The header's count is kept as a comment: pmcstat prints it for
//! the whole run, which can be more than the trees shown (the fixture shows two).
//!
//! Sample types: `samples/count`, or with several events `<event>_samples/count` each.
//! Objects become mappings.

use rustc_hash::FxHashMap as HashMap;

use super::text::{self, text_error};
use crate::model::{Line, LocationId, MappingId, Profile, Sample, SourceFormat};
use crate::Result;

const FORMAT: &str = "pmcstat";

static_regex!(section_header, r"^@ (\S+) \[(\d+) samples\]\s*$");
static_regex!(entry, r"^( *)\d+(?:\.\d+)?%\s+\[(\d+)\]\s+(\S+)(?: @ (.+?))?\s*$");

/// Whether the first meaningful line of `first` is a pmcstat section header.
pub(crate) fn is_pmcstat(first: &str) -> bool {
    section_header().is_match(first)
}

/// A node on the path from the sampled function (depth 0) to the caller being read.
struct Open {
    location: LocationId,
    count: i64,
    callers: i64,
    line: usize,
}

#[derive(Default)]
struct Builder {
    locations: HashMap<(String, String), LocationId>,
    mappings: HashMap<String, MappingId>,
}

impl Builder {
    fn location(&mut self, p: &mut Profile, name: &str, object: &str) -> LocationId {
        let key = (name.to_owned(), object.to_owned());
        if let Some(&l) = self.locations.get(&key) {
            return l;
        }
        let function = super::demangle::add_native_function(p, name, "", 0);
        let l = p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        if !object.is_empty() {
            let mapping = *self.mappings.entry(object.to_owned()).or_insert_with(|| p.add_module_mapping(object));
            p.locations[l.0 as usize].mapping = Some(mapping);
        }
        self.locations.insert(key, l);
        l
    }
}

/// Samples of one event, as (leaf-first stack, count).
type Stacks = Vec<(Vec<LocationId>, i64)>;

/// Closes the open nodes deeper than `depth`, each keeping what its callers did not take.
fn close(open: &mut Vec<Open>, depth: usize, out: &mut Stacks) -> Result<()> {
    while open.len() > depth {
        let node = open.last().expect("open is longer than depth");
        let rest = node.count - node.callers;
        if rest < 0 {
            let reason = format!("its callers have {} samples, more than its {}", node.callers, node.count);
            return Err(text_error(FORMAT, node.line, reason));
        }
        if rest > 0 {
            out.push((open.iter().map(|o| o.location).collect(), rest));
        }
        open.pop();
    }
    Ok(())
}

fn number(s: &str, line: usize) -> Result<i64> {
    s.parse().map_err(|_| text_error(FORMAT, line, format!("count {s} is too large")))
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let text = text::decode(bytes);
    let mut p = Profile::new(SourceFormat::Pmcstat);
    let mut b = Builder::default();
    // Per event: name, header count, stacks.
    let mut events: Vec<(String, i64, Stacks)> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    let mut object = String::new();
    for (n, line) in text::numbered(&text) {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(c) = section_header().captures(line) {
            if let Some(event) = events.last_mut() {
                close(&mut open, 0, &mut event.2)?;
            }
            events.push((c[1].to_owned(), number(&c[2], n)?, Vec::new()));
            object.clear();
            continue;
        }
        let Some(event) = events.last_mut() else {
            return Err(text_error(FORMAT, n, "expected a '@ event [N samples]' header"));
        };
        let c = entry()
            .captures(line)
            .ok_or_else(|| text_error(FORMAT, n, "expected 'N%  [count]  function [@ object]'"))?;
        let depth = c[1].len();
        if depth > open.len() {
            return Err(text_error(FORMAT, n, "indented more than one level below the line above"));
        }
        close(&mut open, depth, &mut event.2)?;
        let count = number(&c[2], n)?;
        if let Some(object_name) = c.get(4) {
            object = object_name.as_str().to_owned();
        }
        let location = b.location(&mut p, &c[3], &object);
        if let Some(callee) = open.last_mut() {
            callee.callers =
                callee.callers.checked_add(count).ok_or_else(|| text_error(FORMAT, n, "counts overflow"))?;
        }
        open.push(Open { location, count, callers: 0, line: n });
    }
    let Some(event) = events.last_mut() else {
        return Err(text_error(FORMAT, 1, "no '@ event [N samples]' header"));
    };
    close(&mut open, 0, &mut event.2)?;

    let single = events.len() == 1;
    for (name, header_count, _) in &events {
        let kind = if single { "samples".to_owned() } else { format!("{name}_samples") };
        let vt = p.value_type(&kind, "count");
        p.sample_types.push(vt);
        let comment = p.strings.intern(&format!("event {name}: {header_count} samples in the run"));
        p.comments.push(comment);
    }
    let width = events.len();
    for (column, (_, _, stacks)) in events.into_iter().enumerate() {
        for (locations, count) in stacks {
            let mut values = vec![0; width];
            values[column] = count;
            room.push(&mut p.samples, Sample { locations, values, labels: Vec::new() })?;
        }
    }
    Ok(p)
}
