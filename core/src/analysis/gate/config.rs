//! What the gate is asked: the test's direction, the thresholds, and the configuration
//! file with its rules per name.

use serde::{Deserialize, Serialize};

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
    pub(super) fn defaults(&self) -> Thresholds {
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
    pub(super) fn thresholds(&self, defaults: Thresholds) -> Thresholds {
        Thresholds {
            alpha: self.alpha.unwrap_or(defaults.alpha),
            min_effect: self.min_effect.unwrap_or(defaults.min_effect),
            min_relative: self.min_relative.unwrap_or(defaults.min_relative),
        }
    }
}
