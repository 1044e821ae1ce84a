//! Folded stacks, as FlameGraph's `stackcollapse-*` and inferno write them: one line per
//! distinct stack, `root;…;leaf value`, sorted, for one sample type.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::frames::FrameTable;
use crate::analysis::query::Prepared;
use crate::Result;

/// The prepared profile's stacks in its sample type, one line each.
pub fn write(prepared: &Prepared) -> Result<Vec<u8>> {
    let (table, index) = (prepared.frames()?, prepared.sample_index);
    let names: Vec<String> = (0..table.node_count() as u32).map(|n| frame_name(table.name(n))).collect();
    let mut lines = Vec::new();
    for (stack, value) in stacks(&table, index) {
        let frames: Vec<&str> = stack.iter().map(|&n| names[n as usize].as_str()).collect();
        lines.push(format!("{} {value}\n", frames.join(";")));
    }
    lines.sort_unstable();
    Ok(lines.concat().into_bytes())
}

/// Each distinct stack (nodes root first) kept by the filters, with its summed value
/// for sample type `index`; zero sums are left out.
pub(super) fn stacks(table: &FrameTable, index: usize) -> Vec<(Vec<u32>, i64)> {
    let mut sums: HashMap<Vec<u32>, i64> = HashMap::default();
    let mut stack = Vec::new();
    for sample in table.kept_samples() {
        let value = sample.values.get(index).copied().unwrap_or(0);
        if value == 0 {
            continue;
        }
        stack.clear();
        table.walk_root_first(sample, |node, _| stack.push(node));
        let sum = sums.entry(stack.clone()).or_insert(0);
        *sum = sum.saturating_add(value);
    }
    sums.into_iter().filter(|(_, v)| *v != 0).collect()
}

/// A frame name a folded line can carry: `;` separates frames and a line ends the
/// stack, so they become `:` and spaces (the format has no escapes).
fn frame_name(name: &str) -> String {
    let name = if name.is_empty() { "<unknown>" } else { name };
    name.chars()
        .map(|c| {
            if c == ';' {
                ':'
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect()
}
