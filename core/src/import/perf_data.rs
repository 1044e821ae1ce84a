//! Linux `perf.data` (`perf record`'s file, magic `PERFILE2`), read with the
//! `linux-perf-data` crate (samply's reader; pure Rust, builds for wasm32) and modelled
//! exactly as its `perf script` text is ([`super::perf_script`]): each sample becomes a
//! record with its event, period, time, comm/pid/tid and frames, leaf first, and the
//! same code turns records into samples. So one recording gives one profile whichever
//! form is opened.
//!
//! * Frames: the callchain's addresses (user and kernel; `PERF_CONTEXT_*` markers
//!   skipped), or the sample's ip without one. A user address inside a `MMAP`/`MMAP2`
//!   of its process becomes, as perf script prints it, its file offset in that file
//!   (`address − start + page offset`) with the file as its mapping; kernel addresses
//!   stay as they are under `[kernel.kallsyms]` (or their module); others are
//!   `[unknown]`. perf.data holds no names, so every frame waits for symbolization.
//! * Mappings get the build ids of the file's build-id feature section (and of
//!   `MMAP2` records that carry one), which symbolization checks binaries against.
//! * Events: each attribute's name from the event-description feature section, its
//!   modifiers dropped (`cpu-clock:u` → `cpu-clock`), as perf script names them.
//! * `comm` is the thread's latest `COMM` before the sample (a `FORK` gives the new
//!   thread its parent's); `pid`, and `tid` for threads
//!   other than the main one (perf script's default shows one number for it); hostname, perf version and
//!   command line become comments. Feature sections not named here are skipped.
//! * Files and pipes: `perf record -o -` writes no file header; its attributes and
//!   features come as records, and build ids as `HEADER_BUILD_ID` records (which
//!   `perf inject -b` adds to a pipe).
//! * `perf record -z`: its zstd-compressed records are unpacked first ([`inflate`]),
//!   at most [`super::ParseOptions::max_inflated_bytes`] of them.
//! * The crate sizes buffers from the file's counts before reading them: the layout
//!   is checked first ([`layout`]), so a corrupt file is an error, never an allocation
//!   of what it claims.

mod inflate;
mod layout;

use std::io::Cursor;

use linux_perf_data::linux_perf_event_reader::{
    Endianness, EventRecord, Mmap2FileId, RawData, RawEventRecord, ReadFormat, RecordType, SampleFormat,
};
use linux_perf_data::{Feature, PerfFileReader, PerfFileRecord, RawUserRecord, UserRecordType};
use rustc_hash::FxHashMap as HashMap;

use super::perf_script::{event_name, Event, FrameKey, Record, Samples};
use crate::model::{Profile, SourceFormat, StrId};
use crate::{Error, Result};

const FORMAT: &str = "perf.data";

/// Callchain entries at or above this are context markers (`PERF_CONTEXT_MAX`).
const CONTEXT_MARKER: u64 = -4095i64 as u64;
const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// The kernel's mapping (perf maps it as `[kernel.kallsyms]_text`).
const KERNEL: &str = "[kernel.kallsyms]";

/// Whether `bytes` start as a perf.data file does (either byte order).
pub fn looks_like_perf_data(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PERFILE2") || bytes.starts_with(b"2ELIFREP")
}

fn error(reason: impl std::fmt::Display) -> Error {
    Error::Binary { format: FORMAT, offset: 0, reason: reason.to_string() }
}

/// One `MMAP`/`MMAP2` of a process: file bytes from `offset` at `[start, end)`.
#[derive(Clone, Copy)]
struct Map {
    start: u64,
    end: u64,
    offset: u64,
    file: StrId,
}

fn text(raw: &RawData) -> String {
    String::from_utf8_lossy(&raw.as_slice()).into_owned()
}

/// Where the frames of each process fall, and the threads' names.
#[derive(Default)]
struct Processes {
    /// Per pid (-1: the kernel and its modules), in the order mapped: a later map of
    /// the same addresses replaces an earlier one.
    maps: HashMap<i32, Vec<Map>>,
    comms: HashMap<i32, StrId>,
    /// Build ids that `MMAP2` records carried, per file.
    build_ids: HashMap<StrId, Vec<u8>>,
    /// The kernel's text as perf placed it (`[kernel.kallsyms]_text`): start, end, and
    /// the address of `_text` as its page offset.
    kernel_text: Option<Map>,
}

impl Processes {
    fn map(&mut self, p: &mut Profile, pid: i32, (start, length, offset): (u64, u64, u64), path: &RawData) -> StrId {
        let path = text(path);
        // perf's own name for the kernel's text, as perf script prints it.
        let kernel = path.starts_with(KERNEL);
        let file = p.strings.intern(if kernel { KERNEL } else { &path });
        let map = Map { start, end: start.saturating_add(length), offset, file };
        if kernel {
            self.kernel_text = Some(map);
        }
        self.maps.entry(pid).or_default().push(map);
        file
    }

    /// The frame of `address` in process `pid`, as perf script prints it.
    fn frame(&self, p: &mut Profile, pid: i32, address: u64, kernel: bool) -> FrameKey {
        let found = |pid: i32| {
            let maps = self.maps.get(&pid)?;
            maps.iter().rev().find(|m| m.start <= address && address < m.end)
        };
        let in_process = if kernel { None } else { found(pid) };
        match in_process.or_else(|| found(-1)) {
            // A corrupt page offset wraps, as perf's u64 arithmetic does, not panics.
            Some(m) if !kernel => ((address - m.start).wrapping_add(m.offset), None, m.file, 0),
            Some(m) => (address, None, m.file, 0),
            None if kernel => (address, None, p.strings.intern(KERNEL), 0),
            None => (address, None, p.strings.intern("[unknown]"), 0),
        }
    }
}

/// Whether a sample record's callchain fits in the record. linux-perf-event-reader
/// multiplies the chain's length by 8 unchecked, which panics in builds with overflow
/// checks (tests, fuzzing) and wraps in release; a chain longer than its record is
/// refused here first. Records this cannot walk are left to the reader's own errors.
fn callchain_fits(record: &RawEventRecord) -> bool {
    let info = &record.parse_info;
    let format = info.sample_format;
    if record.record_type != RecordType::SAMPLE || !format.contains(SampleFormat::CALLCHAIN) {
        return true;
    }
    let mut cur = record.data;
    let word = |cur: &mut RawData| -> Option<u64> {
        let mut bytes = [0u8; 8];
        cur.read_exact(&mut bytes).ok()?;
        Some(match info.endian {
            Endianness::LittleEndian => u64::from_le_bytes(bytes),
            Endianness::BigEndian => u64::from_be_bytes(bytes),
        })
    };
    // The words before the callchain, in the order the reader reads them.
    let before = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut words = before.iter().filter(|&&f| format.contains(f)).count();
    if format.contains(SampleFormat::READ) {
        let read = info.read_format;
        let times = [ReadFormat::TOTAL_TIME_ENABLED, ReadFormat::TOTAL_TIME_RUNNING];
        let times = times.iter().filter(|&&f| read.contains(f)).count();
        let id = usize::from(read.contains(ReadFormat::ID));
        if read.contains(ReadFormat::GROUP) {
            words += 1 + times + id;
        } else {
            if cur.skip(words * 8).is_err() {
                return true;
            }
            let Some(values) = word(&mut cur) else { return true };
            let per_value = 8 * (1 + id as u64);
            match values.checked_mul(per_value).and_then(|b| b.checked_add(8 * times as u64)) {
                Some(bytes) if bytes <= cur.len() as u64 => words = bytes as usize / 8,
                _ => return true,
            }
        }
    }
    if cur.skip(words * 8).is_err() {
        return true;
    }
    let Some(length) = word(&mut cur) else { return true };
    length.checked_mul(8).is_some_and(|bytes| bytes <= cur.len() as u64)
}

/// A `HEADER_BUILD_ID` record's file and build id: a pid, 24 bytes of build id (its
/// length in byte 20 when the record's misc says so, else 20 bytes less trailing
/// zero words, as perf writes them), then the file's path ending in NULs.
fn build_id_record(record: &RawUserRecord) -> Option<(String, Vec<u8>)> {
    const SIZE_GIVEN: u16 = 1 << 15; // PERF_RECORD_MISC_BUILD_ID_SIZE
    let data = record.data.as_slice();
    let id = data.get(4..28)?;
    let len = if record.misc & SIZE_GIVEN != 0 {
        usize::from(id[20]).min(20)
    } else {
        id[..20].chunks(4).rposition(|word| word.iter().any(|&b| b != 0)).map_or(0, |last| 4 * (last + 1))
    };
    let path = &data[28..];
    let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
    Some((String::from_utf8_lossy(path).into_owned(), id[..len].to_vec()))
}

/// Whether an `MMAP2` record's build id, when it carries one, is at most 20 bytes long:
/// linux-perf-event-reader asserts it (a panic), so a longer one is refused here first.
fn mmap2_build_id_fits(record: &RawEventRecord) -> bool {
    // PERF_RECORD_MISC_MMAP_BUILD_ID; the length follows pid, tid, address, length and
    // page offset.
    const BUILD_ID: u16 = 1 << 14;
    const LENGTH_AT: usize = 4 + 4 + 8 + 8 + 8;
    if record.record_type != RecordType::MMAP2 || record.misc & BUILD_ID == 0 {
        return true;
    }
    let mut length = [0u8; 1];
    let mut cur = record.data;
    cur.skip(LENGTH_AT).is_err() || cur.read_exact(&mut length).is_err() || length[0] <= 20
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let records = layout::check(bytes).map_err(error)?;
    let inflated;
    let bytes = if records.compressed {
        inflated = inflate::inflate(bytes, &records, options.max_inflated_bytes).map_err(|e| match e {
            inflate::InflateError::TooLarge(limit) => Error::TooLarge { limit },
            inflate::InflateError::Corrupt(reason) => error(reason),
        })?;
        // What the compressed records held is checked as the file's own records are.
        if layout::check(&inflated).map_err(error)?.compressed {
            return Err(error("compressed records hold compressed records"));
        }
        &inflated[..]
    } else {
        bytes
    };
    let pipe = layout::is_pipe(bytes);
    let big_endian = bytes.starts_with(b"2ELIFREP");
    let reader = Cursor::new(bytes);
    let PerfFileReader { mut perf_file, mut record_iter } =
        if pipe { PerfFileReader::parse_pipe(reader) } else { PerfFileReader::parse_file(reader) }.map_err(error)?;
    let mut p = Profile::new(SourceFormat::PerfData);
    // Each attribute's event, with a weight column when its samples carry periods.
    let events: Vec<Event> = perf_file
        .event_attributes()
        .iter()
        .map(|a| {
            let name = a.name().map_or_else(|| "events".to_owned(), |n| event_name(n).to_owned());
            (name, a.attr.sample_format.contains(SampleFormat::PERIOD))
        })
        .collect();
    let mut samples = Samples::new(&mut p, &events);
    let mut sampled = false;
    // One record's frames at a time: the buffer is kept from one to the next.
    let mut current = Record {
        event: 0,
        period: None,
        time_nanos: None,
        thread: (StrId(0), None, None),
        frames: Vec::new(),
        inline_frame: None,
    };
    let mut processes = Processes::default();
    let (mut first, mut last) = (None::<i64>, None::<i64>);
    // Build ids by file: `HEADER_BUILD_ID` records' (a pipe's), then the feature
    // section's, then MMAP2's.
    let mut build_ids: HashMap<String, Vec<u8>> = HashMap::default();
    while let Some(record) = record_iter.next_record(&mut perf_file).map_err(error)? {
        let (attr_index, record) = match record {
            PerfFileRecord::EventRecord { attr_index, record } => (attr_index, record),
            PerfFileRecord::UserRecord(r) if r.record_type == UserRecordType::PERF_HEADER_BUILD_ID => {
                build_ids.extend(build_id_record(&r));
                continue;
            }
            PerfFileRecord::UserRecord(_) => continue,
        };
        if !callchain_fits(&record) {
            return Err(error("a sample's callchain is longer than its record"));
        }
        if !mmap2_build_id_fits(&record) {
            return Err(error("an MMAP2 record's build id is longer than 20 bytes"));
        }
        match record.parse().map_err(error)? {
            EventRecord::Comm(c) => {
                let name = p.strings.intern(&text(&c.name));
                processes.comms.insert(c.tid, name);
            }
            // A new thread or process has its parent's name until it names itself.
            EventRecord::Fork(f) => {
                if let Some(&name) = processes.comms.get(&f.ptid) {
                    processes.comms.insert(f.tid, name);
                }
            }
            EventRecord::Mmap(m) => {
                processes.map(&mut p, m.pid, (m.address, m.length, m.page_offset), &m.path);
            }
            EventRecord::Mmap2(m) => {
                let file = processes.map(&mut p, m.pid, (m.address, m.length, m.page_offset), &m.path);
                if let Mmap2FileId::BuildId(id) = m.file_id {
                    processes.build_ids.insert(file, id);
                }
            }
            EventRecord::Sample(s) => {
                let (pid, tid) = (s.pid.unwrap_or(-1), s.tid.unwrap_or(-1));
                current.frames.clear();
                match s.callchain {
                    Some(chain) => {
                        let mut kernel = false;
                        for address in (0..chain.len()).filter_map(|i| chain.get(i)) {
                            if address >= CONTEXT_MARKER {
                                kernel = address == CONTEXT_KERNEL;
                                continue;
                            }
                            current.frames.push((processes.frame(&mut p, pid, address, kernel), false));
                        }
                    }
                    None => current.frames.extend(s.ip.map(|ip| (processes.frame(&mut p, pid, ip, false), false))),
                }
                // A time past i64's nanoseconds (292 years) is corrupt: the sample has none.
                let time_nanos = s.timestamp.and_then(|t| i64::try_from(t).ok());
                if let Some(t) = time_nanos {
                    first = Some(first.map_or(t, |f| f.min(t)));
                    last = Some(last.map_or(t, |l| l.max(t)));
                }
                let comm = processes.comms.get(&tid).copied().unwrap_or(StrId(0));
                current.event = attr_index.min(events.len().saturating_sub(1));
                current.period = s.period.map(|v| v as i64);
                current.time_nanos = time_nanos;
                // perf script prints one number for a process's main thread: its pid; a
                // tid only for the other threads.
                current.thread = (comm, s.pid.map(i64::from), s.tid.filter(|&t| Some(t) != s.pid).map(i64::from));
                samples.add(&mut p, &mut room, &current)?;
                sampled = true;
            }
            _ => {}
        }
    }
    if !sampled {
        return Err(error("no samples"));
    }
    let section = |feature| perf_file.feature_section_data(feature);
    for (label, value) in [
        ("hostname", section(Feature::HOSTNAME).and_then(|s| layout::header_string(s, big_endian))),
        ("perf version", section(Feature::VERSION).and_then(|s| layout::header_string(s, big_endian))),
        ("cmdline", section(Feature::CMDLINE).and_then(|s| layout::header_strings(s, big_endian)).map(|c| c.join(" "))),
    ] {
        if let Some(value) = value {
            let comment = p.strings.intern(&format!("{label}: {value}"));
            p.comments.push(comment);
        }
    }
    samples.finish(&mut p, first.zip(last));
    for info in perf_file.build_ids().map_err(error)?.into_values() {
        build_ids.entry(String::from_utf8_lossy(&info.path).into_owned()).or_insert(info.build_id);
    }
    for (file, id) in processes.build_ids {
        build_ids.entry(p.str(file).to_owned()).or_insert(id);
    }
    for m in 0..p.mappings.len() {
        // The kernel's placement, which symbolization checks kallsyms against.
        if let Some(text) = processes.kernel_text.filter(|t| t.file == p.mappings[m].filename) {
            let mapping = &mut p.mappings[m];
            (mapping.memory_start, mapping.memory_limit, mapping.file_offset) = (text.start, text.end, text.offset);
        }
        if let Some(id) = build_ids.get(p.str(p.mappings[m].filename)) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            p.mappings[m].build_id = p.strings.intern(&hex);
        }
    }
    Ok(p)
}
