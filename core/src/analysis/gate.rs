//! The CI gate: several runs a side, before (base) and after (compare) a change, and
//! for each function and package a test of whether its share of the run's total grew.
//!
//! Per run, every function's flat and cum value and every package's flat value (its
//! functions' flat values summed: the time in its own code) are taken as percentages of
//! that run's total, so runs of different lengths compare. For each name, the base
//! runs' shares and the compare runs' shares go through the Mann–Whitney U test, and
//! the effect is the change of the median share, in percentage points of the total and
//! relative to the base median. A name regresses when all hold: its adjusted p ≤ alpha
//! (one-sided, "compare is larger", by default), the same of the sampling test on the
//! runs' pooled sample counts (when the profile counts samples: [`sampling`]), and an
//! effect of at least `min_effect` points and `min_relative` percent. The rank test says
//! the change is not run-to-run noise; the sampling test that it is not a handful of
//! samples more by luck (short runs of a rarely sampled function separate by chance);
//! the minimum effect says it is large enough to matter.
//!
//! Hundreds of names are tested at once, so each test's p-values are Holm-corrected
//! ([`correction`]) over its family: the shares (flat, cum, package) that could reach
//! the minimum effect at all. For the rank test that is decided from the pooled values
//! of both sides, without their labels ([`Change::can_reach`]); the test is a
//! permutation test conditional on those values, so a family chosen from them keeps it
//! valid. For the sampling test, from the pooled counts ([`Change::may_reach_in_samples`]),
//! on which its binomial test is conditional. The rest are reported untested. When the
//! runs are too few for even the smallest p-value they can give to survive the
//! correction (or to reach alpha at all, uncorrected), the gate is
//! [`Status::Inconclusive`] and says how many runs it needs; only fewer than
//! [`MIN_RUNS`] a side are refused.
//!
//! The defaults (alpha 0.01, [`ADVISED_RUNS`] runs a side) are those measured to fail
//! unchanged code at most 1 % of the time and to catch at least 95 % of 10 % slowdowns
//! (scripts/gate-fpr.sh; README: false positives, measured).
//!
//! A function regresses on its flat share (its own code got slower, the most specific
//! finding) or, failing that, on its cum share (something it calls got slower, spread
//! over callees none of which grew enough alone); its callers' cum shares grow too and
//! are reported after the flat regressions, so the function whose flat grew comes first.

pub mod correction;
pub mod mann_whitney;
pub mod sampling;

use std::collections::BTreeSet;

use regex::Regex;
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::query::Prepared;
use super::summary::package_of;
use super::top::{top, TopOptions};
use crate::{Error, Result};
use mann_whitney::{Method, Tables};

/// Fewest runs a side: one run has no spread to tell noise from a change.
pub const MIN_RUNS: usize = 2;

/// Runs a side advised at the default alpha: measured to meet the gate's goals (at most
/// 1 % false positives, at least 95 % of 10 % slowdowns caught) on every workload tried.
pub const ADVISED_RUNS: usize = 10;

/// Which way a change is tested.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Alternative {
    /// Regressions by "compare is larger" (improvements, reported only, by "smaller"):
    /// the test a gate asks, with half the two-sided p-value.
    #[default]
    OneSided,
    /// Either way, p-values doubled.
    TwoSided,
}

/// When a change counts.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    /// Largest p-value that counts as a change (p ≤ alpha); 0.01 by default.
    pub alpha: f64,
    /// Smallest change of the median share, in percentage points of the run's total.
    pub min_effect: f64,
    /// Smallest change of the median share, in percent of the base median.
    pub min_relative: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self { alpha: 0.01, min_effect: 1.0, min_relative: 10.0 }
    }
}

/// The gate's configuration (`stacklens-gate.toml`): the sample type, the test, the
/// default thresholds, and rules for names a regex matches. Unknown keys are refused.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// Sample type by name or index; empty for each profile's default.
    pub sample_type: String,
    pub alternative: Alternative,
    pub alpha: f64,
    pub min_effect: f64,
    pub min_relative: f64,
    /// The first rule whose regex matches a function's (or package's) name decides its
    /// thresholds, or that it is not tested.
    #[serde(rename = "rule")]
    pub rules: Vec<Rule>,
}

impl Default for GateConfig {
    fn default() -> Self {
        let Thresholds { alpha, min_effect, min_relative } = Thresholds::default();
        Self {
            sample_type: String::new(),
            alternative: Alternative::default(),
            alpha,
            min_effect,
            min_relative,
            rules: Vec::new(),
        }
    }
}

impl GateConfig {
    fn defaults(&self) -> Thresholds {
        Thresholds { alpha: self.alpha, min_effect: self.min_effect, min_relative: self.min_relative }
    }
}

/// Thresholds for the names `pattern` matches (anywhere in the name, as pprof's
/// regexes do), or `ignore` to leave them untested.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(default)]
    pub ignore: bool,
    pub alpha: Option<f64>,
    pub min_effect: Option<f64>,
    pub min_relative: Option<f64>,
}

impl Rule {
    fn thresholds(&self, defaults: Thresholds) -> Thresholds {
        Thresholds {
            alpha: self.alpha.unwrap_or(defaults.alpha),
            min_effect: self.min_effect.unwrap_or(defaults.min_effect),
            min_relative: self.min_relative.unwrap_or(defaults.min_relative),
        }
    }
}

/// A run's values in one sample type: the total, each function's flat and cum, and
/// each package's flat (its functions' flat values summed).
#[derive(Clone, Debug)]
struct Tally {
    total: i64,
    functions: HashMap<String, (i64, i64)>,
    packages: HashMap<String, i64>,
}

impl Tally {
    fn of(prepared: &Prepared) -> Result<(Tally, String, String)> {
        let report = top(prepared, &TopOptions::default())?;
        let mut packages: HashMap<String, i64> = HashMap::default();
        for row in &report.functions {
            let package = package_of(&row.name);
            if !package.is_empty() {
                *packages.entry(package.to_owned()).or_default() += row.flat;
            }
        }
        let functions = report.functions.iter().map(|row| (row.name.clone(), (row.flat, row.cum))).collect();
        Ok((Tally { total: report.total, functions, packages }, report.sample_type, report.unit))
    }

    /// Whether every function's flat and cum value here is `values`'s in one ratio (the
    /// totals'); packages sum flat values, so theirs follow.
    fn proportional_to(&self, values: &Tally) -> bool {
        let same = |count: i64, value: i64| {
            i128::from(count) * i128::from(values.total) == i128::from(value) * i128::from(self.total)
        };
        values.functions.iter().all(|(name, &(flat, cum))| {
            let (count_flat, count_cum) = self.functions.get(name).copied().unwrap_or_default();
            same(count_flat, flat) && same(count_cum, cum)
        })
    }

    fn value(&self, of: Of) -> i64 {
        match of {
            Of::Flat(name) => self.functions.get(name).map_or(0, |v| v.0),
            Of::Cum(name) => self.functions.get(name).map_or(0, |v| v.1),
            Of::Package(name) => self.packages.get(name).copied().unwrap_or(0),
        }
    }
}

/// A value a run has for a name.
#[derive(Copy, Clone)]
enum Of<'a> {
    Flat(&'a str),
    Cum(&'a str),
    Package(&'a str),
}

/// One run of the gate, in one sample type.
#[derive(Clone, Debug)]
pub struct Run {
    sample_type: String,
    unit: String,
    duration_nanos: i64,
    values: Tally,
    /// The same in the first sample type in unit "count", when `values` are not counts
    /// themselves (see [`Run::counts`]).
    other_counts: Option<Tally>,
    /// Every value is its count times one factor (a CPU profile's period), so a share of
    /// the values is the same share of the counts.
    counts_proportional: bool,
}

impl Run {
    /// The run of the prepared profile in its sample type.
    pub fn of(prepared: &Prepared) -> Result<Run> {
        let profile = prepared.profile();
        let (values, sample_type, unit) = Tally::of(prepared)?;
        if values.total == 0 {
            return Err(Error::Gate(format!("the profile's total of {sample_type} is 0: nothing to compare")));
        }
        let other_counts = match profile.sample_types.iter().position(|t| profile.str(t.unit) == "count") {
            Some(i) if unit != "count" => Some(Tally::of(&prepared.with_sample(i))?.0).filter(|c| c.total > 0),
            _ => None,
        };
        let counts_proportional = other_counts.as_ref().is_none_or(|counts| counts.proportional_to(&values));
        Ok(Run { sample_type, unit, duration_nanos: profile.duration_nanos, values, other_counts, counts_proportional })
    }

    /// The run's total count of samples, when its values are proportional to the counts.
    fn proportional_count_total(&self) -> Option<i64> {
        self.counts().filter(|_| self.counts_proportional).map(|counts| counts.total)
    }

    /// The run in the profile's count of samples: the sample type's own values when they
    /// are counts, else the first sample type in unit "count"; `None` without one.
    fn counts(&self) -> Option<&Tally> {
        if self.unit == "count" {
            Some(&self.values)
        } else {
            self.other_counts.as_ref()
        }
    }

    /// `of`'s share of the run's total, in percent.
    fn share(&self, of: Of) -> f64 {
        self.values.value(of) as f64 * 100.0 / self.values.total as f64
    }

    /// An error unless this run is of `first`'s sample type.
    pub fn check_matches(&self, first: &Run) -> Result<()> {
        if (&self.sample_type, &self.unit) == (&first.sample_type, &first.unit) {
            return Ok(());
        }
        Err(Error::Incompatible(format!(
            "this run is {}/{}, the first one {}/{}: every run must be of one sample type (--sample-index)",
            self.sample_type, self.unit, first.sample_type, first.unit
        )))
    }

    /// The run's total per second of its duration, when the profile says how long it took.
    fn total_per_second(&self) -> Option<f64> {
        (self.duration_nanos > 0).then(|| self.values.total as f64 / (self.duration_nanos as f64 / 1e9))
    }
}

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
    tails: Tails,
}

/// One-sided p-values (compare larger, smaller) of the rank test and the sampling test.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
struct Tails {
    runs: (f64, f64),
    sampling: Option<(f64, f64)>,
}

/// Counts pooled over a side's runs: the name's and the runs' totals.
#[derive(Copy, Clone)]
struct Pooled {
    count: i64,
    total: i64,
}

/// One-sided p-values (larger, smaller) turned into the alternative's, in the
/// direction of `difference`.
fn directed(alternative: Alternative, difference: f64, (greater, less): (f64, f64)) -> f64 {
    match alternative {
        Alternative::TwoSided => (2.0 * greater.min(less)).min(1.0),
        Alternative::OneSided if difference < 0.0 => less,
        Alternative::OneSided => greater,
    }
}

impl Change {
    fn new(
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

    fn verdict(&self, t: &Thresholds) -> Verdict {
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
    fn decide(&mut self) {
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
    fn changes(&self) -> impl Iterator<Item = &Change> {
        std::iter::once(&self.flat).chain(self.cum.as_ref())
    }

    fn changes_mut(&mut self) -> impl Iterator<Item = &mut Change> {
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
    /// Holm's step-down procedure ([`correction::holm`]).
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

fn strictest_alpha<'a>(rows: impl Iterator<Item = &'a GateRow>) -> f64 {
    rows.filter(|row| row.changes().any(|change| change.adjusted_p_value.is_some()))
        .map(|row| row.thresholds.alpha)
        .fold(f64::INFINITY, f64::min)
}

/// The smallest p-value the rank test can give with `base` and `compare` runs: that of
/// every compare run above every base run (exactly, 1/C(base + compare, base) one-sided).
fn smallest_p_value(alternative: Alternative, base: usize, compare: usize) -> f64 {
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
fn correct<'a>(
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

/// A checked configuration.
pub struct Gate {
    config: GateConfig,
    rules: Vec<Regex>,
}

fn check_thresholds(what: &str, t: &Thresholds) -> Result<()> {
    let problem = if !(t.alpha > 0.0 && t.alpha <= 1.0) {
        format!("alpha must be in (0, 1], not {}", t.alpha)
    } else if !(t.min_effect >= 0.0 && t.min_effect.is_finite()) {
        format!("min_effect (percentage points) must be 0 or more, not {}", t.min_effect)
    } else if !(t.min_relative >= 0.0 && t.min_relative.is_finite()) {
        format!("min_relative (percent) must be 0 or more, not {}", t.min_relative)
    } else {
        return Ok(());
    };
    Err(Error::Gate(format!("{what}{problem}")))
}

impl Gate {
    pub fn new(config: GateConfig) -> Result<Gate> {
        check_thresholds("", &config.defaults())?;
        let mut rules = Vec::with_capacity(config.rules.len());
        for (i, rule) in config.rules.iter().enumerate() {
            let what = format!("rule {} (match = {:?}): ", i + 1, rule.pattern);
            let regex = Regex::new(&rule.pattern).map_err(|e| Error::Gate(format!("{what}invalid regex: {e}")))?;
            if rule.ignore && (rule.alpha.is_some() || rule.min_effect.is_some() || rule.min_relative.is_some()) {
                return Err(Error::Gate(format!("{what}ignore = true takes no thresholds")));
            }
            check_thresholds(&what, &rule.thresholds(config.defaults()))?;
            rules.push(regex);
        }
        Ok(Gate { config, rules })
    }

    /// The sample type the configuration names ("" for each profile's default).
    pub fn sample_type(&self) -> &str {
        &self.config.sample_type
    }

    /// An error unless `base` and `compare` have at least [`MIN_RUNS`] runs each. Runs
    /// too few to reach an alpha configured (exactly, 3 and 3 runs give at best p = 1/20
    /// one-sided, 2 and 2 give 1/6) are not refused: when a share held to that alpha could
    /// reach the minimum effect (and so is tested), [`Gate::compare`] reports
    /// [`Status::Inconclusive`] and the runs a side it needs.
    pub fn check_runs(&self, base: usize, compare: usize) -> Result<()> {
        for (side, runs) in [("base", base), ("compare", compare)] {
            if runs < MIN_RUNS {
                return Err(Error::Gate(format!(
                    "the {side} side has {runs} run(s): the gate needs at least {MIN_RUNS} a side ({ADVISED_RUNS} advised)"
                )));
            }
        }
        Ok(())
    }

    /// The thresholds for `name` and the rule that set them; `None` when a rule ignores it.
    fn thresholds(&self, name: &str) -> Option<(Thresholds, Option<&str>)> {
        let defaults = self.config.defaults();
        match self.rules.iter().zip(&self.config.rules).find(|(regex, _)| regex.is_match(name)) {
            None => Some((defaults, None)),
            Some((_, rule)) if rule.ignore => None,
            Some((_, rule)) => Some((rule.thresholds(defaults), Some(&rule.pattern))),
        }
    }

    /// A row for each of `names` (once each, in order) with the flat and cum changes of
    /// `test`, no verdict yet, but for those a rule ignores, which are counted in `ignored`.
    fn test_names<'a>(
        &self,
        names: impl Iterator<Item = &'a String>,
        ignored: &mut usize,
        mut test: impl FnMut(&str) -> (Change, Option<Change>),
    ) -> Vec<GateRow> {
        let names: BTreeSet<&str> = names.map(String::as_str).collect();
        let mut rows = Vec::with_capacity(names.len());
        for name in names {
            let Some((thresholds, rule)) = self.thresholds(name) else {
                *ignored += 1;
                continue;
            };
            let (flat, cum) = test(name);
            let rule = rule.map(str::to_owned);
            rows.push(GateRow {
                name: name.to_owned(),
                verdict: Verdict::Unchanged,
                metric: None,
                flat,
                cum,
                thresholds,
                rule,
            });
        }
        rows
    }

    /// Tests every function and package of `base` against `compare`.
    pub fn compare(&self, base: &[Run], compare: &[Run]) -> Result<GateReport> {
        self.check_runs(base.len(), compare.len())?;
        let first = &base[0];
        for run in base.iter().chain(compare) {
            run.check_matches(first)?;
        }
        let alternative = self.config.alternative;
        let mut tables = Tables::default();
        let mut ignored = 0;
        let pooled = |runs: &[Run], of: Of| -> Option<Pooled> {
            runs.iter().try_fold(Pooled { count: 0, total: 0 }, |sum, run| {
                let counts = run.counts()?;
                Some(Pooled { count: sum.count + counts.value(of), total: sum.total + counts.total })
            })
        };
        let mut change = |of: Of| {
            let counts = pooled(base, of).zip(pooled(compare, of));
            let shares = |runs: &[Run]| runs.iter().map(|r| r.share(of)).collect();
            Change::new(shares(base), shares(compare), counts, alternative, &mut tables)
        };

        let names = base.iter().chain(compare).flat_map(|r| r.values.functions.keys());
        let mut functions =
            self.test_names(names, &mut ignored, |name| (change(Of::Flat(name)), Some(change(Of::Cum(name)))));
        let names = base.iter().chain(compare).flat_map(|r| r.values.packages.keys());
        let mut packages = self.test_names(names, &mut ignored, |name| (change(Of::Package(name)), None));
        let smallest_run = base.iter().chain(compare).map(Run::proportional_count_total).min().flatten();
        let family = correct(alternative, functions.iter_mut().chain(&mut packages), smallest_run);
        functions.iter_mut().chain(&mut packages).for_each(GateRow::decide);

        let rate = |runs: &[Run]| runs.iter().map(|r| r.total_per_second()).collect::<Option<Vec<f64>>>();
        let total_per_second = rate(base).zip(rate(compare)).map(|(base, compare)| TotalRate {
            unit: first.unit.clone(),
            change: Change::new(base, compare, None, alternative, &mut tables),
        });
        for rows in [&mut functions, &mut packages] {
            rows.sort_by(|a, b| {
                let size = |row: &GateRow| match row.verdict {
                    Verdict::Unchanged => 0.0,
                    _ => row.deciding().difference.abs(),
                };
                (a.verdict, a.metric)
                    .cmp(&(b.verdict, b.metric))
                    .then_with(|| size(b).total_cmp(&size(a)))
                    .then_with(|| a.name.cmp(&b.name))
            });
        }
        let count = |verdict| functions.iter().chain(&packages).filter(|row| row.verdict == verdict).count();
        let regression_count = count(Verdict::Regression);
        let smallest = smallest_p_value(alternative, base.len(), compare.len());
        // A name held to the family's strictest alpha could not have regressed unless the
        // smallest p-value survives the correction at that alpha (runs too few to reach it
        // even uncorrected land here too, as the family has at least one share). An empty
        // family (∞) passes: no share could reach the minimum effect.
        let strictest = strictest_alpha(functions.iter().chain(&packages));
        let undecidable =
            |runs: (usize, usize)| smallest_p_value(alternative, runs.0, runs.1) * family.tests as f64 > strictest;
        let status = if regression_count > 0 {
            Status::Failed
        } else if undecidable((base.len(), compare.len())) {
            Status::Inconclusive
        } else {
            Status::Passed
        };
        let runs_needed = (status == Status::Inconclusive).then(|| {
            let enough = base.len().max(compare.len()) + 1;
            (enough..).find(|&runs| !undecidable((runs, runs))).expect("the smallest p-value falls towards 0")
        });
        Ok(GateReport {
            sample_type: first.sample_type.clone(),
            unit: first.unit.clone(),
            base_runs: base.len(),
            compare_runs: compare.len(),
            alternative,
            method: Method::for_sizes(base.len(), compare.len()),
            defaults: self.config.defaults(),
            status,
            passed: status == Status::Passed,
            correction: Correction::Holm,
            family,
            smallest_p_value: smallest,
            runs_needed,
            regression_count,
            improvement_count: count(Verdict::Improvement),
            ignored,
            total_per_second,
            functions,
            packages,
            diff_url: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
