//! pprof's `-tags` report: per label key, the values of the prepared sample type over the
//! samples the filters keep.

use super::frames::{FrameTable, Granularity};
use super::labels::{LabelSummary, LabelTally};
use super::query::Prepared;
use crate::Result;

/// Per label key, the values of the prepared sample type over the samples the filters
/// keep, as pprof's `-tags` sums them (at any granularity: labels are per sample).
pub fn label_summary(prepared: &Prepared) -> Result<LabelSummary> {
    let (index, filters) = (prepared.sample_index, prepared.filters());
    // The samples kept are those top counts (a focus may match label frames).
    let table = FrameTable::new(prepared.profile(), Granularity::Functions, filters)?;
    let kept = table.profile();
    let mut tally = LabelTally::new(kept, index);
    kept.samples.iter().filter(|&s| table.keeps(s)).for_each(|s| tally.add(s));
    Ok(tally.summary(prepared.total(), &filters.tags.keys))
}
