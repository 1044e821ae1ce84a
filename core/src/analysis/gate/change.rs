//! One value of a name across the runs of both sides, tested: the medians, the effect,
//! both tests' p-values and the verdict they give under the thresholds.

use serde::{Deserialize, Serialize};

use super::config::{Alternative, Thresholds};
use super::mann_whitney::Tables;
use super::sampling;

/// One value across the runs of both sides, tested.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// Each base run's value (shares in percent of the run's total).
    pub base: Vec<f64>,
    pub compare: Vec<f64>,
    pub base_median: f64,
    pub compare_median: f64,
    /// compare − base medians: percentage points for shares.
    pub difference: f64,
    /// The difference in percent of the base median; `None` when that is 0.
    pub relative: Option<f64>,
    /// The Mann–Whitney p-value, one-sided in the direction of the difference (or
    /// two-sided, as the alternative says).
    pub p_value: f64,
    /// The sampling test's p-value on the pooled counts, the same way round; `None`
    /// when the runs do not count samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_p_value: Option<f64>,
    /// The samples of the name on each side, pooled over its runs, when counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<[i64; 2]>,
    /// `p_value` Holm-corrected over the family of shares that could reach the minimum
    /// effect; `None` (null) for a share that cannot, which is not tested.
    #[serde(default)]
    pub adjusted_p_value: Option<f64>,
    /// `sampling_p_value` Holm-corrected over the sampling test's family; `None` when the
    /// share's pooled samples are too few to reach the minimum effect, or not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_adjusted_p_value: Option<f64>,
    /// Both one-sided p-values of each test, which the correction needs.
    #[serde(skip)]
    pub(super) tails: Tails,
}

/// One-sided p-values (compare larger, smaller) of the rank test and the sampling test.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(super) struct Tails {
    pub(super) runs: (f64, f64),
    pub(super) sampling: Option<(f64, f64)>,
}

/// Counts pooled over a side's runs: the name's and the runs' totals.
#[derive(Copy, Clone)]
pub(super) struct Pooled {
    pub(super) count: i64,
    pub(super) total: i64,
}

/// One-sided p-values (larger, smaller) turned into the alternative's, in the
/// direction of `difference`.
pub(super) fn directed(alternative: Alternative, difference: f64, (greater, less): (f64, f64)) -> f64 {
    match alternative {
        Alternative::TwoSided => (2.0 * greater.min(less)).min(1.0),
        Alternative::OneSided if difference < 0.0 => less,
        Alternative::OneSided => greater,
    }
}

impl Change {
    pub(super) fn new(
        base: Vec<f64>,
        compare: Vec<f64>,
        counts: Option<(Pooled, Pooled)>,
        alternative: Alternative,
        tables: &mut Tables,
    ) -> Change {
        let test = tables.test(&base, &compare);
        let (base_median, compare_median) = (median(&base), median(&compare));
        let difference = compare_median - base_median;
        let tails = Tails {
            runs: (test.p_greater, test.p_less),
            sampling: counts.and_then(|(b, c)| sampling::test(b.count, b.total, c.count, c.total)),
        };
        let p_value = directed(alternative, difference, tails.runs);
        let sampling_p_value = tails.sampling.map(|sampling| directed(alternative, difference, sampling));
        let samples = counts.filter(|_| sampling_p_value.is_some()).map(|(b, c)| [b.count, c.count]);
        let relative = (base_median != 0.0).then(|| difference / base_median.abs() * 100.0);
        Change {
            base,
            compare,
            base_median,
            compare_median,
            difference,
            relative,
            p_value,
            sampling_p_value,
            samples,
            adjusted_p_value: None,
            sampling_adjusted_p_value: None,
            tails,
        }
    }

    /// Whether some split of the pooled values into sides of these sizes could give a
    /// change as large as `t` asks. It looks at the pooled values only, not at which side
    /// each came from, so a family chosen by it keeps the rank test valid: conditional on
    /// the pooled values (of every name: the runs) the choice is fixed, and the labels
    /// are as random as without it. A side's median lies between its ⌈n/2⌉-th smallest
    /// and ⌈n/2⌉-th largest value, so (k = ⌈n/2⌉ of the smaller side) the medians differ
    /// by at most the k-th largest minus the k-th smallest pooled value, and the base
    /// median is at least the latter.
    pub fn can_reach(&self, t: &Thresholds) -> bool {
        let mut pooled: Vec<f64> = self.base.iter().chain(&self.compare).copied().collect();
        pooled.sort_by(f64::total_cmp);
        let k = self.base.len().min(self.compare.len()).div_ceil(2);
        let (low, high) = (pooled[k - 1], pooled[pooled.len() - k]);
        let reach = high - low;
        reach > 0.0 && reach >= t.min_effect && (low == 0.0 || reach / low * 100.0 >= t.min_relative)
    }

    /// Whether the pooled samples (both sides) are enough for the minimum effect: a
    /// median share of `min_effect` % needs ⌈n/2⌉ runs of that side with that share of
    /// their samples, so at least ⌈n/2⌉ · min_effect % of the smallest run's samples,
    /// given as `smallest_run` when the runs' values are proportional to their counts
    /// (else only some sample is asked for). The binomial test is conditional on the
    /// pooled count, so a family chosen by it keeps that test valid.
    pub fn may_reach_in_samples(&self, t: &Thresholds, smallest_run: Option<i64>) -> bool {
        let Some([base, compare]) = self.samples else { return false };
        let k = self.base.len().min(self.compare.len()).div_ceil(2);
        let needed = smallest_run.map_or(0.0, |total| k as f64 * t.min_effect / 100.0 * total as f64);
        base + compare > 0 && (base + compare) as f64 >= needed
    }

    pub(super) fn verdict(&self, t: &Thresholds) -> Verdict {
        let large = self.difference.abs() >= t.min_effect
            && self.relative.map_or(self.difference > 0.0, |r| r.abs() >= t.min_relative);
        let within = |p: Option<f64>| p.is_some_and(|p| p <= t.alpha);
        let significant = within(self.adjusted_p_value)
            && (self.sampling_p_value.is_none() || within(self.sampling_adjusted_p_value));
        if self.difference == 0.0 || !large || !significant {
            Verdict::Unchanged
        } else if self.difference > 0.0 {
            Verdict::Regression
        } else {
            Verdict::Improvement
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Regression,
    Improvement,
    Unchanged,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn change(base: &[u8], compare: &[u8]) -> Change {
        let shares = |v: &[u8]| v.iter().map(|&s| f64::from(s) / 2.0).collect();
        Change::new(shares(base), shares(compare), None, Alternative::OneSided, &mut Tables::default())
    }

    proptest! {
        /// `can_reach` is false only where no split could give a large enough change,
        /// and the same for every split of the pooled values (it cannot see the labels).
        #[test]
        fn can_reach_bounds_every_split_and_ignores_the_labels(
            base in proptest::collection::vec(0u8..12, 2..7),
            compare in proptest::collection::vec(0u8..12, 2..7),
            min_effect in 0u8..6,
            min_relative in 0u8..200,
            rotate in 0usize..14,
        ) {
            let t = Thresholds { alpha: 0.05, min_effect: f64::from(min_effect) / 2.0, min_relative: f64::from(min_relative) };
            let observed = change(&base, &compare);
            let large = observed.difference != 0.0
                && observed.difference.abs() >= t.min_effect
                && observed.relative.map_or(observed.difference > 0.0, |r| r.abs() >= t.min_relative);
            prop_assert!(!large || observed.can_reach(&t), "{observed:?}");
            let mut pooled: Vec<u8> = base.iter().chain(&compare).copied().collect();
            let by = rotate % pooled.len();
            pooled.rotate_left(by);
            let resplit = change(&pooled[..base.len()], &pooled[base.len()..]);
            prop_assert_eq!(observed.can_reach(&t), resplit.can_reach(&t));
        }
    }
}
