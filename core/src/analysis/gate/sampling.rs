//! Whether a change of a share is more than sampling noise: the conditional binomial
//! test of two Poisson counts. A function sampled `base` times in `base_total` samples
//! and `compare` times in `compare_total` has, under the null hypothesis (one share on
//! both sides), its `base + compare` samples fall on the compare side with probability
//! `compare_total / (base_total + compare_total)`, whatever the share. Exact up to
//! [`EXACT_MAX_SAMPLES`] samples of the function, the normal approximation with
//! continuity correction above (where it is within 1e-3 of the exact tail).
//!
//! The Mann–Whitney test compares runs; with few runs a side a function seen a handful
//! of times a run can separate the sides by chance (2 samples a run against 4), and the
//! minimum effect in points does not stop it when runs are short. This test pools the
//! runs, so it asks whether that many more samples could be luck.

use super::mann_whitney::normal_upper_tail;

/// Largest pooled count tested exactly (the sum is linear in it).
pub const EXACT_MAX_SAMPLES: i64 = 5_000;

/// The one-sided p-values (compare's share larger, smaller) of `compare` samples in
/// `compare_total` against `base` in `base_total`; `None` when a total is not positive
/// or a count falls outside its total.
pub fn test(base: i64, base_total: i64, compare: i64, compare_total: i64) -> Option<(f64, f64)> {
    if base_total <= 0
        || compare_total <= 0
        || !(0..=base_total).contains(&base)
        || !(0..=compare_total).contains(&compare)
    {
        return None;
    }
    let n = base + compare;
    let p = compare_total as f64 / (base_total as f64 + compare_total as f64);
    if n == 0 {
        return Some((1.0, 1.0));
    }
    if n <= EXACT_MAX_SAMPLES {
        let pmf = binomial_pmf(n, p);
        let k = compare as usize;
        let greater: f64 = pmf[k..].iter().sum();
        let less: f64 = pmf[..=k].iter().sum();
        return Some((greater.min(1.0), less.min(1.0)));
    }
    let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
    let x = compare as f64;
    Some((normal_upper_tail((x - 0.5 - mean) / sd).min(1.0), normal_upper_tail((mean - x - 0.5) / sd).min(1.0)))
}

/// P(X = k) for k in 0..=n, X ~ Binomial(n, p), 0 < p < 1: from the mode outwards by
/// the ratio of neighbours, then normalised (no factorials, no underflow near the mode).
fn binomial_pmf(n: i64, p: f64) -> Vec<f64> {
    let n_us = n as usize;
    let mode = (((n + 1) as f64 * p).floor() as usize).min(n_us);
    let mut pmf = vec![0.0; n_us + 1];
    pmf[mode] = 1.0;
    let odds = p / (1.0 - p);
    // P(k + 1) / P(k) = (n − k)/(k + 1) · p/(1 − p).
    for k in mode..n_us {
        pmf[k + 1] = pmf[k] * (n_us - k) as f64 / (k + 1) as f64 * odds;
    }
    for k in (1..=mode).rev() {
        pmf[k - 1] = pmf[k] * k as f64 / (n_us - k + 1) as f64 / odds;
    }
    let total: f64 = pmf.iter().sum();
    pmf.iter_mut().for_each(|v| *v /= total);
    pmf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn exact_tails_match_counting_by_hand() {
        // Equal totals: the 18 samples are fair coin flips; 12 or more on the compare
        // side: (C(18,12) + … + C(18,18)) / 2^18 = 31,180 / 262,144.
        let (greater, less) = test(6, 558, 12, 558).unwrap();
        assert!(close(greater, 31_180.0 / 262_144.0, 1e-12), "{greater}");
        // P(X ≤ 12) = 1 − P(X ≥ 13) = 1 − 12,616 / 262,144.
        assert!(close(less, 1.0 - 12_616.0 / 262_144.0, 1e-12), "{less}");
        // Compare twice as long: p = 2/3. 3 of 3 on the compare side: (2/3)^3.
        let (greater, _) = test(0, 100, 3, 200).unwrap();
        assert!(close(greater, 8.0 / 27.0, 1e-12), "{greater}");
    }

    #[test]
    fn large_counts_use_the_normal_approximation_close_to_the_exact_tail() {
        // Just above and below the switch, the same question: the tails agree to 1e-3.
        let exact = test(2_480, 1_000_000, 2_520, 1_000_000).unwrap();
        let normal = test(2_481, 1_000_000, 2_521, 1_000_000).unwrap();
        assert!(close(exact.0, normal.0, 2e-3), "{exact:?} {normal:?}");
        // Far out, both are tiny.
        let (greater, less) = test(5_000, 1_000_000, 7_000, 1_000_000).unwrap();
        assert!(greater < 1e-9 && less > 0.999_999, "{greater} {less}");
    }

    #[test]
    fn nothing_to_test_is_no_evidence_and_bad_counts_are_refused() {
        assert_eq!(test(0, 10, 0, 10), Some((1.0, 1.0)));
        assert_eq!(test(1, 0, 1, 10), None);
        assert_eq!(test(11, 10, 1, 10), None);
        assert_eq!(test(-1, 10, 1, 10), None);
    }
}
