//! The Mann–Whitney U test (Wilcoxon rank-sum) of two small samples: exact p-values
//! from the permutation distribution of the rank sum (ties given their midranks, so the
//! distribution is exact with ties too) when both samples have at most
//! [`EXACT_MAX_RUNS`] values, else the normal approximation with tie correction and
//! continuity correction (as scipy's `mannwhitneyu(..., method="asymptotic")`).

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

/// Largest sample, on either side, whose p-value is computed exactly.
pub const EXACT_MAX_RUNS: usize = 10;

/// How a p-value was computed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The exact permutation distribution of the rank sum.
    Exact,
    /// The normal approximation, with tie and continuity corrections.
    Normal,
}

impl Method {
    /// The method used for samples of these sizes.
    pub fn for_sizes(base: usize, compare: usize) -> Method {
        if base <= EXACT_MAX_RUNS && compare <= EXACT_MAX_RUNS {
            Method::Exact
        } else {
            Method::Normal
        }
    }
}

/// The test of `compare` against `base`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of `compare`: the pairs (base, compare) in which compare is larger, a tie
    /// counting one half.
    pub u: f64,
    /// P(U ≥ u) under the null hypothesis (both samples from one distribution): the
    /// one-sided p-value for "compare is larger".
    pub p_greater: f64,
    /// P(U ≤ u): the one-sided p-value for "compare is smaller".
    pub p_less: f64,
}

impl MannWhitney {
    /// The two-sided p-value: twice the smaller one-sided one, at most 1.
    pub fn p_two_sided(&self) -> f64 {
        (2.0 * self.p_greater.min(self.p_less)).min(1.0)
    }
}

/// Exact null distributions already computed, by the sorted doubled ranks and the
/// compare side's size (the values' ties decide the ranks; most names share a pattern).
#[derive(Default)]
pub struct Tables {
    exact: HashMap<(Vec<u32>, usize), Vec<f64>>,
}

impl Tables {
    /// The Mann–Whitney test of `compare` against `base` (neither empty).
    pub fn test(&mut self, base: &[f64], compare: &[f64]) -> MannWhitney {
        let (n1, n2) = (base.len(), compare.len());
        assert!(n1 > 0 && n2 > 0, "Mann–Whitney needs values on both sides");
        let pooled: Vec<f64> = base.iter().chain(compare).copied().collect();
        let ranks = doubled_midranks(&pooled);
        // Doubled, so that midranks (x.5) stay integers.
        let rank_sum: u32 = ranks[n1..].iter().sum();
        let u = f64::from(rank_sum) / 2.0 - (n2 * (n2 + 1)) as f64 / 2.0;
        let (p_greater, p_less) = match Method::for_sizes(n1, n2) {
            Method::Exact => self.exact(&ranks, n2, rank_sum),
            Method::Normal => normal(&ranks, n1, n2, u),
        };
        MannWhitney { u, p_greater, p_less }
    }

    /// P(S ≥ observed) and P(S ≤ observed) for S the sum of `n2` of the doubled
    /// `ranks` drawn without replacement, every subset equally likely.
    fn exact(&mut self, ranks: &[u32], n2: usize, observed: u32) -> (f64, f64) {
        let mut sorted = ranks.to_vec();
        sorted.sort_unstable();
        let counts = self.exact.entry((sorted, n2)).or_insert_with_key(|(ranks, n2)| subset_sums(ranks, *n2));
        let total: f64 = counts.iter().sum();
        let at = observed as usize;
        let greater: f64 = counts[at..].iter().sum();
        let less: f64 = counts[..=at].iter().sum();
        ((greater / total).min(1.0), (less / total).min(1.0))
    }
}

/// How many `size`-element subsets of `values` have each sum (index = sum): the
/// classic counting recurrence, one value at a time.
fn subset_sums(values: &[u32], size: usize) -> Vec<f64> {
    let max: usize = values.iter().map(|&v| v as usize).sum();
    let width = max + 1;
    // ways[k * width + s]: subsets of k of the values seen so far with sum s.
    let mut ways = vec![0.0f64; (size + 1) * width];
    ways[0] = 1.0;
    for &v in values {
        let v = v as usize;
        for k in (1..=size).rev() {
            for s in (v..width).rev() {
                ways[k * width + s] += ways[(k - 1) * width + s - v];
            }
        }
    }
    ways.split_off(size * width)
}

/// Each value's midrank (1-based; tied values share the mean of their positions),
/// doubled so that it is an integer.
fn doubled_midranks(values: &[f64]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && values[order[end + 1]] == values[order[start]] {
            end += 1;
        }
        // Positions start+1 ..= end+1: twice their mean is their sum of ends.
        let doubled = (start + 1 + end + 1) as u32;
        for &i in &order[start..=end] {
            ranks[i] = doubled;
        }
        start = end + 1;
    }
    ranks
}

/// The normal approximation of U's distribution: mean n1·n2/2, variance
/// n1·n2/12 · ((N + 1) − Σ(t³ − t) / (N(N − 1))) over the tie groups' sizes t, and a
/// continuity correction of one half.
fn normal(ranks: &[u32], n1: usize, n2: usize, u: f64) -> (f64, f64) {
    let n = (n1 + n2) as f64;
    let mut groups: HashMap<u32, f64> = HashMap::default();
    for &r in ranks {
        *groups.entry(r).or_default() += 1.0;
    }
    let ties: f64 = groups.values().map(|t| t * t * t - t).sum();
    let (n1, n2) = (n1 as f64, n2 as f64);
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 {
        // Every value the same: no evidence either way.
        return (1.0, 1.0);
    }
    let sd = variance.sqrt();
    let mean = n1 * n2 / 2.0;
    let greater = normal_upper_tail((u - mean - 0.5) / sd);
    let less = normal_upper_tail((mean - u - 0.5) / sd);
    (greater.min(1.0), less.min(1.0))
}

/// P(Z ≥ z) for a standard normal Z.
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function, to about 1e-13 relative: the Taylor series of erf
/// below 2, the continued fraction of erfc (Laplace's) from there on.
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.0 {
        // erf x = 2/√π · Σ (−1)ⁿ x^(2n+1) / (n! (2n + 1))
        let mut term = x;
        let mut sum = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        return 1.0 - sum * std::f64::consts::FRAC_2_SQRT_PI;
    }
    // erfc x = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + …))))),
    // evaluated from a deep enough level up.
    let mut fraction = x;
    for k in (1..=120).rev() {
        fraction = x + f64::from(k) / 2.0 / fraction;
    }
    (-x * x).exp() / fraction * std::f64::consts::FRAC_2_SQRT_PI / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance * b.abs().max(1e-300)
    }

    #[test]
    fn erfc_matches_known_values() {
        // Values of Python's math.erfc (the C library's, correctly rounded to ~1 ulp).
        for (x, expected) in [
            (0.0, 1.0),
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028513),
            (1.9999, 0.004679802092970608),
            (2.0, 0.004677734981047265),
            (3.0, 2.2090496998585438e-05),
            (6.0, 2.1519736712498916e-17),
            (-1.0, 1.842700792949715),
        ] {
            assert!(close(erfc(x), expected, 1e-12), "erfc({x}) = {} not {expected}", erfc(x));
        }
    }

    #[test]
    fn midranks_share_their_positions_mean() {
        // 1 | 2 2 2 | 3 4: positions 1, 2-4 (mean 3), 5, 6; doubled.
        assert_eq!(doubled_midranks(&[2.0, 1.0, 2.0, 4.0, 2.0, 3.0]), [6, 2, 6, 12, 6, 10]);
    }

    #[test]
    fn subset_sums_count_every_subset_once() {
        // The 2-subsets of {1, 2, 3, 4}: sums 3, 4, 5, 5, 6, 7.
        assert_eq!(subset_sums(&[1, 2, 3, 4], 2), [0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
    }

    /// U of `compare` by counting pairs (a tie one half), without ranks.
    fn u_by_pairs(base: &[f64], compare: &[f64]) -> f64 {
        let pair = |b: f64, c: f64| {
            if c > b {
                1.0
            } else if c == b {
                0.5
            } else {
                0.0
            }
        };
        compare.iter().map(|&c| base.iter().map(|&b| pair(b, c)).sum::<f64>()).sum()
    }

    proptest! {
        /// The exact p-values are the shares of all splits of the pooled values into
        /// sides of these sizes whose U is at least (at most) the observed one.
        #[test]
        fn exact_p_values_count_every_split(
            base in proptest::collection::vec(0u8..4, 2..7),
            compare in proptest::collection::vec(0u8..4, 2..7),
        ) {
            let base: Vec<f64> = base.into_iter().map(f64::from).collect();
            let compare: Vec<f64> = compare.into_iter().map(f64::from).collect();
            let test = Tables::default().test(&base, &compare);
            prop_assert_eq!(test.u, u_by_pairs(&base, &compare));
            let pooled: Vec<f64> = base.iter().chain(&compare).copied().collect();
            let (mut splits, mut greater, mut less) = (0.0, 0.0, 0.0);
            for mask in 0u32..1 << pooled.len() {
                if mask.count_ones() as usize != compare.len() {
                    continue;
                }
                let side = |chosen: bool| -> Vec<f64> {
                    pooled.iter().enumerate().filter(|(i, _)| (mask >> i & 1 == 1) == chosen).map(|(_, &v)| v).collect()
                };
                let u = u_by_pairs(&side(false), &side(true));
                splits += 1.0;
                greater += f64::from(u >= test.u);
                less += f64::from(u <= test.u);
            }
            prop_assert!((test.p_greater - greater / splits).abs() < 1e-12, "{} vs {}", test.p_greater, greater / splits);
            prop_assert!((test.p_less - less / splits).abs() < 1e-12, "{} vs {}", test.p_less, less / splits);
        }
    }
}
