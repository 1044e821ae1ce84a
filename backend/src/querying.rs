//! Queries in Pyroscope's model over the time index, for its query API: a profile type
//! id and a label selector choose series and stored profiles (`service_name` is the
//! service; `__name__`, `__profile_type__`, `__type__`, `__unit__`, `__period_type__`
//! and `__period_unit__` describe each of a profile's sample types, which Pyroscope
//! keeps as separate series), which are merged, summed per step or listed.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use stacklens_core::{Profile, ProfileKind};

use crate::budget::Reservation;
use crate::merging::{merge_range, MergeError, RangeQuery};
use crate::records::blocks;
use crate::records::profile_types::{name_of, ProfileTypeId};
use crate::records::selector::{Matcher, Selector};
use crate::records::series::{self, Entry, Series};
use crate::records::{now_millis, RecordError, Tenant};
use crate::state::AppState;

/// The label that names the service.
pub const SERVICE: &str = "service_name";

/// The labels that describe a sample type (see [`type_labels`]).
const TYPE_LABELS: [&str; 6] =
    ["__name__", "__profile_type__", "__type__", "__unit__", "__period_type__", "__period_unit__"];

/// Series read at once.
const CONCURRENCY: usize = 8;

/// What a query selects.
#[derive(Clone, Debug)]
pub struct Selection {
    pub tenant: Tenant,
    /// The sample type asked for; `None` for listings of any.
    pub profile_type: Option<ProfileTypeId>,
    pub selector: Selector,
    /// `[from, to)`, milliseconds since the epoch.
    pub from: u64,
    pub to: u64,
    /// Whether closed hours' listings and merges may be cached (see [`RangeQuery`]).
    pub write_caches: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// The request asks for more than this API answers.
    #[error("{0}")]
    Invalid(String),
}

/// The labels of one sample type of a profile of `kind`, as Pyroscope labels its series.
pub fn type_labels(id: &ProfileTypeId) -> [(&'static str, String); 6] {
    [
        ("__name__", id.name.clone()),
        ("__profile_type__", id.to_string()),
        ("__type__", id.sample_type.clone()),
        ("__unit__", id.sample_unit.clone()),
        ("__period_type__", id.period_type.clone()),
        ("__period_unit__", id.period_unit.clone()),
    ]
}

/// A stored profile with the series it is filed in.
pub struct Found {
    pub series: Series,
    pub entry: Entry,
}

impl Found {
    /// The label sets of the profile's sample types (those that pass `types`, or all),
    /// each with the service and the type's own labels.
    pub fn label_sets(&self, types: &[Matcher]) -> Vec<BTreeMap<String, String>> {
        ProfileTypeId::of_entry(self.series.kind, &self.entry)
            .iter()
            .map(|id| {
                let mut labels = self.entry.labels.clone();
                labels.insert(SERVICE.to_owned(), self.series.service.clone());
                labels.extend(type_labels(id).map(|(k, v)| (k.to_owned(), v)));
                labels
            })
            .filter(|labels| types.iter().all(|m| m.accepts(labels.get(&m.name).map_or("", String::as_str))))
            .collect()
    }
}

impl Selection {
    /// The selector's matchers on the service, on the sample type, and the rest (on
    /// the labels stored with each profile).
    fn parts(&self) -> (Vec<Matcher>, Vec<Matcher>, Selector) {
        let (rest, service) = self.selector.split_off(&[SERVICE]);
        let (labels, types) = rest.split_off(&TYPE_LABELS);
        (service, types, labels)
    }

    /// The tenant's series the selection may read: services that pass the service
    /// matchers, of the kinds that hold the type (for `memory`, a service's heap series
    /// rather than its allocs series when it has both: they hold the same values).
    pub async fn series(&self, state: &AppState) -> Result<Vec<Series>, QueryError> {
        let (service, types, _) = self.parts();
        let names: Vec<&Matcher> = types.iter().filter(|m| m.name == "__name__").collect();
        let all = series::list(&state.store, &self.tenant).await?;
        let mut chosen: BTreeMap<String, Vec<ProfileKind>> = BTreeMap::new();
        for (name, kind) in all {
            let by_type = self.profile_type.as_ref().is_none_or(|t| t.kinds().contains(&kind));
            if by_type && service.iter().all(|m| m.accepts(&name)) && names.iter().all(|m| m.accepts(name_of(kind))) {
                chosen.entry(name).or_default().push(kind);
            }
        }
        let mut out = Vec::new();
        for (service, mut kinds) in chosen {
            if self.profile_type.is_some() && kinds.contains(&ProfileKind::Memory) {
                kinds.retain(|k| *k != ProfileKind::Alloc);
            }
            let tenant = self.tenant.clone();
            out.extend(kinds.into_iter().map(|kind| Series { tenant: tenant.clone(), service: service.clone(), kind }));
        }
        Ok(out)
    }

    /// The stored profiles of the range that the selection selects, oldest first per
    /// series: their labels pass, and one of their sample types is the type asked for
    /// and passes the type matchers.
    pub async fn found(&self, state: &AppState) -> Result<Vec<Found>, QueryError> {
        let (_, types, labels) = self.parts();
        let now = now_millis();
        let (store, labels, write) = (&state.store, &labels, self.write_caches);
        let per_series: Vec<Vec<Found>> = futures::stream::iter(self.series(state).await?)
            .map(|series| async move {
                let entries = blocks::range(store, &series, (self.from, self.to), labels, now, write).await?;
                Ok::<_, RecordError>(entries.into_iter().map(|entry| Found { series: series.clone(), entry }).collect())
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        Ok(per_series
            .into_iter()
            .flatten()
            .filter(|f| self.profile_type.as_ref().is_none_or(|t| t.sample_index(&f.entry).is_some()))
            .filter(|f| {
                let sets = f.label_sets(&types);
                match &self.profile_type {
                    None => !sets.is_empty(),
                    Some(t) => {
                        let id = t.to_string();
                        sets.iter().any(|s| same_type(s, &id, t))
                    }
                }
            })
            .collect())
    }

    /// The range's profiles of the type merged into one, over every selected series,
    /// as `go tool pprof a b c` merges them; `None` when nothing matched.
    pub async fn merge(&self, state: &AppState) -> Result<MergedSelection, QueryError> {
        let (_, types, labels) = self.parts();
        if let Some(m) = types.first() {
            return Err(QueryError::Invalid(format!(
                "the label selector of a merge names labels and service_name, not '{}': the profile type id says the type",
                m.name
            )));
        }
        let mut merged = MergedSelection { profile: None, profile_count: 0, _reserved: Vec::new() };
        let mut profiles = Vec::new();
        for series in self.series(state).await? {
            let range = RangeQuery {
                series,
                from: self.from,
                to: self.to,
                labels: labels.clone(),
                write_caches: self.write_caches,
            };
            let one = merge_range(state, &range, now_millis()).await?;
            merged.profile_count += one.profile_count;
            profiles.extend(one.profile);
            merged._reserved.push(one._reserved);
        }
        merged.profile = match profiles.len() {
            0 => None,
            1 => profiles.pop(),
            _ => Some(
                tokio::task::spawn_blocking(move || Profile::merge(&profiles))
                    .await
                    .map_err(|e| MergeError::Stopped(e.to_string()))?
                    .map_err(MergeError::Incompatible)?,
            ),
        };
        Ok(merged)
    }

    /// The label names of the selected profiles' series, sorted.
    pub async fn label_names(&self, state: &AppState) -> Result<Vec<String>, QueryError> {
        let (_, types, _) = self.parts();
        let mut names = BTreeSet::new();
        for found in self.found(state).await? {
            for set in found.label_sets(&types) {
                names.extend(set.into_keys());
            }
        }
        Ok(names.into_iter().collect())
    }

    /// The values of label `name` in the selected profiles' series, sorted. The
    /// services and the type names come from the series list alone when nothing else
    /// is asked of the profiles.
    pub async fn label_values(&self, state: &AppState, name: &str) -> Result<Vec<String>, QueryError> {
        let (_, types, labels) = self.parts();
        let by_series = types.iter().all(|m| m.name == "__name__") && labels.matchers().is_empty();
        let mut values = BTreeSet::new();
        if by_series && (name == SERVICE || name == "__name__") {
            for series in self.series(state).await? {
                values.insert(if name == SERVICE { series.service } else { name_of(series.kind).to_owned() });
            }
        } else {
            for found in self.found(state).await? {
                values.extend(found.label_sets(&types).into_iter().filter_map(|mut set| set.remove(name)));
            }
        }
        Ok(values.into_iter().filter(|v| !v.is_empty()).collect())
    }

    /// The distinct label sets of the selected profiles' series (only the labels in
    /// `keep`, when any are named).
    pub async fn label_sets(
        &self,
        state: &AppState,
        keep: &[String],
    ) -> Result<Vec<BTreeMap<String, String>>, QueryError> {
        let (_, types, _) = self.parts();
        let mut sets = BTreeSet::new();
        for found in self.found(state).await? {
            for mut set in found.label_sets(&types) {
                if !keep.is_empty() {
                    set.retain(|k, _| keep.contains(k));
                }
                sets.insert(set);
            }
        }
        Ok(sets.into_iter().collect())
    }

    /// The profile types of the selected series, from each one's newest stored profile
    /// before the range's end.
    pub async fn profile_types(&self, state: &AppState) -> Result<Vec<ProfileTypeId>, QueryError> {
        let store = &state.store;
        let to = self.to;
        let newest: Vec<Option<(ProfileKind, Entry)>> = futures::stream::iter(self.series(state).await?)
            .map(|series| async move {
                Ok::<_, RecordError>(series.newest_entry(store, to).await?.map(|entry| (series.kind, entry)))
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await?;
        let ids: BTreeSet<ProfileTypeId> =
            newest.into_iter().flatten().flat_map(|(kind, entry)| ProfileTypeId::of_entry(kind, &entry)).collect();
        Ok(ids.into_iter().collect())
    }

    /// Sums of the type's totals per step of `step_ms` from `from`, with how many
    /// profiles each holds, one line per value of the `group_by` labels; steps without a
    /// profile have no point. `max_points` bounds the answer.
    pub async fn sums(
        &self,
        state: &AppState,
        step_ms: u64,
        group_by: &[String],
        max_points: u64,
    ) -> Result<Vec<Line>, QueryError> {
        let Some(profile_type) = &self.profile_type else {
            return Err(QueryError::Invalid("a series needs a profile type".into()));
        };
        let (_, types, _) = self.parts();
        let id = profile_type.to_string();
        let mut lines: BTreeMap<BTreeMap<String, String>, BTreeMap<u64, (i64, u32)>> = BTreeMap::new();
        let mut points = 0u64;
        for found in self.found(state).await? {
            let Some(index) = profile_type.sample_index(&found.entry) else { continue };
            let Some(set) = found.label_sets(&types).into_iter().find(|s| same_type(s, &id, profile_type)) else {
                continue;
            };
            let key: BTreeMap<String, String> =
                group_by.iter().map(|k| (k.clone(), set.get(k).cloned().unwrap_or_default())).collect();
            let step = self.from + (found.entry.millis - self.from) / step_ms * step_ms;
            let line = lines.entry(key).or_default();
            let point = line.entry(step).or_insert_with(|| {
                points += 1;
                (0, 0)
            });
            point.0 = point.0.saturating_add(found.entry.totals.get(index).copied().unwrap_or(0));
            point.1 += 1;
            if points > max_points {
                return Err(QueryError::Invalid(format!(
                    "the answer would hold more than {max_points} points: ask for a longer step, a shorter range or fewer groups"
                )));
            }
        }
        Ok(lines
            .into_iter()
            .map(|(labels, points)| Line {
                labels,
                points: points.into_iter().map(|(t, (sum, profiles))| StepSum { t, sum, profiles }).collect(),
            })
            .collect())
    }
}

/// Whether a label set is that of type `t` (whose id is `id`): the same name, sample
/// type and unit (the period, which stored profiles do not keep, is not compared).
fn same_type(set: &BTreeMap<String, String>, id: &str, t: &ProfileTypeId) -> bool {
    set.get("__profile_type__").is_some_and(|p| p == id)
        || (set.get("__type__") == Some(&t.sample_type)
            && (t.sample_unit.is_empty() || set.get("__unit__") == Some(&t.sample_unit))
            && t.kinds().iter().any(|k| set.get("__name__").is_some_and(|n| n == name_of(*k))))
}

/// One line of [`Selection::sums`]: its group's labels and its steps, in time order.
pub struct Line {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<StepSum>,
}

/// One step of a [`Line`]: its start (milliseconds), the sum of its profiles' totals
/// and how many profiles went in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepSum {
    pub t: u64,
    pub sum: i64,
    pub profiles: u32,
}

impl StepSum {
    /// The step's value: the sum, or with `average` the mean per profile.
    pub fn value(&self, average: bool) -> f64 {
        match average {
            true => self.sum as f64 / f64::from(self.profiles.max(1)),
            false => self.sum as f64,
        }
    }
}

/// A merged selection; the memory its merges took is held until it is dropped.
pub struct MergedSelection {
    pub profile: Option<Profile>,
    pub profile_count: usize,
    pub _reserved: Vec<Reservation>,
}
