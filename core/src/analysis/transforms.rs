//! Transforms that return a new profile (what a converted file or a merged range
//! carries), as opposed to reports about one.

use super::labels::with_label_frames;
use super::Filters;
use crate::{Profile, Result};

/// The profile with pprof's filters applied to its samples and locations, as `-output`
/// writes it: the label frames of `tag_root`/`tag_leaf` added; samples that
/// focus/ignore or tagfocus/tagignore drop removed; hidden lines removed from their
/// locations, and a location left without lines removed from the stacks (a sample left
/// without a stack goes too); labels whose keys `tag_show`/`tag_hide` leave out removed.
pub fn filter(profile: &Profile, filters: &Filters) -> Result<Profile> {
    let compiled = filters.compile()?;
    if *filters == Filters::default() {
        return Ok(profile.clone());
    }
    let labelled = with_label_frames(profile, filters);
    let profile = &*labelled;
    let tags = compiled.tags.verdicts(profile);
    let mut out = profile.clone();
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
        if !tags.keeps(sample) {
            return false;
        }
        sample.locations.retain(|l| !hidden[l.0 as usize]);
        sample.labels.retain(|l| compiled.tags.keys.shows(profile.str(l.key)));
        !sample.locations.is_empty()
    });
    Ok(out)
}
