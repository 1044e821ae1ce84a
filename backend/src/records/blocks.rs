//! Compacted blocks: a series' closed hour in one immutable object, so that a query over
//! old data reads one object an hour and lists nothing (the hour's name is computed
//! from the range). Raw pushes stay the truth; a block is derived from them and made
//! again whenever they change.
//!
//! A block is a pprof profile, the merge of the hour's stored profiles with their
//! symbols (strings, functions, locations, mappings) deduplicated, holding each profile
//! twice: its own samples, tagged with its entry's number, and merged into its label
//! set's, tagged with the set's number (numeric labels, see [`Tag`]); then a gzipped JSON footer
//! naming those entries (times, labels, sets, totals, headers) and the payload's
//! SHA-256; then a fixed trailer: the footer's length and SHA-256 and a magic. A reader
//! of the footer alone (series answers) reads the object's tail; a merge reads it whole
//! and keeps the samples its range and labels select: the sets' when it takes the hour
//! whole, else the entries'.
//!
//! A closed day's hour blocks are merged again into a day block: the label sets'
//! samples only (a day block serves ranges that take the day whole), and the day's
//! entries in its footer, so that a query of days reads one object a day, and a series
//! one footer a day.
//!
//! Staying true to raw: the compactor lists the hour, writes the block
//! (`PutMode::Create`), then lists the hour again and deletes the block if the listing
//! changed. A push or removal into an hour that may have a block deletes the block after
//! its own write (and its day's block) and leaves a mark, so the compactor makes it
//! again. Whichever of the two comes second sees the other: no block outlives a change
//! to its hour. A day block is made the same way from its hours' blocks, and checked
//! against them again after it is written.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stacklens_core::model::{Label, LabelValue, Profile, StrId};

use super::selector::Selector;
use super::series::{hour_numbers, is_closed, may_be_closed_anywhere, Entry, Series, HOUR_MS};
use super::Result;
use crate::store::Store;

/// The numeric label that tags a block's sample as one entry's: the entry's number in
/// the footer (see [`Tag`]).
const ENTRY_LABEL: &str = "stacklens.block.entry";
/// The numeric label that tags a block's sample as one label set's: the set's number.
const SET_LABEL: &str = "stacklens.block.set";

const MAGIC: &[u8; 8] = b"SLBLOCK1";
/// The footer's length (u32, little-endian), its SHA-256, the magic.
const TRAILER: usize = 4 + 32 + MAGIC.len();
/// What a footer-only read asks for: most footers fit (360 entries of a few labels are
/// about 15 KB gzipped).
const TAIL_GUESS: u64 = 64 << 10;
/// The most a footer may inflate to (an hour of 10,000 entries is a few MB).
const MAX_FOOTER: u64 = 64 << 20;
/// Footers read at once for one series answer.
const FOOTERS_AHEAD: usize = 16;
/// The hours of a day block.
pub const DAY_HOURS: u64 = 24;

/// A stored profile as a block keeps it: its index entry and the header fields a merge
/// of a part of the block needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockEntry {
    #[serde(flatten)]
    pub entry: Entry,
    /// The number of its label set: entries of equal labels share one.
    pub set: usize,
    pub time_nanos: i64,
    pub duration_nanos: i64,
    pub period: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Footer {
    /// Its first hour (hours since the epoch).
    pub hour: u64,
    /// How many hours it holds: 1, or [`DAY_HOURS`] for a day block (which holds its
    /// label sets' samples only).
    #[serde(default = "one_hour")]
    pub hours: u64,
    /// The hour's entries whose profiles went in, oldest first.
    pub entries: Vec<BlockEntry>,
    /// The payload's length and SHA-256 (hex).
    pub payload_len: u64,
    pub payload_sha256: String,
}

fn one_hour() -> u64 {
    1
}

impl Footer {
    /// Whether `[from, to)` covers the block's hours whole.
    pub fn within(&self, from: u64, to: u64) -> bool {
        let start = self.hour * HOUR_MS;
        from <= start && start + self.hours * HOUR_MS <= to
    }
}

/// Why a stored block cannot be used (it is made again from raw).
#[derive(Debug, thiserror::Error)]
#[error("block {key} is damaged: {reason}")]
pub struct Damaged {
    pub key: String,
    pub reason: String,
}

/// A block as read: valid, absent, or damaged.
pub enum Read<T> {
    Valid(T),
    Missing,
    Damaged(Damaged),
}

impl Series {
    /// Where the block of `hour` is.
    pub fn block_key(&self, hour: u64) -> String {
        format!("{}/h{hour}.block", self.folder("blocks"))
    }

    /// Where the block of `day` (days since the epoch) is.
    pub fn day_block_key(&self, day: u64) -> String {
        format!("{}/d{day}.block", self.folder("blocks"))
    }

    /// Where changes to hours mark them for the compactor (see [`changed`]).
    pub fn changed_prefix(&self) -> String {
        format!("{}/changed", self.folder("blocks"))
    }
}

/// Clears an hour's block and its day's after a change to the hour (an entry filed or
/// removed), and marks the hour for the compactor (`mark` names the change, so that two
/// marks never collide and the compactor removes only those it saw).
pub async fn changed(store: &Store, series: &Series, hour: u64, mark: &str) -> Result<()> {
    store.create(&format!("{}/h{hour}-{mark}", series.changed_prefix()), Bytes::new()).await?;
    // Looked for before they are deleted: a storm of pushes into one old hour would
    // otherwise send as many deletes of one key at once, which an S3 server may answer
    // slowly or not at all (SeaweedFS did). A block made after this look was made after
    // the mark and the change, and its maker's second look sees the change.
    for block in [series.block_key(hour), series.day_block_key(hour / DAY_HOURS)] {
        if store.exists(&block).await? {
            store.delete(&block).await?;
        }
    }
    Ok(())
}

/// [`changed`] for the hour of the entry filed at `entry_key` (see [`Series::entry_key`]),
/// when that hour may have a block by now.
pub async fn entry_changed(store: &Store, entry_key: &str, mark: &str, now: u64) -> Result<()> {
    match Series::of_entry_key(entry_key) {
        Some((series, hour)) if may_be_closed_anywhere(hour, now) => changed(store, &series, hour, mark).await,
        _ => Ok(()),
    }
}

/// A part of a range as blocks serve it: an hour, or a closed day the range takes whole.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Window {
    Hour(u64),
    Day(u64),
}

impl Window {
    /// The hours it spans.
    pub fn hours(self) -> std::ops::Range<u64> {
        match self {
            Window::Hour(n) => n..n + 1,
            Window::Day(d) => d * DAY_HOURS..(d + 1) * DAY_HOURS,
        }
    }
}

/// The windows of `[from, to)`, oldest first: the closed days it takes whole, and hours.
pub fn windows(from: u64, to: u64, now: u64) -> Vec<Window> {
    let mut out = Vec::new();
    let mut hours = hour_numbers(from, to);
    while let Some(n) = hours.next() {
        let day = Window::Day(n / DAY_HOURS);
        let span = day.hours();
        if n == span.start && from <= span.start * HOUR_MS && span.end * HOUR_MS <= to && is_closed(span.end - 1, now) {
            out.push(day);
            hours.nth(DAY_HOURS as usize - 2);
        } else {
            out.push(Window::Hour(n));
        }
    }
    out
}

/// What a sample of a block belongs to: one entry's profile (for ranges that cut the
/// hour), or one label set's, the profiles of its entries merged (for ranges that take
/// the hour whole: fewer samples to read).
#[derive(Copy, Clone, Debug)]
pub enum Tag {
    Entry(usize),
    Set(usize),
}

impl Tag {
    fn parts(self) -> (&'static str, usize) {
        match self {
            Tag::Entry(n) => (ENTRY_LABEL, n),
            Tag::Set(n) => (SET_LABEL, n),
        }
    }
}

/// Tags each sample of `profile` (replacing the tag an earlier call gave it): what a
/// profile becomes before it goes into a block, once per tag.
pub fn tag(profile: &mut Profile, tag: Tag) {
    let (name, n) = tag.parts();
    let key = profile.strings.intern(name);
    let ours = [profile.strings.intern(ENTRY_LABEL), profile.strings.intern(SET_LABEL)];
    let label = Label { key, value: LabelValue::Num { value: n as i64, unit: StrId(0) } };
    profile.samples.retain(|sample| {
        match sample.labels.last_mut() {
            Some(last) if ours.contains(&last.key) => *last = label.clone(),
            _ => sample.labels.push(label.clone()),
        }
        true
    });
}

/// Keeps the samples of the entries `wanted` says yes to, without their tags, and sets
/// the header as a merge of those entries' profiles has it. With `whole` (the range
/// takes the hour whole, so `wanted` judges by labels alone) the label sets' merged
/// samples are kept, else the entries' own. The caller merges the result (which joins
/// the samples that only their tags kept apart).
pub fn select(profile: &mut Profile, footer: &Footer, whole: bool, wanted: impl Fn(&BlockEntry) -> bool) {
    let picked: Vec<bool> = footer.entries.iter().map(wanted).collect();
    let mut sets = Vec::new();
    for (entry, &picked) in footer.entries.iter().zip(&picked) {
        if sets.len() <= entry.set {
            sets.resize(entry.set + 1, false);
        }
        sets[entry.set] |= picked;
    }
    debug_assert!(whole || footer.hours == 1, "a day block holds label sets only");
    let (name, keep) = if whole { (SET_LABEL, &sets) } else { (ENTRY_LABEL, &picked) };
    let key = profile.strings.intern(name);
    profile.samples.retain(|sample| match sample.labels.pop() {
        Some(Label { key: k, value: LabelValue::Num { value, .. } }) if k == key => {
            usize::try_from(value).ok().and_then(|i| keep.get(i).copied()).unwrap_or(false)
        }
        _ => false,
    });
    let chosen = || footer.entries.iter().zip(&picked).filter(|(_, p)| **p).map(|(e, _)| e);
    profile.time_nanos = chosen().map(|e| e.time_nanos).filter(|&t| t != 0).min().unwrap_or(0);
    profile.duration_nanos = chosen().fold(0i64, |sum, e| sum.saturating_add(e.duration_nanos));
    profile.period = chosen().map(|e| e.period).max().unwrap_or(0);
}

/// Keeps the label sets' samples of an hour block's payload, numbered as `sets` maps
/// the hour's set numbers (to its day's): what an hour gives its day block.
pub fn renumber_sets(profile: &mut Profile, sets: &[usize]) {
    let key = profile.strings.intern(SET_LABEL);
    profile.samples.retain(|sample| match sample.labels.last_mut() {
        Some(Label { key: k, value: LabelValue::Num { value, .. } }) if *k == key => {
            match usize::try_from(*value).ok().and_then(|i| sets.get(i)) {
                Some(&n) => {
                    *value = n as i64;
                    true
                }
                None => false,
            }
        }
        _ => false,
    });
}

/// The block's bytes: `payload` (an encoded pprof, empty when no profile went in), the
/// footer, the trailer. It holds `hours` hours from `hour`.
pub fn encode(payload: &[u8], (hour, hours): (u64, u64), entries: Vec<BlockEntry>) -> Result<Vec<u8>> {
    let footer = Footer {
        hour,
        hours,
        entries,
        payload_len: payload.len() as u64,
        payload_sha256: hex::encode(Sha256::digest(payload)),
    };
    // Gzipped: its entries repeat their keys and labels (a third of the block otherwise).
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    serde_json::to_writer(&mut gz, &footer)?;
    let footer = gz.finish().expect("writing to memory cannot fail");
    let mut out = Vec::with_capacity(payload.len() + footer.len() + TRAILER);
    out.extend_from_slice(payload);
    out.extend_from_slice(&footer);
    out.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&footer));
    out.extend_from_slice(MAGIC);
    Ok(out)
}

/// The footer of a block whose last bytes are `tail`, and where the footer starts in
/// the block; `Err` with the reason when damaged, `Ok(None)` when `tail` is too short to
/// hold the footer.
fn footer_in(tail: &[u8], block_len: Option<u64>) -> Result<Option<(Footer, u64)>, String> {
    let Some(trailer_at) = tail.len().checked_sub(TRAILER) else { return Err("shorter than its trailer".into()) };
    let trailer = &tail[trailer_at..];
    if &trailer[36..] != MAGIC {
        return Err("no block magic at its end".into());
    }
    let footer_len = u32::from_le_bytes(trailer[..4].try_into().expect("4 bytes")) as usize;
    let Some(footer_at) = trailer_at.checked_sub(footer_len) else {
        return match block_len {
            // The whole block was read: the length is wrong.
            Some(_) => Err(format!("its footer length {footer_len} is longer than the block")),
            None => Ok(None),
        };
    };
    let footer = &tail[footer_at..trailer_at];
    if Sha256::digest(footer)[..] != trailer[4..36] {
        return Err("its footer's checksum does not match".into());
    }
    let json = std::io::Read::take(flate2::read::GzDecoder::new(footer), MAX_FOOTER);
    let footer: Footer =
        serde_json::from_reader(std::io::BufReader::new(json)).map_err(|e| format!("its footer is unreadable: {e}"))?;
    let start = footer.payload_len;
    if block_len.is_some_and(|len| len != start + (footer_len + TRAILER) as u64) {
        return Err("its payload length does not match its size".into());
    }
    Ok(Some((footer, start)))
}

/// The footer of the block at `key`, reading only the block's tail (twice when the
/// footer is longer than a first guess: then exactly its length).
pub async fn read_footer(store: &Store, key: &str) -> Result<Read<Footer>> {
    let damaged = |reason: String| Read::Damaged(Damaged { key: key.to_owned(), reason });
    let Some(tail) = store.get_tail(key, TAIL_GUESS).await? else { return Ok(Read::Missing) };
    let whole = (tail.len() as u64) < TAIL_GUESS;
    match footer_in(&tail, whole.then_some(tail.len() as u64)) {
        Ok(Some((footer, _))) => Ok(Read::Valid(footer)),
        Ok(None) => {
            let stated = u32::from_le_bytes(tail[tail.len() - TRAILER..][..4].try_into().expect("4 bytes"));
            let Some(tail) = store.get_tail(key, (stated as usize + TRAILER) as u64).await? else {
                return Ok(Read::Missing);
            };
            Ok(match footer_in(&tail, None) {
                Ok(Some((footer, _))) => Read::Valid(footer),
                Ok(None) => damaged("it changed while it was read".into()),
                Err(reason) => damaged(reason),
            })
        }
        Err(reason) => Ok(damaged(reason)),
    }
}

/// The entries of `[from, to)` whose labels match, oldest first: a closed hour's from
/// its block's footer, the others' from their listings (closed hours' listings cached
/// when `write_cache`).
pub async fn range(
    store: &Store,
    series: &Series,
    (from, to): (u64, u64),
    labels: &Selector,
    now: u64,
    write_cache: bool,
) -> Result<Vec<Entry>> {
    let hour_entries = |number: u64| async move {
        if is_closed(number, now) {
            match read_footer(store, &series.block_key(number)).await? {
                Read::Valid(footer) => return Ok(footer.entries.into_iter().map(|e| e.entry).collect()),
                Read::Damaged(damaged) => tracing::warn!("{damaged}; the hour's entries are read one by one"),
                Read::Missing => {}
            }
        }
        series.entries(store, &series.hour(store, number, now).await?, write_cache).await
    };
    let per_window: Vec<Vec<Entry>> = futures::stream::iter(windows(from, to, now))
        .map(|window| async move {
            if let Window::Day(day) = window {
                match read_footer(store, &series.day_block_key(day)).await? {
                    Read::Valid(footer) => return Ok(footer.entries.into_iter().map(|e| e.entry).collect()),
                    Read::Damaged(damaged) => tracing::warn!("{damaged}; the day is read hour by hour"),
                    Read::Missing => {}
                }
            }
            let hours: Vec<Vec<Entry>> =
                futures::stream::iter(window.hours()).map(hour_entries).buffered(FOOTERS_AHEAD).try_collect().await?;
            Ok::<_, super::RecordError>(hours.into_iter().flatten().collect())
        })
        .buffered(FOOTERS_AHEAD)
        .try_collect()
        .await?;
    Ok(per_window.into_iter().flatten().filter(|e| (from..to).contains(&e.millis) && e.matches(labels)).collect())
}

/// The block at `key`, whole: its footer and its payload (checked against the footer's
/// checksum; empty when no profile went in).
pub async fn read(store: &Store, key: &str) -> Result<Read<(Footer, Bytes)>> {
    let Some(block) = store.get(key).await? else { return Ok(Read::Missing) };
    Ok(match decode(&block) {
        Ok((footer, payload)) => Read::Valid((footer, block.slice(..payload))),
        Err(reason) => Read::Damaged(Damaged { key: key.to_owned(), reason }),
    })
}

/// The footer and the payload's length of a whole block.
fn decode(block: &[u8]) -> Result<(Footer, usize), String> {
    let (footer, payload_len) = footer_in(block, Some(block.len() as u64))?.expect("a whole block");
    let payload = &block[..payload_len as usize];
    if hex::encode(Sha256::digest(payload)) != footer.payload_sha256 {
        return Err("its payload's checksum does not match".into());
    }
    Ok((footer, payload_len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(millis: u64) -> BlockEntry {
        BlockEntry {
            entry: Entry {
                millis,
                session_id: stacklens_core::ids::SessionId::parse(&format!("sess-{millis:032x}")).unwrap(),
                labels: [("region".to_owned(), "eu".to_owned())].into(),
                sample_types: vec!["cpu".into()],
                units: vec!["nanoseconds".into()],
                totals: vec![7],
                default_index: 0,
                filed_by: None,
            },
            set: 0,
            time_nanos: millis as i64 * 1_000_000,
            duration_nanos: 10,
            period: 1,
        }
    }

    #[test]
    fn a_block_reads_back_and_any_changed_byte_is_found() {
        let block = encode(b"payload bytes", (7, 1), vec![entry(1), entry(2)]).unwrap();
        let (footer, payload) = decode(&block).unwrap();
        assert_eq!((footer.hour, footer.entries, payload), (7, vec![entry(1), entry(2)], 13));
        for at in 0..block.len() {
            let mut changed = block.clone();
            changed[at] ^= 0x20;
            assert!(decode(&changed).is_err(), "a change at byte {at} of {} went unnoticed", block.len());
        }
        for cut in 0..block.len() {
            assert!(decode(&block[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(&block[1..]).is_err(), "the first byte cut off");
    }

    #[test]
    fn a_range_takes_closed_days_whole_and_the_rest_by_hour() {
        let (h, d) = (HOUR_MS, DAY_HOURS * HOUR_MS);
        let now = 10 * d;
        // Day 2 whole, between an hour of day 1 and two of day 3.
        let w = windows(2 * d - h, 3 * d + 2 * h, now);
        let hours = |from: u64, to: u64| (from..to).map(Window::Hour).collect::<Vec<_>>();
        assert_eq!(w, [hours(47, 48), vec![Window::Day(2)], hours(72, 74)].concat());
        // Days are never cut: a range one hour short of a day is hours.
        assert_eq!(windows(2 * d, 3 * d - h, now), hours(48, 71));
        // A day not closed yet (its last hour is not) is hours.
        assert_eq!(windows(2 * d, 3 * d, 3 * d), hours(48, 72));
        assert_eq!(windows(2 * d, 4 * d, now), [Window::Day(2), Window::Day(3)]);
    }

    #[test]
    fn a_tail_holds_the_footer_or_says_it_needs_more() {
        let block = encode(&[9; 1000], (3, 1), vec![entry(5)]).unwrap();
        let (footer, start) = footer_in(&block[900..], None).unwrap().unwrap();
        assert_eq!((footer.entries.len(), start), (1, 1000));
        assert!(footer_in(&block[block.len() - TRAILER - 3..], None).unwrap().is_none());
        assert!(footer_in(&block[block.len() - TRAILER - 3..], Some(50)).is_err());
    }
}
