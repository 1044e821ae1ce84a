//! The CI gate: several runs a side, before (base) and after (compare) a change, and
//! for each function and package a test of whether its share of the run's total grew.
//!
//! Per run, every function's flat and cum value and every package's flat value (its
//! functions' flat values summed: the time in its own code) are taken as percentages of
//! that run's total, so runs of different lengths compare. For each name, the base
//! runs' shares and the compare runs' shares go through the Mann–Whitney U test, and
//! the effect is the change of the median share, in percentage points of the total and
//! relative to the base median. A name regresses when all hold: p ≤ alpha (one-sided,
//! "compare is larger", by default), the same of the sampling test on the runs' pooled
//! sample counts (when the profile counts samples: [`sampling`]), and an effect of at
//! least `min_effect` points and `min_relative` percent. The rank test says the change
//! is not run-to-run noise; the sampling test that it is not a handful of samples more
//! by luck (short runs of a rarely sampled function separate by chance); the minimum
//! effect says it is large enough to matter, which also keeps the many names tested at
//! once from failing builds on chance alone.
//!
//! A function regresses on its flat share (its own code got slower, the most specific
//! finding) or, failing that, on its cum share (something it calls got slower, spread
//! over callees none of which grew enough alone); its callers' cum shares grow too and
//! are reported after the flat regressions, so the function whose flat grew comes first.

pub mod mann_whitney;
pub mod sampling;

use std::collections::BTreeSet;

use regex::Regex;
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::summary::package_of;
use super::top::{top, TopOptions};
use crate::{Error, Profile, Result};
use mann_whitney::{Method, Tables};

/// Fewest runs a side: one run has no spread to tell noise from a change.
pub const MIN_RUNS: usize = 2;

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
    /// Largest p-value that counts as a change (p ≤ alpha).
    pub alpha: f64,
    /// Smallest change of the median share, in percentage points of the run's total.
    pub min_effect: f64,
    /// Smallest change of the median share, in percent of the base median.
    pub min_relative: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self { alpha: 0.05, min_effect: 1.0, min_relative: 10.0 }
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
    fn of(profile: &Profile, sample_index: usize) -> Result<(Tally, String, String)> {
        let report = top(profile, &TopOptions { sample_index: sample_index.to_string(), ..TopOptions::default() })?;
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
}

impl Run {
    /// The run of `profile` in the sample type `sample_type` names (see
    /// [`Profile::sample_index`]; "" for the profile's default).
    pub fn of(profile: &Profile, sample_type: &str) -> Result<Run> {
        let index = profile.sample_index(sample_type)?;
        let (values, sample_type, unit) = Tally::of(profile, index)?;
        if values.total == 0 {
            return Err(Error::Gate(format!("the profile's total of {sample_type} is 0: nothing to compare")));
        }
        let other_counts = match profile.sample_types.iter().position(|t| profile.str(t.unit) == "count") {
            Some(i) if unit != "count" => Some(Tally::of(profile, i)?.0).filter(|c| c.total > 0),
            _ => None,
        };
        Ok(Run { sample_type, unit, duration_nanos: profile.duration_nanos, values, other_counts })
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
        let p_value = directed(alternative, difference, (test.p_greater, test.p_less));
        let sampling_p_value = counts
            .and_then(|(b, c)| sampling::test(b.count, b.total, c.count, c.total))
            .map(|tails| directed(alternative, difference, tails));
        let samples = counts.filter(|_| sampling_p_value.is_some()).map(|(b, c)| [b.count, c.count]);
        let relative = (base_median != 0.0).then(|| difference / base_median.abs() * 100.0);
        Change { base, compare, base_median, compare_median, difference, relative, p_value, sampling_p_value, samples }
    }

    fn verdict(&self, t: &Thresholds) -> Verdict {
        let large = self.difference.abs() >= t.min_effect
            && self.relative.map_or(self.difference > 0.0, |r| r.abs() >= t.min_relative);
        let significant = self.p_value <= t.alpha && self.sampling_p_value.is_none_or(|p| p <= t.alpha);
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
    /// No function or package regressed.
    pub passed: bool,
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
    /// The rows with `verdict`, functions then packages, each named "function" or "package".
    pub fn rows(&self, verdict: Verdict) -> impl Iterator<Item = (&'static str, &GateRow)> {
        let functions = self.functions.iter().map(|row| ("function", row));
        let packages = self.packages.iter().map(|row| ("package", row));
        functions.chain(packages).filter(move |(_, row)| row.verdict == verdict)
    }
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

    /// An error unless `base` and `compare` runs can show a regression: at least
    /// [`MIN_RUNS`] a side, and enough for the test to reach every alpha configured
    /// (exactly, 3 and 3 runs give at best p = 1/20 one-sided, 2 and 2 give 1/6).
    pub fn check_runs(&self, base: usize, compare: usize) -> Result<()> {
        for (side, runs) in [("base", base), ("compare", compare)] {
            if runs < MIN_RUNS {
                return Err(Error::Gate(format!(
                    "the {side} side has {runs} run(s): the gate needs at least {MIN_RUNS} a side (3 for alpha 0.05, 5 recommended)"
                )));
            }
        }
        let separated: (Vec<f64>, Vec<f64>) =
            ((0..base).map(|i| i as f64).collect(), (base..base + compare).map(|i| i as f64).collect());
        let smallest =
            Change::new(separated.0, separated.1, None, self.config.alternative, &mut Tables::default()).p_value;
        let alphas = std::iter::once(("alpha".to_owned(), self.config.alpha)).chain(
            self.config
                .rules
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.ignore)
                .filter_map(|(i, r)| r.alpha.map(|alpha| (format!("rule {}'s alpha", i + 1), alpha))),
        );
        for (what, alpha) in alphas {
            if smallest > alpha {
                return Err(Error::Gate(format!(
                    "with {base} base and {compare} compare runs the smallest p-value the test can give is {smallest:.4}, \
                     above {what} {alpha}: no change could fail the gate; give more runs a side or raise alpha"
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

    /// A row for each of `names` (once each, in order) by `test`, but for those a rule
    /// ignores, which are counted in `ignored`.
    fn test_names<'a>(
        &self,
        names: impl Iterator<Item = &'a String>,
        ignored: &mut usize,
        mut test: impl FnMut(&str, Thresholds) -> (Verdict, Option<Metric>, Change, Option<Change>),
    ) -> Vec<GateRow> {
        let names: BTreeSet<&str> = names.map(String::as_str).collect();
        let mut rows = Vec::with_capacity(names.len());
        for name in names {
            let Some((thresholds, rule)) = self.thresholds(name) else {
                *ignored += 1;
                continue;
            };
            let (verdict, metric, flat, cum) = test(name, thresholds);
            let rule = rule.map(str::to_owned);
            rows.push(GateRow { name: name.to_owned(), verdict, metric, flat, cum, thresholds, rule });
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
        let mut functions = self.test_names(names, &mut ignored, |name, thresholds| {
            let (flat, cum) = (change(Of::Flat(name)), change(Of::Cum(name)));
            let (verdict, metric) = match (flat.verdict(&thresholds), cum.verdict(&thresholds)) {
                (Verdict::Regression, _) => (Verdict::Regression, Some(Metric::Flat)),
                (_, Verdict::Regression) => (Verdict::Regression, Some(Metric::Cum)),
                (Verdict::Improvement, _) => (Verdict::Improvement, Some(Metric::Flat)),
                (_, Verdict::Improvement) => (Verdict::Improvement, Some(Metric::Cum)),
                _ => (Verdict::Unchanged, None),
            };
            (verdict, metric, flat, Some(cum))
        });
        let names = base.iter().chain(compare).flat_map(|r| r.values.packages.keys());
        let mut packages = self.test_names(names, &mut ignored, |name, thresholds| {
            let flat = change(Of::Package(name));
            let verdict = flat.verdict(&thresholds);
            (verdict, (verdict != Verdict::Unchanged).then_some(Metric::Flat), flat, None)
        });

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
        Ok(GateReport {
            sample_type: first.sample_type.clone(),
            unit: first.unit.clone(),
            base_runs: base.len(),
            compare_runs: compare.len(),
            alternative,
            method: Method::for_sizes(base.len(), compare.len()),
            defaults: self.config.defaults(),
            passed: regression_count == 0,
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
