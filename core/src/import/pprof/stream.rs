//! A pprof profile decoded while its bytes arrive, so that a file inflated elsewhere (by
//! the browser, in another worker) is mostly decoded by the time its last bytes come.
//!
//! The decoding here is a speculation on the usual file (Go's and pprof's writers put the
//! sample types first, then the samples, then everything the samples refer to): samples
//! are decoded as their fields complete, with their location ids kept until the
//! locations are read. Whatever the speculation cannot take — a sample type after a
//! sample, an id past 32 bits, a malformed field, anything not pprof — ends it, and the
//! whole input is then parsed at the end as if it had come at once, so the result and
//! every error are exactly [`crate::import::parse_with_progress`]'s.

use super::{convert_head, has_no_fields, read_sample, starts_like_profile, Fields, Head, IdIndex, SampleShape};
use crate::model::{Line, LocationId, Profile, Samples, SourceFormat};
use crate::{import, ParseOptions, Result};

/// How much of what is left [`IncrementalParse::finish`] decodes between progress reports.
const PROGRESS_SLICE: usize = 1 << 20;

/// A parse fed the input as it arrives: [`IncrementalParse::advance`] with the bytes so
/// far after each piece, [`IncrementalParse::finish`] with all of them.
pub struct IncrementalParse {
    /// Where the first field not yet read starts.
    read: usize,
    /// `None` once the speculation ended (see the module's comment).
    decoded: Option<Decoded>,
}

/// What was decoded so far.
#[derive(Default)]
struct Decoded {
    head: Head,
    lines: Vec<Line>,
    samples: Samples,
}

impl Default for IncrementalParse {
    fn default() -> Self {
        IncrementalParse { read: 0, decoded: Some(Decoded::default()) }
    }
}

impl IncrementalParse {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes what `bytes`, all of the input so far (each call's a prefix of the next
    /// call's), adds: every top-level field now whole.
    pub fn advance(&mut self, bytes: &[u8]) {
        let Some(decoded) = self.decoded.as_mut() else { return };
        if self.read == 0 && !bytes.is_empty() && !starts_like_profile(bytes) {
            self.decoded = None;
            return;
        }
        let mut fields = Fields { buf: bytes, pos: self.read, base: 0 };
        // A field cut off by the end of `bytes` fails to read: it is read again, whole,
        // once more bytes came (`finish` tells a truncated input from one still arriving).
        while let Some(Ok((field, value))) = fields.next() {
            if decoded.read(&fields, field, value).is_none() {
                self.decoded = None;
                return;
            }
            self.read = fields.pos;
        }
    }

    /// How many samples were decoded so far; `None` once the speculation ended (the
    /// input is then parsed whole by [`IncrementalParse::finish`]).
    pub fn samples_decoded(&self) -> Option<usize> {
        self.decoded.as_ref().map(|d| d.samples.len())
    }

    /// The profile `bytes` (the whole input, inflated) hold, as
    /// [`import::parse_with_progress`] gives it: from what was decoded while they arrived
    /// when that was all of them, else parsed whole now.
    pub fn finish(mut self, bytes: &[u8], options: &ParseOptions, progress: import::Progress<'_>) -> Result<Profile> {
        // What did not come piece by piece is decoded in slices, for the progress bar.
        let mut end = self.read;
        while self.decoded.is_some() && end < bytes.len() {
            end = (end + PROGRESS_SLICE).min(bytes.len());
            self.advance(&bytes[..end]);
            progress(import::Stage::Decoding, end as f64 / bytes.len() as f64);
        }
        let decoded = self
            .decoded
            .filter(|_| self.read == bytes.len() && import::detect(bytes) == import::Format::Of(SourceFormat::Pprof));
        match decoded.and_then(Decoded::into_profile) {
            Some(profile) => Ok(profile),
            None => import::parse_with_progress(bytes, options, progress),
        }
    }
}

impl Decoded {
    /// Reads one whole top-level field; `None` ends the speculation.
    fn read(&mut self, fields: &Fields<'_>, field: u32, value: super::Value<'_>) -> Option<()> {
        match field {
            // A sample type after a sample would change the shape of those decoded.
            1 if !self.samples.is_empty() => None,
            2 => {
                let types = self.head.sample_types.len();
                // Labels are checked against the string table at the end.
                let shape = SampleShape { types, strings: usize::MAX, location_index: IdIndex::Deferred };
                let sample = super::message(fields, &value).ok()?;
                read_sample(sample, self.samples.len(), &shape, &mut self.samples).ok()
            }
            _ => self.head.read_field(fields, field, value, &mut self.lines).ok(),
        }
    }

    /// The profile, its samples' location ids and label strings resolved; `None` when
    /// any is out of place (the whole parse then says which).
    fn into_profile(self) -> Option<Profile> {
        let Decoded { head, mut samples, .. } = self;
        let (mut profile, location_index) = convert_head(head).ok()?;
        for location in samples.all_locations_mut() {
            *location = LocationId(location_index.get(u64::from(location.0))?);
        }
        let strings = profile.strings.len();
        let known = |s: crate::model::StrId| (s.0 as usize) < strings;
        let labels_known = samples.all_labels().iter().all(|label| {
            known(label.key)
                && match label.value {
                    crate::model::LabelValue::Str(s) => known(s),
                    crate::model::LabelValue::Num { unit, .. } => known(unit),
                }
        });
        samples.shrink_to_fit();
        profile.samples = samples;
        (labels_known && !has_no_fields(&profile)).then_some(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The parse of `bytes` fed in pieces cut at `cuts` (ascending), as text: the
    /// profile's every field, or the error.
    fn fed(bytes: &[u8], cuts: &[usize]) -> String {
        let mut parse = IncrementalParse::new();
        for &cut in cuts {
            parse.advance(&bytes[..cut.min(bytes.len())]);
        }
        shown(parse.finish(bytes, &ParseOptions::default(), &mut |_, _| {}))
    }

    fn shown(parsed: Result<Profile>) -> String {
        match parsed {
            Ok(profile) => format!("{profile:?}"),
            Err(e) => format!("error: {e}"),
        }
    }

    fn whole(bytes: &[u8]) -> String {
        shown(import::parse_with_progress(bytes, &ParseOptions::default(), &mut |_, _| {}))
    }

    /// A small profile as our encoder writes it: two sample types, string and number
    /// labels, a location with an inlined line.
    fn written() -> Vec<u8> {
        use crate::model::{Label, LabelValue, Line, Sample, SourceFormat};
        let mut p = Profile::new(SourceFormat::Built);
        p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
        let mut lines = Vec::new();
        for name in ["main", "work", "inlined", "hot"] {
            let function = p.add_function(name, name, "main.go", 1);
            lines.push(Line { function, line: 10 + i64::from(function.0), column: 0 });
        }
        let main = p.add_location(0x1000, vec![lines[0]]);
        let work = p.add_location(0x2000, vec![lines[2], lines[1]]);
        let hot = p.add_location(0x3000, vec![lines[3]]);
        let tenant = p.strings.intern("tenant");
        let acme = p.strings.intern("acme");
        let (bytes, unit) = (p.strings.intern("bytes"), p.strings.intern("B"));
        let labels = vec![
            Label { key: tenant, value: LabelValue::Str(acme) },
            Label { key: bytes, value: LabelValue::Num { value: 512, unit } },
        ];
        p.samples.push(Sample { locations: vec![hot, work, main], values: vec![3, 30], labels });
        p.samples.push(Sample { locations: vec![work, main], values: vec![1, 10], labels: vec![] });
        crate::export::pprof::encode(&p)
    }

    #[test]
    fn a_profile_fed_in_pieces_is_the_profile_parsed_whole() {
        let bytes = written();
        let cuts: Vec<usize> = (0..bytes.len()).step_by(7).collect();
        assert!(!whole(&bytes).starts_with("error"));
        assert_eq!(fed(&bytes, &cuts), whole(&bytes));
        assert_eq!(fed(&bytes, &[]), whole(&bytes));
        let mut parse = IncrementalParse::new();
        parse.advance(&bytes);
        assert_eq!(parse.samples_decoded(), Some(2), "the samples were decoded as they came");
    }

    #[test]
    fn what_is_not_pprof_is_parsed_whole() {
        for bytes in [&b"main;a;b 3\nmain;c 2\n"[..], b"\x1f\x8bnot really gzip", b""] {
            assert_eq!(fed(bytes, &[1, 5, 9]), whole(bytes));
        }
    }

    proptest! {
        /// Whatever the bytes (a real profile, cut short or with a byte changed) and
        /// wherever they are cut, the result is the whole parse's: the profile or the
        /// error, to the letter.
        #[test]
        fn pieces_never_change_the_result(
            cuts in proptest::collection::vec(0usize..2000, 0..12),
            end in 1usize..=2000,
            flip in proptest::option::of((0usize..2000, any::<u8>())),
        ) {
            let mut bytes = written();
            if let Some((at, byte)) = flip {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            bytes.truncate(end * bytes.len() / 2000);
            let mut cuts = cuts;
            cuts.sort_unstable();
            prop_assert_eq!(fed(&bytes, &cuts), whole(&bytes));
        }
    }
}
