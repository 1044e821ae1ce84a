//! Java Flight Recorder recordings: for both fixtures, the number of execution samples,
//! the allocated bytes and each function's self samples equal what the JDK's `jfr` tool
//! prints (figures stored here, and recomputed from `jfr print --json` at test time when
//! the tool is installed); a small recording written here covers uncompressed integers,
//! several chunks, every string encoding and the wall-clock, lock and TLAB events;
//! malformed recordings get typed errors with byte offsets.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use common::{fixtures, missing_prerequisite, read};
use serde_json::Value;
use stacklens_core::import::{detect, Format};
use stacklens_core::model::{LabelValue, Profile, SourceFormat};
use stacklens_core::{parse, Error};

const HEAVY: &str = "thirdparty/speedscope/heavy.jfr";
const ASYNC_PROFILER: &str = "thirdparty/pyroscope/async-profiler-dump1.jfr.gz";

/// What `jfr` says about one fixture.
struct Expected {
    file: &'static str,
    /// `jfr summary FILE`: the jdk.ExecutionSample count.
    execution_samples: i64,
    /// `jfr summary FILE`: the jdk.NativeMethodSample count.
    native_samples: i64,
    /// `jfr print --json --events jdk.ObjectAllocationSample FILE`: the sum of `weight`
    /// (and the events' count).
    allocated_bytes: i64,
    allocations: i64,
    /// `jfr print --json --events jdk.ExecutionSample FILE`: events per top frame
    /// (`type.name` with `/` as `.`, then `.` and the method name), the hottest first.
    hottest: &'static [(&'static str, i64)],
}

const EXPECTED: &[Expected] = &[
    Expected {
        file: HEAVY,
        execution_samples: 346,
        native_samples: 44,
        allocated_bytes: 878_277_960,
        allocations: 25,
        hottest: &[
            ("java.util.DualPivotQuicksort.sort", 211),
            ("java.util.DualPivotQuicksort.mixedInsertionSort", 87),
            ("java.util.concurrent.atomic.AtomicLong.compareAndSet", 25),
            ("java.util.stream.SpinedBuffer$OfPrimitive.preAccept", 10),
        ],
    },
    Expected {
        file: ASYNC_PROFILER,
        execution_samples: 2188,
        native_samples: 0,
        allocated_bytes: 0,
        allocations: 0,
        hottest: &[("App.fib", 2085), ("java.lang.Long.valueOf", 100), ("java.lang.Long.longValue", 3)],
    },
];

fn inflated(bytes: &[u8]) -> Vec<u8> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return bytes.to_vec();
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

fn column(p: &Profile, kind: &str) -> Option<usize> {
    (0..p.sample_types.len()).find(|&i| p.sample_type_name(i) == kind)
}

/// Self value per function name (the leaf frame's) for one sample type.
fn self_values(p: &Profile, index: usize) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in p.samples.iter().filter(|s| s.values[index] != 0) {
        let name = s.locations.first().map_or("<no stack>", |&l| p.line_function_name(&p.location(l).lines[0]));
        *out.entry(name.to_owned()).or_insert(0) += s.values[index];
    }
    out
}

#[test]
fn totals_and_hottest_functions_equal_the_jfr_tool() {
    let Some(dir) = fixtures() else { return };
    for e in EXPECTED {
        let p = parse(&read(&dir.join(e.file))).unwrap();
        assert_eq!(p.source, SourceFormat::Jfr);
        let cpu = column(&p, "cpu").unwrap();
        assert_eq!((p.sample_type_unit(cpu), p.default_sample_index()), ("count", cpu), "{}", e.file);
        assert_eq!(p.total(cpu), e.execution_samples, "{}", e.file);
        assert_eq!(column(&p, "wall").map_or(0, |i| p.total(i)), e.native_samples, "{}", e.file);
        assert_eq!(column(&p, "alloc_space").map_or(0, |i| p.total(i)), e.allocated_bytes, "{}", e.file);
        assert_eq!(column(&p, "alloc_objects").map_or(0, |i| p.total(i)), e.allocations, "{}", e.file);
        assert_eq!(column(&p, "lock_time"), None, "{}", e.file);
        let flat = self_values(&p, cpu);
        let mut hottest: Vec<(&str, i64)> = flat.iter().map(|(n, &v)| (n.as_str(), v)).collect();
        hottest.sort_by_key(|&(n, v)| (std::cmp::Reverse(v), n));
        assert_eq!(&hottest[..e.hottest.len()], e.hottest, "{}", e.file);
        // Every sample is labelled with its thread.
        let thread = p.strings.iter().position(|s| s == "thread").unwrap();
        assert!(p.samples.iter().all(|s| s.labels.iter().any(|l| l.key.0 as usize == thread)), "{}", e.file);
    }
}

/// `jfr print --json --events EVENT FILE`'s events.
fn jfr_events(jfr: &Path, file: &Path, event: &str) -> Vec<Value> {
    let out = std::process::Command::new(jfr)
        .args(["print", "--json", "--events", event])
        .arg(file)
        .output()
        .expect("running jfr");
    assert!(out.status.success(), "jfr print {event}: {}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["recording"]["events"].as_array().unwrap().clone()
}

/// Events per top frame, as named in [`Expected::hottest`].
fn by_top_frame(events: &[Value]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for e in events {
        let name = match &e["values"]["stackTrace"]["frames"][0]["method"] {
            Value::Null => "<no stack>".to_owned(),
            m => format!("{}.{}", m["type"]["name"].as_str().unwrap().replace('/', "."), m["name"].as_str().unwrap()),
        };
        *out.entry(name).or_insert(0) += 1;
    }
    out
}

#[test]
fn every_function_equals_jfr_print_at_test_time() {
    let Some(dir) = fixtures() else { return };
    let jfr = Path::new("/usr/bin/jfr");
    if !jfr.is_file() {
        missing_prerequisite("the JDK's jfr tool at /usr/bin/jfr (it prints the reference events)");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("stacklens-jfr-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for e in EXPECTED {
        let bytes = inflated(&read(&dir.join(e.file)));
        let file: PathBuf = tmp.join(Path::new(e.file).file_name().unwrap()).with_extension("jfr");
        std::fs::write(&file, &bytes).unwrap();
        let p = parse(&bytes).unwrap();

        let samples = jfr_events(jfr, &file, "jdk.ExecutionSample");
        assert_eq!(samples.len() as i64, e.execution_samples, "{}", e.file);
        assert_eq!(self_values(&p, column(&p, "cpu").unwrap()), by_top_frame(&samples), "{}", e.file);

        let allocations = jfr_events(jfr, &file, "jdk.ObjectAllocationSample");
        let bytes_allocated: i64 = allocations.iter().map(|a| a["values"]["weight"].as_i64().unwrap()).sum();
        assert_eq!((allocations.len() as i64, bytes_allocated), (e.allocations, e.allocated_bytes), "{}", e.file);
        if let Some(objects) = column(&p, "alloc_objects") {
            assert_eq!(self_values(&p, objects), by_top_frame(&allocations), "{}", e.file);
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn both_fixtures_are_detected_as_jfr() {
    let Some(dir) = fixtures() else { return };
    for e in EXPECTED {
        let bytes = read(&dir.join(e.file));
        assert_eq!(detect(&inflated(&bytes)), Format::Of(SourceFormat::Jfr), "{}", e.file);
        assert_eq!(parse(&bytes).unwrap().source, SourceFormat::Jfr, "{}", e.file);
    }
}

fn err(bytes: &[u8]) -> Error {
    parse(bytes).unwrap_err()
}

fn binary(offset: usize, reason: &str) -> Error {
    Error::Binary { format: "JFR", offset, reason: reason.into() }
}

#[test]
fn truncated_and_corrupt_fixtures_are_typed_errors() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(HEAVY));
    assert_eq!(bytes.len(), 355_345);
    assert_eq!(err(&bytes[..4]), binary(4, "truncated: major version needs 2 bytes, 0 left"));
    assert_eq!(err(&bytes[..60]), binary(56, "truncated: ticks per second needs 8 bytes, 4 left"));
    for cut in [68, 1000, bytes.len() / 2, bytes.len() - 1] {
        let left = cut;
        assert_eq!(err(&bytes[..cut]), binary(8, &format!("chunk size 355345 does not fit the {left} bytes left")));
    }
    // A chunk size beyond the file, or smaller than a header.
    for size in [u64::MAX, 10] {
        let mut corrupt = bytes.clone();
        corrupt[8..16].copy_from_slice(&size.to_be_bytes());
        let shown = size as i64;
        assert_eq!(err(&corrupt), binary(8, &format!("chunk size {shown} does not fit the 355345 bytes left")));
    }
    // Bytes after the last chunk that are not one.
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(&[0; 100]);
    assert_eq!(err(&trailing), binary(355_345, "a chunk does not start with the JFR magic FLR\\0"));
    // An unsupported version.
    let mut old = bytes.clone();
    old[4..8].copy_from_slice(&[0, 1, 0, 0]);
    assert_eq!(err(&old), binary(4, "JFR version 1.0 is not supported (only 2.x)"));
}

/// Writes recordings the way the JDK does, compressed integers or not.
struct Writer {
    compressed: bool,
    out: Vec<u8>,
}

impl Writer {
    fn new(compressed: bool) -> Self {
        Self { compressed, out: Vec::new() }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn int(&mut self, v: i32) {
        if self.compressed {
            self.varint(u64::from(v as u32));
        } else {
            self.out.extend_from_slice(&v.to_be_bytes());
        }
    }

    fn long(&mut self, v: i64) {
        if self.compressed {
            self.varint(v as u64);
        } else {
            self.out.extend_from_slice(&v.to_be_bytes());
        }
    }

    fn utf8(&mut self, s: &str) {
        self.out.push(3);
        self.int(s.len() as i32);
        self.out.extend_from_slice(s.as_bytes());
    }

    /// An event: a four-byte size (padded when compressed, as the JDK pads it), then
    /// `body` (type id and fields).
    fn event(&mut self, body: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::new(self.compressed);
        body(&mut inner);
        let size = inner.out.len() + 4;
        if self.compressed {
            let s = size as u32;
            self.out.extend_from_slice(&[
                s as u8 | 0x80,
                (s >> 7) as u8 | 0x80,
                (s >> 14) as u8 | 0x80,
                (s >> 21) as u8,
            ]);
        } else {
            self.out.extend_from_slice(&(size as u32).to_be_bytes());
        }
        self.out.extend_from_slice(&inner.out);
    }
}

// Type ids of the small recording.
const LONG: i64 = 10;
const INT: i64 = 11;
const STRING: i64 = 12;
const BOOLEAN: i64 = 13;
const THREAD: i64 = 20;
const SYMBOL: i64 = 21;
const CLASS: i64 = 22;
const METHOD: i64 = 23;
const FRAME: i64 = 24;
const TRACE: i64 = 25;
const EXECUTION_SAMPLE: i64 = 100;
const THREAD_PARK: i64 = 101;
const NEW_TLAB: i64 = 102;
const WALL_CLOCK: i64 = 103;

/// (name, id, fields: (name, type, in the constant pool, array)).
type ClassSpec = (&'static str, i64, &'static [(&'static str, i64, bool, bool)]);

const CLASSES: &[ClassSpec] = &[
    ("long", LONG, &[]),
    ("int", INT, &[]),
    ("java.lang.String", STRING, &[]),
    ("boolean", BOOLEAN, &[]),
    ("java.lang.Thread", THREAD, &[("osName", STRING, false, false), ("javaName", STRING, false, false)]),
    ("jdk.types.Symbol", SYMBOL, &[("string", STRING, false, false)]),
    ("java.lang.Class", CLASS, &[("name", SYMBOL, true, false)]),
    ("jdk.types.Method", METHOD, &[("type", CLASS, true, false), ("name", SYMBOL, true, false)]),
    ("jdk.types.StackFrame", FRAME, &[("method", METHOD, true, false), ("lineNumber", INT, false, false)]),
    ("jdk.types.StackTrace", TRACE, &[("truncated", BOOLEAN, false, false), ("frames", FRAME, false, true)]),
    (
        "jdk.ExecutionSample",
        EXECUTION_SAMPLE,
        &[
            ("startTime", LONG, false, false),
            ("sampledThread", THREAD, true, false),
            ("stackTrace", TRACE, true, false),
        ],
    ),
    (
        "jdk.ThreadPark",
        THREAD_PARK,
        &[
            ("startTime", LONG, false, false),
            ("duration", LONG, false, false),
            ("eventThread", THREAD, true, false),
            ("stackTrace", TRACE, true, false),
        ],
    ),
    (
        "jdk.ObjectAllocationInNewTLAB",
        NEW_TLAB,
        &[
            ("startTime", LONG, false, false),
            ("eventThread", THREAD, true, false),
            ("stackTrace", TRACE, true, false),
            ("tlabSize", LONG, false, false),
        ],
    ),
    (
        "profiler.WallClockSample",
        WALL_CLOCK,
        &[
            ("startTime", LONG, false, false),
            ("sampledThread", THREAD, true, false),
            ("stackTrace", TRACE, true, false),
            ("samples", INT, false, false),
        ],
    ),
];

/// The metadata event's body: a string table, then root → metadata → class → field.
fn metadata(w: &mut Writer, classes: &[ClassSpec]) {
    let mut strings: Vec<String> = Vec::new();
    let mut index = |s: &str| -> i32 {
        let i = strings.iter().position(|t| t == s).unwrap_or_else(|| {
            strings.push(s.to_owned());
            strings.len() - 1
        });
        i as i32
    };
    let mut tree = Writer::new(w.compressed);
    let element = |tree: &mut Writer, name: i32, attributes: &[(i32, i32)], children: i32| {
        tree.int(name);
        tree.int(attributes.len() as i32);
        for &(k, v) in attributes {
            tree.int(k);
            tree.int(v);
        }
        tree.int(children);
    };
    element(&mut tree, index("root"), &[], 1);
    element(&mut tree, index("metadata"), &[], classes.len() as i32);
    for (name, id, fields) in classes {
        let attributes = [(index("name"), index(name)), (index("id"), index(&id.to_string()))];
        element(&mut tree, index("class"), &attributes, fields.len() as i32);
        for &(field, class, pooled, array) in *fields {
            let mut attributes = vec![(index("name"), index(field)), (index("class"), index(&class.to_string()))];
            if pooled {
                attributes.push((index("constantPool"), index("true")));
            }
            if array {
                attributes.push((index("dimension"), index("1")));
            }
            element(&mut tree, index("field"), &attributes, 0);
        }
    }
    w.long(0); // type: metadata
    w.long(0); // start time
    w.long(0); // duration
    w.long(1); // metadata id
    w.int(strings.len() as i32);
    for s in &strings {
        w.utf8(s);
    }
    w.out.extend_from_slice(&tree.out);
}

/// The constant pool: thread `main` (a pooled string in Latin-1), methods
/// `com/example/App.work` (its name a char array) and `.park`, and two stack traces.
fn constant_pool(w: &mut Writer) {
    w.long(1); // type: constant pool
    w.long(0); // start time
    w.long(0); // duration
    w.long(0); // delta to the previous pool: none
    w.out.push(0); // checkpoint kind
    w.int(7);
    w.long(STRING);
    w.int(1);
    w.long(1);
    w.out.push(5); // Latin-1
    w.int(4);
    w.out.extend_from_slice(b"main");
    w.long(THREAD);
    w.int(1);
    w.long(1);
    w.out.push(0); // osName: null
    w.out.push(2); // javaName: string pool entry 1
    w.long(1);
    w.long(SYMBOL);
    w.int(4);
    w.long(1);
    w.utf8("com/example/App");
    w.long(2);
    w.out.push(4); // a char array
    w.int(4);
    for c in "work".encode_utf16() {
        if w.compressed {
            w.varint(u64::from(c));
        } else {
            w.out.extend_from_slice(&c.to_be_bytes());
        }
    }
    w.long(3);
    w.utf8("park");
    w.long(4);
    w.out.push(1); // the empty string, used by nothing
    w.long(CLASS);
    w.int(1);
    w.long(1);
    w.long(1);
    w.long(METHOD);
    w.int(2);
    for (id, name) in [(1, 2), (2, 3)] {
        w.long(id);
        w.long(1);
        w.long(name);
    }
    w.long(TRACE);
    w.int(2);
    // Trace 1: work at line 10. Trace 2: park at line 20, called by work at line 11.
    for (id, frames) in [(1, &[(1, 10)][..]), (2, &[(2, 20), (1, 11)][..])] {
        w.long(id);
        w.out.push(0);
        w.int(frames.len() as i32);
        for &(method, line) in frames {
            w.long(method);
            w.int(line);
        }
    }
    w.long(FRAME);
    w.int(0);
}

/// One chunk: three CPU samples, a batch of four wall-clock samples, a 2 ms park and a
/// 4 KiB TLAB, 1 MHz ticks.
fn chunk(compressed: bool) -> Vec<u8> {
    recording(compressed, CLASSES, |w| {
        sample_events(w);
        w.event(constant_pool);
    })
}

fn sample_events(w: &mut Writer) {
    for _ in 0..3 {
        w.event(|e| {
            e.long(EXECUTION_SAMPLE);
            e.long(5); // start time
            e.long(1); // thread
            e.long(1); // stack trace
        });
    }
    w.event(|e| {
        e.long(WALL_CLOCK);
        e.long(5);
        e.long(1);
        e.long(2);
        e.int(4);
    });
    w.event(|e| {
        e.long(THREAD_PARK);
        e.long(5);
        e.long(2000);
        e.long(1);
        e.long(2);
    });
    w.event(|e| {
        e.long(NEW_TLAB);
        e.long(5);
        e.long(1);
        e.long(1);
        e.long(4096);
    });
}

/// A chunk of `classes` and the events `events` writes, then the metadata; 1 MHz ticks.
fn recording(compressed: bool, classes: &[ClassSpec], events: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new(compressed);
    w.out.resize(68, 0);
    events(&mut w);
    let metadata_offset = w.out.len() as i64;
    w.event(|m| metadata(m, classes));
    let size = w.out.len() as i64;
    // The reader finds the constant pools without the header's offset; 68 is in range.
    let constant_pool_offset = 68;
    let mut header = b"FLR\0\0\x02\0\x01".to_vec();
    for v in [size, constant_pool_offset, metadata_offset, 1_000_000_000, 2_000_000_000, 0, 1_000_000] {
        header.extend_from_slice(&v.to_be_bytes());
    }
    header.extend_from_slice(&i32::from(compressed).to_be_bytes());
    w.out[..68].copy_from_slice(&header);
    w.out
}

#[test]
fn a_small_recording_of_two_chunks_with_every_measure() {
    for chunks in [vec![chunk(true)], vec![chunk(false)], vec![chunk(true), chunk(false)]] {
        let n = chunks.len() as i64;
        let p = parse(&chunks.concat()).unwrap_or_else(|e| panic!("{} chunks: {e}", chunks.len()));
        let types: Vec<String> =
            (0..p.sample_types.len()).map(|i| format!("{}/{}", p.sample_type_name(i), p.sample_type_unit(i))).collect();
        assert_eq!(
            types,
            [
                "cpu/count",
                "wall/count",
                "alloc_objects/count",
                "alloc_space/bytes",
                "lock_count/count",
                "lock_time/nanoseconds"
            ]
        );
        assert_eq!(p.default_sample_index(), 0);
        let totals: Vec<i64> = (0..6).map(|i| p.total(i)).collect();
        assert_eq!(totals, [3 * n, 4 * n, n, 4096 * n, n, 2_000_000 * n]);
        assert_eq!((p.time_nanos, p.duration_nanos), (1_000_000_000, 2_000_000_000));
        // Functions are shared by the chunks; stacks are leaf first with their lines.
        assert_eq!(p.functions.len(), 2);
        let park = p.samples.iter().find(|s| s.values[4] == 1).unwrap();
        let frames: Vec<(&str, i64)> = park
            .locations
            .iter()
            .map(|&l| {
                let line = &p.location(l).lines[0];
                (p.line_function_name(line), line.line)
            })
            .collect();
        assert_eq!(frames, [("com.example.App.park", 20), ("com.example.App.work", 11)]);
        for s in &p.samples {
            let [label] = s.labels else { panic!("labels {:?}", s.labels) };
            let LabelValue::Str(thread) = label.value else { panic!("{label:?}") };
            assert_eq!((p.str(label.key), p.str(thread)), ("thread", "main"));
        }
    }
}

#[test]
fn malformed_small_recordings_get_byte_offsets() {
    let good = chunk(true);
    let metadata_offset = i64::from_be_bytes(good[24..32].try_into().unwrap()) as usize;
    // A metadata string count far beyond the bytes: the count's offset is after the
    // event size (4), type, start time, duration and id (1 byte each).
    let mut huge = good[..metadata_offset + 8].to_vec();
    huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    let size = huge.len() as i64;
    huge[8..16].copy_from_slice(&size.to_be_bytes());
    let left = huge.len() - metadata_offset - 8;
    let size_field = huge.len() - metadata_offset;
    huge[metadata_offset..metadata_offset + 4].copy_from_slice(&[
        size_field as u8 | 0x80,
        (size_field >> 7) as u8 | 0x80,
        (size_field >> 14) as u8 | 0x80,
        (size_field >> 21) as u8,
    ]);
    assert_eq!(
        err(&huge),
        binary(metadata_offset + 8, &format!("metadata string count 2147483647 exceeds the {} bytes left", left - 5))
    );
    // A metadata offset that points at an ordinary event.
    let mut wrong = good.clone();
    wrong[24..32].copy_from_slice(&68i64.to_be_bytes());
    assert_eq!(err(&wrong), binary(68, "the metadata offset does not point to a metadata event"));
    // An event whose size runs past the chunk.
    let mut long_event = good.clone();
    long_event[68..72].copy_from_slice(&[0xff, 0xff, 0xff, 0x07]);
    assert_eq!(err(&long_event), binary(68, "event size does not fit in the chunk"));
}

#[test]
fn damaged_bytes_never_panic() {
    // Every byte of the small recording, in both integer encodings.
    for compressed in [true, false] {
        let good = chunk(compressed);
        for at in 0..good.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = good.clone();
                damaged[at] ^= flip;
                let _ = parse(&damaged);
            }
        }
    }
    // A few places in a real recording: events, the constant pool, the metadata (last).
    let Some(dir) = fixtures() else { return };
    let bytes = inflated(&read(&dir.join(ASYNC_PROFILER)));
    for at in (68..bytes.len()).step_by(bytes.len() / 8) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0xff;
        let _ = parse(&damaged);
    }
}

/// Sixteen fields of type `class`, inline.
const fn sixteen(class: i64) -> [(&'static str, i64, bool, bool); 16] {
    [("f", class, false, false); 16]
}

/// Types that take no bytes but nest 16 wide, five deep: a million objects per value.
const NESTED: &[ClassSpec] = &[
    ("Empty", 200, &[]),
    ("Wide1", 201, &sixteen(200)),
    ("Wide2", 202, &sixteen(201)),
    ("Wide3", 203, &sixteen(202)),
    ("Wide4", 204, &sixteen(203)),
    ("Wide5", 205, &sixteen(204)),
];

#[test]
fn objects_that_take_no_bytes_are_budgeted() {
    let bomb = recording(true, NESTED, |w| {
        w.event(|e| {
            e.long(1); // type: constant pool
            for _ in 0..3 {
                e.long(0); // start time, duration, delta
            }
            e.out.push(0);
            e.int(1);
            e.long(205);
            e.int(1);
            e.long(1);
        });
    });
    let Error::Binary { reason, .. } = err(&bomb) else { panic!("not a binary error") };
    assert_eq!(reason, "more objects than a recording of this size can hold");
}
