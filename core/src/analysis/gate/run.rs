//! One run of the gate: a profile's values per function and package, and its counts of
//! samples when the sampling test can use them.

use rustc_hash::FxHashMap as HashMap;

use crate::analysis::query::Prepared;
use crate::analysis::summary::package_of;
use crate::analysis::top::{top, TopOptions};
use crate::{Error, Result};

/// A run's values in one sample type: the total, each function's flat and cum, and
/// each package's flat (its functions' flat values summed).
#[derive(Clone, Debug)]
pub(super) struct Tally {
    pub(super) total: i64,
    pub(super) functions: HashMap<String, (i64, i64)>,
    pub(super) packages: HashMap<String, i64>,
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

    pub(super) fn value(&self, of: Of) -> i64 {
        match of {
            Of::Flat(name) => self.functions.get(name).map_or(0, |v| v.0),
            Of::Cum(name) => self.functions.get(name).map_or(0, |v| v.1),
            Of::Package(name) => self.packages.get(name).copied().unwrap_or(0),
        }
    }
}

/// A value a run has for a name.
#[derive(Copy, Clone)]
pub(super) enum Of<'a> {
    Flat(&'a str),
    Cum(&'a str),
    Package(&'a str),
}

/// One run of the gate, in one sample type.
#[derive(Clone, Debug)]
pub struct Run {
    pub(super) sample_type: String,
    pub(super) unit: String,
    duration_nanos: i64,
    pub(super) values: Tally,
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
    pub(super) fn proportional_count_total(&self) -> Option<i64> {
        self.counts().filter(|_| self.counts_proportional).map(|counts| counts.total)
    }

    /// The run in the profile's count of samples: the sample type's own values when they
    /// are counts, else the first sample type in unit "count"; `None` without one.
    pub(super) fn counts(&self) -> Option<&Tally> {
        if self.unit == "count" {
            Some(&self.values)
        } else {
            self.other_counts.as_ref()
        }
    }

    /// `of`'s share of the run's total, in percent.
    pub(super) fn share(&self, of: Of) -> f64 {
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
    pub(super) fn total_per_second(&self) -> Option<f64> {
        (self.duration_nanos > 0).then(|| self.values.total as f64 / (self.duration_nanos as f64 / 1e9))
    }
}
