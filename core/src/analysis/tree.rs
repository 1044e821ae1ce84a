//! The merged call tree behind flame graphs: every distinct root-to-leaf path of report
//! nodes, in an index arena with children stored contiguously (sorted by name).
//! A diff tree carries the base profile's values beside the compared profile's.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::frames::{Filters, FrameTable, Granularity};
use crate::{Profile, Result};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TreeOptions {
    pub sample_index: String,
    pub granularity: Granularity,
    pub filters: Filters,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TreeNode {
    /// Index into [`CallTree::names`]; the root's name is "root".
    pub name: u32,
    pub parent: u32,
    pub depth: u32,
    /// Value of samples whose leaf is this node.
    pub self_value: i64,
    /// Value of all samples through this node.
    pub total: i64,
    /// For diff trees: the base profile's total through the same path.
    pub base_total: i64,
    pub base_self: i64,
    /// Offset of this node's left edge from the root's, in value units.
    pub offset: i64,
    children_start: u32,
    children_len: u32,
}

#[derive(Clone, Debug)]
pub struct CallTree {
    pub nodes: Vec<TreeNode>,
    pub names: Vec<String>,
    pub sample_type: String,
    pub unit: String,
    children: Vec<u32>,
    pub max_depth: u32,
}

pub const ROOT: u32 = 0;

struct Builder {
    nodes: Vec<TreeNode>,
    names: Vec<String>,
    name_index: HashMap<String, u32>,
    edges: HashMap<(u32, u32), u32>,
}

impl Builder {
    fn new() -> Self {
        let mut b = Builder { nodes: Vec::new(), names: Vec::new(), name_index: HashMap::new(), edges: HashMap::new() };
        let root = b.name("root");
        b.nodes.push(TreeNode {
            name: root,
            parent: ROOT,
            depth: 0,
            self_value: 0,
            total: 0,
            base_total: 0,
            base_self: 0,
            offset: 0,
            children_start: 0,
            children_len: 0,
        });
        b
    }

    fn name(&mut self, s: &str) -> u32 {
        if let Some(&n) = self.name_index.get(s) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.push(s.to_owned());
        self.name_index.insert(s.to_owned(), n);
        n
    }

    /// Adds a profile's samples; `base` selects which value columns receive them.
    fn add(&mut self, profile: &Profile, index: usize, options: &TreeOptions, base: bool) -> Result<()> {
        let table = FrameTable::new(profile, options.granularity, &options.filters)?;
        // Map the table's node names into the tree's name space once.
        let names: Vec<u32> = (0..table.node_count() as u32).map(|n| self.name(table.name(n))).collect();
        for sample in &profile.samples {
            let value = sample.values.get(index).copied().unwrap_or(0);
            if value == 0 || !table.keeps(sample) {
                continue;
            }
            let mut current = ROOT;
            self.bump(current, value, base, false);
            table.walk_root_first(sample, |node, _| {
                let name = names[node as usize];
                let next_id = self.nodes.len() as u32;
                let child = *self.edges.entry((current, name)).or_insert(next_id);
                if child == next_id {
                    let depth = self.nodes[current as usize].depth + 1;
                    self.nodes.push(TreeNode {
                        name,
                        parent: current,
                        depth,
                        self_value: 0,
                        total: 0,
                        base_total: 0,
                        base_self: 0,
                        offset: 0,
                        children_start: 0,
                        children_len: 0,
                    });
                }
                current = child;
                self.bump(current, value, base, false);
            });
            self.bump(current, value, base, true);
        }
        Ok(())
    }

    fn bump(&mut self, node: u32, value: i64, base: bool, leaf: bool) {
        let n = &mut self.nodes[node as usize];
        match (base, leaf) {
            (false, false) => n.total += value,
            (false, true) => n.self_value += value,
            (true, false) => n.base_total += value,
            (true, true) => n.base_self += value,
        }
    }

    fn finish(self, sample_type: String, unit: String) -> CallTree {
        let Builder { mut nodes, names, .. } = self;
        // Children contiguous per parent, sorted by name: a parent-major order.
        let mut order: Vec<u32> = (1..nodes.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (na, nb) = (&nodes[a as usize], &nodes[b as usize]);
            na.parent.cmp(&nb.parent).then_with(|| names[na.name as usize].cmp(&names[nb.name as usize]))
        });
        let mut i = 0;
        while i < order.len() {
            let parent = nodes[order[i] as usize].parent;
            let start = i;
            while i < order.len() && nodes[order[i] as usize].parent == parent {
                i += 1;
            }
            nodes[parent as usize].children_start = start as u32;
            nodes[parent as usize].children_len = (i - start) as u32;
        }
        let max_depth = nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        let mut tree = CallTree { nodes, names, sample_type, unit, children: order, max_depth };
        tree.assign_offsets();
        tree
    }
}

impl CallTree {
    pub fn build(profile: &Profile, options: &TreeOptions) -> Result<Self> {
        let index = profile.sample_index(&options.sample_index)?;
        let mut b = Builder::new();
        b.add(profile, index, options, false)?;
        Ok(b.finish(profile.sample_type_name(index).to_owned(), profile.sample_type_unit(index).to_owned()))
    }

    /// One tree over both profiles: `total`/`self_value` from `compare`,
    /// `base_total`/`base_self` from `base`, matched by call path.
    pub fn build_diff(base: &Profile, compare: &Profile, options: &TreeOptions) -> Result<Self> {
        let compare_index = compare.sample_index(&options.sample_index)?;
        let base_index = super::diff::matching_sample_index(base, compare, compare_index)?;
        let mut b = Builder::new();
        b.add(compare, compare_index, options, false)?;
        b.add(base, base_index, options, true)?;
        Ok(b.finish(
            compare.sample_type_name(compare_index).to_owned(),
            compare.sample_type_unit(compare_index).to_owned(),
        ))
    }

    pub fn children(&self, node: u32) -> &[u32] {
        let n = &self.nodes[node as usize];
        &self.children[n.children_start as usize..(n.children_start + n.children_len) as usize]
    }

    pub fn name(&self, node: u32) -> &str {
        &self.names[self.nodes[node as usize].name as usize]
    }

    pub fn total(&self) -> i64 {
        self.nodes[ROOT as usize].total
    }

    /// The path from the root to `node` (root excluded), root first.
    pub fn path(&self, mut node: u32) -> Vec<u32> {
        let mut path = Vec::new();
        while node != ROOT {
            path.push(node);
            node = self.nodes[node as usize].parent;
        }
        path.reverse();
        path
    }

    /// Children start at their parent's left edge, in name order.
    fn assign_offsets(&mut self) {
        let mut stack = vec![ROOT];
        while let Some(node) = stack.pop() {
            let mut x = self.nodes[node as usize].offset;
            let n = &self.nodes[node as usize];
            let range = n.children_start as usize..(n.children_start + n.children_len) as usize;
            for i in range {
                let child = self.children[i];
                self.nodes[child as usize].offset = x;
                x += self.nodes[child as usize].total.max(0);
                stack.push(child);
            }
        }
    }
}
