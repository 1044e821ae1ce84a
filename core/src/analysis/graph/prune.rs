//! Pruning a built graph as pprof does: the entropy order, low-weight edges, the top
//! nodes and the residual edges that another path makes redundant.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::build::{WorkEdge, WorkGraph};
use super::tags::SampleTags;
use crate::analysis::frames::FrameTable;

impl WorkGraph<'_> {
    fn live<'a>(&'a self, edges: &'a [u32]) -> impl Iterator<Item = &'a WorkEdge> + 'a {
        edges.iter().map(|&e| &self.edges[e as usize]).filter(|e| e.live)
    }

    /// pprof's `EntropyOrder`: a node whose calls fan in or out scores higher than one
    /// that only passes its caller's time on; entry and leaf nodes are favoured.
    pub(super) fn sort_by_entropy(&mut self, table: &FrameTable) {
        let (flat, cum) = (&self.values.flat, &self.values.cum);
        let mut score = vec![0i64; flat.len()];
        for &n in &self.nodes {
            let (flat, cum) = (flat[n as usize], cum[n as usize]);
            let side = |edges: &[u32], own: i64| {
                let weights: Vec<i64> = self.live(edges).map(|e| e.weight).collect();
                if weights.is_empty() {
                    1.0
                } else {
                    edge_entropy(&weights, own)
                }
            };
            let entropy = side(&self.ins[n as usize], 0) + side(&self.outs[n as usize], flat);
            score[n as usize] = ((entropy * cum as f64) as i64).saturating_add(flat);
        }
        self.nodes.sort_by(|&a, &b| {
            score[b as usize]
                .unsigned_abs()
                .cmp(&score[a as usize].unsigned_abs())
                .then_with(|| table.name(a).cmp(table.name(b)))
                .then_with(|| flat[b as usize].unsigned_abs().cmp(&flat[a as usize].unsigned_abs()))
        });
    }

    /// pprof's `TrimLowFrequencyEdges`: removes the edges into the graph's nodes lighter
    /// than `cutoff`, and says how many.
    pub(super) fn trim_edges(&mut self, cutoff: i64) -> usize {
        let mut dropped = 0;
        for &n in &self.nodes {
            for &e in &self.ins[n as usize] {
                let edge = &mut self.edges[e as usize];
                if edge.live && edge.weight.unsigned_abs() < cutoff.unsigned_abs() {
                    edge.live = false;
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// How many of the first nodes pprof keeps for `limit` in a visual graph: each node
    /// counts once plus its tags with a flat value (at most 4, as pprof draws at most 4
    /// nodelets), tags under `tag_cutoff` left out.
    pub(super) fn top_nodes(&self, limit: usize, tag_cutoff: i64, tags: &SampleTags) -> usize {
        let mut sums: HashMap<(u32, u32), (i64, i64)> = HashMap::default();
        for ((node, set), (flat, cum)) in self.values.tags.iter() {
            for &tag in &tags.sets[set as usize] {
                let sum = sums.entry((node, tag)).or_default();
                *sum = (sum.0.saturating_add(flat), sum.1.saturating_add(cum));
            }
        }
        let mut counts = vec![0usize; self.values.flat.len()];
        for (&(node, _), &(flat, cum)) in &sums {
            let kept =
                flat.unsigned_abs() >= tag_cutoff.unsigned_abs() || cum.unsigned_abs() >= tag_cutoff.unsigned_abs();
            if flat != 0 && kept {
                counts[node as usize] += 1;
            }
        }
        const MAX_NODELETS: usize = 4;
        let mut count = 0;
        for (i, &n) in self.nodes.iter().enumerate() {
            count += counts[n as usize].min(MAX_NODELETS) + 1;
            if count >= limit {
                return i + 1;
            }
        }
        limit.min(self.nodes.len())
    }

    /// Live edges among `edges`, in pprof's edge order: heaviest first, then by the
    /// caller's and the callee's names.
    pub(super) fn sorted_live_edges(&self, mut edges: Vec<u32>, table: &FrameTable) -> Vec<u32> {
        edges.retain(|&e| self.edges[e as usize].live);
        edges.sort_by(|&a, &b| {
            let (a, b) = (&self.edges[a as usize], &self.edges[b as usize]);
            b.weight
                .unsigned_abs()
                .cmp(&a.weight.unsigned_abs())
                .then_with(|| table.name(a.src).cmp(table.name(b.src)))
                .then_with(|| table.name(a.dest).cmp(table.name(b.dest)))
        });
        edges
    }

    /// pprof's `RemoveRedundantEdges`: from the last node up, its lightest incoming
    /// residual edges go when the caller still reaches the node another way; the first
    /// non-residual edge stops the node's turn.
    pub(super) fn remove_redundant_edges(&mut self, table: &FrameTable) {
        for i in (0..self.nodes.len()).rev() {
            let n = self.nodes[i];
            for e in self.sorted_live_edges(self.ins[n as usize].clone(), table).into_iter().rev() {
                if !self.edges[e as usize].residual {
                    break;
                }
                if self.reachable_without(e) {
                    self.edges[e as usize].live = false;
                }
            }
        }
    }

    /// Whether the edge's caller reaches its callee through other edges (a breadth-first
    /// walk up the callers).
    fn reachable_without(&self, edge: u32) -> bool {
        let WorkEdge { src, dest, .. } = self.edges[edge as usize];
        let mut seen: HashSet<u32> = HashSet::from_iter([dest]);
        let mut queue = std::collections::VecDeque::from([dest]);
        while let Some(n) = queue.pop_front() {
            for &e in &self.ins[n as usize] {
                let caller = self.edges[e as usize].src;
                if e == edge || !self.edges[e as usize].live || seen.contains(&caller) {
                    continue;
                }
                if caller == src {
                    return true;
                }
                seen.insert(caller);
                queue.push_back(caller);
            }
        }
        false
    }
}

/// pprof's `edgeEntropyScore`: the entropy of how a node's value splits over its edges
/// (and its own flat value, for the outgoing side).
fn edge_entropy(weights: &[i64], own: i64) -> f64 {
    let total = weights.iter().filter(|&&w| w > 0).fold(own, |t, &w| t.saturating_add(w));
    if total == 0 {
        return 0.0;
    }
    let term = |w: i64| {
        let frac = w.unsigned_abs() as f64 / total as f64;
        -frac * frac.log2()
    };
    let mut score: f64 = weights.iter().map(|&w| term(w)).sum();
    if own > 0 {
        score += term(own);
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_of_an_even_split_is_one_bit() {
        assert_eq!(edge_entropy(&[5, 5], 0), 1.0);
        assert_eq!(edge_entropy(&[10], 0), 0.0);
        assert_eq!(edge_entropy(&[0], 0), 0.0);
    }
}
