//! The family correction: which shares are tested, their Holm-adjusted p-values, and the
//! smallest p-value the runs can give at all.

use super::change::{directed, Change};
use super::config::Alternative;
use super::correction;
use super::mann_whitney::Tables;
use super::report::{Family, GateRow};

/// The smallest p-value the rank test can give with `base` and `compare` runs: that of
/// every compare run above every base run (exactly, 1/C(base + compare, base) one-sided).
pub(super) fn smallest_p_value(alternative: Alternative, base: usize, compare: usize) -> f64 {
    let separated: (Vec<f64>, Vec<f64>) =
        ((0..base).map(|i| i as f64).collect(), (base..base + compare).map(|i| i as f64).collect());
    Change::new(separated.0, separated.1, None, alternative, &mut Tables::default()).p_value
}

/// Holm-adjusted p-values of `tests` (each a difference and its one-sided p-values, compare
/// larger and smaller), each in the direction of its difference. One-sided, regressions
/// and improvements are corrected apart, each over the whole family whichever way each
/// share moved (under no change the direction is chance), so that chance regressions stay
/// within alpha; two-sided, the two-sided p-values once.
fn adjusted(alternative: Alternative, tests: &[(f64, (f64, f64))]) -> Vec<f64> {
    let corrected = |tail: fn((f64, f64)) -> f64| {
        correction::holm(&tests.iter().map(|&(_, tails)| tail(tails)).collect::<Vec<_>>())
    };
    match alternative {
        Alternative::TwoSided => corrected(|tails| directed(Alternative::TwoSided, 0.0, tails)),
        Alternative::OneSided => {
            let (greater, less) = (corrected(|tails| tails.0), corrected(|tails| tails.1));
            let directions = greater.into_iter().zip(less);
            tests
                .iter()
                .zip(directions)
                .map(|(&(difference, _), (g, l))| if difference < 0.0 { l } else { g })
                .collect()
        }
    }
}

/// Sets the adjusted p-values of the rows' changes: the rank test's over the shares that
/// [`Change::can_reach`] the minimum effect, the sampling test's over those that
/// [`Change::may_reach_in_samples`] (`smallest_run`: the fewest samples of a run, when
/// values are proportional to counts). The rest keep none: untested.
pub(super) fn correct<'a>(
    alternative: Alternative,
    rows: impl Iterator<Item = &'a mut GateRow>,
    smallest_run: Option<i64>,
) -> Family {
    let mut family = Family::default();
    // Each change, whether it is in the rank test's family and in the sampling test's.
    let mut changes: Vec<(&mut Change, bool, bool)> = Vec::new();
    for row in rows {
        let thresholds = row.thresholds;
        let first = changes.len();
        changes.extend(row.changes_mut().map(|change| {
            let in_runs = change.can_reach(&thresholds);
            let in_samples = change.may_reach_in_samples(&thresholds, smallest_run);
            (change, in_runs, in_samples)
        }));
        let named = changes[first..].iter().any(|&(_, in_runs, _)| in_runs);
        family.names += usize::from(named);
        family.untested += usize::from(!named);
    }
    let runs: Vec<usize> = (0..changes.len()).filter(|&i| changes[i].1).collect();
    let tests: Vec<_> = runs.iter().map(|&i| (changes[i].0.difference, changes[i].0.tails.runs)).collect();
    for (&i, p) in runs.iter().zip(adjusted(alternative, &tests)) {
        changes[i].0.adjusted_p_value = Some(p);
    }
    let sampling: Vec<(usize, (f64, f64))> =
        (0..changes.len()).filter(|&i| changes[i].2).filter_map(|i| Some((i, changes[i].0.tails.sampling?))).collect();
    let tests: Vec<_> = sampling.iter().map(|&(i, tails)| (changes[i].0.difference, tails)).collect();
    for (&(i, _), p) in sampling.iter().zip(adjusted(alternative, &tests)) {
        changes[i].0.sampling_adjusted_p_value = Some(p);
    }
    family.tests = runs.len();
    family.sampling_tests = sampling.len();
    family
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sided_regressions_and_improvements_are_corrected_apart() {
        // Compare larger: 0.01, 0.99, 0.02 → Holm 0.03, 0.99, 0.04; smaller: 0.99, 0.01,
        // 0.98 → 1, 0.03, 1. Each test takes its direction's.
        let tests = [(1.0, (0.01, 0.99)), (-1.0, (0.99, 0.01)), (1.0, (0.02, 0.98))];
        let one_sided = adjusted(Alternative::OneSided, &tests);
        assert!(one_sided.iter().zip([0.03, 0.03, 0.04]).all(|(a, b)| (a - b).abs() < 1e-12), "{one_sided:?}");
        // Two-sided: 0.02, 0.02, 0.04 → 0.06, 0.06, 0.06.
        let two_sided = adjusted(Alternative::TwoSided, &tests);
        assert!(two_sided.iter().all(|a| (a - 0.06).abs() < 1e-12), "{two_sided:?}");
    }
}
