//! Whole call trees kept for zooming and searching, so a new zoom only cuts a new window:
//! a few at most, and few nodes while another is built, as a large profile's tree takes
//! over a hundred MB and a worker's WebAssembly memory never shrinks.

use std::sync::Arc;

use super::CallTree;

/// A tree of more nodes is built without its narrowest subtrees (32 bytes a node: 256 MB
/// at most; the large CPU fixture's whole tree has 4.45 M nodes).
pub const MAX_TREE_NODES: usize = 8 << 20;

/// A zoomed subtree's detail is built within what its whole tree left of
/// [`MAX_TREE_NODES`], and at least this many nodes.
pub const MIN_DETAIL_NODES: usize = 1 << 20;

/// Trees by key, newest last.
pub struct TreeCache<K> {
    entries: Vec<(K, Arc<CallTree>)>,
    kept_nodes: usize,
}

impl<K: PartialEq> Default for TreeCache<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: PartialEq> TreeCache<K> {
    const CAPACITY: usize = 3;
    /// 32 MB of nodes: small trees stay cached side by side, a large one is dropped
    /// before the next is built.
    pub const KEPT_NODES: usize = 1 << 20;

    pub const fn new() -> Self {
        Self::keeping(Self::KEPT_NODES)
    }

    pub const fn keeping(kept_nodes: usize) -> Self {
        TreeCache { entries: Vec::new(), kept_nodes }
    }

    pub fn get_or_build<E>(&mut self, key: K, build: impl FnOnce() -> Result<CallTree, E>) -> Result<Arc<CallTree>, E> {
        self.get_or_build_keeping(key, self.kept_nodes, build)
    }

    /// [`TreeCache::get_or_build`], keeping up to `kept_nodes` nodes of the newest trees
    /// while building (a zoomed subtree's detail is built beside its whole tree).
    pub fn get_or_build_keeping<E>(
        &mut self,
        key: K,
        kept_nodes: usize,
        build: impl FnOnce() -> Result<CallTree, E>,
    ) -> Result<Arc<CallTree>, E> {
        if let Some(i) = self.entries.iter().position(|(k, _)| *k == key) {
            let entry = self.entries.remove(i);
            let tree = entry.1.clone();
            self.entries.push(entry);
            return Ok(tree);
        }
        // Evict first, so large trees are never held while another is built.
        while self.entries.len() >= Self::CAPACITY
            || self.entries.iter().map(|(_, t)| t.nodes.len()).sum::<usize>() > kept_nodes
        {
            self.entries.remove(0);
        }
        let tree = Arc::new(build()?);
        self.entries.push((key, tree.clone()));
        Ok(tree)
    }

    pub fn retain(&mut self, keep: impl Fn(&K) -> bool) {
        self.entries.retain(|(k, _)| keep(k));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
