//! The label tags pprof's graph attaches to nodes, which decide how many nodelets a node
//! counts for when the graph keeps its top nodes.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Label, LabelValue};
use crate::units::format_value;
use crate::Profile;

/// The tags pprof's graph attaches to nodes: a sample's string labels joined (one tag),
/// and each of its `bytes` numeric labels as formatted under those labels. Samples mostly
/// share a few label sets, so nodes sum values per set; node selection then counts a
/// node's distinct tags.
#[derive(Default)]
pub(super) struct SampleTags {
    /// Per input sample, its label set ([`SampleTags::NO_SET`] without tags).
    pub(super) set_of_sample: Vec<u32>,
    /// Per label set, the ids of its tags.
    pub(super) sets: Vec<Vec<u32>>,
}

impl SampleTags {
    pub(super) const NO_SET: u32 = u32::MAX;

    pub(super) fn new(profile: &Profile, samples: &[(u32, i64, usize)]) -> Self {
        let bytes = profile.strings.iter().position(|s| s == "bytes");
        // pprof's unit for a numeric label: the first one a sample names, else its key.
        let bytes_unit = profile
            .samples
            .iter()
            .flat_map(|s| s.labels)
            .find_map(|l| match l.value {
                LabelValue::Num { unit, .. } if Some(l.key.0 as usize) == bytes && unit.0 != 0 => {
                    Some(profile.str(unit))
                }
                _ => None,
            })
            .unwrap_or("bytes");
        let mut tags = Self::default();
        let mut tag_ids: HashMap<String, u32> = HashMap::default();
        let mut set_ids: HashMap<&[Label], u32> = HashMap::default();
        for &(sample, ..) in samples {
            let labels = profile.samples.sample(sample as usize).labels;
            if let Some(&set) = set_ids.get(labels) {
                tags.set_of_sample.push(set);
                continue;
            }
            let mut strings: Vec<String> = labels
                .iter()
                .filter_map(|l| match l.value {
                    LabelValue::Str(v) => Some(format!("{}:{}", profile.str(l.key), profile.str(v))),
                    LabelValue::Num { .. } => None,
                })
                .collect();
            strings.sort();
            // pprof joins them with a literal `\n`; a NUL separates the numeric tags' key.
            let joined = strings.join("\\n");
            let mut keys = Vec::new();
            for l in labels {
                if let LabelValue::Num { value, .. } = l.value {
                    if Some(l.key.0 as usize) == bytes {
                        keys.push(format!("{joined}\0{}", format_value(value, bytes_unit)));
                    }
                }
            }
            if !joined.is_empty() {
                keys.push(joined);
            }
            let set = if keys.is_empty() {
                Self::NO_SET
            } else {
                let ids = keys.into_iter().map(|key| {
                    let next = tag_ids.len() as u32;
                    *tag_ids.entry(key).or_insert(next)
                });
                tags.sets.push(ids.collect());
                (tags.sets.len() - 1) as u32
            };
            set_ids.insert(labels, set);
            tags.set_of_sample.push(set);
        }
        tags
    }
}
