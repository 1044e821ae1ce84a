//! Weighted call graphs (callgrind, cProfile) turned into the model's stacks.
//!
//! Both formats record, per function, its *self* cost (one value per sample type) and,
//! per caller→callee edge, the *inclusive* cost of the callee when called from that
//! caller — but no stacks. [`CallGraph::into_samples`] expands the graph into samples:
//!
//! * **Roots** are the functions nobody else calls (self-calls do not count), entered
//!   with the whole of their cost; and functions whose total cost (when the importer
//!   knows it, as cProfile's `ct`) exceeds what their callers' edges and their calls to
//!   themselves bring in, entered with the difference (Python's top-level `exec` is
//!   also called by imports).
//! * **Walking down**, a function entered with a fraction `r` of its total cost passes
//!   `r × cost(edge)` into each callee; the callee then holds the fraction
//!   `r × cost(edge) / total(callee)`, per sample type. A function's total is the sum of
//!   the costs on its incoming edges (self-calls excluded), or for a root its self cost
//!   plus its outgoing edges, unless the importer gives it ([`CallGraph::set_total`]). This is the usual "calls share the callee's inclusive cost
//!   in proportion" approximation: when a function has several callers, the stacks
//!   below it are split between the callers by the callers' inclusive costs on the
//!   edges, not by what really ran under each of them (the format does not say).
//! * **Recursion and cycles** are cut: a function already on the stack is not entered
//!   again (its cost on that edge is already counted in the caller's stack above it).
//! * Paths carrying less than half a unit in every sample type are not expanded.
//! * **Self cost stays exact**: each function's self cost is apportioned over the stacks
//!   where the function was reached, in proportion to their fractions, by cumulative
//!   rounding (the parts always add up to the self cost). A function never reached
//!   (a cycle nobody enters, or cut by the caps below) gets a stack of its own.
//! * **Caps**: at most [`MAX_VISITS`] stacks, [`MAX_FRAMES`] frames over all of them,
//!   and [`MAX_STEPS`] edge visits. Past a cap the expansion stops, a profile comment
//!   says so, and the remaining self costs land on the stacks already made (or on
//!   stacks of their own), so totals and self costs are still exact.

use rustc_hash::FxHashMap as HashMap;

use super::Room;
use crate::model::{LocationId, Profile, Sample};
use crate::Result;

/// Most stacks an expansion produces.
pub const MAX_VISITS: usize = 500_000;
/// Most frames over all stacks produced (about 16 MB of location ids).
pub const MAX_FRAMES: usize = 4_000_000;
/// Most edges looked at during an expansion.
pub const MAX_STEPS: usize = 50_000_000;

const NO_PARENT: u32 = u32::MAX;

struct Node {
    /// The location callers see for this function.
    frame: LocationId,
    /// Self cost by the leaf location it is shown at (usually `frame`; inlined code
    /// from another source file gets a location of its own).
    parts: Vec<(LocationId, Vec<i64>)>,
    /// Total (inclusive) cost when the format records it.
    total: Option<Vec<i64>>,
}

struct Edge {
    from: usize,
    to: usize,
    cost: Vec<i64>,
}

/// A call graph under construction. Nodes are functions, identified by the caller.
pub(crate) struct CallGraph {
    types: usize,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    edge_index: HashMap<(usize, usize), usize>,
}

struct Visit {
    node: u32,
    parent: u32,
    depth: u32,
    /// Fraction of the node's total cost on this path, per sample type.
    fraction: Vec<f64>,
}

fn add_into(into: &mut [i64], values: &[i64]) -> Option<()> {
    for (a, &b) in into.iter_mut().zip(values) {
        *a = a.checked_add(b)?;
    }
    Some(())
}

impl CallGraph {
    pub fn new(types: usize) -> Self {
        Self { types, nodes: Vec::new(), edges: Vec::new(), edge_index: HashMap::default() }
    }

    /// Adds a function shown at `frame`; returns its node index.
    pub fn add_node(&mut self, frame: LocationId) -> usize {
        self.nodes.push(Node { frame, parts: Vec::new(), total: None });
        self.nodes.len() - 1
    }

    /// Records the total (inclusive) cost of `node`, per sample type.
    pub fn set_total(&mut self, node: usize, values: &[i64]) {
        self.nodes[node].total = Some(values.to_vec());
    }

    /// Adds self cost of `node`, shown at the leaf location `leaf`. `None` on overflow.
    pub fn add_self(&mut self, node: usize, leaf: LocationId, values: &[i64]) -> Option<()> {
        let parts = &mut self.nodes[node].parts;
        match parts.iter_mut().find(|(l, _)| *l == leaf) {
            Some((_, v)) => add_into(v, values),
            None => {
                let mut v = vec![0; self.types];
                add_into(&mut v, values)?;
                parts.push((leaf, v));
                Some(())
            }
        }
    }

    /// Adds inclusive cost to the edge `from` → `to`. `None` on overflow.
    pub fn add_edge(&mut self, from: usize, to: usize, values: &[i64]) -> Option<()> {
        let types = self.types;
        let edges = &mut self.edges;
        let i = *self.edge_index.entry((from, to)).or_insert_with(|| {
            edges.push(Edge { from, to, cost: vec![0; types] });
            edges.len() - 1
        });
        add_into(&mut self.edges[i].cost, values)
    }

    /// Expands the graph into `profile.samples` (see the module documentation).
    /// Stops at the end of `room`: each stack is counted as it is made.
    pub fn into_samples(self, profile: &mut Profile, room: &mut Room) -> Result<()> {
        let (n, types) = (self.nodes.len(), self.types);
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut incoming = vec![vec![0f64; types]; n];
        let mut has_caller = vec![false; n];
        let mut outgoing = vec![vec![0f64; types]; n];
        let mut self_calls = vec![vec![0f64; types]; n];
        for (i, e) in self.edges.iter().enumerate() {
            if e.from == e.to {
                for (sum, &c) in self_calls[e.to].iter_mut().zip(&e.cost) {
                    *sum += c as f64;
                }
                continue;
            }
            out[e.from].push(i);
            has_caller[e.to] = true;
            for k in 0..types {
                incoming[e.to][k] += e.cost[k] as f64;
                outgoing[e.from][k] += e.cost[k] as f64;
            }
        }
        let total: Vec<Vec<f64>> = (0..n)
            .map(|v| {
                if let Some(t) = &self.nodes[v].total {
                    return t.iter().map(|&x| x as f64).collect();
                }
                if has_caller[v] {
                    return incoming[v].clone();
                }
                let mut t = outgoing[v].clone();
                for (_, values) in &self.nodes[v].parts {
                    for k in 0..types {
                        t[k] += values[k] as f64;
                    }
                }
                t
            })
            .collect();

        let mut visits: Vec<Visit> = Vec::new();
        let (mut frames, mut steps, mut capped) = (0usize, 0usize, false);
        let mut on_stack = vec![false; n];
        // (visit, next outgoing edge)
        let mut dfs: Vec<(usize, usize)> = Vec::new();
        // Cost entering each node from outside its callers' edges.
        let entry: Vec<Vec<f64>> = (0..n)
            .map(|v| match (&self.nodes[v].total, has_caller[v]) {
                (None, true) => vec![0.0; types],
                (None, false) => total[v].clone(),
                // A recursive function's total counts its calls to itself (cProfile's
                // `nc`): those do not enter from outside either.
                (Some(_), _) => {
                    (0..types).map(|k| (total[v][k] - incoming[v][k] - self_calls[v][k]).max(0.0)).collect()
                }
            })
            .collect();
        'roots: for root in (0..n).filter(|&v| entry[v].iter().any(|&c| c >= 0.5)) {
            if visits.len() >= MAX_VISITS || frames >= MAX_FRAMES {
                capped = true;
                break;
            }
            let fraction =
                (0..types).map(|k| if total[root][k] > 0.0 { entry[root][k] / total[root][k] } else { 0.0 }).collect();
            visits.push(Visit { node: root as u32, parent: NO_PARENT, depth: 1, fraction });
            frames += 1;
            on_stack[root] = true;
            dfs.push((visits.len() - 1, 0));
            while let Some(&mut (visit, ref mut next)) = dfs.last_mut() {
                let node = visits[visit].node as usize;
                let Some(&e) = out[node].get(*next) else {
                    on_stack[node] = false;
                    dfs.pop();
                    continue;
                };
                *next += 1;
                steps += 1;
                if steps > MAX_STEPS {
                    capped = true;
                    break 'roots;
                }
                let callee = self.edges[e].to;
                if on_stack[callee] {
                    continue;
                }
                let parent = &visits[visit];
                let carried: Vec<f64> = (0..types).map(|k| self.edges[e].cost[k] as f64 * parent.fraction[k]).collect();
                if carried.iter().all(|c| c.abs() < 0.5) {
                    continue;
                }
                let depth = parent.depth + 1;
                if visits.len() >= MAX_VISITS || frames + depth as usize > MAX_FRAMES {
                    capped = true;
                    continue;
                }
                let fraction = (0..types)
                    .map(|k| if total[callee][k] != 0.0 { (carried[k] / total[callee][k]).max(0.0) } else { 0.0 })
                    .collect();
                room.take_samples(1, u64::from(depth))?;
                visits.push(Visit { node: callee as u32, parent: visit as u32, depth, fraction });
                frames += depth as usize;
                on_stack[callee] = true;
                dfs.push((visits.len() - 1, 0));
            }
        }
        if capped {
            on_stack.iter_mut().for_each(|s| *s = false);
            let comment = format!(
                "call graph expansion capped (at most {MAX_VISITS} stacks, {MAX_FRAMES} frames, {MAX_STEPS} edges): \
                 self costs are exact, stacks below the cap are missing"
            );
            let id = profile.strings.intern(&comment);
            profile.comments.push(id);
        }

        // Visits per node; unreached nodes with self cost get a root visit of their own.
        let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, v) in visits.iter().enumerate() {
            by_node[v.node as usize].push(i);
        }
        for (v, node) in self.nodes.iter().enumerate() {
            if by_node[v].is_empty() && node.parts.iter().any(|(_, values)| values.iter().any(|&x| x != 0)) {
                visits.push(Visit { node: v as u32, parent: NO_PARENT, depth: 1, fraction: vec![1.0; types] });
                by_node[v].push(visits.len() - 1);
            }
        }

        for (v, node) in self.nodes.iter().enumerate() {
            let list = &by_node[v];
            for (leaf, values) in &node.parts {
                let shares: Vec<Vec<i64>> =
                    (0..types).map(|k| apportion(values[k], list.iter().map(|&i| visits[i].fraction[k]))).collect();
                for (j, &visit) in list.iter().enumerate() {
                    let sample_values: Vec<i64> = shares.iter().map(|s| s[j]).collect();
                    if sample_values.iter().all(|&x| x == 0) {
                        continue;
                    }
                    let mut locations = Vec::with_capacity(visits[visit].depth as usize);
                    locations.push(*leaf);
                    let mut p = visits[visit].parent;
                    while p != NO_PARENT {
                        let up = &visits[p as usize];
                        locations.push(self.nodes[up.node as usize].frame);
                        p = up.parent;
                    }
                    room.push(&mut profile.samples, Sample { locations, values: sample_values, labels: Vec::new() })?;
                }
            }
        }
        Ok(())
    }
}

/// Splits `value` into one part per weight, in proportion, by cumulative rounding: the
/// parts add up to `value` exactly. Zero total weight puts everything in the first part.
fn apportion(value: i64, weights: impl Iterator<Item = f64>) -> Vec<i64> {
    let weights: Vec<f64> = weights.collect();
    let mut parts = vec![0i64; weights.len()];
    if parts.is_empty() {
        return parts;
    }
    let sum: f64 = weights.iter().sum();
    if !(sum > 0.0 && sum.is_finite()) {
        parts[0] = value;
        return parts;
    }
    let (mut prefix, mut given) = (0f64, 0i64);
    let last = parts.len() - 1;
    for (i, w) in weights.iter().enumerate() {
        prefix += w;
        let upto = if i == last { value } else { (value as f64 * (prefix / sum).min(1.0)).round() as i64 };
        // Keep the parts of one sign even if rounding wobbles.
        let upto = if value >= 0 { upto.clamp(given, value) } else { upto.clamp(value, given) };
        parts[i] = upto - given;
        given = upto;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::apportion;

    #[test]
    fn apportion_is_exact() {
        assert_eq!(apportion(10, [1.0, 1.0, 1.0].into_iter()), vec![3, 4, 3]);
        assert_eq!(apportion(7, [0.0, 0.0].into_iter()), vec![7, 0]);
        assert_eq!(apportion(-5, [1.0, 4.0].into_iter()), vec![-1, -4]);
        assert_eq!(apportion(i64::MAX, [1.0, 1e-300].into_iter()).iter().sum::<i64>(), i64::MAX);
    }
}
