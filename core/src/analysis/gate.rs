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
mod change;
mod config;
pub mod correction;
mod family;
pub mod mann_whitney;
mod report;
mod run;
pub mod sampling;

use std::collections::BTreeSet;

use regex::Regex;

use self::change::Pooled;
pub use self::change::{Change, Verdict};
pub use self::config::{Alternative, GateConfig, Rule, Thresholds};
use self::family::{correct, smallest_p_value};
use self::mann_whitney::{Method, Tables};
use self::report::strictest_alpha;
pub use self::report::{Correction, Family, GateReport, GateRow, Metric, Status, TotalRate};
use self::run::Of;
pub use self::run::Run;
use crate::{Error, Result};

/// Fewest runs a side: one run has no spread to tell noise from a change.
pub const MIN_RUNS: usize = 2;

/// Runs a side advised at the default alpha: measured to meet the gate's goals (at most
/// 1 % false positives, at least 95 % of 10 % slowdowns caught) on every workload tried.
pub const ADVISED_RUNS: usize = 10;

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
            // Runs a side: the smaller side is the one short (2 against 10 needs more base
            // runs, not 11 of each).
            let enough = base.len().min(compare.len()) + 1;
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
