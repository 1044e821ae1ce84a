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
mod samples;

use super::text::{self, text_error};
use crate::model::{Profile, SourceFormat, StrId};
use crate::Result;

const FORMAT: &str = "perf script";
pub(super) use lines::event_name;
pub(crate) use lines::looks_like_perf_script;
use lines::{event_line, frame, srcline};
pub(super) use samples::Samples;

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
    let mut samples = Samples::new(&mut p, &events);
    for record in &records {
        samples.add(&mut p, &mut room, record)?;
    }
    samples.finish(&mut p, first_time.zip(last_time));
    Ok(p)
}
