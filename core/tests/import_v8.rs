//! V8 / Chrome importers: `.cpuprofile` (new and old shapes), `.heapprofile` and the
//! DevTools performance trace. Every fixture's totals and per-function self values are
//! recomputed here straight from the raw JSON and compared with the import.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, read};
use serde_json::Value;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::model::{LabelValue, Profile, SourceFormat};
use stacklens_core::{parse, Error, ProfileKind};

const CPUPROFILES: &[&str] = &[
    "thirdparty/speedscope/chrome65-simple.cpuprofile",
    "thirdparty/speedscope/node10.11-example.cpuprofile",
    "thirdparty/firefox-profiler/hello.cjs-20231120T211435.cpuprofile",
];
const TRACE: &str = "thirdparty/speedscope/chrome116-Trace-20230603T221323.json";
const HEAP: &str = "thirdparty/speedscope/chrome69-Heap-20181005T144546.heapprofile";

/// Self value per function name as `top` reports it for one sample type.
fn flat(p: &Profile, sample_index: usize) -> BTreeMap<String, i64> {
    let query = Query { sample: sample_index.into(), ..Query::default() };
    let report = query.prepare(p).and_then(|prepared| top(&prepared, &TopOptions::default())).unwrap();
    report.functions.iter().filter(|f| f.flat != 0).map(|f| (f.name.clone(), f.flat)).collect()
}

fn hottest(by_name: &BTreeMap<String, i64>) -> (&str, i64) {
    let (name, v) = by_name.iter().max_by_key(|(n, v)| (**v, std::cmp::Reverse(*n))).unwrap();
    (name.as_str(), *v)
}

/// The name a V8 call frame is shown with (anonymous functions: file and 1-based line).
fn frame_name(frame: &Value) -> String {
    let name = frame["functionName"].as_str().unwrap_or("");
    if !name.is_empty() {
        return name.to_owned();
    }
    let base = frame["url"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("").to_owned();
    match frame["lineNumber"].as_i64() {
        _ if base.is_empty() => "(anonymous)".to_owned(),
        Some(l) if l >= 0 => format!("({} {base}:{})", "anonymous", l + 1),
        _ => format!("(anonymous {base})"),
    }
}

/// Independent reading of a CPU profile: node id → name, sample node ids, sample times
/// (µs) and the end time. Returns (sample count, total wall, self counts, self wall).
struct Expected {
    samples: i64,
    wall: i64,
    count_by_name: BTreeMap<String, i64>,
    wall_by_name: BTreeMap<String, i64>,
}

fn expect_cpu(names: &BTreeMap<u64, String>, samples: &[u64], times: &[i64], end: Option<i64>) -> Expected {
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by_key(|&i| times[i]);
    let mut e = Expected { samples: 0, wall: 0, count_by_name: BTreeMap::new(), wall_by_name: BTreeMap::new() };
    for (k, &i) in order.iter().enumerate() {
        let next = order.get(k + 1).map(|&j| times[j]).or(end).unwrap_or(times[i]);
        let dur = (next - times[i]).max(0);
        e.samples += 1;
        e.wall += dur;
        let name = &names[&samples[i]];
        if name != "(root)" {
            *e.count_by_name.entry(name.clone()).or_default() += 1;
            *e.wall_by_name.entry(name.clone()).or_default() += dur;
        }
    }
    e.count_by_name.retain(|_, v| *v != 0);
    e.wall_by_name.retain(|_, v| *v != 0);
    e
}

fn expect_cpuprofile(json: &Value) -> Expected {
    let mut names = BTreeMap::new();
    if let Some(nodes) = json["nodes"].as_array() {
        for n in nodes {
            names.insert(n["id"].as_u64().unwrap(), frame_name(&n["callFrame"]));
        }
    } else {
        let mut pending = vec![&json["head"]];
        while let Some(n) = pending.pop() {
            names.insert(n["id"].as_u64().unwrap(), frame_name(n));
            pending.extend(n["children"].as_array().unwrap());
        }
    }
    let samples: Vec<u64> = json["samples"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    let (times, end) = if let Some(deltas) = json["timeDeltas"].as_array() {
        let mut t = json["startTime"].as_i64().unwrap();
        let times = deltas.iter().map(|d| {
            t += d.as_i64().unwrap();
            t
        });
        (times.collect::<Vec<_>>(), json["endTime"].as_i64())
    } else {
        let stamps: Vec<i64> = json["timestamps"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
        (stamps[stamps.len() - samples.len()..].to_vec(), None)
    };
    expect_cpu(&names, &samples, &times, end)
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&common::inflated(&read(path))).unwrap()
}

fn timestamps(p: &Profile) -> Vec<(String, i64)> {
    p.samples
        .iter()
        .map(|s| {
            let thread = s.labels.iter().find_map(|l| match l.value {
                LabelValue::Str(v) if p.str(l.key) == "thread" => Some(p.str(v).to_owned()),
                _ => None,
            });
            let ts = s.labels.iter().find_map(|l| match l.value {
                LabelValue::Num { value, unit } if p.str(l.key) == "timestamp" => {
                    assert_eq!(p.str(unit), "nanoseconds");
                    Some(value)
                }
                _ => None,
            });
            (thread.unwrap_or_default(), ts.expect("every sample has a timestamp"))
        })
        .collect()
}

fn assert_monotonic(p: &Profile) {
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for (thread, ts) in timestamps(p) {
        let prev = last.insert(thread.clone(), ts);
        assert!(prev.is_none_or(|prev| prev <= ts), "{thread}: timestamp {ts} after {prev:?}");
    }
}

#[test]
fn every_cpuprofile_matches_its_file() {
    let Some(dir) = fixtures() else { return };
    for name in CPUPROFILES {
        let path = dir.join(name);
        let json = read_json(&path);
        let p = parse(&read(&path)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.source, SourceFormat::V8CpuProfile, "{name}");
        assert_eq!(ProfileKind::of(&p), ProfileKind::Cpu, "{name}");
        assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"), "{name}");
        assert_eq!((p.sample_type_name(1), p.sample_type_unit(1)), ("wall", "microseconds"), "{name}");
        let e = expect_cpuprofile(&json);
        assert_eq!((p.total(0), p.total(1)), (e.samples, e.wall), "{name}");
        assert_eq!(flat(&p, 0), e.count_by_name, "{name}");
        assert_eq!(flat(&p, 1), e.wall_by_name, "{name}");
        assert_monotonic(&p);
    }
}

#[test]
fn cpuprofile_spot_checks() {
    let Some(dir) = fixtures() else { return };
    // Chrome 65: 29 samples; d() is hot under both b() and c(). The last sample runs to
    // endTime, so wall = endTime - first sample = 163140647178 - 163140610861.
    let p = parse(&read(&dir.join(CPUPROFILES[0]))).unwrap();
    assert_eq!((p.total(0), p.total(1)), (29, 36_317));
    assert_eq!(hottest(&flat(&p, 0)), ("d", 28));
    let d = p.functions.iter().find(|f| p.str(f.name) == "d").unwrap();
    assert_eq!(d.start_line, 14); // lineNumber 13, 0-based
    let first = p.samples.sample(0).labels.iter().find(|l| p.str(l.key) == "timestamp").unwrap();
    assert!(matches!(first.value, LabelValue::Num { value: 163_140_610_861_000, .. }));

    // The same program recorded by Node 10 in the old shape (head tree, timestamps):
    // the same samples; its endTime is in whole seconds, so the last sample gets 0.
    let old = parse(&read(&dir.join(CPUPROFILES[1]))).unwrap();
    assert_eq!(flat(&old, 0), flat(&p, 0));
    assert_eq!(old.total(1), 36_317 - (163_140_647_178 - 163_140_645_206));

    // Node 20 --cpu-prof of hello.cjs: 150 samples, urls as files, 1-based lines.
    let node = parse(&read(&dir.join(CPUPROFILES[2]))).unwrap();
    assert_eq!(node.total(0), 150);
    let by_wall = flat(&node, 1);
    assert_eq!(hottest(&by_wall), ("compileForInternalLoader", 46_065));
    assert_eq!(hottest(&flat(&node, 0)), ("compileForInternalLoader", 40));
    let main = node.functions.iter().find(|f| node.str(f.filename) == "node:internal/main/run_main_module").unwrap();
    assert_eq!((node.str(main.name), main.start_line), ("(anonymous run_main_module:1)", 1));
}

/// Independent reading of the trace: per (pid, profile id) nodes, samples and deltas,
/// joined in `ts` order.
fn expect_trace(json: &Value) -> (Expected, BTreeMap<String, i64>) {
    let events = common::cpu_profile_events(json);
    // Per profile: start time, node names, sample node ids, time deltas.
    type Gathered = (i64, BTreeMap<u64, String>, Vec<u64>, Vec<i64>);
    let mut profiles: BTreeMap<(i64, String), Gathered> = BTreeMap::new();
    for e in events {
        let key = (e["pid"].as_i64().unwrap(), e["id"].as_str().unwrap().to_owned());
        let entry = profiles.entry(key).or_default();
        let data = &e["args"]["data"];
        if e["name"] == "Profile" {
            entry.0 = data["startTime"].as_i64().unwrap();
            continue;
        }
        for n in data["cpuProfile"]["nodes"].as_array().into_iter().flatten() {
            entry.1.insert(n["id"].as_u64().unwrap(), frame_name(&n["callFrame"]));
        }
        entry.2.extend(data["cpuProfile"]["samples"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()));
        entry.3.extend(data["timeDeltas"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()));
    }
    let mut all = Expected { samples: 0, wall: 0, count_by_name: BTreeMap::new(), wall_by_name: BTreeMap::new() };
    let mut per_profile = BTreeMap::new();
    for ((pid, id), (start, names, samples, deltas)) in profiles {
        let mut t = start;
        let times: Vec<i64> = deltas
            .iter()
            .map(|d| {
                t += d;
                t
            })
            .collect();
        let e = expect_cpu(&names, &samples, &times, None);
        per_profile.insert(format!("{pid} {id}"), e.samples);
        all.samples += e.samples;
        all.wall += e.wall;
        for (k, v) in e.count_by_name {
            *all.count_by_name.entry(k).or_default() += v;
        }
        for (k, v) in e.wall_by_name {
            *all.wall_by_name.entry(k).or_default() += v;
        }
    }
    (all, per_profile)
}

#[test]
fn chrome_trace_matches_its_file() {
    let Some(dir) = fixtures() else { return };
    let path = dir.join(TRACE);
    let json = read_json(&path);
    let p = parse(&read(&path)).unwrap();
    assert_eq!(p.source, SourceFormat::ChromeTrace);
    assert_eq!(ProfileKind::of(&p), ProfileKind::Cpu);
    let (e, per_profile) = expect_trace(&json);
    assert_eq!((p.total(0), p.total(1)), (e.samples, e.wall));
    assert_eq!(flat(&p, 0), e.count_by_name);
    assert_eq!(flat(&p, 1), e.wall_by_name);
    // One profiled thread, the renderer's main thread (its chunks come from tid 5143).
    assert_eq!(per_profile.into_iter().collect::<Vec<_>>(), [("6543 0x2".to_owned(), 1600)]);
    let threads: std::collections::BTreeSet<String> = timestamps(&p).into_iter().map(|(t, _)| t).collect();
    assert_eq!(threads.into_iter().collect::<Vec<_>>(), ["Renderer CrRendererMain (6543:259)"]);
    let tid = p.samples.sample(0).labels.iter().find(|l| p.str(l.key) == "tid").unwrap();
    assert!(matches!(tid.value, LabelValue::Num { value: 259, .. }));
    // The file has 7 negative deltas: samples are put in time order first.
    assert_monotonic(&p);
    // Mostly idle (1376 samples: the (idle) node's hitCount); the page's JS is gamma().
    assert_eq!(hottest(&flat(&p, 0)), ("(idle)", 1376));
    assert_eq!(hottest(&flat(&p, 1)), ("(idle)", 230_497));
    let mut js = flat(&p, 1);
    js.retain(|name, _| !name.starts_with('('));
    assert_eq!(hottest(&js), ("gamma", 8_593));
    let alpha = p.functions.iter().find(|f| p.str(f.name) == "alpha").unwrap();
    assert!(p.str(alpha.filename).ends_with("sample/programs/javascript/simple.js"));
    assert_eq!(alpha.start_line, 1);
}

#[test]
fn heapprofile_matches_its_file() {
    let Some(dir) = fixtures() else { return };
    let path = dir.join(HEAP);
    let json = read_json(&path);
    let p = parse(&read(&path)).unwrap();
    assert_eq!(p.source, SourceFormat::V8HeapProfile);
    assert_eq!(ProfileKind::of(&p), ProfileKind::Memory);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("space", "bytes"));
    let (mut total, mut by_name) = (0, BTreeMap::<String, i64>::new());
    let mut pending = vec![&json["head"]];
    while let Some(n) = pending.pop() {
        let size = n["selfSize"].as_i64().unwrap();
        total += size;
        if size != 0 {
            *by_name.entry(frame_name(&n["callFrame"])).or_default() += size;
        }
        pending.extend(n["children"].as_array().unwrap());
    }
    assert_eq!(p.total(0), total);
    assert_eq!(total, 10_030_888);
    assert_eq!(flat(&p, 0), by_name);
    assert_eq!(hottest(&by_name), ("(V8 API)", 1_894_920));
}

fn err(json: &str) -> Error {
    parse(json.as_bytes()).expect_err(json)
}

#[test]
fn malformed_cpuprofiles_are_typed_errors() {
    let missing_nodes = err(r#"{"startTime": 0, "endTime": 5, "samples": [1], "timeDeltas": [1]}"#);
    assert!(matches!(&missing_nodes, Error::Invalid(m) if m.contains("has no nodes")), "{missing_nodes}");

    let node = r#"{"id": 1, "callFrame": {"functionName": "(root)", "url": "", "lineNumber": -1}, "children": [2]},
                  {"id": 2, "callFrame": {"functionName": "f", "url": "a.js", "lineNumber": 3}}"#;
    let unknown = err(&format!(r#"{{"nodes": [{node}], "startTime": 0, "samples": [2, 9], "timeDeltas": [1, 1]}}"#));
    assert_eq!(unknown, Error::DanglingReference { what: "sample 1".into(), target: "node", id: 9 });

    let bad_child = err(r#"{"nodes": [{"id": 1, "callFrame": {}, "children": [4]}], "samples": [1]}"#);
    assert!(matches!(bad_child, Error::DanglingReference { id: 4, .. }), "{bad_child}");

    // JSON has no NaN; a delta that is not a number, or absurdly large, is refused.
    for delta in [r#""NaN""#, "null", "1e300"] {
        let e = err(&format!(r#"{{"nodes": [{node}], "startTime": 0, "samples": [2], "timeDeltas": [{delta}]}}"#));
        assert!(matches!(&e, Error::Invalid(m) if m.contains("time delta 0")), "{e}");
    }
    let short = err(&format!(r#"{{"nodes": [{node}], "startTime": 0, "samples": [2, 2], "timeDeltas": [1]}}"#));
    assert!(short.to_string().contains("2 samples but 1 timeDeltas"), "{short}");
    let cycle = err(r#"{"nodes": [{"id": 1, "callFrame": {}, "parent": 2}, {"id": 2, "callFrame": {}, "parent": 1}],
            "samples": [1], "timeDeltas": [0]}"#);
    assert!(cycle.to_string().contains("cycle"), "{cycle}");
    let twice = err(r#"{"nodes": [{"id": 1, "callFrame": {}}, {"id": 1, "callFrame": {}}], "samples": [1]}"#);
    assert!(twice.to_string().contains("appears twice"), "{twice}");
}

#[test]
fn negative_deltas_reorder_samples_instead_of_negative_time() {
    // Samples at 10 (f), 7 (g), 12 (f); end 20: in time order g 7..10, f 10..12, f 12..20.
    let doc = r#"{"nodes": [{"id": 1, "callFrame": {"functionName": "(root)"}, "children": [2, 3]},
        {"id": 2, "callFrame": {"functionName": "f"}}, {"id": 3, "callFrame": {"functionName": "g"}}],
        "startTime": 0, "endTime": 20, "samples": [2, 3, 2], "timeDeltas": [10, -3, 5]}"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!((p.total(0), p.total(1)), (3, 13));
    assert_eq!(flat(&p, 1), BTreeMap::from([("f".to_owned(), 10), ("g".to_owned(), 3)]));
    assert_monotonic(&p);
}

#[test]
fn cpuprofile_without_samples_uses_hit_counts() {
    let doc = r#"{"nodes": [{"id": 1, "callFrame": {"functionName": "(root)"}, "children": [2]},
        {"id": 2, "callFrame": {"functionName": "f", "url": "file:///x/a.js", "lineNumber": 4, "columnNumber": 2},
         "hitCount": 7}], "startTime": 0, "endTime": 1}"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!(p.sample_types.len(), 1);
    assert_eq!(flat(&p, 0), BTreeMap::from([("f".to_owned(), 7)]));
    let line = p.location(p.samples.sample(0).locations[0]).lines[0];
    assert_eq!((line.line, line.column), (5, 3));
}

#[test]
fn malformed_traces_and_heap_profiles_are_typed_errors() {
    let empty = err(r#"{"traceEvents": [], "metadata": {}}"#);
    assert_eq!(empty, Error::UnknownFormat { hint: "a Chrome trace with no events, so no CPU profile".into() });
    let chunk = r#"{"name": "ProfileChunk", "ph": "P", "pid": 1, "tid": 2, "ts": 5, "id": "0x1",
        "args": {"data": {"cpuProfile": {"nodes": [{"id": 1, "callFrame": {"functionName": "(root)"}}],
        "samples": [1, 3]}, "timeDeltas": [1, 1]}}}"#;
    let profile = r#"{"name": "Profile", "ph": "P", "pid": 1, "tid": 2, "ts": 1, "id": "0x1",
        "args": {"data": {"startTime": 100}}}"#;
    // A bare array of events, too.
    let dangling = err(&format!("[{profile}, {chunk}]"));
    assert_eq!(dangling, Error::DanglingReference { what: "sample 1".into(), target: "node", id: 3 });
    let mismatched = err(&format!("[{profile}, {}]", chunk.replace("[1, 1]", "[1]")));
    assert!(mismatched.to_string().contains("2 samples but 1 timeDeltas"), "{mismatched}");

    let heap = err(r#"{"head": {"callFrame": {"functionName": "(root)"}, "selfSize": 0, "children": [
        {"callFrame": {"functionName": "f"}, "selfSize": -5, "children": []}]}}"#);
    assert!(matches!(&heap, Error::Invalid(m) if m.contains("negative")), "{heap}");
    let heap = err(r#"{"head": {"callFrame": {}, "selfSize": 0, "children": [{"selfSize": 1}]}}"#);
    assert!(heap.to_string().contains("no callFrame"), "{heap}");
}

#[path = "json_mutation/mod.rs"]
mod json_mutation;

mod mutations {
    use super::json_mutation::{mutate, replacement};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn seeds() -> Vec<Value> {
        let frame = |name: &str, line: i64| json!({"functionName": name, "url": "file:///a/b.js", "lineNumber": line, "columnNumber": 2});
        vec![
            json!({"nodes": [
                {"id": 1, "callFrame": frame("(root)", -1), "children": [2, 3]},
                {"id": 2, "callFrame": frame("f", 3), "children": [4], "hitCount": 1},
                {"id": 3, "callFrame": frame("", 9)},
                {"id": 4, "callFrame": frame("g", 5), "positionTicks": [{"line": 6, "ticks": 1}]}],
                "startTime": 100, "endTime": 200, "samples": [2, 4, 3, 4], "timeDeltas": [5, 10, -3, 20]}),
            json!({"head": {"functionName": "(root)", "id": 1, "hitCount": 0, "children": [
                {"functionName": "a", "url": "", "lineNumber": 0, "id": 2, "hitCount": 2, "children": []}]},
                "startTime": 1, "endTime": 2, "samples": [2, 2], "timestamps": [1000000, 1000500, 1001000]}),
            json!({"head": {"callFrame": frame("(root)", -1), "selfSize": 0, "id": 1, "children": [
                {"callFrame": frame("alloc", 1), "selfSize": 4096, "id": 2, "children": [
                    {"callFrame": frame("inner", 2), "selfSize": 64, "id": 3, "children": []}]}]},
                "samples": [{"size": 64, "nodeId": 3, "ordinal": 1}]}),
            json!({"traceEvents": [
                {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "Main"}},
                {"name": "Profile", "ph": "P", "pid": 1, "tid": 2, "ts": 10, "id": "0x1", "args": {"data": {"startTime": 10}}},
                {"name": "ProfileChunk", "ph": "P", "pid": 1, "tid": 3, "ts": 20, "id": "0x1", "args": {"data": {
                    "cpuProfile": {"nodes": [{"id": 1, "callFrame": frame("(root)", -1)},
                                             {"id": 2, "callFrame": frame("f", 1), "parent": 1}],
                                   "samples": [2, 1]}, "timeDeltas": [1, 2]}}},
                {"name": "ProfileChunk", "ph": "P", "pid": 1, "tid": 3, "ts": 30, "id": "0x1", "args": {"data": {
                    "cpuProfile": {"nodes": [{"id": 3, "callFrame": frame("g", 4), "parent": 2}], "samples": [3]},
                    "timeDeltas": [-1], "endTime": 50}}}]}),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn mutated_v8_documents_never_panic(
            seed in 0..4usize,
            mutations in proptest::collection::vec((any::<prop::sample::Index>(), replacement()), 1..6),
        ) {
            let bytes = mutate(&seeds()[seed], &mutations);
            if let Err(e) = stacklens_core::parse(&bytes) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn unmutated_seeds_import() {
        for seed in seeds() {
            stacklens_core::parse(&serde_json::to_vec(&seed).unwrap()).unwrap();
        }
    }
}
