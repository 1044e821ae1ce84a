//! Java Flight Recorder recordings (`.jfr`), as the JDK's Flight Recorder and
//! async-profiler (`-o jfr`) write them: JFR format 2.x, one or more chunks.
//!
//! A chunk is a 68-byte header (magic `FLR\0`, version, chunk size, constant pool and
//! metadata offsets, start time, duration, ticks per second, and a features word whose
//! bit 0 says integers are LEB128-compressed), then events: each a size, a type id and
//! fields. Event type 0 is the metadata, which describes every type (`jdk.ExecutionSample`,
//! `jdk.types.StackTrace`, `java.lang.Thread`, …) as a list of typed fields; type 1 is a
//! constant pool (checkpoint), holding the stack traces, methods, classes, symbols,
//! strings and threads that events refer to by id. Ids are per chunk.
//!
//! The reader is generic: it reads any type from its metadata description into a
//! [`Value`], so it needs no knowledge of a producer's field order. It visits every
//! event of a chunk in file order (the constant pools in a first pass, the samples in a
//! second) rather than following the constant pools' delta chain, which reads the
//! same pools and cannot loop.
//!
//! Events read, each one or two sample types (pprof `type/unit`):
//!
//! * `jdk.ExecutionSample` (also what async-profiler writes for CPU samples): `cpu/count`,
//!   1 per event;
//! * `jdk.NativeMethodSample`: `wall/count`, 1 per event, and async-profiler's
//!   `profiler.WallClockSample`: `wall/count`, its `samples` (one event per batch);
//! * `jdk.ObjectAllocationInNewTLAB` (its `tlabSize`), `jdk.ObjectAllocationOutsideTLAB`
//!   (`allocationSize`) and `jdk.ObjectAllocationSample` (`weight`): `alloc_objects/count`
//!   and `alloc_space/bytes`;
//! * `jdk.JavaMonitorEnter` and `jdk.ThreadPark`: `lock_count/count` and
//!   `lock_time/nanoseconds` (the event's duration, converted from ticks).
//!
//! Only sample types with events appear; the default is `cpu` when present. A recording
//! with both TLAB events and `jdk.ObjectAllocationSample` (JDK settings enable one or the
//! other) counts both. Each sample is labelled `thread` with the Java thread name (else
//! the OS one). A frame is a function `package.Class.method` at the frame's line; frame
//! types (interpreted, JIT, inlined, native) are not kept. Stacks are leaf first, as JFR
//! stores them.
//!
//! Why not the `jfrs` crate: its last release is from 2023, it reads from a `Read +
//! Seek` source where core has a byte slice, and it brings `rustc-hash` 1 beside core's
//! 2; what stacklens needs (a few event types, every count bounded by the bytes left,
//! errors with byte offsets, no I/O, wasm32) fits in this module.
//!
//! Hostile input: every count read from the file is checked against the bytes left;
//! every value but an object or array takes at least a byte, and objects and arrays are
//! budgeted at one per byte of the chunk, so a chunk of n bytes makes at most 2n values;
//! nesting is limited and every loop advances through the input, so no input makes the
//! reader allocate more than a small multiple of its size or run for long.

mod chunk;
mod metadata;
mod reader;

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Label, LabelValue, LocationId, Profile, Sample, SourceFormat, StrId};
use crate::Result;
use chunk::{Chunk, Frames};
use metadata::Pools;
use reader::{error, Reader, Value, CONTAINERS_PER_BYTE};

/// A recording's (and every chunk's) first bytes.
pub(crate) const MAGIC: &[u8] = b"FLR\0";

const HEADER_LEN: usize = 68;

/// Bit 0 of the header's features: integers are LEB128-compressed.
const FEATURE_COMPRESSED_INTEGERS: i32 = 1;

const EVENT_METADATA: u64 = 0;
const EVENT_CONSTANT_POOL: u64 = 1;

/// What an event measures, and the field that holds its amount.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Measure {
    Cpu,
    Wall,
    Allocation,
    Lock,
}

impl Measure {
    fn of_event(name: &str) -> Option<(Self, Option<&'static str>)> {
        Some(match name {
            "jdk.ExecutionSample" => (Self::Cpu, None),
            "jdk.NativeMethodSample" => (Self::Wall, None),
            // async-profiler's wall-clock mode: one event for `samples` samples of a stack.
            "profiler.WallClockSample" => (Self::Wall, Some("samples")),
            "jdk.ObjectAllocationInNewTLAB" => (Self::Allocation, Some("tlabSize")),
            "jdk.ObjectAllocationOutsideTLAB" => (Self::Allocation, Some("allocationSize")),
            "jdk.ObjectAllocationSample" => (Self::Allocation, Some("weight")),
            "jdk.JavaMonitorEnter" | "jdk.ThreadPark" => (Self::Lock, Some("duration")),
            _ => return None,
        })
    }

    /// Sample types: one holding the amount (1 when the event has none), or the count of
    /// events then the amount; the last is the one shown by default.
    fn sample_types(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Cpu => &[("cpu", "count")],
            Self::Wall => &[("wall", "count")],
            Self::Allocation => &[("alloc_objects", "count"), ("alloc_space", "bytes")],
            Self::Lock => &[("lock_count", "count"), ("lock_time", "nanoseconds")],
        }
    }
}

/// One event, before the sample types are known.
struct Record {
    measure: Measure,
    stack: Vec<LocationId>,
    amount: i64,
    thread: Option<StrId>,
}

/// A chunk's header fields that the reader uses.
struct Header {
    size: usize,
    metadata_offset: usize,
    start_nanos: i64,
    duration_nanos: i64,
    ticks_per_second: i64,
    compressed: bool,
}

fn header(bytes: &[u8], start: usize) -> Result<Header> {
    let mut r = Reader { bytes, pos: start, end: bytes.len(), compressed: false, budget: 0 };
    if r.take(MAGIC.len(), "chunk magic")? != MAGIC {
        return Err(error(start, "a chunk does not start with the JFR magic FLR\\0"));
    }
    let [major, minor] = [r.short("major version")?, r.short("minor version")?];
    if major != 2 {
        return Err(error(start + 4, format!("JFR version {major}.{minor} is not supported (only 2.x)")));
    }
    let size = r.long("chunk size")?;
    // The constant pools are found by visiting every event, not from this offset.
    r.long("constant pool offset")?;
    let metadata_offset = r.long("metadata offset")?;
    let start_nanos = r.long("start time")?;
    let duration_nanos = r.long("duration")?;
    r.long("start ticks")?;
    let ticks_per_second = r.long("ticks per second")?;
    let features = r.int("features")?;
    let left = bytes.len() - start;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| (HEADER_LEN..=left).contains(&s))
        .ok_or_else(|| error(start + 8, format!("chunk size {size} does not fit the {left} bytes left")))?;
    let metadata_offset = usize::try_from(metadata_offset)
        .ok()
        .filter(|&m| (HEADER_LEN..size).contains(&m))
        .ok_or_else(|| error(start + 24, format!("metadata offset {metadata_offset} is outside the chunk")))?;
    if ticks_per_second <= 0 {
        return Err(error(start + 56, format!("ticks per second is {ticks_per_second}")));
    }
    Ok(Header {
        size,
        metadata_offset,
        start_nanos,
        duration_nanos,
        ticks_per_second,
        compressed: features & FEATURE_COMPRESSED_INTEGERS != 0,
    })
}

/// Reads one chunk's samples into `records`.
fn read_chunk(
    bytes: &[u8],
    start: usize,
    h: &Header,
    p: &mut Profile,
    frames: &mut Frames,
    records: &mut Vec<Record>,
) -> Result<()> {
    let end = start + h.size;
    let budget = h.size.saturating_mul(CONTAINERS_PER_BYTE);
    let mut r = Reader { bytes, pos: start + h.metadata_offset, end, compressed: h.compressed, budget };
    let at = r.pos;
    if r.event_header(end)? != EVENT_METADATA {
        return Err(error(at, "the metadata offset does not point to a metadata event"));
    }
    let metadata = r.metadata()?;
    let events: HashMap<u64, (Measure, Option<&'static str>)> =
        metadata.classes.iter().filter_map(|(&id, c)| Measure::of_event(&c.name).map(|m| (id, m))).collect();

    // First pass: the constant pools, which events may precede.
    let mut pools = Pools::default();
    let mut next = start + HEADER_LEN;
    while next < end {
        r.pos = next;
        let kind = r.event_header(end)?;
        next = r.end;
        if kind == EVENT_CONSTANT_POOL {
            r.constant_pools(&metadata, &mut pools)?;
        }
    }
    let mut chunk = Chunk {
        metadata: &metadata,
        pools,
        ticks_per_second: h.ticks_per_second,
        stacks: HashMap::default(),
        threads: HashMap::default(),
    };

    // Second pass: the events that are samples.
    let mut next = start + HEADER_LEN;
    while next < end {
        r.pos = next;
        let kind = r.event_header(end)?;
        next = r.end;
        let Some(&(measure, amount_field)) = events.get(&kind) else { continue };
        let class = &metadata.classes[&kind];
        let at = r.pos;
        let mut fields = Vec::with_capacity(class.fields.len());
        for f in &class.fields {
            fields.push(r.field(&metadata, f, 0)?);
        }
        let event = Value::Object(fields);
        let amount = match amount_field {
            None => 1,
            Some(name) => match chunk.get(&event, kind, name) {
                Some((&Value::Int(v), _)) if measure == Measure::Lock => chunk.nanoseconds(v),
                Some((&Value::Int(v), _)) => v,
                _ => return Err(error(at, format!("{} has no numeric {name}", class.name))),
            },
        };
        let stack = chunk.stack(p, frames, &event, kind);
        let thread = chunk.thread(p, &event, kind);
        records.push(Record { measure, stack, amount, thread });
    }
    Ok(())
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let mut p = Profile::new(SourceFormat::Jfr);
    let mut frames = Frames::default();
    let mut records = Vec::new();
    let (mut first_nanos, mut last_nanos) = (i64::MAX, i64::MIN);
    let mut start = 0;
    while start < bytes.len() {
        let h = header(bytes, start)?;
        read_chunk(bytes, start, &h, &mut p, &mut frames, &mut records)?;
        first_nanos = first_nanos.min(h.start_nanos);
        last_nanos = last_nanos.max(h.start_nanos.saturating_add(h.duration_nanos));
        start += h.size;
    }
    p.time_nanos = first_nanos;
    p.duration_nanos = last_nanos.saturating_sub(first_nanos).max(0);

    // Columns for the measures that have events, in `Measure` order.
    let mut measures: Vec<Measure> = records.iter().map(|r| r.measure).collect();
    measures.sort_unstable();
    measures.dedup();
    let mut first_column = HashMap::default();
    for &m in &measures {
        first_column.insert(m, p.sample_types.len());
        for &(kind, unit) in m.sample_types() {
            let t = p.value_type(kind, unit);
            p.sample_types.push(t);
        }
    }
    if let Some(&main) = measures.first() {
        let (kind, _) = main.sample_types().last().expect("every measure has a sample type");
        p.default_sample_type = p.strings.intern(kind);
    }
    let thread_key = p.strings.intern("thread");
    let width = p.sample_types.len();
    for r in records {
        let column = first_column[&r.measure];
        let mut values = vec![0; width];
        if r.measure.sample_types().len() > 1 {
            values[column] = 1;
            values[column + 1] = r.amount;
        } else {
            values[column] = r.amount;
        }
        let labels = r.thread.map(|t| Label { key: thread_key, value: LabelValue::Str(t) }).into_iter().collect();
        room.push(&mut p.samples, Sample { locations: r.stack, values, labels })?;
    }
    Ok(p)
}
