//! Android ART method traces (`Debug.startMethodTracing`, `am profile start`; the
//! "regular" `.trace` format Firefox Profiler and Android Studio read): a text header
//! (`*version`, `key=value` lines, `*threads`, `*methods`, `*end`), then `SLOW`, a binary
//! header and fixed-size records `thread, method id | action, times`.
//!
//! * Each record enters (action 0) or exits (1, 2 for an exception unwind) a method on
//!   its thread; the time until that thread's next record belongs to the stack then
//!   running, so self time per stack is exact, not sampled. Time with an empty stack
//!   (before the first enter) is not counted; an exit with nothing entered is ignored.
//! * Times are microseconds: wall clock (`clock=wall` or `dual`) as wall/microseconds,
//!   else thread CPU time as cpu/microseconds.
//! * Methods are named `class.method`, in their source file; threads become a `thread`
//!   label.

use rustc_hash::FxHashMap as HashMap;

use super::demangle::add_native_function;
use crate::model::{Label, LabelValue, Line, LocationId, Profile, Sample, SourceFormat};
use crate::{Error, Result};

const FORMAT: &str = "ART method trace";
/// The text header's first line.
pub(crate) const MAGIC: &[u8] = b"*version\n";
const DATA_MAGIC: &[u8] = b"SLOW";
const END: &[u8] = b"\n*end\n";

fn error(offset: usize, reason: impl Into<String>) -> Error {
    Error::Binary { format: FORMAT, offset, reason: reason.into() }
}

/// The text header's sections.
struct Header<'a> {
    version: u16,
    clock: &'a str,
    threads: HashMap<u16, &'a str>,
    /// Method id → (class, method, file).
    methods: HashMap<u32, (&'a str, &'a str, &'a str)>,
}

fn parse_header(text: &str) -> Result<Header<'_>> {
    let mut header =
        Header { version: 0, clock: "thread-cpu", threads: HashMap::default(), methods: HashMap::default() };
    let mut section = "";
    let mut offset = 0;
    for line in text.split('\n') {
        if let Some(name) = line.strip_prefix('*') {
            section = name;
        } else if section == "version" && header.version == 0 {
            header.version = line.parse().map_err(|_| error(offset, format!("version '{line}' is not a number")))?;
        } else if section == "version" {
            if let Some(clock) = line.strip_prefix("clock=") {
                header.clock = clock;
            }
        } else if section == "threads" {
            let (tid, name) = line.split_once('\t').unwrap_or((line, ""));
            let tid = tid.parse().map_err(|_| error(offset, format!("thread id '{tid}' is not a number")))?;
            header.threads.insert(tid, name);
        } else if section == "methods" {
            let mut fields = line.split('\t');
            let id = fields.next().unwrap_or("");
            // Hex (`0x1468`), though ART writes method 0 as `0`.
            let parsed = match id.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => id.parse().ok(),
            };
            let id = parsed.ok_or_else(|| error(offset, format!("method id '{id}' is not a number")))?;
            let (class, method) = (fields.next().unwrap_or(""), fields.next().unwrap_or(""));
            let file = fields.nth(1).unwrap_or("");
            header.methods.insert(id, (class, method, file));
        }
        offset += line.len() + 1;
    }
    if !(1..=3).contains(&header.version) {
        return Err(error(0, format!("version {} (stacklens reads versions 1 to 3)", header.version)));
    }
    Ok(header)
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Self time per (thread, stack), in first-seen order.
#[derive(Default)]
struct Stacks {
    index: HashMap<(u16, Vec<LocationId>), usize>,
    totals: Vec<(u16, Vec<LocationId>, i64)>,
}

impl Stacks {
    fn add(&mut self, tid: u16, root_first: &[LocationId], time: i64) {
        let key = (tid, root_first.to_vec());
        let totals = &mut self.totals;
        let i = *self.index.entry(key).or_insert_with(|| {
            totals.push((tid, root_first.to_vec(), 0));
            totals.len() - 1
        });
        totals[i].2 = totals[i].2.saturating_add(time);
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let end = bytes.windows(END.len()).position(|w| w == END).ok_or_else(|| error(0, "no '*end' line"))?;
    let text = std::str::from_utf8(&bytes[..end]).map_err(|e| error(e.valid_up_to(), "the header is not UTF-8"))?;
    let header = parse_header(text)?;
    let start = end + END.len();
    if bytes.get(start..start + 4) != Some(DATA_MAGIC) {
        return Err(error(start, "no 'SLOW' after the header"));
    }
    let truncated = || error(start, "the data header is truncated");
    let data_offset = usize::from(u16_at(bytes, start + 6).ok_or_else(truncated)?);
    let record_size = match header.version {
        1 => 9,
        2 => 10,
        _ => usize::from(u16_at(bytes, start + 16).ok_or_else(truncated)?),
    };
    let thread_width = if header.version == 1 { 1 } else { 2 };
    let wall = matches!(header.clock, "wall" | "dual");
    // Where a record's time is: wall time follows thread time with the dual clock.
    let time_at = thread_width + 4 + if header.clock == "dual" { 4 } else { 0 };
    if record_size < time_at + 4 {
        return Err(error(start, format!("records of {record_size} bytes cannot hold the {} clock", header.clock)));
    }

    let mut p = Profile::new(SourceFormat::ArtTrace);
    let vt = if wall { p.value_type("wall", "microseconds") } else { p.value_type("cpu", "microseconds") };
    p.sample_types.push(vt);
    let mut locations: HashMap<u32, LocationId> = HashMap::default();
    // Per thread: the running stack, root first, and the last record's time.
    let mut running: HashMap<u16, (Vec<LocationId>, u32)> = HashMap::default();
    let mut stacks = Stacks::default();
    let mut at = start.saturating_add(data_offset);
    while let Some(record) = bytes.get(at..at + record_size) {
        let tid = if thread_width == 1 { u16::from(record[0]) } else { u16_at(record, 0).unwrap_or(0) };
        let method_and_action = u32_at(record, thread_width).unwrap_or(0);
        let time = u32_at(record, time_at).unwrap_or(0);
        let (stack, last) = running.entry(tid).or_insert_with(|| (Vec::new(), time));
        if !stack.is_empty() && time > *last {
            stacks.add(tid, stack, i64::from(time - *last));
        }
        *last = time;
        match method_and_action & 3 {
            0 => {
                let id = method_and_action & !3;
                let location = *locations.entry(id).or_insert_with(|| {
                    let (class, method, file) = header.methods.get(&id).copied().unwrap_or(("", "", ""));
                    let name = if class.is_empty() { format!("method 0x{id:x}") } else { format!("{class}.{method}") };
                    let function = add_native_function(&mut p, &name, file, 0);
                    p.add_location(0, vec![Line { function, line: 0, column: 0 }])
                });
                stack.push(location);
            }
            1 | 2 => {
                stack.pop();
            }
            action => return Err(error(at, format!("unknown method action {action}"))),
        }
        at += record_size;
    }
    let thread_key = p.strings.intern("thread");
    for (tid, root_first, time) in stacks.totals {
        let name = header.threads.get(&tid).map_or_else(|| format!("thread {tid}"), |n| (*n).to_owned());
        let labels = vec![Label { key: thread_key, value: LabelValue::Str(p.strings.intern(&name)) }];
        room.push(
            &mut p.samples,
            Sample { locations: root_first.into_iter().rev().collect(), values: vec![time], labels },
        )?;
    }
    Ok(p)
}
