//! The remaining third-party formats: each fixture is imported with the file's own totals;
//! unknown binary input names its magic.

mod common;

use std::collections::BTreeMap;
use std::io::Read;

use common::{fixtures, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::{Profile, SourceFormat};
use stacklens_core::{parse, Error};

/// A fixture's bytes, inflated when gzipped (as `detect` sees them).
fn inflated(path: &std::path::Path) -> Vec<u8> {
    let bytes = read(path);
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return bytes;
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn binary_input_that_is_not_protobuf_names_its_magic() {
    // 0xff is no valid tag of profile.proto's Profile (field 31, wire type 7).
    let err = parse(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00").unwrap_err();
    let Error::UnknownFormat { hint } = &err else { panic!("{err:?}") };
    assert!(hint.starts_with("binary, magic ffd8ffe000104a4649460001, "), "{hint}");
    assert_eq!(detect(b"\x07\x00\x01"), Format::Unrecognized);
    // Profile fields with their wire types still reach the pprof decoder.
    for start in [&b"\x0a\x04\x08\x01\x10\x02"[..], b"\x32\x00", b"\x50\x01", b"\x6a\x01\x00", b"\x78\x01"] {
        assert_eq!(detect(start), Format::Of(SourceFormat::Pprof), "{start:02x?}");
    }
    // Right field, wrong wire type: sample_type (1) as a varint, period (12) as bytes.
    for start in [&b"\x08\x01\x00"[..], b"\x62\x01\x00"] {
        assert_eq!(detect(start), Format::Unrecognized, "{start:02x?}");
    }
}

/// Self value per leaf frame, keyed `module`raw function` (the raw symbol, before
/// demangling, so independent scans of the file can key the same way).
fn self_by_frame(p: &Profile, sample_index: usize) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let Some(&leaf) = s.locations.first() else { continue };
        let location = p.location(leaf);
        let module = location.mapping.map_or("", |m| p.str(p.mapping(m).filename));
        let function = p.str(p.function(location.lines[0].function).system_name);
        *out.entry(format!("{module}`{function}")).or_insert(0) += s.values[sample_index];
    }
    out
}

/// A fixture under `thirdparty/` (inflated) and its import, after checking what
/// `detect` says and which importer made it.
fn import(name: &str, format: Format, source: SourceFormat) -> Option<(Vec<u8>, Profile)> {
    let bytes = inflated(&fixtures()?.join("thirdparty").join(name));
    assert_eq!(detect(&bytes), format, "{name}");
    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, source, "{name}");
    Some((bytes, p))
}

/// [`import`] for a text fixture under `thirdparty/inferno`.
fn import_text(name: &str, format: Format, source: SourceFormat) -> Option<(String, Profile)> {
    let (bytes, p) = import(&format!("inferno/{name}"), format, source)?;
    Some((String::from_utf8(bytes).unwrap(), p))
}

/// Parsing `input` fails with a text error at `line` whose reason has `reason` in it.
fn assert_text_error(input: &str, line: usize, reason: &str) {
    let err = parse(input.as_bytes()).unwrap_err();
    let Error::Text { line: at, reason: why, .. } = &err else { panic!("{input:?}: {err:?}") };
    assert!(why.contains(reason) && *at == line, "{input:?}: {err}");
}

#[test]
fn dtrace_stacks_keep_the_files_counts() {
    let Some((text, p)) =
        import_text("dtrace-stack-ustack.txt", Format::Of(SourceFormat::Dtrace), SourceFormat::Dtrace)
    else {
        return;
    };
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"));

    // Independently: after the header's blank line, a count line closes a stack whose
    // first line is its leaf.
    let (mut expected, mut total, mut leaf) = (BTreeMap::new(), 0, None::<String>);
    for line in text.split("\n\n").skip(1).flat_map(str::lines).map(str::trim).filter(|l| !l.is_empty()) {
        match line.parse::<i64>() {
            Ok(count) => {
                *expected.entry(leaf.take().unwrap()).or_insert(0) += count;
                total += count;
            }
            Err(_) if leaf.is_none() => {
                let frame = line.rsplit_once("+0x").map_or(line, |(f, _)| f);
                leaf = Some(if frame.contains('`') { frame.to_owned() } else { format!("`{frame}") });
            }
            Err(_) => {}
        }
    }
    assert_eq!(p.total(0), total);
    assert_eq!(total, 4, "the fixture's four stacks");
    assert_eq!(self_by_frame(&p, 0), expected);
    // Rust frames come out demangled; the module is the location's mapping.
    let names: Vec<&str> = p.functions.iter().map(|f| p.str(f.name)).collect();
    assert!(names.contains(&"crucible_downstairs::extent::Extent::write"), "{names:?}");
}

#[test]
fn malformed_dtrace_stacks_get_typed_errors() {
    let headed = "CPU     ID                    FUNCTION:NAME\n  0  1  :tick-1s\n\n";
    let cases = [
        (format!("{headed}  app`main+0x1\n  app`start\n"), 5, "ends in the middle of a stack"),
        (format!("{headed}  app`main\n  99999999999999999999\n"), 5, "too large"),
        (headed.to_owned(), 1, "no stacks"),
    ];
    for (input, line, reason) in cases {
        assert_text_error(&input, line, reason);
    }
    let quiet = "\n  libc.so.1`_lwp_start\n  3\n";
    assert_eq!(detect(quiet.as_bytes()), Format::Of(SourceFormat::Dtrace));
    assert_eq!(parse(quiet.as_bytes()).unwrap().total(0), 3);
}

/// Adds `value` to `key` in `map`.
fn add(map: &mut BTreeMap<String, i64>, key: String, value: i64) {
    *map.entry(key).or_insert(0) += value;
}

/// `map` without its zero entries (the importers make no sample for a zero self value).
fn nonzero(map: BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    map.into_iter().filter(|(_, v)| *v != 0).collect()
}

#[test]
fn vtune_csv_keeps_self_cpu_time() {
    let Some((text, p)) = import_text("vtune.csv", Format::Of(SourceFormat::Vtune), SourceFormat::Vtune) else {
        return;
    };
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("cpu", "nanoseconds"));

    // Independently: `name,seconds,module` from the right (names may hold commas).
    let (mut expected, mut seconds) = (BTreeMap::new(), 0.0);
    for line in text.lines().skip(1) {
        let mut fields = line.rsplitn(3, ',');
        let (module, time, name) = (fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap());
        let time: f64 = time.parse().unwrap();
        seconds += time;
        add(&mut expected, format!("{module}`{}", name.trim().trim_matches('"')), (time * 1e9).round() as i64);
    }
    assert_eq!(p.total(0), (seconds * 1e9).round() as i64);
    assert!(p.total(0) > 0);
    assert_eq!(self_by_frame(&p, 0), nonzero(expected));
}

#[test]
fn visual_studio_csv_keeps_calls_and_exclusive_time() {
    let format = (Format::Of(SourceFormat::VisualStudio), SourceFormat::VisualStudio);
    let Some((text, p)) = import_text("vsprof-CallTreeSummary.csv", format.0, format.1) else { return };
    let types: Vec<(&str, &str)> = (0..2).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();
    assert_eq!(types, [("calls", "count"), ("elapsed_time", "percent/100")]);

    // Independently: every row ends with a comma, so each field is a quoted or a bare
    // run followed by one.
    let field = regex::Regex::new(r#"(?:"([^"]*)"|([^,"]*)),"#).unwrap();
    let (mut calls, mut exclusive) = (BTreeMap::new(), BTreeMap::new());
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = field.captures_iter(line).map(|c| c.get(1).or(c.get(2)).unwrap().as_str()).collect();
        let key = format!("{}`{}", fields[7], fields[1]);
        add(&mut calls, key.clone(), fields[2].replace(',', "").parse().unwrap());
        add(&mut exclusive, key, (fields[4].parse::<f64>().unwrap() * 100.0).round() as i64);
    }
    let total = |m: &BTreeMap<String, i64>| m.values().sum::<i64>();
    assert_eq!((p.total(0), p.total(1)), (total(&calls), total(&exclusive)));
    assert!((9990..=10010).contains(&p.total(1)), "exclusive times add up to 100%: {}", p.total(1));
    let importer = |i| nonzero(self_by_frame(&p, i));
    assert_eq!(importer(0), nonzero(calls));
    assert_eq!(importer(1), nonzero(exclusive));
}

#[test]
fn malformed_csv_call_trees_get_typed_errors() {
    let cases: [(&str, usize, &str); 5] = [
        ("Function Stack,CPU Time:Self,Module\nmain,0.5,a\n   deep,0.1,a\n", 3, "skips a level"),
        ("Function Stack,CPU Time:Self,Module\nmain,fast,a\n", 2, "not a number of seconds"),
        ("Function Stack,CPU Time:Self,Module\n", 1, "no rows"),
        ("Level,Function Name,Number of Calls,Module Name\n0,\"a\",x1,\"m\"\n", 2, "Number of Calls 'x1'"),
        ("Level,Function Name,Module Name\n0,\"a\",\"m\"\n", 1, "no exclusive value column"),
    ];
    for (input, line, reason) in cases {
        assert_text_error(input, line, reason);
    }
}

#[test]
fn macos_sample_keeps_the_call_trees_counts() {
    let format = (Format::Of(SourceFormat::MacosSample), SourceFormat::MacosSample);
    let Some((text, p)) = import_text("macos-sample.txt", format.0, format.1) else { return };
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"));

    // Independently: (depth, count, key) per call graph line; a node's self count is its
    // count minus those of the lines one level deeper before the next line at its depth.
    let line = regex::Regex::new(r"^    ([ +|:!]*)(\d+) (.*)$").unwrap();
    let nodes: Vec<(usize, i64, String)> = text
        .lines()
        .skip_while(|l| *l != "Call graph:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let c = line.captures(l).unwrap();
            let key = match c[3].rsplit_once("  (in ") {
                Some((function, place)) => format!("{}`{}", place.split(')').next().unwrap(), function.trim()),
                None => format!("thread {}", &c[3]),
            };
            (c[1].len() / 2, c[2].parse().unwrap(), key)
        })
        .collect();
    let mut expected = BTreeMap::new();
    for (i, (depth, count, key)) in nodes.iter().enumerate() {
        let below = nodes[i + 1..].iter().take_while(|n| n.0 > *depth);
        let children: i64 = below.filter(|n| n.0 == depth + 1).map(|n| n.1).sum();
        add(&mut expected, key.clone(), count - children);
    }
    let threads: i64 = nodes.iter().filter(|n| n.0 == 0).map(|n| n.1).sum();
    assert_eq!(p.total(0), threads);
    assert_eq!(threads, 3 * 825, "three threads of 825 samples");
    assert_eq!(self_by_frame(&p, 0), nonzero(expected));
    // Each sample carries its thread.
    let thread = p.strings.iter().position(|s| s == "thread").unwrap();
    assert!(p.samples.iter().all(|s| s.labels.len() == 1 && s.labels[0].key.0 as usize == thread));
}

#[test]
fn malformed_macos_samples_get_typed_errors() {
    let head = "Analysis of sampling a (pid 1) every 1 millisecond\n\nCall graph:\n";
    let cases = [
        ("Analysis of sampling a (pid 1)\n", 1, "no 'Call graph:' line"),
        ("    5 Thread_1\n    + 3 main  (in a)\n    +       3 f  (in a)\n", 6, "skips a level"),
        ("    5 Thread_1\n    + 9 main  (in a)\n    2 Thread_2\n", 6, "more samples than the node"),
        ("    5 Thread_1\n    + x main  (in a)\n", 5, "expected 'count function"),
        ("    5 Thread_1\n     + 3 main  (in a)\n", 5, "odd indentation"),
        ("\n", 3, "no samples"),
    ];
    for (tree, line, reason) in cases {
        let input = if tree.starts_with("Analysis") { tree.to_owned() } else { format!("{head}{tree}") };
        assert_text_error(&input, line, reason);
    }
}

#[test]
fn dhat_keeps_bytes_and_blocks_per_program_point() {
    let Some((bytes, p)) = import("firefox-profiler/dhat.json.gz", Format::Json, SourceFormat::Dhat) else { return };
    let types: Vec<&str> = (0..p.sample_types.len()).map(|i| p.sample_type_name(i)).collect();
    assert_eq!(types, ["total_bytes", "total_blocks", "max_bytes", "bytes_at_global_max", "bytes_at_end"]);
    assert_eq!(p.default_sample_index(), 0);

    // Independently: per field, the sum over program points and per innermost frame
    // (`0x…: name (file:line:column)` → name).
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let ftbl = json["ftbl"].as_array().unwrap();
    let pps = json["pps"].as_array().unwrap();
    for (i, field) in ["tb", "tbk", "mb", "gb", "eb"].into_iter().enumerate() {
        let mut expected = BTreeMap::new();
        for pp in pps {
            let leaf = ftbl[pp["fs"][0].as_u64().unwrap() as usize].as_str().unwrap();
            let name = leaf.split_once(": ").map_or(leaf, |(_, rest)| rest.rsplit_once(" (").unwrap().0);
            add(&mut expected, format!("`{name}"), pp[field].as_i64().unwrap());
        }
        assert_eq!(p.total(i), expected.values().sum::<i64>(), "{field}");
        assert_eq!(self_by_frame(&p, i), expected, "{field}");
    }
    assert_eq!((p.total(0), p.total(1)), (21642, 133), "the fixture's tb and tbk sums");
    // Frames keep their file, line and address.
    let leaf = p.location(p.samples.sample(0).locations[0]);
    let function = p.function(leaf.lines[0].function);
    let shown = (p.str(function.name), p.str(function.filename), leaf.lines[0].line, leaf.address);
    assert_eq!(shown, ("<alloc::alloc::Global as core::alloc::Allocator>::allocate", "alloc.rs", 226, 0x1084fcbbb));
}

#[test]
fn malformed_dhat_gets_typed_errors() {
    let cases = [
        (r#"{"dhatFileVersion":1,"pps":[],"ftbl":[]}"#, "dhatFileVersion 1"),
        (r#"{"dhatFileVersion":2,"pps":[{"tb":1,"tbk":1,"fs":[3]}],"ftbl":["[root]"]}"#, "pps[0].fs"),
        (r#"{"dhatFileVersion":2,"pps":[{"tb":1,"fs":[]}],"ftbl":["[root]"]}"#, "pps[0] lacks a count"),
        (r#"{"dhatFileVersion":2,"pps":[],"ftbl":[7]}"#, "ftbl[0] is not a string"),
        (r#"{"dhatFileVersion":2,"pps":[]}"#, "no frame table"),
    ];
    for (input, reason) in cases {
        let err = parse(input.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)) && err.to_string().contains(reason), "{input}: {err}");
    }
}

/// A protobuf varint at `at`: its value and the position after it.
fn varint(bytes: &[u8], mut at: usize) -> (u64, usize) {
    let mut value = 0;
    for shift in (0..64).step_by(7) {
        let b = bytes[at];
        at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
    }
    (value, at)
}

/// The varint fields of a protobuf message as (field, value); other fields skipped.
fn varint_fields(message: &[u8]) -> Vec<(u64, u64)> {
    let (mut out, mut at) = (Vec::new(), 0);
    while at < message.len() {
        let (tag, next) = varint(message, at);
        let (value, next) = varint(message, next);
        at = next;
        match tag & 7 {
            0 => out.push((tag >> 3, value)),
            2 => at += value as usize,
            wire => panic!("wire type {wire} in the fixture"),
        }
    }
    out
}

#[test]
fn simpleperf_keeps_samples_and_event_counts() {
    let format = (Format::Of(SourceFormat::Simpleperf), SourceFormat::Simpleperf);
    let Some((bytes, p)) = import("firefox-profiler/simpleperf-cpu-clock.trace.gz", format.0, format.1) else { return };
    let types: Vec<(&str, &str)> =
        (0..p.sample_types.len()).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();

    // Independently: walk the records (u32 size, then a Record whose field 1 is a
    // Sample, 2 a LostSituation) and sum each sample's event_count (field 4) per
    // event_type_id (field 5); the LostSituation's sample_count is simpleperf's own total.
    let (mut at, mut samples, mut counted) = (12, 0, None);
    let mut events: BTreeMap<u64, i64> = BTreeMap::new();
    loop {
        let size = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 4;
        if size == 0 {
            break;
        }
        let record = &bytes[at..at + size];
        at += size;
        let (tag, body) = varint(record, 0);
        let (_, body) = varint(record, body);
        let fields = varint_fields(&record[body..]);
        let field = |n| fields.iter().find(|f| f.0 == n).map(|f| f.1);
        match tag >> 3 {
            1 => {
                samples += 1;
                *events.entry(field(5).unwrap_or(0)).or_insert(0) += field(4).unwrap_or(0) as i64;
            }
            2 => counted = field(1),
            _ => {}
        }
    }
    assert_eq!(Some(samples as u64), counted, "the file's own sample count");
    assert_eq!(p.total(0), samples);
    for (event, total) in events {
        assert_eq!(p.total(event as usize + 1), total, "{types:?}");
    }
    assert_eq!(types[1], ("cpu-clock", "nanoseconds"));
}

#[test]
fn malformed_simpleperf_gets_typed_errors() {
    let cases: [(&[u8], usize, &str); 4] = [
        (b"SIMPLEPERF\x01\x00", 12, "ends before its end record"),
        (b"SIMPLEPERF\x01\x00\x09\x00\x00\x00\x0a", 16, "record past the end"),
        (b"SIMPLEPERF\x01\x00\x02\x00\x00\x00\x0a\x05\x00\x00\x00\x00", 16, "malformed record"),
        (b"SIMPLEPERF\x01\x00\x04\x00\x00\x00\x0a\x02\x1a\x00\x00\x00\x00\x00", 16, "no File record"),
    ];
    for (input, offset, reason) in cases {
        let err = parse(input).unwrap_err();
        let Error::Binary { offset: at, reason: why, .. } = &err else { panic!("{input:02x?}: {err:?}") };
        assert!(why.contains(reason) && *at == offset, "{input:02x?}: {err}");
    }
}

#[test]
fn art_trace_keeps_wall_time_between_method_events() {
    let format = (Format::Of(SourceFormat::ArtTrace), SourceFormat::ArtTrace);
    let Some((bytes, p)) = import("firefox-profiler/art-trace-regular.trace.gz", format.0, format.1) else { return };
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("wall", "microseconds"));

    // Independently: the fixture is version 3 with the dual clock (14-byte records: u16
    // thread, u32 method|action, u32 thread time, u32 wall time). Per thread, the wall
    // time to the next record goes to the innermost entered method, if any.
    let text_end = bytes.windows(6).position(|w| w == b"\n*end\n").unwrap() + 6;
    let header = String::from_utf8_lossy(&bytes[..text_end]);
    let names: BTreeMap<u32, String> = header
        .lines()
        .skip_while(|l| *l != "*methods")
        .skip(1)
        .take_while(|l| !l.starts_with('*'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let id = u32::from_str_radix(f[0].trim_start_matches("0x"), 16).unwrap(); // `0` is the one decimal
            (id, format!("`{}.{}", f[1], f[2]))
        })
        .collect();
    let data = &bytes[text_end..];
    assert_eq!((&data[..4], data[4], data[16]), (&b"SLOW"[..], 3, 14));
    let mut threads: BTreeMap<u16, (Vec<u32>, u32)> = BTreeMap::new();
    let mut expected = BTreeMap::new();
    for record in data[usize::from(data[6])..].chunks_exact(14) {
        let tid = u16::from_le_bytes([record[0], record[1]]);
        let method = u32::from_le_bytes(record[2..6].try_into().unwrap());
        let wall = u32::from_le_bytes(record[10..14].try_into().unwrap());
        let (stack, last) = threads.entry(tid).or_insert((Vec::new(), wall));
        if let Some(top) = stack.last() {
            // A few methods the trace calls are missing from its table.
            let name = names.get(top).cloned().unwrap_or_else(|| format!("`method 0x{top:x}"));
            add(&mut expected, name, i64::from(wall.saturating_sub(*last)));
        }
        *last = wall;
        if method & 3 == 0 {
            stack.push(method & !3);
        } else {
            stack.pop();
        }
    }
    let expected = nonzero(expected);
    assert_eq!(p.total(0), expected.values().sum::<i64>());
    assert!(p.total(0) > 1_000_000, "over a second of traced wall time: {}", p.total(0));
    assert_eq!(self_by_frame(&p, 0), expected);
}

#[test]
fn malformed_art_traces_get_typed_errors() {
    let header = "*version\n3\nclock=dual\n*threads\n1\tmain\n*methods\n0x10\tA\tf\t()V\tA.java\n*end\n";
    let cases: [(String, &str); 4] = [
        ("*version\n3\n".to_owned(), "no '*end' line"),
        ("*version\nx\n*end\nSLOW".to_owned(), "version 'x'"),
        (format!("{header}WOLS"), "no 'SLOW'"),
        (format!("{header}SLOW\x03\x00"), "truncated"),
    ];
    for (input, reason) in cases {
        let err = parse(input.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::Binary { .. }) && err.to_string().contains(reason), "{input:?}: {err}");
    }
}
