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

use rustc_hash::FxHashMap as HashMap;

use crate::model::{FunctionId, Label, LabelValue, Line, LocationId, Profile, Sample, SourceFormat, StrId};
use crate::{Error, Result};

const FORMAT: &str = "JFR";

/// A recording's (and every chunk's) first bytes.
pub(crate) const MAGIC: &[u8] = b"FLR\0";

const HEADER_LEN: usize = 68;

/// Bit 0 of the header's features: integers are LEB128-compressed.
const FEATURE_COMPRESSED_INTEGERS: i32 = 1;

const EVENT_METADATA: u64 = 0;
const EVENT_CONSTANT_POOL: u64 = 1;

/// Deepest nesting of values and metadata elements followed (real files need 4).
const MAX_DEPTH: usize = 32;

/// Objects and arrays a chunk may produce per byte: they take no bytes themselves, so
/// types that nest objects or have no fields would otherwise let a small file make the
/// reader build huge trees. Real recordings have one per 5 bytes or fewer (a stack frame).
const CONTAINERS_PER_BYTE: usize = 1;

fn error(offset: usize, reason: impl Into<String>) -> Error {
    Error::Binary { format: FORMAT, offset, reason: reason.into() }
}

/// Reads big-endian or compressed integers and JFR strings from `bytes[pos..end]`.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
    compressed: bool,
    /// Objects and arrays still allowed in this chunk (see [`CONTAINERS_PER_BYTE`]).
    budget: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.end - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(error(self.pos, format!("truncated: {what} needs {n} bytes, {} left", self.left())));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    /// JFR's LEB128: 7 bits per byte, low first, except that a ninth byte gives all 8.
    fn varint(&mut self, what: &str) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..56).step_by(7) {
            let b = self.u8(what)?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Ok(value | u64::from(self.u8(what)?) << 56)
    }

    fn long(&mut self, what: &str) -> Result<i64> {
        if self.compressed {
            return Ok(self.varint(what)? as i64);
        }
        Ok(i64::from_be_bytes(self.fixed(what)?))
    }

    fn int(&mut self, what: &str) -> Result<i32> {
        if self.compressed {
            // Truncation is what the JDK does with an oversized compressed int.
            return Ok(self.varint(what)? as i32);
        }
        Ok(i32::from_be_bytes(self.fixed(what)?))
    }

    fn short(&mut self, what: &str) -> Result<i16> {
        if self.compressed {
            return Ok(self.varint(what)? as i16);
        }
        Ok(i16::from_be_bytes(self.fixed(what)?))
    }

    /// A count of items that each take at least a byte: at most the bytes left.
    fn count(&mut self, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.int(what)?;
        match usize::try_from(n) {
            Ok(n) if n <= self.left() => Ok(n),
            Ok(n) => Err(error(at, format!("{what} {n} exceeds the {} bytes left", self.left()))),
            Err(_) => Err(error(at, format!("negative {what} {n}"))),
        }
    }

    /// Charges one object or array against the chunk's budget.
    fn spend_container(&mut self) -> Result<()> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| error(self.pos, "more objects than a recording of this size can hold"))?;
        Ok(())
    }

    /// A string in one of JFR's encodings: [`Value::Str`], or a [`Value::Ref`] into the
    /// pool of `string_class` for encoding 2.
    fn string(&mut self, string_class: u64, what: &str) -> Result<Value> {
        let at = self.pos;
        Ok(Value::Str(match self.u8(what)? {
            0 => None,
            1 => Some(String::new()),
            2 => return Ok(Value::Ref(string_class, self.long(what)?)),
            3 => {
                let n = self.count(what)?;
                let bytes = self.take(n, what)?;
                Some(String::from_utf8(bytes.to_vec()).map_err(|e| error(at, format!("{what} is not UTF-8: {e}")))?)
            }
            4 => {
                let n = self.count(what)?;
                let mut units = Vec::with_capacity(n);
                for _ in 0..n {
                    units.push(self.short(what)? as u16);
                }
                Some(String::from_utf16_lossy(&units))
            }
            5 => {
                let n = self.count(what)?;
                Some(self.take(n, what)?.iter().map(|&b| char::from(b)).collect())
            }
            other => return Err(error(at, format!("{what} has unknown string encoding {other}"))),
        }))
    }
}

/// A value read by its metadata type.
#[derive(Clone, Debug)]
enum Value {
    /// Numbers and booleans; floating point values are never needed and read as 0.
    Int(i64),
    Str(Option<String>),
    /// A constant pool entry: (type id, entry id).
    Ref(u64, i64),
    /// Fields in metadata order.
    Object(Vec<Value>),
    Array(Vec<Value>),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Primitive {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
}

impl Primitive {
    fn of(class: &str) -> Option<Self> {
        Some(match class {
            "boolean" => Self::Boolean,
            "byte" => Self::Byte,
            "char" => Self::Char,
            "short" => Self::Short,
            "int" => Self::Int,
            "long" => Self::Long,
            "float" => Self::Float,
            "double" => Self::Double,
            "java.lang.String" => Self::String,
            _ => return None,
        })
    }
}

#[derive(Debug)]
struct Field {
    name: String,
    class: u64,
    constant_pool: bool,
    array: bool,
}

#[derive(Debug)]
struct Class {
    name: String,
    primitive: Option<Primitive>,
    fields: Vec<Field>,
}

/// Types of one chunk by id.
#[derive(Default)]
struct Metadata {
    classes: HashMap<u64, Class>,
    string_class: u64,
}

impl Metadata {
    fn class(&self, id: u64, at: usize) -> Result<&Class> {
        self.classes.get(&id).ok_or_else(|| error(at, format!("type id {id} is not in the metadata")))
    }

    fn id_of(&self, name: &str) -> Option<u64> {
        self.classes.iter().find(|(_, c)| c.name == name).map(|(&id, _)| id)
    }
}

/// An element of the metadata event's tree: a name, attributes and children.
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

impl Reader<'_> {
    fn metadata_string<'s>(&mut self, strings: &'s [String]) -> Result<&'s str> {
        let at = self.pos;
        let i = self.int("metadata string index")?;
        usize::try_from(i)
            .ok()
            .and_then(|i| strings.get(i))
            .map(String::as_str)
            .ok_or_else(|| error(at, format!("metadata string index {i} is out of range")))
    }

    fn element(&mut self, strings: &[String], depth: usize) -> Result<Element> {
        if depth > MAX_DEPTH {
            return Err(error(self.pos, format!("metadata nested deeper than {MAX_DEPTH}")));
        }
        let name = self.metadata_string(strings)?.to_owned();
        let n = self.count("metadata attribute count")?;
        let mut attributes = Vec::with_capacity(n);
        for _ in 0..n {
            let key = self.metadata_string(strings)?.to_owned();
            let value = self.metadata_string(strings)?.to_owned();
            attributes.push((key, value));
        }
        let n = self.count("metadata child count")?;
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            children.push(self.element(strings, depth + 1)?);
        }
        Ok(Element { name, attributes, children })
    }

    /// The metadata event's body (after its size and type): the type descriptions.
    fn metadata(&mut self) -> Result<Metadata> {
        for what in ["metadata start time", "metadata duration", "metadata id"] {
            self.long(what)?;
        }
        let n = self.count("metadata string count")?;
        let mut strings = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.pos;
            match self.string(u64::MAX, "metadata string")? {
                Value::Str(s) => strings.push(s.unwrap_or_default()),
                _ => return Err(error(at, "a metadata string refers to the constant pool")),
            }
        }
        let at = self.pos;
        let root = self.element(&strings, 0)?;
        let mut metadata = Metadata::default();
        let mut pending = vec![&root];
        while let Some(e) = pending.pop() {
            if e.name != "class" {
                pending.extend(&e.children);
                continue;
            }
            let id = id_attribute(e, "id", at)?;
            let name = e.attribute("name").unwrap_or_default().to_owned();
            let mut fields = Vec::new();
            for f in e.children.iter().filter(|f| f.name == "field") {
                fields.push(Field {
                    name: f.attribute("name").unwrap_or_default().to_owned(),
                    class: id_attribute(f, "class", at)?,
                    constant_pool: f.attribute("constantPool") == Some("true"),
                    array: f.attribute("dimension").is_some_and(|d| d != "0"),
                });
            }
            let primitive = Primitive::of(&name);
            metadata.classes.insert(id, Class { name, primitive, fields });
        }
        metadata.string_class = metadata.id_of("java.lang.String").unwrap_or(u64::MAX);
        Ok(metadata)
    }

    /// One value of type `class` (a constant pool reference when `constant_pool`).
    fn value(&mut self, metadata: &Metadata, class: u64, constant_pool: bool, depth: usize) -> Result<Value> {
        if constant_pool {
            return Ok(Value::Ref(class, self.long("constant pool reference")?));
        }
        let at = self.pos;
        let class = metadata.class(class, at)?;
        Ok(match class.primitive {
            Some(Primitive::Boolean | Primitive::Byte) => Value::Int(i64::from(self.u8(&class.name)?)),
            Some(Primitive::Char | Primitive::Short) => Value::Int(i64::from(self.short(&class.name)?)),
            Some(Primitive::Int) => Value::Int(i64::from(self.int(&class.name)?)),
            Some(Primitive::Long) => Value::Int(self.long(&class.name)?),
            Some(Primitive::Float) => {
                self.take(4, &class.name)?;
                Value::Int(0)
            }
            Some(Primitive::Double) => {
                self.take(8, &class.name)?;
                Value::Int(0)
            }
            Some(Primitive::String) => self.string(metadata.string_class, &class.name)?,
            None => {
                if depth > MAX_DEPTH {
                    return Err(error(at, format!("values nested deeper than {MAX_DEPTH}")));
                }
                self.spend_container()?;
                let mut fields = Vec::with_capacity(class.fields.len());
                for f in &class.fields {
                    fields.push(self.field(metadata, f, depth + 1)?);
                }
                Value::Object(fields)
            }
        })
    }

    fn field(&mut self, metadata: &Metadata, field: &Field, depth: usize) -> Result<Value> {
        if !field.array {
            return self.value(metadata, field.class, field.constant_pool, depth);
        }
        let n = self.count(&field.name)?;
        self.spend_container()?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(metadata, field.class, field.constant_pool, depth)?);
        }
        Ok(Value::Array(items))
    }

    /// An event's header: its size (checked against the chunk) and type; `pos` is then
    /// at the fields and `end` is the event's end.
    fn event_header(&mut self, chunk_end: usize) -> Result<u64> {
        let start = self.pos;
        self.end = chunk_end;
        let size = self.int("event size")?;
        let size = usize::try_from(size).ok().filter(|&s| s > self.pos - start && s <= chunk_end - start);
        let size = size.ok_or_else(|| error(start, "event size does not fit in the chunk"))?;
        self.end = start + size;
        self.long("event type").map(|t| t as u64)
    }
}

fn id_attribute(e: &Element, key: &str, at: usize) -> Result<u64> {
    e.attribute(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| error(at, format!("metadata {} has no numeric {key}", e.name)))
}

/// The constant pools of one chunk: (type id, entry id) → value.
type Pools = HashMap<(u64, i64), Value>;

impl Reader<'_> {
    /// A constant pool event's body: pools of entries, each an id and a value.
    fn constant_pools(&mut self, metadata: &Metadata, pools: &mut Pools) -> Result<()> {
        for what in ["checkpoint start time", "checkpoint duration", "checkpoint delta"] {
            self.long(what)?;
        }
        self.u8("checkpoint kind")?;
        let n = self.count("constant pool count")?;
        for _ in 0..n {
            let class = self.long("constant pool type")? as u64;
            let entries = self.count("constant pool size")?;
            for _ in 0..entries {
                let id = self.long("constant pool entry id")?;
                let value = self.value(metadata, class, false, 0)?;
                pools.insert((class, id), value);
            }
        }
        Ok(())
    }
}

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

/// Functions and locations shared by all chunks, by name and line.
#[derive(Default)]
struct Frames {
    functions: HashMap<String, FunctionId>,
    locations: HashMap<(FunctionId, i64), LocationId>,
}

/// What one chunk's constant pools resolve to.
struct Chunk<'m> {
    metadata: &'m Metadata,
    pools: Pools,
    ticks_per_second: i64,
    /// Stack trace id → leaf-first locations.
    stacks: HashMap<i64, Vec<LocationId>>,
    threads: HashMap<i64, Option<StrId>>,
}

impl Chunk<'_> {
    /// Follows a constant pool reference (a missing entry is `None`, as the JDK shows it).
    fn resolve<'v>(&'v self, value: &'v Value) -> Option<&'v Value> {
        match value {
            Value::Ref(class, id) => self.pools.get(&(*class, *id)),
            v => Some(v),
        }
    }

    /// Field `name` of an object of type `class` as stored (a reference stays one),
    /// with the field's type.
    fn raw<'v>(&self, object: &'v Value, class: u64, name: &str) -> Option<(&'v Value, u64)> {
        let Value::Object(values) = object else { return None };
        let fields = &self.metadata.classes.get(&class)?.fields;
        let i = fields.iter().position(|f| f.name == name)?;
        Some((values.get(i)?, fields[i].class))
    }

    /// Field `name` of an object of type `class`, resolved, with its type.
    fn get<'v>(&'v self, object: &'v Value, class: u64, name: &str) -> Option<(&'v Value, u64)> {
        let (value, field_class) = self.raw(object, class, name)?;
        Some((self.resolve(value)?, field_class))
    }

    fn text<'v>(&'v self, value: &'v Value) -> Option<&'v str> {
        match self.resolve(value)? {
            Value::Str(s) => s.as_deref(),
            _ => None,
        }
    }

    /// The text of a `jdk.types.Symbol` field.
    fn symbol<'v>(&'v self, object: &'v Value, class: u64, name: &str) -> Option<&'v str> {
        let (symbol, symbol_class) = self.get(object, class, name)?;
        self.text(self.get(symbol, symbol_class, "string")?.0)
    }

    /// `package.Class.method` of a `jdk.types.Method`.
    fn method_name(&self, method: &Value, class: u64) -> String {
        let name = self.symbol(method, class, "name").unwrap_or("<unknown>");
        let owner = self.get(method, class, "type").and_then(|(c, cc)| self.symbol(c, cc, "name"));
        match owner {
            Some(owner) => format!("{}.{name}", owner.replace('/', ".")),
            None => name.to_owned(),
        }
    }

    /// The leaf-first locations of an event's `stackTrace` (none when it has none).
    fn stack(&mut self, p: &mut Profile, frames: &mut Frames, event: &Value, class: u64) -> Vec<LocationId> {
        let Some((&Value::Ref(trace_class, id), _)) = self.raw(event, class, "stackTrace") else { return Vec::new() };
        if let Some(stack) = self.stacks.get(&id) {
            return stack.clone();
        }
        let mut stack = Vec::new();
        let trace = self.pools.get(&(trace_class, id));
        if let Some((Value::Array(items), frame_class)) = trace.and_then(|t| self.get(t, trace_class, "frames")) {
            for frame in items {
                let method = self.get(frame, frame_class, "method");
                let name = method.map_or_else(|| "<unknown>".to_owned(), |(m, mc)| self.method_name(m, mc));
                let line = match self.get(frame, frame_class, "lineNumber") {
                    Some((&Value::Int(l), _)) if l > 0 => l,
                    _ => 0,
                };
                stack.push(frames.location(p, name, line));
            }
        }
        self.stacks.insert(id, stack.clone());
        stack
    }

    /// The `thread` label of an event: its sampled or event thread's Java name, else its
    /// OS name.
    fn thread(&mut self, p: &mut Profile, event: &Value, class: u64) -> Option<StrId> {
        let field = self.raw(event, class, "sampledThread").or_else(|| self.raw(event, class, "eventThread"));
        let (&Value::Ref(thread_class, id), _) = field? else { return None };
        if let Some(&name) = self.threads.get(&id) {
            return name;
        }
        let thread = self.pools.get(&(thread_class, id));
        let name = thread
            .and_then(|t| {
                let java = self.get(t, thread_class, "javaName").and_then(|(v, _)| self.text(v));
                java.or_else(|| self.get(t, thread_class, "osName").and_then(|(v, _)| self.text(v)))
            })
            .map(|name| p.strings.intern(name));
        self.threads.insert(id, name);
        name
    }

    /// Ticks (the unit of event durations) in nanoseconds.
    fn nanoseconds(&self, ticks: i64) -> i64 {
        let ns = i128::from(ticks) * 1_000_000_000 / i128::from(self.ticks_per_second);
        i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
    }
}

impl Frames {
    fn location(&mut self, p: &mut Profile, name: String, line: i64) -> LocationId {
        let function = *self.functions.entry(name).or_insert_with_key(|name| p.add_function(name, name, "", 0));
        *self
            .locations
            .entry((function, line))
            .or_insert_with(|| p.add_location(0, vec![Line { function, line, column: 0 }]))
    }
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
