//! What a flame graph shows of a call tree: a window zoomed at one node, of only the
//! frames wide enough to see, and the detail of a zoomed subtree that a pruned tree left
//! out. The worker cuts windows so the page gets thousands of nodes, not millions.

use serde::{Deserialize, Serialize};

use super::{CallTree, TreeNode, ROOT};

/// Frames a window leaves out are narrower than 1/(2·WINDOW_PX) of the zoomed frame, so
/// invisible (under 0.5 px) on any canvas up to WINDOW_PX CSS pixels wide.
pub const WINDOW_PX: i64 = 8192;
/// Rows deeper than this are neither sent nor drawn (a 10,000-deep stack stays usable).
pub const MAX_ROWS: u32 = 400;

/// About a window: what the page learns with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowMeta {
    /// The zoomed node's index in the window.
    pub zoom: u32,
    /// The search and the value it matches in the whole tree (at least that much when
    /// the tree is pruned).
    pub matched: Option<(String, i64)>,
    /// The whole tree left out subtrees narrower than this (0: it has every node).
    pub pruned_below: i64,
    /// Whether the window has every frame it would have from the whole tree.
    pub complete: bool,
}

/// The search box's rule: a case-insensitive substring of the frame's name.
pub fn search_matcher(needle: &str) -> impl Fn(&str) -> bool {
    let needle = needle.to_lowercase();
    move |name| name.to_lowercase().contains(&needle)
}

impl CallTree {
    /// The node reached by following child names from the root; stops at the deepest
    /// name that exists (a zoom kept in an address survives a changed profile).
    pub fn node_at_path<S: AsRef<str>>(&self, names: &[S]) -> u32 {
        let mut node = ROOT;
        for name in names {
            match self.children(node).find(|&c| self.name(c) == name.as_ref()) {
                Some(child) => node = child,
                None => break,
            }
        }
        node
    }

    /// What a flame graph zoomed at `zoom` can show, as a tree of its own: the path from
    /// the root to `zoom` (each ancestor with only that child), then `zoom`'s subtree
    /// without subtrees whose total is below `min_total` or that lie deeper than
    /// `max_depth`. Values are kept, so a dropped child's share stays in its parent, as
    /// layout leaves sub-pixel frames. Lets a worker send the page thousands of nodes
    /// instead of millions. Returns the window and the zoomed node's index in it.
    pub fn window(&self, zoom: u32, min_total: i64, max_depth: u32) -> (CallTree, u32) {
        let zoom = if (zoom as usize) < self.nodes.len() { zoom } else { ROOT };
        let mut window = CallTree {
            nodes: Vec::new(),
            names: Vec::new(),
            files: Vec::new(),
            base: Vec::new(),
            left_out_before: Vec::new(),
            sample_type: self.sample_type.clone(),
            unit: self.unit.clone(),
            max_depth: 0,
            pruned_below: self.pruned_below,
        };
        let mut name_map = vec![u32::MAX; self.names.len()];
        let mut push = |window: &mut CallTree, old: u32, parent: u32, left_out: i64| {
            let n = self.nodes[old as usize];
            let slot = &mut name_map[n.name as usize];
            if *slot == u32::MAX {
                *slot = window.names.len() as u32;
                window.names.push(self.names[n.name as usize].clone());
                window.files.push(self.files[n.name as usize].clone());
            }
            window.nodes.push(TreeNode { name: *slot, parent, ..n });
            if !self.base.is_empty() {
                window.base.push(self.base_values(old));
            }
            window.left_out_before.push(left_out);
            window.max_depth = window.max_depth.max(n.depth);
        };
        // Ancestors form a chain: each is the parent of the next.
        let mut ancestors = vec![ROOT];
        ancestors.extend(self.path(zoom));
        ancestors.pop();
        for (i, &old) in ancestors.iter().enumerate() {
            push(&mut window, old, i.saturating_sub(1) as u32, 0);
        }
        let zoom_in_window = window.nodes.len() as u32;
        // Pre-order walk of zoom's subtree; `open` holds, per kept node whose subtree is
        // not finished, its old end, its new index and the value of its children left
        // out since the last kept one.
        let mut open: Vec<(u32, u32, i64)> = Vec::new();
        let mut i = zoom;
        let end = self.nodes[zoom as usize].end;
        while i < end {
            let n = &self.nodes[i as usize];
            while open.last().is_some_and(|&(old_end, _, _)| old_end <= i) {
                let (_, new, _) = open.pop().expect("checked");
                window.nodes[new as usize].end = window.nodes.len() as u32;
            }
            if i != zoom && (n.total < min_total || n.depth > max_depth) {
                if let Some(parent) = open.last_mut() {
                    parent.2 = parent.2.saturating_add(n.total);
                }
                i = n.end;
                continue;
            }
            let (parent, left_out) = match open.last_mut() {
                Some(p) => (p.1, std::mem::take(&mut p.2)),
                None => (zoom_in_window.saturating_sub(1), 0),
            };
            // A pruned tree's own left-out siblings come first.
            let left_out = left_out.saturating_add(self.left_out_before(i));
            open.push((n.end, window.nodes.len() as u32, 0));
            push(&mut window, i, parent, left_out);
            i += 1;
        }
        let len = window.nodes.len() as u32;
        for (_, new, _) in open {
            window.nodes[new as usize].end = len;
        }
        for node in &mut window.nodes[..zoom_in_window as usize] {
            node.end = len;
        }
        (window, zoom_in_window)
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

    /// The flame graph's window zoomed at the node `zoom_path` names (from the root),
    /// and what the page learns with it: the zoomed node, what `search` matches in the
    /// whole tree, and whether pruning left anything out of it.
    pub fn flame_window(&self, zoom_path: &[String], search: &str) -> (CallTree, WindowMeta) {
        let zoom = self.node_at_path(zoom_path);
        let min_total = self.nodes[zoom as usize].total / (2 * WINDOW_PX);
        let (window, at) = self.window(zoom, min_total, MAX_ROWS - 1);
        let matched = (!search.is_empty()).then(|| (search.to_owned(), self.search(search_matcher(search)).1));
        let meta =
            WindowMeta { zoom: at, matched, pruned_below: self.pruned_below, complete: min_total >= self.pruned_below };
        (window, meta)
    }

    /// Where a window zoomed at `zoom_path` goes deeper than this tree kept: the
    /// root-first path of the deepest node of `zoom_path` it has, whose subtree built
    /// alone has every frame the window lacks ([`CallTree::detail_window`]); `None` when
    /// the window is complete or at the root.
    pub fn detail_path(&self, zoom_path: &[String], meta: &WindowMeta) -> Option<Vec<String>> {
        let zoom = self.node_at_path(zoom_path);
        (!meta.complete && zoom != ROOT).then(|| self.path(zoom).iter().map(|&n| self.name(n).to_owned()).collect())
    }

    /// The window at `zoom_path` cut from `detail`, the tree of only the stacks through
    /// `path` (a prefix of `zoom_path`), instead of from this pruned whole tree: every
    /// frame the zoom can show, and a zoom deeper than the whole tree kept. The root and
    /// the ancestors above `path`'s node take their values from the whole tree (in
    /// `detail` they carry only that node's); the search and the whole tree's pruning
    /// stay `meta`'s.
    pub fn detail_window(
        &self,
        detail: &CallTree,
        path: &[String],
        zoom_path: &[String],
        meta: WindowMeta,
    ) -> (CallTree, WindowMeta) {
        let zoom = detail.node_at_path(zoom_path);
        let min_total = detail.nodes[zoom as usize].total / (2 * WINDOW_PX);
        let (mut window, at) = detail.window(zoom, min_total, MAX_ROWS - 1);
        let above = std::iter::once(ROOT).chain(self.path(self.node_at_path(path))).take(path.len());
        for (node, from) in window.nodes[..at as usize].iter_mut().zip(above) {
            let whole_node = self.nodes[from as usize];
            (node.total, node.self_value) = (whole_node.total, whole_node.self_value);
        }
        window.pruned_below = self.pruned_below;
        (window, WindowMeta { zoom: at, complete: min_total >= detail.pruned_below, ..meta })
    }
}
