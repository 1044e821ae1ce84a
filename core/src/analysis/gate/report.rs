//! What the gate reports: a row per function and package with its verdict, the family
//! the correction was over, and the status.

use serde::{Deserialize, Serialize};

use super::change::{Change, Verdict};
use super::config::{Alternative, Thresholds};
use super::mann_whitney::Method;

/// The share a verdict is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    Flat,
    Cum,
}

/// A function or package, tested.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateRow {
    pub name: String,
    pub verdict: Verdict,
    /// The share that decided a regression or improvement: flat when it changed, else cum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    pub flat: Change,
    /// Functions only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cum: Option<Change>,
    pub thresholds: Thresholds,
    /// The `match` of the rule that set the thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl GateRow {
    /// The change the verdict is about (flat for unchanged rows).
    pub fn deciding(&self) -> &Change {
        match (self.metric, &self.cum) {
            (Some(Metric::Cum), Some(cum)) => cum,
            _ => &self.flat,
        }
    }

    /// The verdict and metric from the (corrected) changes: a flat regression first,
    /// else a cum one, then improvements the same way.
    pub(super) fn decide(&mut self) {
        let flat = self.flat.verdict(&self.thresholds);
        let cum = self.cum.as_ref().map_or(Verdict::Unchanged, |cum| cum.verdict(&self.thresholds));
        (self.verdict, self.metric) = match (flat, cum) {
            (Verdict::Regression, _) => (Verdict::Regression, Some(Metric::Flat)),
            (_, Verdict::Regression) => (Verdict::Regression, Some(Metric::Cum)),
            (Verdict::Improvement, _) => (Verdict::Improvement, Some(Metric::Flat)),
            (_, Verdict::Improvement) => (Verdict::Improvement, Some(Metric::Cum)),
            _ => (Verdict::Unchanged, None),
        };
    }

    /// The row's changes (flat, and cum for functions).
    pub(super) fn changes(&self) -> impl Iterator<Item = &Change> {
        std::iter::once(&self.flat).chain(self.cum.as_ref())
    }

    pub(super) fn changes_mut(&mut self) -> impl Iterator<Item = &mut Change> {
        std::iter::once(&mut self.flat).chain(self.cum.as_mut())
    }
}

/// The runs' totals per second of their duration (a CPU profile's: CPU time a second),
/// tested as the shares are; reported, not gated, as it follows the machine's load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TotalRate {
    /// The sample type's unit (a second's worth of it).
    pub unit: String,
    #[serde(flatten)]
    pub change: Change,
}

/// What the gate concluded.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// No regression, and the runs could have shown one of every name tested.
    Passed,
    /// At least one regression.
    Failed,
    /// No regression, but the runs are too few for one to survive the correction: the
    /// smallest p-value they can give, times the family's size, is above alpha (the
    /// family's strictest). That includes runs too few to reach alpha even uncorrected.
    Inconclusive,
}

/// How the p-values of the many names tested at once are corrected.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Correction {
    /// Holm's step-down procedure ([`correction::holm`](super::correction::holm)).
    #[default]
    Holm,
}

/// The tests the correction was over.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Family {
    /// Shares (function flat and cum, package flat) in the rank test's correction: those
    /// the pooled values let reach the minimum effect.
    pub tests: usize,
    /// Functions and packages with at least one share in it.
    pub names: usize,
    /// Functions and packages with none, reported unchanged and untested.
    pub untested: usize,
    /// Shares in the sampling test's correction: those with enough pooled samples.
    pub sampling_tests: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GateReport {
    pub sample_type: String,
    pub unit: String,
    pub base_runs: usize,
    pub compare_runs: usize,
    pub alternative: Alternative,
    pub method: Method,
    /// The thresholds where no rule sets others.
    pub defaults: Thresholds,
    pub status: Status,
    /// The status is "passed": no function or package regressed, and the runs could tell.
    pub passed: bool,
    pub correction: Correction,
    pub family: Family,
    /// The smallest p-value (uncorrected) the rank test can give with these runs.
    pub smallest_p_value: f64,
    /// When inconclusive: the runs a side that would let the smallest p-value survive
    /// the correction of a family of this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_needed: Option<usize>,
    pub regression_count: usize,
    pub improvement_count: usize,
    /// Functions and packages a rule leaves untested.
    pub ignored: usize,
    /// Present when every profile says how long it took.
    pub total_per_second: Option<TotalRate>,
    /// Regressions (flat ones first), improvements, then the unchanged by name.
    pub functions: Vec<GateRow>,
    pub packages: Vec<GateRow>,
    /// The diff view of the two sides on a stacklens server, when the caller put them there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_url: Option<String>,
}

impl GateReport {
    /// The smallest alpha of a name in the rank test's family (∞ when it is empty): the
    /// one the runs must reach after the correction.
    pub fn strictest_alpha(&self) -> f64 {
        strictest_alpha(self.functions.iter().chain(&self.packages))
    }

    /// The rows with `verdict`, functions then packages, each named "function" or "package".
    pub fn rows(&self, verdict: Verdict) -> impl Iterator<Item = (&'static str, &GateRow)> {
        let functions = self.functions.iter().map(|row| ("function", row));
        let packages = self.packages.iter().map(|row| ("package", row));
        functions.chain(packages).filter(move |(_, row)| row.verdict == verdict)
    }
}

pub(super) fn strictest_alpha<'a>(rows: impl Iterator<Item = &'a GateRow>) -> f64 {
    rows.filter(|row| row.changes().any(|change| change.adjusted_p_value.is_some()))
        .map(|row| row.thresholds.alpha)
        .fold(f64::INFINITY, f64::min)
}
