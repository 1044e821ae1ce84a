//! x placement of the ordered layers: each layer pulled toward its neighbours' mean x by
//! a weighted least-squares fit that keeps its boxes apart.

use super::layered::Layered;
use super::GraphLayoutOptions;

/// Rounds of x placement.
const PLACEMENT_ROUNDS: usize = 8;

impl Layered {
    /// x centers: each layer placed as close as it can be to its neighbours' mean x,
    /// alternately from above and from below, then once from both.
    pub(super) fn place_x(&mut self, options: &GraphLayoutOptions) {
        self.x = vec![0.0; self.layer.len()];
        let depth = self.layers.len();
        for l in 0..depth {
            self.place_layer(l, &vec![None; self.layers[l].len()], options);
        }
        let place = |graph: &mut Self, l: usize, above: bool, below: bool| {
            let wishes = graph.wishes(l, above, below);
            graph.place_layer(l, &wishes, options);
        };
        for _ in 0..PLACEMENT_ROUNDS {
            for l in 1..depth {
                place(self, l, true, false);
            }
            for l in (0..depth.saturating_sub(1)).rev() {
                place(self, l, false, true);
            }
        }
        for l in 0..depth {
            place(self, l, true, true);
        }
    }

    /// Per vertex of layer `l`, the mean x of its neighbours above and (or) below, if any.
    fn wishes(&self, l: usize, above: bool, below: bool) -> Vec<Option<f64>> {
        let none: &[u32] = &[];
        self.layers[l]
            .iter()
            .map(|&v| {
                let up = if above { &self.up[v as usize][..] } else { none };
                let down = if below { &self.down[v as usize][..] } else { none };
                let count = up.len() + down.len();
                (count > 0).then(|| up.iter().chain(down).map(|&u| self.x[u as usize]).sum::<f64>() / count as f64)
            })
            .collect()
    }

    /// Places one layer's vertices, in their order and at least their gap apart, as near
    /// their wished x as a weighted least-squares fit allows (pool-adjacent-violators).
    /// Dummies weigh more, to keep long edges straight; a vertex with no wish stays put.
    fn place_layer(&mut self, l: usize, wishes: &[Option<f64>], options: &GraphLayoutOptions) {
        let layer = &self.layers[l];
        let mut offset = 0.0;
        // Per vertex: (target minus offset, weight).
        let mut points = Vec::with_capacity(layer.len());
        for (i, &v) in layer.iter().enumerate() {
            if i > 0 {
                let u = layer[i - 1];
                let gap = if self.is_real(u) && self.is_real(v) { options.node_gap } else { options.node_gap / 2.0 };
                offset += (self.width[u as usize] + self.width[v as usize]) / 2.0 + gap;
            }
            let (target, weight) = match wishes[i] {
                Some(x) if self.is_real(v) => (x, 1.0),
                Some(x) => (x, 4.0),
                None => (self.x[v as usize], 0.01),
            };
            points.push((target - offset, weight, offset));
        }
        // Blocks of (weighted sum, total weight, length), means non-decreasing.
        let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
        for &(y, w, _) in &points {
            blocks.push((y * w, w, 1));
            while blocks.len() > 1 {
                let (last, previous) = (blocks[blocks.len() - 1], blocks[blocks.len() - 2]);
                if previous.0 / previous.1 <= last.0 / last.1 {
                    break;
                }
                blocks.pop();
                *blocks.last_mut().expect("two blocks") =
                    (previous.0 + last.0, previous.1 + last.1, previous.2 + last.2);
            }
        }
        let mut i = 0;
        for (sum, weight, len) in blocks {
            for _ in 0..len {
                self.x[layer[i] as usize] = sum / weight + points[i].2;
                i += 1;
            }
        }
    }
}
