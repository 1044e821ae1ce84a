//! Transforms that return a new profile (what a converted file or a merged range
//! carries), as opposed to reports about one.

use super::Filters;
use crate::{Profile, Result};

/// The profile with pprof's focus/ignore/hide/show applied to its samples and
/// locations (pprof's `FilterSamplesByName`, as `-output` writes it): samples that the
/// filters drop are removed, hidden lines are removed from their locations, and a
/// location left without lines is removed from the stacks; a sample left without a
/// stack goes too.
pub fn filter(profile: &Profile, filters: &Filters) -> Result<Profile> {
    let compiled = filters.compile()?;
    let mut out = profile.clone();
    if *filters == Filters::default() {
        return Ok(out);
    }
    let verdicts: Vec<Option<bool>> =
        profile.locations.iter().map(|location| compiled.location_verdict(profile, location)).collect();
    let mut hidden = vec![false; profile.locations.len()];
    for (i, (location, original)) in out.locations.iter_mut().zip(&profile.locations).enumerate() {
        if original.lines.is_empty() {
            hidden[i] = !compiled.keeps_unsymbolized(profile, original);
            continue;
        }
        let mut visible = compiled.visible_lines(profile, original);
        location.lines.retain(|_| visible.next().unwrap_or(false));
        hidden[i] = location.lines.is_empty();
    }
    out.retain_samples(|sample| {
        let verdict = |l: &crate::model::LocationId| verdicts[l.0 as usize];
        if compiled.has_ignore() && sample.locations.iter().any(|l| verdict(l) == Some(false)) {
            return false;
        }
        if compiled.has_focus() && !sample.locations.iter().any(|l| verdict(l) == Some(true)) {
            return false;
        }
        sample.locations.retain(|l| !hidden[l.0 as usize]);
        !sample.locations.is_empty()
    });
    Ok(out)
}
