//! A profile's samples, stored flat: each sample's locations, values and labels are a
//! stretch of one shared vector each, so millions of samples are a handful of
//! allocations instead of three apiece (a third of the memory of a large CPU profile,
//! and most of its decoding time, went to those small vectors and their allocator).

use super::{Label, LocationId, Sample};

/// Where a sample's stretches end in the shared vectors (they start where the previous
/// sample's end).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Ends {
    locations: usize,
    values: usize,
    labels: usize,
}

impl Ends {
    /// These ends moved past `part`.
    fn after(self, part: &SampleSizes) -> Ends {
        Ends {
            locations: self.locations + part.locations,
            values: self.values + part.values,
            labels: self.labels + part.labels,
        }
    }
}

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Samples {
    ends: Vec<Ends>,
    locations: Vec<LocationId>,
    values: Vec<i64>,
    labels: Vec<Label>,
}

/// One sample of [`Samples`], borrowed: the same fields as [`Sample`], as slices.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SampleRef<'a> {
    /// Leaf first, as in pprof.
    pub locations: &'a [LocationId],
    /// One value per entry of [`super::Profile::sample_types`].
    pub values: &'a [i64],
    pub labels: &'a [Label],
}

impl SampleRef<'_> {
    pub fn to_sample(&self) -> Sample {
        Sample { locations: self.locations.to_vec(), values: self.values.to_vec(), labels: self.labels.to_vec() }
    }
}

impl Samples {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Sample `i`; panics when `i` is out of range, as indexing a slice does.
    pub fn sample(&self, i: usize) -> SampleRef<'_> {
        let (start, end) = self.range(i);
        SampleRef {
            locations: &self.locations[start.locations..end.locations],
            values: &self.values[start.values..end.values],
            labels: &self.labels[start.labels..end.labels],
        }
    }

    pub fn last(&self) -> Option<SampleRef<'_>> {
        self.len().checked_sub(1).map(|i| self.sample(i))
    }

    pub fn iter(&self) -> Iter<'_> {
        self.iter_range(0..self.len())
    }

    /// The samples in `range`; panics when it is out of bounds, as slicing does.
    pub fn iter_range(&self, range: std::ops::Range<usize>) -> Iter<'_> {
        assert!(range.start <= range.end && range.end <= self.len(), "samples {range:?} of {}", self.len());
        Iter { samples: self, next: range.start, end: range.end }
    }

    /// Sample `i`'s values, to change in place.
    pub fn values_mut(&mut self, i: usize) -> &mut [i64] {
        let (start, end) = self.range(i);
        &mut self.values[start.values..end.values]
    }

    pub fn push(&mut self, sample: Sample) {
        self.push_ref(sample.view());
    }

    pub fn push_ref(&mut self, sample: SampleRef<'_>) {
        self.locations.extend_from_slice(sample.locations);
        self.values.extend_from_slice(sample.values);
        self.labels.extend_from_slice(sample.labels);
        self.close_sample();
    }

    /// Every sample's locations, one after another: for a decoder that wrote them
    /// before it could resolve them.
    pub(crate) fn all_locations_mut(&mut self) -> &mut [LocationId] {
        &mut self.locations
    }

    /// Gives back the room the vectors grew beyond their samples (decoded as they came,
    /// their number unknown, they grew by doubling).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.ends.shrink_to_fit();
        self.locations.shrink_to_fit();
        self.values.shrink_to_fit();
        self.labels.shrink_to_fit();
    }

    /// Every sample's labels, one after another.
    pub(crate) fn all_labels(&self) -> &[Label] {
        &self.labels
    }

    /// Keeps the first `len` samples.
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            let end = self.start(len);
            self.ends.truncate(len);
            self.locations.truncate(end.locations);
            self.values.truncate(end.values);
            self.labels.truncate(end.labels);
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Removes the last sample and hands it back.
    pub fn pop(&mut self) -> Option<Sample> {
        self.ends.pop()?;
        let start = self.start(self.len());
        Some(Sample {
            locations: self.locations.split_off(start.locations),
            values: self.values.split_off(start.values),
            labels: self.labels.split_off(start.labels),
        })
    }

    /// Keeps the samples for which `keep` says so; `keep` may also edit them (each is
    /// handed over as a [`Sample`] of reused vectors).
    pub fn retain(&mut self, mut keep: impl FnMut(&mut Sample) -> bool) {
        let old = std::mem::take(self);
        self.ends.reserve(old.len());
        let mut scratch = Sample::default();
        for sample in &old {
            scratch.locations.clear();
            scratch.locations.extend_from_slice(sample.locations);
            scratch.values.clear();
            scratch.values.extend_from_slice(sample.values);
            scratch.labels.clear();
            scratch.labels.extend_from_slice(sample.labels);
            if keep(&mut scratch) {
                self.push_ref(scratch.view());
            }
        }
    }

    /// Samples of known sizes written in consecutive parts at once (a thread a part, see
    /// [`crate::parallel::each`]) straight into vectors allocated once, so no part is
    /// copied afterwards. `write` gets one [`PartWriter`] per entry of `parts`.
    pub(crate) fn write_parts<E>(
        parts: &[SampleSizes],
        write: impl FnOnce(Vec<PartWriter<'_>>) -> Result<(), E>,
    ) -> Result<Samples, Unwritten<E>> {
        let total = parts.iter().fold(Ends::default(), |at, part| at.after(part));
        let placeholder = Label { key: super::StrId(0), value: super::LabelValue::Str(super::StrId(0)) };
        let mut out = Samples {
            ends: filled(parts.iter().map(|p| p.samples).sum(), Ends::default())?,
            locations: filled(total.locations, LocationId(0))?,
            values: filled(total.values, 0)?,
            labels: filled(total.labels, placeholder)?,
        };
        let mut writers = Vec::with_capacity(parts.len());
        let (mut ends, mut locations, mut values, mut labels) =
            (&mut out.ends[..], &mut out.locations[..], &mut out.values[..], &mut out.labels[..]);
        let mut base = Ends::default();
        for part in parts {
            let (e, rest_e) = std::mem::take(&mut ends).split_at_mut(part.samples);
            let (l, rest_l) = std::mem::take(&mut locations).split_at_mut(part.locations);
            let (v, rest_v) = std::mem::take(&mut values).split_at_mut(part.values);
            let (b, rest_b) = std::mem::take(&mut labels).split_at_mut(part.labels);
            (ends, locations, values, labels) = (rest_e, rest_l, rest_v, rest_b);
            writers.push(PartWriter {
                ends: e,
                locations: l,
                values: v,
                labels: b,
                base,
                written: SampleSizes::default(),
            });
            base = base.after(part);
        }
        write(writers).map_err(Unwritten::Failed)?;
        // Each part ends where the next starts, and ends never go back: every range is
        // in bounds and every slot written, whatever the writers did.
        let (mut whole, mut first, mut base) = (true, 0, Ends::default());
        for part in parts {
            base = base.after(part);
            first += part.samples;
            whole &= out.start(first) == base;
        }
        let mut at = Ends::default();
        whole &= out.ends.iter().all(|e| {
            let forward = e.locations >= at.locations && e.values >= at.values && e.labels >= at.labels;
            at = *e;
            forward
        });
        if whole {
            Ok(out)
        } else {
            Err(Unwritten::Incomplete)
        }
    }

    fn close_sample(&mut self) {
        self.ends.push(Ends { locations: self.locations.len(), values: self.values.len(), labels: self.labels.len() });
    }

    /// Where sample `i` starts: where the one before it ends.
    fn start(&self, i: usize) -> Ends {
        i.checked_sub(1).map_or_else(Ends::default, |before| self.ends[before])
    }

    fn range(&self, i: usize) -> (Ends, Ends) {
        (self.start(i), self.ends[i])
    }
}

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Vec<Sample>> for Samples {
    fn from(samples: Vec<Sample>) -> Self {
        samples.into_iter().collect()
    }
}

impl FromIterator<Sample> for Samples {
    fn from_iter<I: IntoIterator<Item = Sample>>(iter: I) -> Self {
        let mut samples = Samples::new();
        samples.extend(iter);
        samples
    }
}

impl Extend<Sample> for Samples {
    fn extend<I: IntoIterator<Item = Sample>>(&mut self, iter: I) {
        for sample in iter {
            self.push(sample);
        }
    }
}

impl<'a> IntoIterator for &'a Samples {
    type Item = SampleRef<'a>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Why [`Samples::write_parts`] gave no samples.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unwritten<E> {
    /// A part's writer failed.
    Failed(E),
    /// The vectors could not be had: this many bytes were asked for.
    OutOfMemory(u64),
    /// A part was not written whole.
    Incomplete,
}

/// `len` copies of `value`, or the bytes asked for when the allocator refuses them (a
/// file's counts can ask for more than a browser tab can hold).
fn filled<T: Clone, E>(len: usize, value: T) -> Result<Vec<T>, Unwritten<E>> {
    let mut v = Vec::new();
    let bytes = || len.saturating_mul(std::mem::size_of::<T>()) as u64;
    v.try_reserve_exact(len).map_err(|_| Unwritten::OutOfMemory(bytes()))?;
    v.resize(len, value);
    Ok(v)
}

/// How much room samples take in [`Samples`]' shared vectors.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SampleSizes {
    pub samples: usize,
    pub locations: usize,
    pub values: usize,
    pub labels: usize,
}

/// One part of [`Samples::write_parts`]: appends to its stretch of the shared vectors,
/// refusing (`false`) what does not fit.
pub(crate) struct PartWriter<'a> {
    ends: &'a mut [Ends],
    locations: &'a mut [LocationId],
    values: &'a mut [i64],
    labels: &'a mut [Label],
    /// Where this part's stretches start in the shared vectors.
    base: Ends,
    /// What was written so far (`samples`: the samples closed).
    written: SampleSizes,
}

/// Where a decoder writes samples an item at a time, each call refusing (`false`) what
/// does not fit: a [`PartWriter`]'s room, sized beforehand, or [`Samples`] themselves,
/// grown as the items come (a profile decoded while it arrives, whose size is unknown).
pub(crate) trait SampleSink {
    #[must_use]
    fn push_location(&mut self, location: LocationId) -> bool;
    #[must_use]
    fn push_value(&mut self, value: i64) -> bool;
    #[must_use]
    fn push_label(&mut self, label: Label) -> bool;
    /// Closes the sample written since the last call.
    #[must_use]
    fn end_sample(&mut self) -> bool;
}

impl SampleSink for PartWriter<'_> {
    fn push_location(&mut self, location: LocationId) -> bool {
        put(self.locations, &mut self.written.locations, location)
    }

    fn push_value(&mut self, value: i64) -> bool {
        put(self.values, &mut self.written.values, value)
    }

    fn push_label(&mut self, label: Label) -> bool {
        put(self.labels, &mut self.written.labels, label)
    }

    fn end_sample(&mut self) -> bool {
        let end = self.base.after(&self.written);
        put(self.ends, &mut self.written.samples, end)
    }
}

impl SampleSink for Samples {
    fn push_location(&mut self, location: LocationId) -> bool {
        self.locations.push(location);
        true
    }

    fn push_value(&mut self, value: i64) -> bool {
        self.values.push(value);
        true
    }

    fn push_label(&mut self, label: Label) -> bool {
        self.labels.push(label);
        true
    }

    fn end_sample(&mut self) -> bool {
        self.close_sample();
        true
    }
}

fn put<T>(slots: &mut [T], written: &mut usize, item: T) -> bool {
    let Some(slot) = slots.get_mut(*written) else { return false };
    *slot = item;
    *written += 1;
    true
}

/// The samples of [`Samples::iter`], in order.
#[derive(Clone)]
pub struct Iter<'a> {
    samples: &'a Samples,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = SampleRef<'a>;
    fn next(&mut self) -> Option<SampleRef<'a>> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.samples.sample(self.next - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<SampleRef<'a>> {
        self.next = self.next.saturating_add(n).min(self.end);
        self.next()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.next < self.end).then(|| {
            self.end -= 1;
            self.samples.sample(self.end)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LabelValue, StrId};

    fn sample(locations: &[u32], values: &[i64], labels: usize) -> Sample {
        Sample {
            locations: locations.iter().map(|&l| LocationId(l)).collect(),
            values: values.to_vec(),
            labels: (0..labels).map(|i| Label { key: StrId(i as u32), value: LabelValue::Str(StrId(1)) }).collect(),
        }
    }

    #[test]
    fn samples_read_back_as_pushed() {
        let pushed = vec![sample(&[3, 2, 1], &[5, 50], 1), sample(&[], &[0, 0], 0), sample(&[7], &[1, 10], 2)];
        let samples = Samples::from(pushed.clone());
        assert_eq!(samples.len(), 3);
        assert_eq!(samples.iter().map(|s| s.to_sample()).collect::<Vec<_>>(), pushed);
        assert_eq!(
            samples.iter().rev().map(|s| s.to_sample()).collect::<Vec<_>>(),
            pushed.iter().rev().cloned().collect::<Vec<_>>()
        );
        assert_eq!(samples.iter().nth(2).map(|s| s.to_sample()), Some(pushed[2].clone()));
        assert_eq!(samples.iter().nth(3), None);
        assert_eq!(samples.last().unwrap().locations, &[LocationId(7)]);
    }

    fn sizes(samples: &[Sample]) -> SampleSizes {
        SampleSizes {
            samples: samples.len(),
            locations: samples.iter().map(|s| s.locations.len()).sum(),
            values: samples.iter().map(|s| s.values.len()).sum(),
            labels: samples.iter().map(|s| s.labels.len()).sum(),
        }
    }

    fn write(writer: &mut PartWriter<'_>, samples: &[Sample]) -> bool {
        samples.iter().all(|s| {
            s.locations.iter().all(|&l| writer.push_location(l))
                && s.values.iter().all(|&v| writer.push_value(v))
                && s.labels.iter().all(|l| writer.push_label(l.clone()))
                && writer.end_sample()
        })
    }

    #[test]
    fn parts_written_at_once_are_the_samples_in_order() {
        let parts = [vec![sample(&[1, 2], &[1], 1), sample(&[], &[2], 0)], vec![], vec![sample(&[3], &[3], 2)]];
        let part_sizes: Vec<SampleSizes> = parts.iter().map(|p| sizes(p)).collect();
        let written = Samples::write_parts(&part_sizes, |writers| {
            let wrote = writers.into_iter().zip(&parts).all(|(mut w, p)| write(&mut w, p));
            if wrote {
                Ok(())
            } else {
                Err("refused")
            }
        });
        assert_eq!(written, Ok(Samples::from(parts.concat())));
        // A part written short, or one that wrote more than its room, gives no samples.
        let short = Samples::write_parts(&part_sizes, |mut writers| {
            assert!(write(&mut writers[0], &parts[0][..1]) && write(&mut writers[2], &parts[2]));
            Ok::<_, ()>(())
        });
        assert_eq!(short, Err(Unwritten::Incomplete));
        let mut over = part_sizes.clone();
        over[0].locations = 1;
        let over = Samples::write_parts(&over, |mut writers| {
            assert!(!write(&mut writers[0], &parts[0]), "two locations in the room of one");
            Err("refused")
        });
        assert_eq!(over, Err(Unwritten::Failed("refused")));
        let huge = SampleSizes { samples: 1, locations: usize::MAX / 8, values: 0, labels: 0 };
        let refused = Samples::write_parts(&[huge], |_| Ok::<_, ()>(()));
        assert!(matches!(refused, Err(Unwritten::OutOfMemory(bytes)) if bytes >= u64::MAX / 4), "{refused:?}");
    }

    #[test]
    fn values_can_be_changed_and_samples_taken_off_the_end() {
        let mut samples = Samples::from(vec![sample(&[1], &[1], 0), sample(&[4, 5], &[2], 1), sample(&[6], &[3], 0)]);
        samples.values_mut(2)[0] = 30;
        assert_eq!(samples.sample(2).values, &[30]);
        assert_eq!(samples.pop(), Some(sample(&[6], &[30], 0)));
        samples.truncate(1);
        assert_eq!(samples, Samples::from(vec![sample(&[1], &[1], 0)]));
        samples.push(sample(&[2], &[2], 1));
        assert_eq!(samples.sample(1).to_sample(), sample(&[2], &[2], 1));
        samples.clear();
        assert!(samples.is_empty() && samples.pop().is_none());
    }

    #[test]
    fn retain_keeps_and_edits_in_order() {
        let mut samples = Samples::from(vec![sample(&[1, 2], &[1], 0), sample(&[3], &[2], 1), sample(&[4], &[3], 0)]);
        samples.retain(|s| {
            s.locations.push(LocationId(0));
            s.values[0] != 2
        });
        assert_eq!(
            samples.iter().map(|s| s.to_sample()).collect::<Vec<_>>(),
            vec![sample(&[1, 2, 0], &[1], 0), sample(&[4, 0], &[3], 0)]
        );
    }
}
