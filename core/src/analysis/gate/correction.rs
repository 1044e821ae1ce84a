//! Holm's step-down correction for testing many names at once. Holm rather than
//! Benjamini–Hochberg: it bounds the chance of any false finding (what fails a build of
//! unchanged code) under any dependence between the tests, and the shares of one run
//! are dependent (they sum to 100 %), which BH's guarantee does not cover.

/// Holm-adjusted p-values, in the order of `p_values`: the i-th smallest p becomes
/// max over j ≤ i of min(1, (m − j + 1) · p₍ⱼ₎) for m tests. A test is rejected by
/// Holm's procedure at level α exactly when its adjusted p ≤ α, so names with
/// different alphas can share one correction.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut running_max: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        // Tied p-values get the same adjusted value: the running maximum carries the
        // first of them to the rest, and later ones are never smaller.
        running_max = running_max.max(((m - rank) as f64 * p_values[i]).min(1.0));
        adjusted[i] = running_max;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn adjusted_p_values_match_working_by_hand() {
        // m = 4, sorted 0.01, 0.02, 0.03, 0.5: ×4 = 0.04, ×3 = 0.06, ×2 = 0.06, ×1 = 0.5.
        let adjusted = holm(&[0.03, 0.01, 0.5, 0.02]);
        assert!(close(&adjusted, &[0.06, 0.04, 0.5, 0.06]), "{adjusted:?}");
        // The step-down keeps the order: 0.04 × 3 = 0.12 lifts 0.05 × 2 = 0.10 to 0.12.
        let adjusted = holm(&[0.04, 0.05, 0.9]);
        assert!(close(&adjusted, &[0.12, 0.12, 0.9]), "{adjusted:?}");
        // Capped at 1; one test is its own adjustment; none is nothing.
        assert!(close(&holm(&[0.6, 0.7]), &[1.0, 1.0]));
        assert!(close(&holm(&[0.05]), &[0.05]));
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn ties_share_their_adjusted_value() {
        // Three of 1/20 among four tests: 4/20 for each, whichever is sorted first.
        let adjusted = holm(&[0.05, 0.05, 1.0, 0.05]);
        assert!(close(&adjusted, &[0.2, 0.2, 1.0, 0.2]), "{adjusted:?}");
    }

    proptest! {
        /// Adjusted p-values never fall below the raw ones, never exceed 1 or m · p, and
        /// keep the raw ones' order.
        #[test]
        fn adjusted_p_values_are_bounded_and_monotone(p in proptest::collection::vec(0.0f64..=1.0, 0..40)) {
            let adjusted = holm(&p);
            let m = p.len() as f64;
            for i in 0..p.len() {
                prop_assert!(adjusted[i] >= p[i] && adjusted[i] <= 1.0 && adjusted[i] <= (m * p[i]).max(p[i]));
                for j in 0..p.len() {
                    if p[i] <= p[j] {
                        prop_assert!(adjusted[i] <= adjusted[j], "{p:?} → {adjusted:?}");
                    }
                }
            }
        }
    }
}
