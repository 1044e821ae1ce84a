//! What every analysis is asked of a profile: the sample type, the granularity, pprof's
//! filters, the stack transforms and the time range. One [`Query`] is parsed and printed
//! here for the CLI, the URL hash, the API and the worker alike, and prepared once per
//! profile ([`Query::prepare`]); top, tree, diff, graph, details, timeline, source,
//! labels and export then take the [`Prepared`] profile and only their own settings.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::filters::Filters;
use super::frames::{CompiledFilters, FrameTable, Granularity};
use super::transforms::{format_transforms, parse_transforms, Transform};
use crate::model::Profile;
use crate::{Error, Result};

/// Which of a profile's sample types an analysis sums, as pprof's `-sample_index`: the
/// profile's default, an index, or a type's name. Written as pprof writes it ("" for the
/// default, a number, or a name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum SampleType {
    #[default]
    Default,
    Index(usize),
    Named(String),
}

impl SampleType {
    /// Reads pprof's `-sample_index` text: "" is the default, digits an index, anything
    /// else a name. pprof also accepts a legacy `sample_index=` prefix; so do we.
    pub fn parse(spec: &str) -> Self {
        let spec = spec.trim();
        let spec = spec.strip_prefix("sample_index=").unwrap_or(spec);
        if spec.is_empty() {
            SampleType::Default
        } else if let Ok(i) = spec.parse() {
            SampleType::Index(i)
        } else {
            SampleType::Named(spec.to_owned())
        }
    }

    /// The index of this type among `names` (a profile's sample types in order), whose
    /// default is `default`: pprof's rule, the one rule of every caller. A legacy heap
    /// profile's type is "space", which pprof also finds as `inuse_space`.
    pub fn resolve_in<S: AsRef<str>>(&self, names: &[S], default: usize) -> Result<usize> {
        let position = |wanted: &str| names.iter().position(|n| n.as_ref() == wanted);
        let found = match self {
            SampleType::Default => Some(default),
            SampleType::Index(i) => Some(*i).filter(|&i| i < names.len()),
            SampleType::Named(name) => {
                position(name).or_else(|| name.strip_prefix("inuse_").filter(|n| !n.is_empty()).and_then(position))
            }
        };
        found.ok_or_else(|| Error::UnknownSampleType {
            requested: self.to_string(),
            available: names.iter().map(|n| n.as_ref().to_owned()).collect(),
        })
    }

    /// [`SampleType::resolve_in`] the sample types of `profile`.
    pub fn resolve(&self, profile: &Profile) -> Result<usize> {
        let names: Vec<&str> = (0..profile.sample_types.len()).map(|i| profile.sample_type_name(i)).collect();
        self.resolve_in(&names, profile.default_sample_index())
    }
}

impl std::fmt::Display for SampleType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleType::Default => Ok(()),
            SampleType::Index(i) => write!(f, "{i}"),
            SampleType::Named(name) => f.write_str(name),
        }
    }
}

impl From<&str> for SampleType {
    fn from(spec: &str) -> Self {
        SampleType::parse(spec)
    }
}

impl From<usize> for SampleType {
    fn from(index: usize) -> Self {
        SampleType::Index(index)
    }
}

impl Serialize for SampleType {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SampleType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Ok(SampleType::parse(&Cow::<str>::deserialize(deserializer)?))
    }
}

/// The question asked of one profile, before the analysis that answers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Query {
    pub sample: SampleType,
    pub granularity: Granularity,
    pub filters: Filters,
    /// The Firefox Profiler's stack transforms, applied in order after the range.
    pub transforms: Vec<Transform>,
    /// Only the samples that start in `[from, to)`, in the samples' time.
    pub range: Option<(i64, i64)>,
}

/// The keys of a query's text form, as the URL hash and the API write them.
pub const QUERY_KEYS: [&str; 14] = [
    "sample",
    "granularity",
    "focus",
    "ignore",
    "hide",
    "show",
    "tagfocus",
    "tagignore",
    "tagshow",
    "taghide",
    "tagroot",
    "tagleaf",
    "transforms",
    "range",
];

impl Query {
    /// The whole profile in one sample type.
    pub fn of_sample(sample: impl Into<SampleType>) -> Query {
        Query { sample: sample.into(), ..Query::default() }
    }

    /// Sets the field `key` names from its text (`key` one of [`QUERY_KEYS`]; a list's
    /// key adds one value). `Ok(false)` when the key is not a query's.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool> {
        let invalid = |reason: String| Error::Invalid(format!("{key}: {reason}"));
        let text = || (!value.is_empty()).then(|| value.to_owned());
        let f = &mut self.filters;
        match key {
            "sample" => self.sample = SampleType::parse(value),
            "granularity" => self.granularity = value.parse().map_err(invalid)?,
            "focus" => f.focus = text(),
            "ignore" => f.ignore = text(),
            "hide" => f.hide = text(),
            "show" => f.show = text(),
            "tagfocus" => f.tag_focus = text(),
            "tagignore" => f.tag_ignore = text(),
            "tagshow" => f.tag_show = text(),
            "taghide" => f.tag_hide = text(),
            "tagroot" => f.tag_root.extend(text()),
            "tagleaf" => f.tag_leaf.extend(text()),
            "transforms" => self.transforms = parse_transforms(value)?,
            "range" => {
                self.range = Some(parse_range(value).ok_or_else(|| invalid(format!("'{value}' is not FROM~TO")))?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The query as `(key, text)` pairs, [`Query::set`]'s inverse: only what differs from
    /// the default, in [`QUERY_KEYS`]' order; the caller encodes the text.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let f = &self.filters;
        let mut pairs = vec![("sample", self.sample.to_string())];
        if self.granularity != Granularity::default() {
            pairs.push(("granularity", self.granularity.to_string()));
        }
        for (key, value) in [
            ("focus", &f.focus),
            ("ignore", &f.ignore),
            ("hide", &f.hide),
            ("show", &f.show),
            ("tagfocus", &f.tag_focus),
            ("tagignore", &f.tag_ignore),
            ("tagshow", &f.tag_show),
            ("taghide", &f.tag_hide),
        ] {
            pairs.extend(value.clone().map(|v| (key, v)));
        }
        pairs.extend(f.tag_root.iter().map(|k| ("tagroot", k.clone())));
        pairs.extend(f.tag_leaf.iter().map(|k| ("tagleaf", k.clone())));
        pairs.push(("transforms", format_transforms(&self.transforms)));
        pairs.extend(self.range.map(|(from, to)| ("range", format!("{from}~{to}"))));
        pairs.retain(|(_, value)| !value.is_empty());
        pairs
    }

    /// The same query without a time range (a diff's two profiles have no common time).
    pub fn without_range(&self) -> Query {
        Query { range: None, ..self.clone() }
    }

    /// `profile` with the range and then the transforms applied (borrowed when there is
    /// neither): what the analyses read.
    pub fn shape<'p>(&self, profile: &'p Profile) -> Result<Cow<'p, Profile>> {
        let ranged = match self.range {
            Some((from, to)) => Cow::Owned(profile.restrict(from, to)?),
            None => Cow::Borrowed(profile),
        };
        Ok(match self.transforms.is_empty() {
            true => ranged,
            false => Cow::Owned(ranged.transform(&self.transforms)?),
        })
    }

    /// The query made ready for `profile`: shaped, the sample type resolved, the filters
    /// checked.
    pub fn prepare<'p>(&self, profile: &'p Profile) -> Result<Prepared<'p>> {
        self.ready(self.shape(profile)?)
    }

    /// [`Query::prepare`] of a profile already shaped by this query (the worker keeps the
    /// last shaped profile across the views' requests).
    pub fn prepare_shaped<'p>(&self, shaped: &'p Profile) -> Result<Prepared<'p>> {
        self.ready(Cow::Borrowed(shaped))
    }

    fn ready<'p>(&self, profile: Cow<'p, Profile>) -> Result<Prepared<'p>> {
        let sample_index = self.sample.resolve(&profile)?;
        let filters = Arc::new(self.filters.compile()?);
        Ok(Prepared { profile, sample_index, granularity: self.granularity, filters })
    }

    /// Prepares `base` and `compare` for a diff: the sample type is resolved in `compare`,
    /// and `base` is held to the type of the same name and unit (profiles whose types come
    /// in another order compare).
    pub fn prepare_pair<'p>(&self, base: &'p Profile, compare: &'p Profile) -> Result<(Prepared<'p>, Prepared<'p>)> {
        let compare = self.prepare(compare)?;
        let base = Query { sample: SampleType::Default, ..self.clone() }.prepare(base)?;
        let sample_index = matching_sample_index(base.profile(), compare.profile(), compare.sample_index)?;
        Ok((Prepared { sample_index, ..base }, compare))
    }
}

/// The base profile's sample index with the same type (and unit) as `compare[index]`.
fn matching_sample_index(base: &Profile, compare: &Profile, index: usize) -> Result<usize> {
    let (name, unit) = (compare.sample_type_name(index), compare.sample_type_unit(index));
    (0..base.sample_types.len())
        .find(|&i| base.sample_type_name(i) == name && base.sample_type_unit(i) == unit)
        .ok_or_else(|| {
            let available: Vec<String> =
                (0..base.sample_types.len()).map(|i| base.sample_type_name(i).to_owned()).collect();
            Error::Incompatible(format!(
                "the base profile has no '{name}' ({unit}) samples; it has: {}",
                available.join(", ")
            ))
        })
}

fn parse_range(text: &str) -> Option<(i64, i64)> {
    let (from, to) = text.split_once('~')?;
    let range = (from.parse().ok()?, to.parse().ok()?);
    (range.0 < range.1).then_some(range)
}

/// A profile made ready for one [`Query`]: shaped, with its sample type resolved and its
/// filters checked. Every analysis takes it.
pub struct Prepared<'p> {
    profile: Cow<'p, Profile>,
    pub sample_index: usize,
    pub granularity: Granularity,
    filters: Arc<CompiledFilters>,
}

impl<'p> Prepared<'p> {
    /// The whole profile, unshaped and unfiltered, as the default query prepares it.
    pub fn whole(profile: &'p Profile) -> Result<Self> {
        Query::default().prepare(profile)
    }

    /// The shaped profile (filters are applied by the analyses, through [`Prepared::frames`]).
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The same profile for another sample type (the gate and the page's summaries walk
    /// every type of one profile).
    pub fn with_sample(&self, sample_index: usize) -> Prepared<'_> {
        Prepared {
            profile: Cow::Borrowed(&self.profile),
            sample_index,
            granularity: self.granularity,
            filters: Arc::clone(&self.filters),
        }
    }

    /// The query's filters, compiled.
    pub fn filters(&self) -> &CompiledFilters {
        &self.filters
    }

    /// The report nodes of the shaped profile at the query's granularity and filters.
    pub fn frames(&self) -> Result<FrameTable<'_>> {
        FrameTable::new(&self.profile, self.granularity, &self.filters)
    }

    pub fn sample_type(&self) -> &str {
        self.profile.sample_type_name(self.sample_index)
    }

    pub fn unit(&self) -> &str {
        self.profile.sample_type_unit(self.sample_index)
    }

    /// pprof's total: the sum of |value| of the sample type over every sample.
    pub fn total(&self) -> i64 {
        self.profile.total(self.sample_index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_types_read_and_print_as_pprof_writes_them() {
        assert_eq!(SampleType::parse(""), SampleType::Default);
        assert_eq!(SampleType::parse(" 2 "), SampleType::Index(2));
        assert_eq!(SampleType::parse("sample_index=cpu"), SampleType::Named("cpu".into()));
        for text in ["", "3", "alloc_space"] {
            assert_eq!(SampleType::parse(text).to_string(), text);
        }
        let names = ["alloc_objects", "alloc_space", "space"];
        assert_eq!(SampleType::parse("").resolve_in(&names, 1).unwrap(), 1);
        assert_eq!(SampleType::parse("0").resolve_in(&names, 1).unwrap(), 0);
        assert_eq!(SampleType::parse("inuse_space").resolve_in(&names, 1).unwrap(), 2);
        let unknown = SampleType::parse("7").resolve_in(&names, 1).unwrap_err().to_string();
        assert!(unknown.contains("'7'") && unknown.contains("alloc_objects, alloc_space, space"), "{unknown}");
    }

    #[test]
    fn a_query_prints_what_it_reads() {
        let mut query = Query::default();
        for (key, value) in [
            ("sample", "cpu"),
            ("granularity", "lines"),
            ("focus", "main\\."),
            ("tagroot", "endpoint"),
            ("tagroot", "tenant"),
            ("transforms", "mf:runtime.mcall~inv"),
            ("range", "10~20"),
        ] {
            assert!(query.set(key, value).unwrap(), "{key}");
        }
        assert!(!query.set("view", "flame").unwrap());
        let mut again = Query::default();
        for (key, value) in query.pairs() {
            again.set(key, &value).unwrap();
        }
        assert_eq!(again, query);
        assert_eq!(query.pairs()[0], ("sample", "cpu".to_owned()));
        assert!(Query::default().pairs().is_empty());
        let bad = Query::default().set("range", "20~10").unwrap_err().to_string();
        assert!(bad.contains("range: '20~10' is not FROM~TO"), "{bad}");
        assert!(Query::default().set("granularity", "bogus").is_err());
    }
}
