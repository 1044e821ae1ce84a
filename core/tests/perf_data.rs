//! perf.data read directly, checked against perf itself: the same recording opened as
//! perf.data and as its `perf script` text is the same profile (totals, stacks by
//! address and file, comm/pid/tid); totals equal what `perf script` counts at test time;
//! build ids equal `perf buildid-list`; truncated and corrupt files are typed errors.
//! `symwork-c.pipe` is pipe mode (`perf record -o -` through `perf inject -b`); the
//! `symwork-c.zstd` recordings are `perf record -z` (a file, a long one and a pipe).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::{LabelValue, SourceFormat};
use stacklens_core::Profile;

const RECORDINGS: [&str; 8] = [
    "symwork-c",
    "symwork-cpp",
    "symwork-go-s",
    "symwork-cpp.events",
    "symwork-c.pipe",
    "symwork-c.zstd",
    "symwork-c.zstd-long",
    "symwork-c.zstd-pipe",
];

fn perf() -> bool {
    let found = Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        missing_prerequisite("perf (Debian package linux-perf)");
    }
    found
}

/// Each sample as (stack of (address, mapping file), comm and thread, values), sorted.
/// The thread is the tid, else the pid: perf script's default prints one number, the
/// thread's id, which its importer files as the pid.
/// Values by sample type name: perf script's events come in the order they first
/// appear, perf.data's in the order they were asked for.
type Shape = Vec<(Vec<(u64, String)>, (String, i64), BTreeMap<String, i64>)>;

fn shape(p: &Profile) -> Shape {
    let mut out: Shape = p
        .samples
        .iter()
        .map(|s| {
            let stack = s
                .locations
                .iter()
                .map(|&l| {
                    let location = p.location(l);
                    let file = location.mapping.map_or(String::new(), |m| p.str(p.mapping(m).filename).to_owned());
                    (location.address, file)
                })
                .collect();
            let (mut comm, mut pid, mut tid) = (String::new(), None, None);
            for l in s.labels.iter() {
                match (p.str(l.key), &l.value) {
                    ("comm", LabelValue::Str(v)) => comm = p.str(*v).to_owned(),
                    ("pid", LabelValue::Num { value, .. }) => pid = Some(*value),
                    ("tid", LabelValue::Num { value, .. }) => tid = Some(*value),
                    (key, _) => panic!("unexpected label {key}"),
                }
            }
            let values = s.values.iter().enumerate().map(|(i, &v)| (p.sample_type_name(i).to_owned(), v)).collect();
            (stack, (comm, tid.or(pid).unwrap_or(-1)), values)
        })
        .collect();
    out.sort();
    out
}

fn types(p: &Profile) -> Vec<(String, String)> {
    (0..p.sample_types.len()).map(|i| (p.sample_type_name(i).to_owned(), p.sample_type_unit(i).to_owned())).collect()
}

#[test]
fn a_recording_read_as_perf_data_is_the_profile_of_its_perf_script_text() {
    let Some(dir) = symbol_fixtures() else { return };
    for name in RECORDINGS {
        let bytes = read(&dir.join(format!("{name}.perf.data")));
        assert_eq!(detect(&bytes), Format::Of(SourceFormat::PerfData), "{name}");
        let data = stacklens_core::parse(&bytes).unwrap();
        let script = stacklens_core::parse(&read(&dir.join(format!("{name}.perf-script.txt")))).unwrap();
        let totals = |p: &Profile| -> BTreeMap<(String, String), i64> {
            types(p).into_iter().enumerate().map(|(i, t)| (t, p.total(i))).collect()
        };
        assert_eq!(totals(&data), totals(&script), "{name}: sample types and totals");
        let (ours, perfs) = (shape(&data), shape(&script));
        let first_difference = ours.iter().zip(&perfs).find(|(a, b)| a != b);
        assert!(
            ours.len() == perfs.len() && first_difference.is_none(),
            "{name}: {} and {} samples; first difference {first_difference:?}",
            ours.len(),
            perfs.len()
        );
        // perf script prints times in microseconds; perf.data keeps nanoseconds.
        let near = |a: i64, b: i64| (a - b).abs() <= 2_000;
        assert!(near(data.duration_nanos, script.duration_nanos), "{name}: duration");
        assert_eq!(data.sample_times.len(), script.sample_times.len(), "{name}: timed samples");
        for (ours, perfs) in data.sample_times.iter().zip(&script.sample_times) {
            assert!(near(ours.start, perfs.start) && near(ours.duration, perfs.duration), "{name}: {ours:?} {perfs:?}");
        }
    }
}

/// Per event: samples and the sum of periods, as `perf script -F event,period` prints them.
fn perf_counts(file: &Path) -> BTreeMap<String, (i64, i64)> {
    let out = Command::new("perf").args(["script", "-F", "event,period", "-i"]).arg(file).output().unwrap();
    assert!(out.status.success(), "perf script: {}", String::from_utf8_lossy(&out.stderr));
    let mut counts = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut words = line.split_whitespace();
        // A pipe's samples come with their callchains whatever -F says: lines that are
        // not "PERIOD EVENT:" are frames.
        let (Some(period), Some(event)) = (words.next(), words.next()) else { continue };
        if !event.ends_with(':') || line.starts_with('\t') {
            continue;
        }
        let event = event.trim_end_matches(':').split(':').next().unwrap().to_owned();
        let entry = counts.entry(event).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += period.parse::<i64>().unwrap();
    }
    counts
}

#[test]
fn each_events_samples_and_periods_equal_what_perf_counts() {
    let Some(dir) = symbol_fixtures() else { return };
    if !perf() {
        return;
    }
    for name in RECORDINGS {
        let file = dir.join(format!("{name}.perf.data"));
        let p = stacklens_core::parse(&read(&file)).unwrap();
        let expected = perf_counts(&file);
        let single = expected.len() == 1;
        for (event, (samples, periods)) in &expected {
            let count_type = if single { "samples".to_owned() } else { format!("{event}_samples") };
            let index = |t: &str| (0..p.sample_types.len()).find(|&i| p.sample_type_name(i) == t);
            let counted = index(&count_type).unwrap_or_else(|| panic!("{name}: no {count_type} in {:?}", types(&p)));
            assert_eq!(p.total(counted), *samples, "{name}: {event} samples");
            assert_eq!(p.total(index(event).unwrap()), *periods, "{name}: {event} periods");
        }
    }
}

#[test]
fn mapping_build_ids_are_those_perf_lists() {
    let Some(dir) = symbol_fixtures() else { return };
    if !perf() {
        return;
    }
    // The file's build-id section, and a pipe's HEADER_BUILD_ID records.
    for name in ["symwork-c", "symwork-c.pipe"] {
        let file = dir.join(format!("{name}.perf.data"));
        let out = Command::new("perf").args(["buildid-list", "-i"]).arg(&file).output().unwrap();
        let listed: BTreeMap<String, String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(id, path)| (path.to_owned(), id.to_owned())))
            .collect();
        let p = stacklens_core::parse(&read(&file)).unwrap();
        let ours: BTreeMap<String, String> = p
            .mappings
            .iter()
            .filter(|m| !p.str(m.build_id).is_empty())
            .map(|m| (p.str(m.filename).to_owned(), p.str(m.build_id).to_owned()))
            .collect();
        assert!(ours.keys().any(|f| f.ends_with("/symwork-c.stripped")), "{name}: {ours:?}");
        for (file, id) in &ours {
            assert_eq!(listed.get(file), Some(id), "{name}: {file}; perf lists {listed:?}");
        }
    }
}

#[test]
fn truncated_and_corrupt_files_are_errors_not_panics() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.perf.data"));
    for cut in (0..bytes.len()).step_by(97) {
        let _ = stacklens_core::parse(&bytes[..cut]);
    }
    assert!(stacklens_core::parse(&bytes[..200]).is_err());
    let mut corrupt = bytes.clone();
    for at in (8..corrupt.len()).step_by(131) {
        corrupt[at] ^= 0x5a;
        let _ = stacklens_core::parse(&corrupt);
    }
}

/// The records in `bytes[range]` as (offset, type, size).
fn records_in(bytes: &[u8], range: std::ops::Range<usize>) -> Vec<(usize, u32, usize)> {
    let mut out = Vec::new();
    let mut at = range.start;
    while at + 8 <= range.end {
        let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let size = usize::from(u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()));
        out.push((at, kind, size));
        at += size;
    }
    out
}

/// A pipe's records, from its 16-byte header on.
fn pipe_records(bytes: &[u8]) -> Vec<(usize, u32, usize)> {
    records_in(bytes, 16..bytes.len())
}

/// A file's records: those of its data section.
fn file_records(bytes: &[u8]) -> Vec<(usize, u32, usize)> {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    records_in(bytes, word(40)..word(40) + word(48))
}

#[test]
fn a_pipes_truncated_corrupt_and_endless_records_are_errors_not_panics() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.pipe.perf.data"));
    assert_eq!(&bytes[8..16], &16u64.to_le_bytes(), "the fixture is in pipe mode");
    for cut in (0..bytes.len()).step_by(89) {
        let _ = stacklens_core::parse(&bytes[..cut]);
    }
    let mut corrupt = bytes.clone();
    for at in (16..corrupt.len()).step_by(127) {
        corrupt[at] ^= 0x5a;
        let _ = stacklens_core::parse(&corrupt);
    }
    let records = pipe_records(&bytes);
    // A record of size 0 would be read forever.
    let (sample_at, ..) = *records.iter().find(|r| r.1 == 9).expect("a sample record");
    let mut endless = bytes.clone();
    endless[sample_at + 6..sample_at + 8].copy_from_slice(&0u16.to_le_bytes());
    let error = stacklens_core::parse(&endless).unwrap_err().to_string();
    assert!(error.contains("less than its own header"), "{error}");
    // A sample turned into an AUXTRACE record whose trace would be 2^62 bytes.
    let mut claiming = bytes.clone();
    claiming[sample_at..sample_at + 4].copy_from_slice(&71u32.to_le_bytes());
    claiming[sample_at + 8..sample_at + 16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("of trace) lies past the end"), "{error}");
    // The event description's count claims 2^31 events (the crate reserves what it claims).
    let (desc_at, ..) = *records
        .iter()
        .find(|&&(at, kind, _)| kind == 80 && bytes[at + 8..at + 16] == 12u64.to_le_bytes())
        .expect("an EVENT_DESC feature record");
    let mut claiming = bytes.clone();
    claiming[desc_at + 16..desc_at + 20].copy_from_slice(&(1u32 << 31).to_le_bytes());
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("past the end"), "{error}");
    // The same with high bits in the feature's number, which the crate drops (it reads
    // the u64 as u32): a 755 GB allocation found by the perf_data target after 6.8 M
    // executions.
    claiming[desc_at + 15] = 0x2e;
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("past the end"), "{error}");
    assert!(!stacklens_core::parse(&bytes).unwrap().samples.is_empty());
}

#[test]
fn a_finished_round_record_with_a_body_is_an_error_not_an_allocation() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.perf.data"));
    let (at, ..) = *file_records(&bytes)
        .iter()
        .find(|&&(_, kind, size)| kind == 9 && size >= 40)
        .expect("a sample record of 40 bytes or more");
    // A sample record made a FINISHED_ROUND of the same size, its body an AUXTRACE
    // record claiming 2^62 bytes of trace: the reader skips the round's header alone and
    // reads the body as records (found by the perf_data target).
    let mut round = bytes.clone();
    round[at..at + 4].copy_from_slice(&68u32.to_le_bytes());
    round[at + 8..at + 12].copy_from_slice(&71u32.to_le_bytes());
    round[at + 14..at + 16].copy_from_slice(&24u16.to_le_bytes());
    round[at + 16..at + 24].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let error = stacklens_core::parse(&round).unwrap_err().to_string();
    assert!(error.contains("FINISHED_ROUND"), "{error}");
}

/// The zstd payload of each compressed record (type 81) of a file's data section.
fn compressed_payloads(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    file_records(bytes).into_iter().filter(|r| r.1 == 81).map(|(at, _, size)| at + 8..at + size).collect()
}

#[test]
fn compressed_records_inflate_within_the_limit_and_corrupt_ones_are_errors() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.zstd-long.perf.data"));
    let payloads = compressed_payloads(&bytes);
    assert!(payloads.len() > 2, "{} compressed records", payloads.len());
    // Inflated, the records outgrow a limit set below their size: a typed error.
    let small = stacklens_core::import::ParseOptions { max_inflated_bytes: 1 << 20, ..Default::default() };
    let error = stacklens_core::import::parse_with(&bytes, &small).unwrap_err();
    assert!(matches!(error, stacklens_core::Error::TooLarge { limit } if limit == 1 << 20), "{error}");
    // A zstd frame that does not begin with zstd's magic.
    let mut corrupt = bytes.clone();
    corrupt[payloads[0].start] ^= 0xff;
    let error = stacklens_core::parse(&corrupt).unwrap_err().to_string();
    assert!(error.contains("zstd"), "{error}");
    // Garbage in the middle of the stream (0xa5: a last block larger than what follows).
    let mut garbled = bytes.clone();
    garbled[payloads[1].clone()].iter_mut().for_each(|b| *b = 0xa5);
    let error = stacklens_core::parse(&garbled).unwrap_err().to_string();
    assert!(error.contains("zstd"), "{error}");
    // Cut short inside a compressed record.
    let error = stacklens_core::parse(&bytes[..payloads[1].start + 10]).unwrap_err().to_string();
    assert!(error.contains("perf.data"), "{error}");
}

#[test]
fn sizes_past_the_end_of_the_file_are_errors_not_allocations() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.perf.data"));
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
    // The feature table follows the data section; its first entry's size claims 2^62 bytes
    // (linux-perf-data would allocate that before reading; found by the perf_data target).
    let table = word(&bytes, 40) + word(&bytes, 48);
    let mut corrupt = bytes.clone();
    corrupt[table + 8..table + 16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let error = stacklens_core::parse(&corrupt).unwrap_err().to_string();
    assert!(error.contains("perf.data") && error.contains("past the end"), "{error}");
    // An AUXTRACE record claiming 2^62 bytes of trace after it: the crate resizes its
    // buffer to that before reading (found by the perf_data target).
    let data = word(&bytes, 40);
    let mut claiming = bytes.clone();
    claiming[data..data + 4].copy_from_slice(&71u32.to_le_bytes());
    claiming[data + 8..data + 16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("of trace) lies past the end"), "{error}");
    // An MMAP2 record that says it carries a build id of 200 bytes: the reader asserts
    // 20 at most (a panic found by the perf_data target).
    let (mut at, end) = (data, word(&bytes, 40) + word(&bytes, 48));
    while at < end && u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) != 10 {
        at += u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize;
    }
    assert!(at < end, "the recording has an MMAP2 record");
    let mut claiming = bytes.clone();
    let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().unwrap()) | 1 << 14;
    claiming[at + 4..at + 6].copy_from_slice(&misc.to_le_bytes());
    claiming[at + 8 + 32] = 200;
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("build id is longer than 20 bytes"), "{error}");
    // The same MMAP2's page offset near 2^64: a frame's file offset overflowed (found by
    // the perf_data target); it wraps as perf's does and the file reads.
    let mut far = bytes.clone();
    far[at + 8 + 24..at + 8 + 32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(!stacklens_core::parse(&far).unwrap().samples.is_empty());
    // An old-style event types section (an attribute, then its ids' section) whose ids
    // claim 2^40 of them: the crate reserves room for that many before reading (an
    // allocation of 290 GB found by the perf_data target after 8.7 M executions).
    let (attrs, attr_size) = (word(&bytes, 24), word(&bytes, 16));
    let mut claiming = bytes.clone();
    claiming[56..64].copy_from_slice(&(attrs as u64).to_le_bytes());
    claiming[64..72].copy_from_slice(&(attr_size as u64 + 16).to_le_bytes());
    let ids = attrs + attr_size;
    claiming[ids..ids + 8].copy_from_slice(&0u64.to_le_bytes());
    claiming[ids + 8..ids + 16].copy_from_slice(&(8u64 << 40).to_le_bytes());
    let error = stacklens_core::parse(&claiming).unwrap_err().to_string();
    assert!(error.contains("event type ids section") && error.contains("past the end"), "{error}");
    // Attributes of 0 bytes: linux-perf-data 0.13 divides the section by their size
    // (found by the perf_data target); of 1 byte it would reserve one per byte.
    for size in [0u64, 1, 79] {
        let mut corrupt = bytes.clone();
        corrupt[16..24].copy_from_slice(&size.to_le_bytes());
        let error = stacklens_core::parse(&corrupt).unwrap_err().to_string();
        assert!(error.contains(&format!("attributes of {size} bytes")), "{error}");
    }
    // The file as it was still reads: the check refuses only what does not fit.
    assert!(!stacklens_core::parse(&bytes).unwrap().samples.is_empty());
}

#[test]
fn a_callchain_longer_than_its_record_is_an_error_not_an_overflow() {
    let Some(dir) = symbol_fixtures() else { return };
    let bytes = read(&dir.join("symwork-c.perf.data"));
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    // perf.data's header: the attributes' section at 24, the data section at 40; the first
    // attribute's sample_type is its fourth word.
    let sample_type = word(&bytes, word(&bytes, 24) as usize + 24);
    const IP: u64 = 1 << 0;
    const TID: u64 = 1 << 1;
    const TIME: u64 = 1 << 2;
    const ADDR: u64 = 1 << 3;
    const READ: u64 = 1 << 4;
    const CALLCHAIN: u64 = 1 << 5;
    const ID: u64 = 1 << 6;
    const CPU: u64 = 1 << 7;
    const PERIOD: u64 = 1 << 8;
    const STREAM_ID: u64 = 1 << 9;
    const IDENTIFIER: u64 = 1 << 16;
    assert!(sample_type & CALLCHAIN != 0 && sample_type & READ == 0, "perf record -g: {sample_type:#x}");
    let before = [IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD];
    let words = before.iter().filter(|&&f| sample_type & f != 0).count();
    // The first PERF_RECORD_SAMPLE (type 9) of the data section gets a chain of 2^61 frames.
    let (mut at, end) = (word(&bytes, 40) as usize, (word(&bytes, 40) + word(&bytes, 48)) as usize);
    while at < end && u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) != 9 {
        at += u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize;
    }
    assert!(at < end, "the recording has a sample");
    let chain = at + 8 + 8 * words;
    let mut corrupt = bytes.clone();
    corrupt[chain..chain + 8].copy_from_slice(&(1u64 << 61).to_le_bytes());
    let error = stacklens_core::parse(&corrupt).unwrap_err().to_string();
    assert!(error.contains("callchain is longer than its record"), "{error}");
    assert!(!stacklens_core::parse(&bytes).unwrap().samples.is_empty());
    // The same sample's time set past i64's nanoseconds: the duration was computed with
    // it as a negative time and overflowed (found by the perf_data target). It has no
    // time now; the others keep theirs.
    let time = at + 8 + 8 * [IDENTIFIER, IP, TID].iter().filter(|&&f| sample_type & f != 0).count();
    assert!(sample_type & TIME != 0);
    let mut corrupt = bytes.clone();
    corrupt[time..time + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let p = stacklens_core::parse(&corrupt).unwrap();
    assert!(p.duration_nanos > 0 && p.duration_nanos < 3_600_000_000_000, "{}", p.duration_nanos);
}
