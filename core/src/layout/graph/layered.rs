//! The layered graph and its order: cycles broken at their back edges, nodes layered by
//! longest path, long edges passed through dummy vertices, and barycenter sweeps that
//! order each layer to reduce crossings.

/// Rounds of barycenter sweeps.
const ORDER_SWEEPS: usize = 12;

/// The layered graph: real nodes `0..n`, then dummy vertices for long edges.
pub(super) struct Layered {
    pub(super) real: usize,
    pub(super) layer: Vec<u32>,
    pub(super) width: Vec<f64>,
    /// Neighbours one layer up and one layer down.
    pub(super) up: Vec<Vec<u32>>,
    pub(super) down: Vec<Vec<u32>>,
    /// Per layer, its vertices left to right.
    pub(super) layers: Vec<Vec<u32>>,
    pub(super) position: Vec<u32>,
    pub(super) x: Vec<f64>,
    /// Per input edge, its vertices from top to bottom (`None` for a self-loop), and
    /// whether it was reversed to break a cycle.
    pub(super) chains: Vec<Option<(Vec<u32>, bool)>>,
}

impl Layered {
    pub(super) fn new(sizes: &[(f64, f64)], edges: &[(u32, u32)]) -> Self {
        let n = sizes.len();
        let reversed = back_edges(n, edges);
        let downward: Vec<Option<(u32, u32)>> = edges
            .iter()
            .zip(&reversed)
            .map(|(&(from, to), &rev)| (from != to).then_some(if rev { (to, from) } else { (from, to) }))
            .collect();
        let layer = assign_layers(n, &downward);
        let mut graph = Layered {
            real: n,
            width: sizes.iter().map(|s| s.0).collect(),
            up: vec![Vec::new(); n],
            down: vec![Vec::new(); n],
            layer,
            layers: Vec::new(),
            position: Vec::new(),
            x: Vec::new(),
            chains: Vec::with_capacity(edges.len()),
        };
        for (edge, rev) in downward.iter().zip(&reversed) {
            let chain = edge.map(|(top, bottom)| {
                let mut chain = vec![top];
                for layer in graph.layer[top as usize] + 1..graph.layer[bottom as usize] {
                    chain.push(graph.add_vertex(layer));
                }
                chain.push(bottom);
                for pair in chain.windows(2) {
                    graph.down[pair[0] as usize].push(pair[1]);
                    graph.up[pair[1] as usize].push(pair[0]);
                }
                (chain, *rev)
            });
            graph.chains.push(chain);
        }
        graph.initial_order();
        graph
    }

    fn add_vertex(&mut self, layer: u32) -> u32 {
        self.layer.push(layer);
        self.width.push(0.0);
        self.up.push(Vec::new());
        self.down.push(Vec::new());
        (self.layer.len() - 1) as u32
    }

    /// Layers filled in depth-first order from the top nodes, so a node starts next to
    /// its callers' other callees.
    fn initial_order(&mut self) {
        let count = self.layer.len();
        let depth = self.layer.iter().max().map_or(0, |&d| d as usize + 1);
        self.layers = vec![Vec::new(); depth];
        let mut placed = vec![false; count];
        let roots: Vec<u32> = (0..self.real as u32).filter(|&v| self.up[v as usize].is_empty()).collect();
        for start in roots.into_iter().chain(0..count as u32) {
            let mut stack = vec![start];
            while let Some(v) = stack.pop() {
                if std::mem::replace(&mut placed[v as usize], true) {
                    continue;
                }
                self.layers[self.layer[v as usize] as usize].push(v);
                stack.extend(self.down[v as usize].iter().rev().filter(|&&w| !placed[w as usize]));
            }
        }
        self.position = vec![0; count];
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                self.position[v as usize] = i as u32;
            }
        }
    }

    /// Barycenter sweeps, down then up, keeping the order with the fewest crossings.
    pub(super) fn order_layers(&mut self) {
        let mut best = (self.crossings(), self.layers.clone());
        for sweep in 0..ORDER_SWEEPS {
            let downward = sweep % 2 == 0;
            let layers: Vec<usize> = if downward {
                (1..self.layers.len()).collect()
            } else {
                (0..self.layers.len().saturating_sub(1)).rev().collect()
            };
            for l in layers {
                self.reorder(l, downward);
            }
            let crossings = self.crossings();
            if crossings < best.0 {
                best = (crossings, self.layers.clone());
            }
        }
        self.layers = best.1;
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                self.position[v as usize] = i as u32;
            }
        }
    }

    /// Sorts a layer by the mean position of each vertex's neighbours in the layer above
    /// (or below); a vertex without any keeps its place.
    fn reorder(&mut self, l: usize, from_above: bool) {
        let key = |v: u32| {
            let neighbours = if from_above { &self.up[v as usize] } else { &self.down[v as usize] };
            if neighbours.is_empty() {
                return f64::from(self.position[v as usize]);
            }
            neighbours.iter().map(|&u| f64::from(self.position[u as usize])).sum::<f64>() / neighbours.len() as f64
        };
        let mut keyed: Vec<(f64, u32, u32)> =
            self.layers[l].iter().map(|&v| (key(v), self.position[v as usize], v)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        self.layers[l] = keyed.into_iter().map(|(_, _, v)| v).collect();
        for (i, &v) in self.layers[l].iter().enumerate() {
            self.position[v as usize] = i as u32;
        }
    }

    /// Edge crossings between all adjacent layers: inversions among each layer's
    /// downward edges sorted by their upper ends.
    fn crossings(&self) -> usize {
        let mut total = 0;
        for layer in &self.layers {
            let mut ends: Vec<(u32, u32)> = layer
                .iter()
                .flat_map(|&v| self.down[v as usize].iter().map(move |&w| (self.position[v as usize], w)))
                .map(|(p, w)| (p, self.position[w as usize]))
                .collect();
            ends.sort_unstable();
            total += inversions(&mut ends.into_iter().map(|e| e.1).collect::<Vec<_>>());
        }
        total
    }

    pub(super) fn is_real(&self, v: u32) -> bool {
        (v as usize) < self.real
    }
}

/// Per edge, whether a depth-first search from the nodes without callers (then from
/// any node left) meets it as a back edge: reversing those makes the graph acyclic.
fn back_edges(n: usize, edges: &[(u32, u32)]) -> Vec<bool> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut has_caller = vec![false; n];
    for (i, &(from, to)) in edges.iter().enumerate() {
        out[from as usize].push(i);
        has_caller[to as usize] |= from != to;
    }
    // 0 unvisited, 1 on the DFS stack, 2 done.
    let mut state = vec![0u8; n];
    let mut back = vec![false; edges.len()];
    let starts = (0..n).filter(|&v| !has_caller[v]).chain(0..n);
    for start in starts {
        if state[start] != 0 {
            continue;
        }
        state[start] = 1;
        let mut stack = vec![(start, 0usize)];
        while let Some((v, next)) = stack.last_mut() {
            let Some(&e) = out[*v].get(*next) else {
                state[*v] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            let to = edges[e].1 as usize;
            match state[to] {
                0 => {
                    state[to] = 1;
                    stack.push((to, 0));
                }
                1 => back[e] = true,
                _ => {}
            }
        }
    }
    back
}

/// Longest-path layers over the downward edges; a node no edge enters then moves down
/// to just above its highest callee, so entry points do not pull long edges.
fn assign_layers(n: usize, downward: &[Option<(u32, u32)>]) -> Vec<u32> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &(top, bottom) in downward.iter().flatten() {
        indegree[bottom as usize] += 1;
        out[top as usize].push(bottom);
    }
    let mut layer = vec![0u32; n];
    let mut order: Vec<u32> = (0..n as u32).filter(|&v| indegree[v as usize] == 0).collect();
    let mut i = 0;
    while i < order.len() {
        let v = order[i] as usize;
        i += 1;
        for &w in &out[v] {
            layer[w as usize] = layer[w as usize].max(layer[v] + 1);
            indegree[w as usize] -= 1;
            if indegree[w as usize] == 0 {
                order.push(w);
            }
        }
    }
    let mut entered = vec![false; n];
    for &(_, bottom) in downward.iter().flatten() {
        entered[bottom as usize] = true;
    }
    for &v in order.iter().rev() {
        let v = v as usize;
        if !entered[v] {
            if let Some(highest) = out[v].iter().map(|&w| layer[w as usize]).min() {
                layer[v] = highest - 1;
            }
        }
    }
    layer
}

/// Inversions in `values` (pairs out of order), by merge sort; sorts them.
fn inversions(values: &mut [u32]) -> usize {
    if values.len() < 2 {
        return 0;
    }
    let middle = values.len() / 2;
    let mut count = inversions(&mut values[..middle]) + inversions(&mut values[middle..]);
    let mut merged = Vec::with_capacity(values.len());
    let (mut i, mut j) = (0, middle);
    while i < middle && j < values.len() {
        if values[j] < values[i] {
            count += middle - i;
            merged.push(values[j]);
            j += 1;
        } else {
            merged.push(values[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&values[i..middle]);
    merged.extend_from_slice(&values[j..]);
    values.copy_from_slice(&merged);
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inversions_count_out_of_order_pairs() {
        assert_eq!(inversions(&mut [0, 1, 2]), 0);
        assert_eq!(inversions(&mut [2, 1, 0]), 3);
        assert_eq!(inversions(&mut [1, 0, 1, 0]), 3);
    }

    #[test]
    fn cycles_are_broken_at_their_back_edge() {
        // 0 → 1 → 2 → 0, and 2 → 3.
        let edges = [(0, 1), (1, 2), (2, 0), (2, 3)];
        assert_eq!(back_edges(4, &edges), [false, false, true, false]);
    }
}
