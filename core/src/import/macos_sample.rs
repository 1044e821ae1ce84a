//! macOS `sample` output (also Activity Monitor's "Sample Process"): a header, then
//! `Call graph:`, one tree per thread with each node's inclusive sample count:
//!
//! ```text
//! Call graph:
//!     825 Thread_15758523   DispatchQueue_1: com.apple.main-thread  (serial)
//!     + 825 start  (in libdyld.dylib) + 1  [0x7fff737cf3d5]
//!     +   825 main  (in rg) + 41  [0x10384b549]
//!     +     617 open  (in libsystem_kernel.dylib) + 10  [0x7fff739051ee]
//! ```
//!
//! * After four spaces, each level of depth is two characters of ` +|:!`.
//! * A node's self count is its count minus its children's, as `sample` means them; the
//!   thread becomes a `thread` label (inferno's `collapse-sample` makes it a frame).
//! * The tree ends at the first blank line; the summaries after it are not read.

use super::named_frames::NamedFrames;
use super::text::{self, text_error};
use crate::model::{Label, LabelValue, LocationId, Profile, SourceFormat};
use crate::Result;

const FORMAT: &str = "macOS sample";
const HEADER: &str = "Analysis of sampling ";
const CALL_GRAPH: &str = "Call graph:";
const MARGIN: &str = "    ";

/// Whether `text` starts with `sample`'s header line.
pub(crate) fn looks_like_macos_sample(text: &str) -> bool {
    text.trim_start().starts_with(HEADER)
}

/// A node of the tree whose subtree is still being read.
struct Open {
    /// `None` for the thread.
    frame: Option<LocationId>,
    count: i64,
    children: i64,
}

struct Tree {
    frames: NamedFrames,
    open: Vec<Open>,
}

impl Tree {
    /// Ends the nodes deeper than `depth`, adding a sample for each self count.
    fn close_to(&mut self, depth: usize, line: usize) -> Result<()> {
        while self.open.len() > depth {
            let stack: Vec<LocationId> = self.open.iter().rev().filter_map(|o| o.frame).collect();
            let Some(node) = self.open.pop() else { break };
            if node.children > node.count {
                return Err(text_error(FORMAT, line, "a node's children have more samples than the node"));
            }
            self.frames.sample(stack, vec![node.count - node.children])?;
            if self.open.is_empty() {
                self.frames.labels.clear();
            }
        }
        Ok(())
    }
}

/// `825 start  (in libdyld.dylib) + 1  [0x7fff737cf3d5]` → (825, `start`, `libdyld.dylib`).
fn split_node(node: &str) -> Option<(i64, &str, &str)> {
    let (count, rest) = node.split_once(' ')?;
    let count = count.parse().ok()?;
    Some(match rest.rsplit_once("  (in ") {
        Some((function, place)) => (count, function.trim(), place.split_once(')').map_or(place, |(module, _)| module)),
        None => (count, rest.trim(), ""),
    })
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = text::numbered(&text);
    let (mut last, _) = lines
        .by_ref()
        .find(|(_, l)| l.trim() == CALL_GRAPH)
        .ok_or_else(|| text_error(FORMAT, 1, format!("no '{CALL_GRAPH}' line")))?;
    let mut tree = Tree {
        frames: NamedFrames::new(SourceFormat::MacosSample, &[("samples", "count")], options),
        open: Vec::new(),
    };
    for (n, line) in lines {
        if line.trim().is_empty() {
            break;
        }
        last = n;
        let body = line.strip_prefix(MARGIN).ok_or_else(|| text_error(FORMAT, n, "expected a call graph line"))?;
        let node = body.trim_start_matches([' ', '+', '|', ':', '!']);
        let indent = body.len() - node.len();
        let (count, function, module) =
            split_node(node).ok_or_else(|| text_error(FORMAT, n, "expected 'count function  (in module)'"))?;
        if indent % 2 != 0 {
            return Err(text_error(FORMAT, n, "odd indentation"));
        }
        let depth = indent / 2;
        tree.close_to(depth, n)?;
        if depth > tree.open.len() {
            return Err(text_error(FORMAT, n, "the line skips a level of the call tree"));
        }
        let frame = if depth == 0 {
            let p = &mut tree.frames.profile;
            let label = Label { key: p.strings.intern("thread"), value: LabelValue::Str(p.strings.intern(function)) };
            tree.frames.labels = vec![label];
            None
        } else {
            Some(tree.frames.frame(function, module))
        };
        if let Some(parent) = tree.open.last_mut() {
            parent.children =
                parent.children.checked_add(count).ok_or_else(|| text_error(FORMAT, n, "count overflow"))?;
        }
        tree.open.push(Open { frame, count, children: 0 });
    }
    tree.close_to(0, last)?;
    if tree.frames.profile.samples.is_empty() {
        return Err(text_error(FORMAT, last, "no samples in the call graph"));
    }
    Ok(tree.frames.profile)
}
