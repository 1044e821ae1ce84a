//! The merged call tree behind flame graphs, stored in pre-order: a node's subtree is the
//! index range `node..node.end`, children follow their parent in name order, and a
//! subtree too narrow to draw is skipped in O(1). It is built by sorting the samples'
//! stacks and walking them once (common prefixes share nodes), with no per-frame hashing:
//! large profiles have millions of nodes.
//! A diff tree carries the base profile's values beside the compared profile's.

use serde::{Deserialize, Serialize};

use super::query::Prepared;
use crate::Result;

pub mod cache;
pub mod window;
mod wire;

/// How much of a call tree is built (what it sums is the [`Prepared`] query's).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TreeOptions {
    /// Build at most this many nodes: a tree that would have more leaves out its
    /// narrowest subtrees (see [`CallTree::pruned_below`]). `None`: every node.
    pub max_nodes: Option<usize>,
    /// Only the stacks through this call path (root first, node names): the subtree of
    /// one node, at full detail when the whole tree had to leave some out. Empty: all.
    pub below: Vec<String>,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeNode {
    /// Index into [`CallTree::names`]; the root's name is "root".
    pub name: u32,
    pub parent: u32,
    pub depth: u32,
    /// One past the last node of this node's subtree.
    pub end: u32,
    /// Value of samples whose leaf is this node.
    pub self_value: i64,
    /// Value of all samples through this node.
    pub total: i64,
}

/// The base profile's values for one node of a diff tree.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BaseValues {
    pub self_value: i64,
    pub total: i64,
}

#[derive(Clone, Debug)]
pub struct CallTree {
    pub nodes: Vec<TreeNode>,
    pub names: Vec<String>,
    /// The source file of each name's function ("" when unknown).
    pub files: Vec<String>,
    /// Per node, for diff trees only (empty otherwise).
    pub base: Vec<BaseValues>,
    /// Per node, for windows only (empty otherwise): the value of left-out siblings
    /// just before it, so frames keep their places (see [`CallTree::window`]).
    pub left_out_before: Vec<i64>,
    pub sample_type: String,
    pub unit: String,
    pub max_depth: u32,
    /// Subtrees whose |total| is below this were left out to keep within
    /// [`TreeOptions::max_nodes`] (0: none were). Their values stay in their parents'
    /// totals and in [`CallTree::left_out_before`].
    pub pruned_below: i64,
}

pub const ROOT: u32 = 0;

/// Which half of a sandwich view.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Who calls the function: the function at the top, its callers below it.
    Callers,
    /// What the function calls: the function at the top, the calls it makes below.
    Callees,
}

/// Stacks of one or two profiles as root-first name ids, ready to be sorted.
#[derive(Default)]
struct Stacks {
    names: Vec<String>,
    files: Vec<String>,
    name_index: rustc_hash::FxHashMap<String, u32>,
    frames: Vec<u32>,
    /// (start, len, value, from_base)
    stacks: Vec<(u32, u32, i64, bool)>,
}

impl Stacks {
    fn add(&mut self, prepared: &Prepared, options: &TreeOptions, base: bool) -> Result<()> {
        let (table, index) = (prepared.frames()?, prepared.sample_index);
        let mut ids = Vec::with_capacity(table.node_count());
        for n in 0..table.node_count() as u32 {
            let name = table.name(n);
            let next = self.names.len() as u32;
            let id = *self.name_index.entry(name.to_owned()).or_insert(next);
            if id == next {
                self.names.push(name.to_owned());
                self.files.push(table.file(n).to_owned());
            }
            ids.push(id);
        }
        // The path as name ids; a name no frame has leaves no stack through it.
        let Some(below) =
            options.below.iter().map(|name| self.name_index.get(name).copied()).collect::<Option<Vec<u32>>>()
        else {
            return Ok(());
        };
        for sample in table.kept_samples() {
            let value = sample.values.get(index).copied().unwrap_or(0);
            if value == 0 {
                continue;
            }
            let start = self.frames.len() as u32;
            table.walk_root_first(sample, |node, _| self.frames.push(ids[node as usize]));
            if !self.frames[start as usize..].starts_with(&below) {
                self.frames.truncate(start as usize);
                continue;
            }
            self.stacks.push((start, self.frames.len() as u32 - start, value, base));
        }
        Ok(())
    }

    /// Keeps, per stack, only the part seen from `function`: its callees (the stack from
    /// its outermost occurrence down) or its callers (up to its innermost occurrence,
    /// reversed so the function is the root's child). Stacks without it are dropped.
    fn sandwich(mut self, function: &str, side: Side) -> Self {
        let Some(target) = self.names.iter().position(|n| n == function).map(|i| i as u32) else {
            self.stacks.clear();
            return self;
        };
        let mut frames = Vec::with_capacity(self.frames.len());
        let mut stacks = Vec::with_capacity(self.stacks.len());
        for &(start, len, value, base) in &self.stacks {
            let seq = &self.frames[start as usize..(start + len) as usize];
            let part: Vec<u32> = match side {
                Side::Callees => match seq.iter().position(|&f| f == target) {
                    Some(i) => seq[i..].to_vec(),
                    None => continue,
                },
                Side::Callers => match seq.iter().rposition(|&f| f == target) {
                    Some(i) => seq[..=i].iter().rev().copied().collect(),
                    None => continue,
                },
            };
            let at = frames.len() as u32;
            frames.extend_from_slice(&part);
            stacks.push((at, part.len() as u32, value, base));
        }
        self.frames = frames;
        self.stacks = stacks;
        self
    }

    fn build(self, sample_type: String, unit: String, diff: bool, max_nodes: Option<usize>) -> CallTree {
        let Stacks { mut names, mut files, frames: mut ranked, mut stacks, .. } = self;
        // Rank names alphabetically so sorted stacks give name-ordered children; frames
        // are ranked in place (a large profile has millions).
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut rank = vec![0u32; names.len()];
        for (r, &n) in order.iter().enumerate() {
            rank[n as usize] = r as u32;
        }
        for frame in &mut ranked {
            *frame = rank[*frame as usize];
        }
        let seq = |s: &(u32, u32, i64, bool)| &ranked[s.0 as usize..(s.0 + s.1) as usize];
        stacks.sort_unstable_by(|a, b| seq(a).cmp(seq(b)));
        // Each stack adds a node per frame past the prefix it shares with the previous
        // one. Counting first allocates the nodes once, at their size: growing by
        // doubling held up to twice the tree (a page's WASM memory never shrinks).
        let mut previous: &[u32] = &[];
        let commons: Vec<u32> = stacks
            .iter()
            .map(|s| {
                let current = seq(s);
                let common = common_prefix(previous, current);
                previous = current;
                common as u32
            })
            .collect();
        let node_count = 1 + stacks.iter().zip(&commons).map(|(s, &common)| (s.1 - common) as usize).sum::<usize>();

        // Names are now referred to by rank; reorder the table to match.
        let sorted_names: Vec<String> = order.iter().map(|&n| std::mem::take(&mut names[n as usize])).collect();
        let mut files: Vec<String> = order.iter().map(|&n| std::mem::take(&mut files[n as usize])).collect();
        let root_name = sorted_names.len() as u32;
        let mut names = sorted_names;
        names.push("root".to_owned());
        files.push(String::new());
        if let Some(max_nodes) = max_nodes.filter(|&m| node_count > m) {
            let sorted = Sorted { frames: &ranked, stacks: &stacks, commons: &commons, root_name, diff };
            let mut tree = sorted.pruned(max_nodes);
            (tree.names, tree.files, tree.sample_type, tree.unit) = (names, files, sample_type, unit);
            return tree;
        }

        let mut nodes = Vec::with_capacity(node_count);
        nodes.push(TreeNode { name: root_name, parent: ROOT, depth: 0, end: 0, self_value: 0, total: 0 });
        let mut base = Vec::with_capacity(if diff { node_count } else { 0 });
        if diff {
            base.push(BaseValues::default());
        }
        let mut path: Vec<u32> = vec![ROOT];
        for (s, &common) in stacks.iter().zip(&commons) {
            let (current, common) = (seq(s), common as usize);
            while path.len() > common + 1 {
                let done = path.pop().expect("path holds the root");
                nodes[done as usize].end = nodes.len() as u32;
            }
            for &name in &current[common..] {
                let parent = *path.last().expect("path holds the root");
                let id = nodes.len() as u32;
                nodes.push(TreeNode { name, parent, depth: path.len() as u32, end: 0, self_value: 0, total: 0 });
                if diff {
                    base.push(BaseValues::default());
                }
                path.push(id);
            }
            let (value, from_base) = (s.2, s.3);
            for &n in &path {
                if from_base {
                    base[n as usize].total = base[n as usize].total.saturating_add(value);
                } else {
                    nodes[n as usize].total = nodes[n as usize].total.saturating_add(value);
                }
            }
            let leaf = *path.last().expect("path holds the root") as usize;
            if from_base {
                base[leaf].self_value = base[leaf].self_value.saturating_add(value);
            } else {
                nodes[leaf].self_value = nodes[leaf].self_value.saturating_add(value);
            }
        }
        let end = nodes.len() as u32;
        for n in path {
            nodes[n as usize].end = end;
        }
        let max_depth = nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        CallTree {
            nodes,
            names,
            files,
            base,
            left_out_before: Vec::new(),
            sample_type,
            unit,
            max_depth,
            pruned_below: 0,
        }
    }
}

/// Sorted stacks (root-first frame ranks) with each one's common prefix with the one
/// before: a node of the whole tree is a run of stacks sharing a prefix, so its total is
/// a difference of running sums and a narrow subtree is skipped without building it.
struct Sorted<'a> {
    frames: &'a [u32],
    /// (start, len, value, from_base), sorted by frames.
    stacks: &'a [(u32, u32, i64, bool)],
    commons: &'a [u32],
    root_name: u32,
    diff: bool,
}

/// A node being walked: its index, its stacks `at..end` (those ending at it already
/// consumed), its depth, and the value of children left out since the last one kept.
struct Open {
    node: u32,
    at: usize,
    end: usize,
    depth: u32,
    left_out: i64,
}

impl Sorted<'_> {
    fn frame(&self, stack: usize, depth: u32) -> u32 {
        self.frames[(self.stacks[stack].0 + depth) as usize]
    }

    /// The tree without the subtrees whose |total| (either side's, in a diff) is below
    /// the smallest power-of-two fraction of the root's that keeps it within
    /// `max_nodes` nodes.
    fn pruned(&self, max_nodes: usize) -> CallTree {
        // Running sums of each side's values; wrapping, as the difference of two is
        // exact whenever the sum it stands for fits (pprof's sums are int64 too).
        let running = |base: bool| -> Vec<i64> {
            let mut sum = 0i64;
            let mut out = Vec::with_capacity(self.stacks.len() + 1);
            out.push(0);
            for s in self.stacks {
                if s.3 == base {
                    sum = sum.wrapping_add(s.2);
                }
                out.push(sum);
            }
            out
        };
        let sums = [running(false), if self.diff { running(true) } else { Vec::new() }];
        let widest = sums.iter().filter_map(|s| s.last()).map(|t| t.unsigned_abs()).max().unwrap_or(0);
        // The most detail (the largest shift) whose tree still fits.
        let (mut fits, mut too_big) = (0u32, 64u32);
        while too_big - fits > 1 {
            let shift = (fits + too_big) / 2;
            if self.walk(&sums, (widest >> shift) as i64, max_nodes, |_, _, _| {}) <= max_nodes {
                fits = shift;
            } else {
                too_big = shift;
            }
        }
        let min_total = ((widest >> fits) as i64).max(1);
        let mut tree = CallTree {
            nodes: Vec::with_capacity(max_nodes),
            names: Vec::new(),
            files: Vec::new(),
            base: Vec::new(),
            left_out_before: Vec::with_capacity(max_nodes),
            sample_type: String::new(),
            unit: String::new(),
            max_depth: 0,
            pruned_below: min_total,
        };
        self.walk(&sums, min_total, usize::MAX, |tree_node, base, left_out| {
            tree.max_depth = tree.max_depth.max(tree_node.depth);
            match tree_node.end {
                // A finished subtree: its end is now known.
                u32::MAX => tree.nodes[tree_node.parent as usize].end = tree.nodes.len() as u32,
                _ => {
                    tree.nodes.push(tree_node);
                    tree.left_out_before.push(left_out);
                    if self.diff {
                        tree.base.push(base);
                    }
                }
            }
        });
        tree
    }

    /// Walks the tree's nodes whose |total| is at least `min_total` in pre-order, giving
    /// each to `visit` with its base values and the value of the siblings left out just
    /// before it, then a marker (`end == u32::MAX`, `parent` = the node) when its subtree
    /// is done. Stops once past `limit` nodes; returns how many it visited.
    fn walk(
        &self,
        sums: &[Vec<i64>; 2],
        min_total: i64,
        limit: usize,
        mut visit: impl FnMut(TreeNode, BaseValues, i64),
    ) -> usize {
        let value = |side: &Vec<i64>, from: usize, to: usize| side.get(to).map_or(0, |t| t.wrapping_sub(side[from]));
        let kept = |from: usize, to: usize| {
            value(&sums[0], from, to).unsigned_abs() >= min_total as u64
                || value(&sums[1], from, to).unsigned_abs() >= min_total as u64
        };
        let mut count = 0usize;
        // Adds a node over stacks `at..end` at `depth`, with the stacks ending at it as its self value.
        let open_node = |visit: &mut dyn FnMut(TreeNode, BaseValues, i64),
                         name: u32,
                         parent: u32,
                         at: usize,
                         end: usize,
                         depth: u32,
                         left_out: i64| {
            let mut stop = at;
            while stop < end && self.stacks[stop].1 == depth {
                stop += 1;
            }
            let node = TreeNode {
                name,
                parent,
                depth,
                end: 0,
                self_value: value(&sums[0], at, stop),
                total: value(&sums[0], at, end),
            };
            let base = BaseValues { self_value: value(&sums[1], at, stop), total: value(&sums[1], at, end) };
            visit(node, base, left_out);
            Open { node: 0, at: stop, end, depth, left_out: 0 }
        };
        let mut path = vec![open_node(&mut visit, self.root_name, ROOT, 0, self.stacks.len(), 0, 0)];
        count += 1;
        while let Some(top) = path.last_mut() {
            if top.at >= top.end || count > limit {
                let done = path.pop().expect("a node is open");
                visit(TreeNode { end: u32::MAX, parent: done.node, ..TreeNode::default() }, BaseValues::default(), 0);
                continue;
            }
            // The child: the run of stacks sharing the frame at this depth.
            let start = top.at;
            let mut stop = start + 1;
            while stop < top.end && self.commons[stop] > top.depth {
                stop += 1;
            }
            top.at = stop;
            if !kept(start, stop) {
                top.left_out = top.left_out.wrapping_add(value(&sums[0], start, stop));
                continue;
            }
            let (parent, depth, left_out) = (top.node, top.depth + 1, std::mem::take(&mut top.left_out));
            let mut child = open_node(&mut visit, self.frame(start, top.depth), parent, start, stop, depth, left_out);
            child.node = count as u32;
            count += 1;
            path.push(child);
        }
        count
    }
}

/// How many leading frames two stacks share.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl CallTree {
    pub fn build(prepared: &Prepared, options: &TreeOptions) -> Result<Self> {
        Self::of_one(prepared, options, |stacks| stacks)
    }

    /// Builds from one profile's stacks after `shape` rewrites them.
    fn of_one(prepared: &Prepared, options: &TreeOptions, shape: impl FnOnce(Stacks) -> Stacks) -> Result<Self> {
        let mut stacks = Stacks::default();
        stacks.add(prepared, options, false)?;
        let (sample_type, unit) = (prepared.sample_type().to_owned(), prepared.unit().to_owned());
        Ok(shape(stacks).build(sample_type, unit, false, options.max_nodes))
    }

    /// The callers or the callees of `function` (a node name at the chosen granularity),
    /// merged over every stack that contains it; recursion is counted once per sample.
    pub fn sandwich(prepared: &Prepared, options: &TreeOptions, function: &str, side: Side) -> Result<Self> {
        Self::of_one(prepared, options, |stacks| stacks.sandwich(function, side))
    }

    /// One tree over both profiles, matched by call path: `total`/`self_value` from
    /// `compare`, [`CallTree::base`] from `base` (both from
    /// [`super::query::Query::prepare_pair`]).
    pub fn build_diff(base: &Prepared, compare: &Prepared, options: &TreeOptions) -> Result<Self> {
        let mut stacks = Stacks::default();
        stacks.add(compare, options, false)?;
        stacks.add(base, options, true)?;
        let (sample_type, unit) = (compare.sample_type().to_owned(), compare.unit().to_owned());
        Ok(stacks.build(sample_type, unit, true, options.max_nodes))
    }

    /// Children of `node` in name order.
    pub fn children(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let end = self.nodes[node as usize].end;
        let mut next = node + 1;
        std::iter::from_fn(move || {
            (next < end).then(|| {
                let child = next;
                next = self.nodes[child as usize].end;
                child
            })
        })
    }

    pub fn name(&self, node: u32) -> &str {
        &self.names[self.nodes[node as usize].name as usize]
    }

    /// The source file of the node's function ("" when unknown).
    pub fn file(&self, node: u32) -> &str {
        &self.files[self.nodes[node as usize].name as usize]
    }

    pub fn total(&self) -> i64 {
        self.nodes[ROOT as usize].total
    }

    /// The value of left-out siblings just before `node` (zero outside windows).
    pub fn left_out_before(&self, node: u32) -> i64 {
        self.left_out_before.get(node as usize).copied().unwrap_or(0)
    }

    /// The base profile's values at `node` (zero for trees that are not diffs).
    pub fn base_values(&self, node: u32) -> BaseValues {
        self.base.get(node as usize).copied().unwrap_or_default()
    }

    /// Nodes whose name satisfies `matches`, and the value they cover: each sample is
    /// counted once, at its outermost matching frame (what a search "matched %" shows).
    pub fn search(&self, matches: impl Fn(&str) -> bool) -> (Vec<bool>, i64) {
        let name_hits: Vec<bool> = self.names.iter().map(|n| matches(n)).collect();
        let hit: Vec<bool> = self.nodes.iter().map(|n| name_hits[n.name as usize]).collect();
        let mut covered: i64 = 0;
        let mut i = 1;
        while i < self.nodes.len() {
            if hit[i] {
                // Totals are sums of sample values, which may be as large as i64 allows.
                covered = covered.saturating_add(self.nodes[i].total);
                i = self.nodes[i].end as usize; // nested matches are already covered
            } else {
                i += 1;
            }
        }
        (hit, covered)
    }
}
