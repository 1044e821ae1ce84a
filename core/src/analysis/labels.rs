//! Sample labels, pprof's tags: the `-tagfocus`/`-tagignore` sample filters, the
//! `-tagshow`/`-taghide` key filters, the `-tagroot`/`-tagleaf` pseudo-frames, and the
//! per-key summary behind `-tags` and the page's label panel.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::{Deserialize, Serialize};

use super::filters::{compile_regex, Filters};
use crate::model::{
    Function, FunctionId, Label, LabelValue, Line, Location, LocationId, Profile, SampleRef, Samples, StrId,
};
use crate::units::{format_value, percentage_value, scale_to};
use crate::{Error, Result};

/// pprof reads a label with neither a string, a number nor a unit as no label at all.
fn is_blank(label: &Label) -> bool {
    matches!(label.value, LabelValue::Num { value: 0, unit: StrId(0) })
}

/// A sample's labels as pprof sees them.
fn labels(sample: SampleRef<'_>) -> impl Iterator<Item = &Label> + '_ {
    sample.labels.iter().filter(|l| !is_blank(l))
}

/// The unit of each numeric label key, as pprof's `NumLabelUnits`: the first unit a
/// value of the key names, else `bytes` for `alignment` and `request` (tcmalloc's keys),
/// else the key itself (so Go's unitless heap label `bytes` is in bytes).
fn numeric_label_units(profile: &Profile) -> HashMap<&str, &str> {
    let mut units: HashMap<&str, &str> = HashMap::default();
    for label in profile.samples.iter().flat_map(labels) {
        if let LabelValue::Num { unit, .. } = label.value {
            let known = units.entry(profile.str(label.key)).or_insert("");
            if known.is_empty() {
                *known = profile.str(unit);
            }
        }
    }
    for (key, unit) in &mut units {
        if unit.is_empty() {
            *unit = match *key {
                "alignment" | "request" => "bytes",
                key => key,
            };
        }
    }
    units
}

/// A parsed `-tagfocus` or `-tagignore`: `[key=]regex[,regex…]` or `[key=]range`.
pub(crate) struct TagFilter {
    /// Only this key's labels are tested; every label when `None`.
    key: Option<String>,
    test: ValueTest,
}

enum ValueTest {
    /// With a key: any regex matches one of its string values. Without: every regex
    /// matches some string label written `key:value`.
    Regexes(Vec<Regex>),
    Range(NumRange),
}

/// Numbers in one unit between two bounds, both included (`32kb` is both).
#[derive(Clone)]
struct NumRange {
    low: Option<f64>,
    high: Option<f64>,
    unit: String,
}

impl NumRange {
    /// pprof scales the label's value to the range's unit; a unit of another kind never matches.
    fn contains(&self, value: i64, unit: &str) -> bool {
        let (value, unit) = scale_to(value, unit, &self.unit);
        unit == self.unit && self.low.is_none_or(|low| value >= low) && self.high.is_none_or(|high| value <= high)
    }
}

/// A number with an optional unit, as pprof finds the ends of a range.
static RANGE_END: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("([+-]?[[:digit:]]+)([[:alpha:]]+)?").expect("a valid pattern"));

impl TagFilter {
    /// pprof's `compileTagFilter`; `None` for an empty option.
    pub(crate) fn parse(option: &'static str, spec: &Option<String>) -> Result<Option<Self>> {
        let Some(spec) = spec.as_deref().map(str::trim).filter(|s| !s.is_empty()) else { return Ok(None) };
        let (key, value) = match spec.split_once('=') {
            Some((key, value)) => ((!key.is_empty()).then(|| key.to_owned()), value),
            None => (None, spec),
        };
        let test = match parse_range(option, value)? {
            Some(range) => ValueTest::Range(range),
            None => ValueTest::Regexes(
                value
                    .split(',')
                    .map(|re| Regex::new(re).map_err(|e| Error::InvalidRegex { option, reason: e.to_string() }))
                    .collect::<Result<_>>()?,
            ),
        };
        Ok(Some(TagFilter { key, test }))
    }

    /// The filter resolved against one profile's string ids.
    fn bind(&self, profile: &Profile, units: &HashMap<&str, &str>) -> SampleTest {
        let wanted = |key: StrId| self.key.as_deref().is_none_or(|k| profile.str(key) == k);
        match &self.test {
            ValueTest::Regexes(regexes) => {
                let pairs: HashSet<(StrId, StrId)> = profile
                    .samples
                    .iter()
                    .flat_map(labels)
                    .filter_map(|l| match l.value {
                        LabelValue::Str(value) if wanted(l.key) => Some((l.key, value)),
                        _ => None,
                    })
                    .collect();
                let matching = |re: &Regex, text: &dyn Fn(StrId, StrId) -> String| -> HashSet<(StrId, StrId)> {
                    pairs.iter().copied().filter(|&(k, v)| re.is_match(&text(k, v))).collect()
                };
                let sets = if self.key.is_some() {
                    let value = |_, v| profile.str(v).to_owned();
                    vec![regexes.iter().flat_map(|re| matching(re, &value)).collect()]
                } else {
                    let key_value = |k, v| format!("{}:{}", profile.str(k), profile.str(v));
                    regexes.iter().map(|re| matching(re, &key_value)).collect()
                };
                SampleTest::Strings(sets)
            }
            ValueTest::Range(range) => {
                let mut keys = HashMap::default();
                for label in profile.samples.iter().flat_map(labels) {
                    if matches!(label.value, LabelValue::Num { .. }) && wanted(label.key) {
                        keys.entry(label.key).or_insert_with(|| units[profile.str(label.key)].to_owned());
                    }
                }
                SampleTest::Range { keys, range: range.clone() }
            }
        }
    }
}

/// pprof's `parseTagFilterRange`: `32kb` (exactly), `:64kb`, `4mb:` or `12kb:64mb`;
/// `None` when `text` is none of those (pprof then reads it as regexes).
fn parse_range(option: &'static str, text: &str) -> Result<Option<NumRange>> {
    let ends: Vec<(&str, &str, &str)> = RANGE_END
        .captures_iter(text)
        .take(2)
        .map(|c| {
            (
                c.get(0).map_or("", |m| m.as_str()),
                c.get(1).map_or("", |m| m.as_str()),
                c.get(2).map_or("", |m| m.as_str()),
            )
        })
        .collect();
    // pprof parses the first number before it looks at the form (and panics on overflow).
    let number = |digits: &str| {
        digits.parse::<i64>().map_err(|e| Error::InvalidTagFilter {
            option,
            filter: text.to_owned(),
            reason: format!("{digits}: {e}"),
        })
    };
    let Some(&(first, digits, unit)) = ends.first() else { return Ok(None) };
    let (low, unit) = scale_to(number(digits)?, unit, unit);
    let range = |low, high| NumRange { low, high, unit: unit.clone() };
    let Some(&(second, digits, second_unit)) = ends.get(1) else {
        return Ok(if text == first {
            Some(range(Some(low), Some(low)))
        } else if text.strip_suffix(':') == Some(first) {
            Some(range(Some(low), None))
        } else if text.strip_prefix(':') == Some(first) {
            Some(range(None, Some(low)))
        } else {
            None
        });
    };
    if text != format!("{first}:{second}") {
        return Ok(None);
    }
    let (high, high_unit) = scale_to(number(digits)?, second_unit, &unit);
    Ok((high_unit == unit).then(|| range(Some(low), Some(high))))
}

/// A tag filter bound to one profile: tests a sample by its labels' string ids.
enum SampleTest {
    /// For every set, one of the sample's string labels (key, value) is in it.
    Strings(Vec<HashSet<(StrId, StrId)>>),
    /// One of the sample's numbers under a listed key (with the key's unit) is in range.
    Range { keys: HashMap<StrId, String>, range: NumRange },
}

impl SampleTest {
    fn matches(&self, sample: SampleRef<'_>) -> bool {
        match self {
            SampleTest::Strings(sets) => sets.iter().all(|set| {
                labels(sample).any(|l| matches!(l.value, LabelValue::Str(value) if set.contains(&(l.key, value))))
            }),
            SampleTest::Range { keys, range } => labels(sample).any(|l| match l.value {
                LabelValue::Num { value, .. } => keys.get(&l.key).is_some_and(|unit| range.contains(value, unit)),
                LabelValue::Str(_) => false,
            }),
        }
    }
}

/// The tag options of [`Filters`], compiled once.
pub(crate) struct CompiledTagFilters {
    focus: Option<TagFilter>,
    ignore: Option<TagFilter>,
    pub(crate) keys: KeyFilter,
}

impl CompiledTagFilters {
    pub(crate) fn new(filters: &Filters) -> Result<Self> {
        Ok(Self {
            focus: TagFilter::parse("tagfocus", &filters.tag_focus)?,
            ignore: TagFilter::parse("tagignore", &filters.tag_ignore)?,
            keys: KeyFilter::new(filters)?,
        })
    }

    /// tagfocus and tagignore bound to `profile`.
    pub(crate) fn verdicts(&self, profile: &Profile) -> TagVerdicts {
        if self.focus.is_none() && self.ignore.is_none() {
            return TagVerdicts::default();
        }
        let units = numeric_label_units(profile);
        TagVerdicts {
            focus: self.focus.as_ref().map(|f| f.bind(profile, &units)),
            ignore: self.ignore.as_ref().map(|f| f.bind(profile, &units)),
        }
    }
}

/// pprof's `FilterSamplesByTag` for one profile's samples.
#[derive(Default)]
pub(crate) struct TagVerdicts {
    focus: Option<SampleTest>,
    ignore: Option<SampleTest>,
}

impl TagVerdicts {
    pub(crate) fn keeps(&self, sample: SampleRef<'_>) -> bool {
        self.focus.as_ref().is_none_or(|f| f.matches(sample))
            && !self.ignore.as_ref().is_some_and(|i| i.matches(sample))
    }
}

/// pprof's `-tagshow`/`-taghide`: the label keys that tag reports show.
pub(crate) struct KeyFilter {
    show: Option<Regex>,
    hide: Option<Regex>,
}

impl KeyFilter {
    fn new(filters: &Filters) -> Result<Self> {
        Ok(Self {
            show: compile_regex("tagshow", &filters.tag_show)?,
            hide: compile_regex("taghide", &filters.tag_hide)?,
        })
    }

    pub(crate) fn shows(&self, key: &str) -> bool {
        self.show.as_ref().is_none_or(|re| re.is_match(key)) && !self.hide.as_ref().is_some_and(|re| re.is_match(key))
    }
}

/// The profile with pprof's `-tagroot`/`-tagleaf` pseudo-frames (its `addLabelNodes`):
/// each sample gets one frame per key at the root (the first key outermost) and at the
/// leaf (the last key innermost), named by the sample's values of the key joined by `,`
/// (strings, then numbers in their own unit), with the key as its file. A sample without
/// the key gets a frame with no name (`<unknown>` in reports), as in pprof.
pub fn add_label_frames(profile: &Profile, root_keys: &[String], leaf_keys: &[String]) -> Profile {
    let mut out = profile.clone();
    let mut next_location = profile.locations.iter().map(|l| l.id).max().unwrap_or(0).saturating_add(1);
    let mut next_function = profile.functions.iter().map(|f| f.id).max().unwrap_or(0).saturating_add(1);
    let mut frames: HashMap<(String, &str), LocationId> = HashMap::default();
    let (roots, leaves) = (label_keys(root_keys), label_keys(leaf_keys));
    let mut samples = Samples::new();
    let mut stack = Vec::new();
    for sample in &profile.samples {
        let mut frame = |key| {
            let name = label_values(profile, sample, key).join(",");
            *frames.entry((name, key)).or_insert_with_key(|(name, key)| {
                let function = FunctionId(out.functions.len() as u32);
                out.functions.push(Function {
                    id: next_function,
                    name: out.strings.intern(name),
                    system_name: StrId(0),
                    filename: out.strings.intern(key),
                    start_line: 0,
                });
                let location = LocationId(out.locations.len() as u32);
                out.locations.push(Location {
                    id: next_location,
                    lines: vec![Line { function, line: 0, column: 0 }],
                    ..Location::default()
                });
                next_function = next_function.saturating_add(1);
                next_location = next_location.saturating_add(1);
                location
            })
        };
        // Stacks are leaf first: the last leaf key goes first, the first root key last.
        let leaf_frames: Vec<LocationId> = leaves.iter().rev().map(|k| frame(k)).collect();
        let root_frames: Vec<LocationId> = roots.iter().rev().map(|k| frame(k)).collect();
        stack.clear();
        stack.extend(leaf_frames.into_iter().chain(sample.locations.iter().copied()).chain(root_frames));
        samples.push_ref(SampleRef { locations: &stack, ..sample });
    }
    out.samples = samples;
    out
}

/// The keys of a `-tagroot`/`-tagleaf` list; pprof skips empty ones.
fn label_keys(list: &[String]) -> Vec<&str> {
    list.iter().map(String::as_str).filter(|k| !k.is_empty()).collect()
}

/// `profile` with the filters' label frames, or `profile` itself when they ask for none.
pub(crate) fn with_label_frames<'a>(profile: &'a Profile, filters: &Filters) -> Cow<'a, Profile> {
    if !label_keys(&filters.tag_root).is_empty() || !label_keys(&filters.tag_leaf).is_empty() {
        Cow::Owned(add_label_frames(profile, &filters.tag_root, &filters.tag_leaf))
    } else {
        Cow::Borrowed(profile)
    }
}

/// pprof's `formatLabelValues`: a sample's string values of `key`, then its numbers,
/// each in the unit it names.
fn label_values(profile: &Profile, sample: SampleRef<'_>, key: &str) -> Vec<String> {
    let of_key = || labels(sample).filter(move |l| profile.str(l.key) == key);
    let strings = of_key().filter_map(|l| match l.value {
        LabelValue::Str(value) => Some(profile.str(value).to_owned()),
        LabelValue::Num { .. } => None,
    });
    let numbers = of_key().filter_map(|l| match l.value {
        LabelValue::Num { value, unit } => Some(format_value(value, profile.str(unit))),
        LabelValue::Str(_) => None,
    });
    strings.chain(numbers).collect()
}

/// One sample type's values per label key and value, for the label panel and `-tags`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSummary {
    pub sample_type: String,
    pub unit: String,
    /// pprof's total: the sum of |value| over every sample, before filters.
    pub total: i64,
    /// In name order; keys that `tag_show`/`tag_hide` leave out are not listed.
    pub keys: Vec<LabelKeySummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelKeySummary {
    pub key: String,
    /// The unit numeric values are in (pprof's `NumLabelUnits`); `None` when the key has
    /// only strings.
    pub unit: Option<String>,
    /// The sum over the key's values: pprof's "Total" (a sample with two values of the
    /// key counts twice).
    pub total: i64,
    /// The value of the samples the filters keep that lack this key.
    pub missing: i64,
    pub missing_pct: f64,
    /// As pprof sorts them: largest |total| first, then by value.
    pub values: Vec<LabelValueSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelValueSummary {
    /// The string, or the number in the key's unit as pprof prints it (`16kB`).
    pub value: String,
    /// The value of the samples with this label.
    pub total: i64,
    /// `total` as a percentage of the profile total.
    pub total_pct: f64,
}

/// Label values summed over samples as they come (those of one function, say), for a
/// [`LabelSummary`]. Summed by ids: formatting each label of a large profile would be slow.
pub(crate) struct LabelTally<'p> {
    kept: &'p Profile,
    index: usize,
    by_label: HashMap<(StrId, LabelValue), i64>,
    with_key: HashMap<&'p str, i64>,
    kept_total: i64,
    keys_seen: Vec<&'p str>,
}

impl<'p> LabelTally<'p> {
    /// A tally of the values of sample type `index` of `kept`'s samples.
    pub(crate) fn new(kept: &'p Profile, index: usize) -> Self {
        Self {
            kept,
            index,
            by_label: HashMap::default(),
            with_key: HashMap::default(),
            kept_total: 0,
            keys_seen: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, sample: SampleRef<'_>) {
        let value = sample.values.get(self.index).copied().unwrap_or(0);
        self.kept_total = self.kept_total.saturating_add(value);
        self.keys_seen.clear();
        for label in labels(sample) {
            let sum = self.by_label.entry((label.key, label.value.clone())).or_default();
            *sum = sum.saturating_add(value);
            let key = self.kept.str(label.key);
            if !self.keys_seen.contains(&key) {
                self.keys_seen.push(key);
                let sum = self.with_key.entry(key).or_default();
                *sum = sum.saturating_add(value);
            }
        }
    }

    /// The summary of the samples added, with the keys `filters` show; `total` is
    /// `kept.total(index)`, which the caller may have at hand.
    pub(crate) fn summary(self, total: i64, keys_shown: &KeyFilter) -> LabelSummary {
        let LabelTally { kept, index, by_label, with_key, kept_total, .. } = self;
        // Units take a pass over every sample: found only when numbers need them.
        let mut units: Option<HashMap<&str, &str>> = None;
        let mut by_key: BTreeMap<&str, (Option<&str>, HashMap<String, i64>)> = BTreeMap::new();
        for ((key, value), sum) in by_label {
            let key = kept.str(key);
            if !keys_shown.shows(key) {
                continue;
            }
            let (unit, values) = by_key.entry(key).or_default();
            let text = match value {
                LabelValue::Str(s) => kept.str(s).to_owned(),
                LabelValue::Num { value, .. } => {
                    let key_unit = units.get_or_insert_with(|| numeric_label_units(kept))[key];
                    *unit = Some(key_unit);
                    format_value(value, key_unit)
                }
            };
            let total = values.entry(text).or_default();
            *total = total.saturating_add(sum);
        }
        let keys = by_key
            .into_iter()
            .map(|(key, (unit, values))| {
                let mut values: Vec<LabelValueSummary> = values
                    .into_iter()
                    .map(|(value, sum)| LabelValueSummary {
                        value,
                        total: sum,
                        total_pct: percentage_value(sum, total),
                    })
                    .collect();
                values.sort_by(|a, b| {
                    b.total.unsigned_abs().cmp(&a.total.unsigned_abs()).then_with(|| a.value.cmp(&b.value))
                });
                let missing = kept_total.saturating_sub(with_key[key]);
                LabelKeySummary {
                    key: key.to_owned(),
                    unit: unit.map(str::to_owned),
                    total: values.iter().map(|v| v.total).fold(0, i64::saturating_add),
                    missing,
                    missing_pct: percentage_value(missing, total),
                    values,
                }
            })
            .collect();
        LabelSummary {
            sample_type: kept.sample_type_name(index).to_owned(),
            unit: kept.sample_type_unit(index).to_owned(),
            total,
            keys,
        }
    }
}
