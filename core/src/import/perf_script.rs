//! Linux `perf script` text: an optional `--header` block of `#` lines, then one record
//! per sample — a header line and, with call graphs, one line per frame, leaf
//! first, indented (perf uses a tab), ending at a blank line:
//!
//! ```text
//! go  6157  1224.147545:     250000 cpu-clock:uhH:
//!               414297 runtime.mapassign_faststr+0x277 (/usr/lib/go/bin/go)
//!     ffffffff8104f45a native_write_msr_safe ([kernel.kallsyms])
//!         7f26cab4c0b0 [unknown] ([unknown])
//! ```
//!
//! * Sample types: with one event, `samples/count` and, when records carry a period,
//!   the event itself weighted by its periods (`cpu-clock`, `task-clock` in
//!   nanoseconds, other events in `count`). With several events (`-e cycles -e
//!   instructions`), each event gets `<event>_samples/count` and, with periods,
//!   `<event>`; a record counts only in its own event's types. Event modifiers
//!   (`:uhH`, `:ppp`) are dropped from names; tracepoints (`sched:sched_switch`) keep
//!   theirs.
//! * Frames: the address is kept on the location; the DSO in parentheses becomes the
//!   location's mapping (`[kernel.kallsyms]` for kernel frames); the symbol, without
//!   its `+0x…` offset, becomes the function: mangled Rust and C++ symbols are
//!   demangled, the raw symbol kept as its `system_name` ([`super::demangle`]).
//!   `[unknown]` symbols give locations without lines, which analyses show by their
//!   mapping (`[libc.so.6]`) as pprof does. A `file:line` line after a
//!   frame (`perf script -F +srcline`) sets that frame's line.
//! * Inlined frames (`perf script --inline`, the default when debug info is there) are
//!   printed as extra frames at the same address, ending in ` (inlined)` instead of a
//!   DSO (with `+srcline`, the `file:line` line ends in it). A run of frames at one
//!   address whose frames but the last are inlined becomes ONE location whose lines
//!   are those frames, innermost first (pprof's representation of inlining); its mapping
//!   is the DSO of the frame that names one.
//! * Each record is labelled with `comm`, `pid` and `tid` (when printed). When every
//!   record has a time, each is one sample with its span in [`Profile::sample_times`]
//!   (from the first record): it lasts until the next record of its thread and event,
//!   as Firefox Profiler draws samples, the last one the median time between them.
//!   Otherwise records with the same stack, event and labels are summed into one sample.
//! * Header lines `captured on`, `hostname`, `perf version` and `cmdline` become
//!   profile comments; the span of the records' timestamps is the duration.

mod lines;

use rustc_hash::FxHashMap as HashMap;

use super::demangle::add_native_function;
use super::text::{self, text_error};
use crate::model::{
    FunctionId, Label, LabelValue, Line, LocationId, Mapping, MappingId, Profile, Sample, SampleTime, SourceFormat,
};
use crate::model::{StrId, ValueType};
use crate::Result;

const FORMAT: &str = "perf script";
pub(super) use lines::event_name;
pub(crate) use lines::looks_like_perf_script;
use lines::{event_line, frame, srcline};

/// A record's (comm, pid, tid), which become its labels.
pub(super) type Thread = (StrId, Option<i64>, Option<i64>);

/// (address, symbol, DSO, source line) of one frame.
pub(super) type FrameKey = (u64, Option<StrId>, StrId, i64);

/// One sample as perf prints it; perf.data's samples are read into the same shape
/// (`super::perf_data`), so one recording gives one profile in either form.
pub(super) struct Record {
    /// Index into the events.
    pub event: usize,
    pub period: Option<i64>,
    pub time_nanos: Option<i64>,
    pub thread: Thread,
    /// Frames leaf first, each with its `(inlined)` mark; locations are made when the
    /// record ends.
    pub frames: Vec<(FrameKey, bool)>,
    /// A frame on the header line, used when no frame lines follow.
    pub inline_frame: Option<FrameKey>,
}

/// An event's name and whether any of its records has a period.
pub(super) type Event = (String, bool);

#[derive(Default)]
struct Builder {
    functions: HashMap<StrId, FunctionId>,
    mappings: HashMap<StrId, MappingId>,
    locations: HashMap<FrameKey, LocationId>,
    /// Locations with inlined frames: their frames, innermost first.
    inlined_locations: HashMap<Vec<FrameKey>, LocationId>,
}

impl Builder {
    /// The locations of a record's frames, leaf first: each inlined frame joins the
    /// frames after it at the same address into one location.
    fn locations(&mut self, p: &mut Profile, frames: &[(FrameKey, bool)]) -> Vec<LocationId> {
        let mut out = Vec::with_capacity(frames.len());
        let mut start = 0;
        for (i, &(key, inlined)) in frames.iter().enumerate() {
            if inlined && frames.get(i + 1).is_some_and(|next| next.0 .0 == key.0) {
                continue;
            }
            out.push(match &frames[start..=i] {
                [(key, _)] => self.location(p, *key),
                group => {
                    let keys: Vec<FrameKey> = group.iter().map(|&(k, _)| k).collect();
                    match self.inlined_locations.get(&keys) {
                        Some(&l) => l,
                        None => {
                            let l = self.new_location(p, &keys);
                            self.inlined_locations.insert(keys, l);
                            l
                        }
                    }
                }
            });
            start = i + 1;
        }
        out
    }

    fn location(&mut self, p: &mut Profile, key: FrameKey) -> LocationId {
        if let Some(&l) = self.locations.get(&key) {
            return l;
        }
        let l = self.new_location(p, &[key]);
        self.locations.insert(key, l);
        l
    }

    /// A location for frames at one address, innermost first.
    fn new_location(&mut self, p: &mut Profile, frames: &[FrameKey]) -> LocationId {
        let mut lines = Vec::with_capacity(frames.len());
        for &(_, symbol, _, line) in frames {
            if let Some(s) = symbol {
                let function = *self.functions.entry(s).or_insert_with(|| {
                    let raw = p.strings.get(s).to_owned();
                    add_native_function(p, &raw, "", 0)
                });
                lines.push(Line { function, line, column: 0 });
            }
        }
        let has_lines = !lines.is_empty();
        let l = p.add_location(frames[0].0, lines);
        // Inlined frames name no DSO; the frame that does names the location's.
        let dso = frames.iter().map(|f| f.2).find(|&d| !p.str(d).is_empty() && p.str(d) != "[unknown]");
        if let Some(dso) = dso {
            let mapping = *self.mappings.entry(dso).or_insert_with(|| {
                let id = MappingId(p.mappings.len() as u32);
                p.mappings.push(Mapping { id: u64::from(id.0) + 1, filename: dso, ..Mapping::default() });
                id
            });
            let m = &mut p.mappings[mapping.0 as usize];
            m.has_functions |= has_lines;
            m.has_inline_frames |= frames.len() > 1;
            p.locations[l.0 as usize].mapping = Some(mapping);
        }
        l
    }
}

/// Each record's span from `origin`, when every record has a time: a record lasts until
/// the next record of its thread and event, the last one the profile's median time
/// between them.
fn record_spans(records: &[Record], origin: i64) -> Option<Vec<SampleTime>> {
    let mut threads: HashMap<(Thread, usize), Vec<usize>> = HashMap::default();
    for (i, record) in records.iter().enumerate() {
        record.time_nanos?;
        threads.entry((record.thread, record.event)).or_default().push(i);
    }
    let start = |i: usize| records[i].time_nanos.map_or(0, |t| t.saturating_sub(origin));
    // Each thread's records and their starts, in time order.
    let threads: Vec<(Vec<usize>, Vec<i64>)> = threads
        .into_values()
        .map(|mut members| {
            members.sort_by_key(|&i| start(i));
            let starts = members.iter().map(|&i| start(i)).collect();
            (members, starts)
        })
        .collect();
    let last = super::median_interval(threads.iter().map(|(_, starts)| starts.as_slice()));
    let mut spans = vec![SampleTime::default(); records.len()];
    for (members, starts) in &threads {
        for (&i, span) in members.iter().zip(super::spans_until_next(starts, last)) {
            spans[i] = span;
        }
    }
    Some(spans)
}

/// The unit of an event's periods: software clocks count nanoseconds.
fn period_unit(event: &str) -> &'static str {
    match event {
        "cpu-clock" | "task-clock" => "nanoseconds",
        _ => "count",
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let text = text::decode(bytes);
    let mut p = Profile::new(SourceFormat::PerfScript);
    // Events in order of appearance, and whether any of their records has a period.
    let mut events: Vec<Event> = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut current: Option<Record> = None;
    let (mut first_time, mut last_time) = (None::<i64>, None::<i64>);
    let mut seen_record_line = false;

    for (n, line) in text::numbered(&text) {
        if line.starts_with('#') {
            if !seen_record_line {
                let body = line.trim_start_matches('#').trim();
                if let Some((key, value)) = body.split_once(" : ") {
                    if matches!(key.trim(), "captured on" | "hostname" | "perf version" | "cmdline") {
                        let comment = p.strings.intern(&format!("{}: {}", key.trim(), value.trim()));
                        p.comments.push(comment);
                    }
                }
            }
            continue;
        }
        if line.trim().is_empty() {
            records.extend(current.take());
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let Some(record) = current.as_mut() else {
                return Err(text_error(FORMAT, n, "a frame line outside a sample (no record header before it)"));
            };
            match frame(line) {
                Some(f) => {
                    let symbol = f.symbol.map(|s| p.strings.intern(s));
                    record.frames.push(((f.address, symbol, p.strings.intern(f.dso), 0), f.inlined));
                }
                None => match (srcline(line), record.frames.last_mut()) {
                    (Some((l, inlined)), Some(last)) => {
                        last.0 .3 = l;
                        last.1 |= inlined;
                    }
                    _ => {
                        let shown: String = line.trim().chars().take(60).collect();
                        return Err(text_error(FORMAT, n, format!("expected 'address symbol (dso)', got '{shown}'")));
                    }
                },
            }
            continue;
        }
        records.extend(current.take());
        seen_record_line = true;
        let Some(e) = event_line(line) else {
            let shown: String = line.trim().chars().take(60).collect();
            return Err(text_error(
                FORMAT,
                n,
                format!("expected a sample line 'comm pid time: event:', got '{shown}'"),
            ));
        };
        let event = match events.iter().position(|(name, _)| name == e.event) {
            Some(i) => i,
            None => {
                events.push((e.event.to_owned(), false));
                events.len() - 1
            }
        };
        events[event].1 |= e.period.is_some();
        if let Some(t) = e.time_nanos {
            first_time = Some(first_time.map_or(t, |f| f.min(t)));
            last_time = Some(last_time.map_or(t, |l| l.max(t)));
        }
        let thread = (p.strings.intern(e.comm), e.pid, e.tid);
        let inline_frame = frame(e.rest).map(|f| {
            let symbol = f.symbol.map(|s| p.strings.intern(s));
            (f.address, symbol, p.strings.intern(f.dso), 0)
        });
        current = Some(Record {
            event,
            period: e.period,
            time_nanos: e.time_nanos,
            thread,
            frames: Vec::new(),
            inline_frame,
        });
    }
    records.extend(current.take());
    if records.is_empty() {
        return Err(text_error(FORMAT, 1, "no samples"));
    }
    add_records(&mut p, &mut room, records, &events, first_time.zip(last_time))?;
    Ok(p)
}

/// Adds `records` to `p` as samples: per event, a count column and (with periods) a
/// weight column; records with times stay one sample each (their spans from the first,
/// `times`), others with the same stack, event and thread are summed.
pub(super) fn add_records(
    p: &mut Profile,
    room: &mut super::Room,
    records: Vec<Record>,
    events: &[Event],
    times: Option<(i64, i64)>,
) -> Result<()> {
    let mut b = Builder::default();
    let (comm_key, pid_key, tid_key) = (p.strings.intern("comm"), p.strings.intern("pid"), p.strings.intern("tid"));
    let no_unit = StrId(0);
    // Sample types: per event, its count column and (with periods) its weight column.
    let single = events.len() == 1;
    let mut columns: Vec<(usize, Option<usize>)> = Vec::with_capacity(events.len());
    for (name, has_period) in events {
        let shown = if name.is_empty() { "events" } else { name.as_str() };
        let count_name = if single { "samples".to_owned() } else { format!("{shown}_samples") };
        let count_type: ValueType = p.value_type(&count_name, "count");
        p.sample_types.push(count_type);
        let count_column = p.sample_types.len() - 1;
        let weight_column = has_period.then(|| {
            let vt = p.value_type(shown, period_unit(shown));
            p.sample_types.push(vt);
            p.sample_types.len() - 1
        });
        columns.push((count_column, weight_column));
    }
    if let Some((first, last)) = times {
        p.duration_nanos = last.saturating_sub(first);
    }

    let n_types = p.sample_types.len();
    let spans = times.and_then(|(origin, _)| record_spans(&records, origin));
    let mut index: HashMap<(Vec<LocationId>, usize, Thread), usize> = HashMap::default();
    for (i, mut record) in records.into_iter().enumerate() {
        if record.frames.is_empty() {
            record.frames.extend(record.inline_frame.map(|f| (f, false)));
        }
        let locations = b.locations(p, &record.frames);
        let (count_column, weight_column) = columns[record.event];
        let key = (locations, record.event, record.thread);
        // Timed records stay one sample each: the timeline needs them apart.
        let summed = if spans.is_some() { None } else { index.get(&key).copied() };
        let at = match summed {
            Some(at) => at,
            None => {
                let (comm, pid, tid) = record.thread;
                let mut labels = Vec::with_capacity(3);
                if comm != StrId(0) {
                    labels.push(Label { key: comm_key, value: LabelValue::Str(comm) });
                }
                if let Some(pid) = pid {
                    labels.push(Label { key: pid_key, value: LabelValue::Num { value: pid, unit: no_unit } });
                }
                if let Some(tid) = tid {
                    labels.push(Label { key: tid_key, value: LabelValue::Num { value: tid, unit: no_unit } });
                }
                room.push(&mut p.samples, Sample { locations: key.0.clone(), values: vec![0; n_types], labels })?;
                match &spans {
                    Some(spans) => p.sample_times.push(spans[i]),
                    None => {
                        index.insert(key, p.samples.len() - 1);
                    }
                }
                p.samples.len() - 1
            }
        };
        let values = p.samples.values_mut(at);
        values[count_column] = values[count_column].saturating_add(1);
        if let Some(w) = weight_column {
            values[w] = values[w].saturating_add(record.period.unwrap_or(0));
        }
    }
    Ok(())
}
