//! speedscope's file format: py-spy's output checked against numbers recomputed from
//! the raw JSON, hand-made evented and multi-profile files, and typed errors.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, read};
use serde_json::Value;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::model::{LabelValue, Profile, SourceFormat};
use stacklens_core::{parse, Error, ProfileKind};

const PYSPY: &str = "tools/pyspy-workload-A.speedscope.json";

fn flat(p: &Profile, sample_index: &str) -> BTreeMap<String, i64> {
    let query = Query { sample: sample_index.into(), ..Query::default() };
    let report = query.prepare(p).and_then(|prepared| top(&prepared, &TopOptions::default())).unwrap();
    report.functions.iter().filter(|f| f.flat != 0).map(|f| (f.name.clone(), f.flat)).collect()
}

fn hottest(by_name: &BTreeMap<String, i64>) -> (&str, i64) {
    let (name, v) = by_name.iter().max_by_key(|(n, v)| (**v, std::cmp::Reverse(*n))).unwrap();
    (name.as_str(), *v)
}

fn threads(p: &Profile) -> Vec<String> {
    let mut out: Vec<String> = p
        .samples
        .iter()
        .flat_map(|s| s.labels)
        .filter_map(|l| match l.value {
            LabelValue::Str(v) if p.str(l.key) == "thread" => Some(p.str(v).to_owned()),
            _ => None,
        })
        .collect();
    out.dedup();
    out
}

#[test]
fn pyspy_profile_matches_its_file() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(PYSPY));
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::Speedscope);
    assert_eq!(ProfileKind::of(&p), ProfileKind::Cpu);
    let types: Vec<(&str, &str)> = (0..2).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();
    assert_eq!(types, [("samples", "count"), ("time", "nanoseconds")]);

    // Independently: weights are seconds; stacks are root first, so the leaf is last.
    let frames = json["shared"]["frames"].as_array().unwrap();
    let (mut count, mut time) = (0, 0);
    let (mut count_by, mut time_by) = (BTreeMap::<String, i64>::new(), BTreeMap::<String, i64>::new());
    for prof in json["profiles"].as_array().unwrap() {
        assert_eq!(prof["unit"], "seconds");
        for (stack, w) in prof["samples"].as_array().unwrap().iter().zip(prof["weights"].as_array().unwrap()) {
            let ns = (w.as_f64().unwrap() * 1e9).round() as i64;
            count += 1;
            time += ns;
            if let Some(leaf) = stack.as_array().unwrap().last() {
                let name = frames[leaf.as_u64().unwrap() as usize]["name"].as_str().unwrap().to_owned();
                *count_by.entry(name.clone()).or_default() += 1;
                *time_by.entry(name).or_default() += ns;
            }
        }
    }
    assert_eq!((p.total(0), p.total(1)), (count, time));
    assert_eq!((count, time), (954, 4_770_000_000)); // 954 samples at 200 Hz
    assert_eq!(flat(&p, "samples"), count_by);
    assert_eq!(flat(&p, "time"), time_by);
    assert_eq!(hottest(&time_by), ("JSONDecoder.raw_decode", 2_250_000_000));
    assert_eq!(threads(&p), ["Thread 30126 \"\""]);
    let raw_decode = p.functions.iter().find(|f| p.str(f.name) == "JSONDecoder.raw_decode").unwrap();
    assert!(p.str(raw_decode.filename).ends_with("json/decoder.py"), "{}", p.str(raw_decode.filename));
    assert_eq!(raw_decode.start_line, 353);

    // The collapsed output is of another py-spy run of the same workload (SOURCES.md:
    // two `py-spy record` commands), so only its shape agrees: the same hottest leaf.
    let collapsed = String::from_utf8(read(&dir.join("tools/pyspy-workload-A.collapsed.txt"))).unwrap();
    let mut leaves = BTreeMap::<String, i64>::new();
    for line in collapsed.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let leaf = stack.rsplit(';').next().unwrap().split(" (").next().unwrap();
        *leaves.entry(leaf.to_owned()).or_default() += n.parse::<i64>().unwrap();
    }
    assert_eq!(hottest(&leaves).0, hottest(&time_by).0);
}

const FRAMES: &str =
    r#"{"frames": [{"name": "main", "file": "m.rb", "line": 3, "col": 7}, {"name": "work"}, {"name": "io"}]}"#;

fn doc(profiles: &str) -> Vec<u8> {
    format!(r#"{{"$schema": "https://www.speedscope.app/file-format-schema.json", "shared": {FRAMES}, "profiles": [{profiles}]}}"#)
        .into_bytes()
}

#[test]
fn evented_profiles_give_self_time_per_stack() {
    // main 0..10 ms, work 2..6 (io 3..4 inside it): main self 6, work 3, io 1.
    let events = r#"[{"type": "O", "at": 0, "frame": 0}, {"type": "O", "at": 2, "frame": 1},
        {"type": "O", "at": 3, "frame": 2}, {"type": "C", "at": 4, "frame": 2},
        {"type": "C", "at": 6, "frame": 1}, {"type": "C", "at": 10, "frame": 0}]"#;
    let p = parse(&doc(&format!(
        r#"{{"type": "evented", "name": "main thread", "unit": "milliseconds", "startValue": 0, "endValue": 10,
            "events": {events}}}"#
    )))
    .unwrap();
    assert_eq!(p.sample_types.len(), 1);
    assert_eq!(p.total(0), 10_000_000);
    let expected = [("io", 1_000_000), ("main", 6_000_000), ("work", 3_000_000)];
    assert_eq!(flat(&p, ""), expected.map(|(n, v)| (n.to_owned(), v)).into_iter().collect());
    let main = p.functions.iter().find(|f| p.str(f.name) == "main").unwrap();
    assert_eq!((p.str(main.filename), main.start_line), ("m.rb", 3));
    let io = p.samples.iter().find(|s| s.locations.len() == 3).unwrap();
    let names: Vec<&str> = io.locations.iter().map(|&l| p.line_function_name(&p.location(l).lines[0])).collect();
    assert_eq!(names, ["io", "work", "main"]); // leaf first
}

#[test]
fn several_profiles_become_threads_and_units_become_sample_types() {
    let p =
        parse(&doc(r#"{"type": "sampled", "name": "worker 1", "unit": "microseconds", "startValue": 0, "endValue": 3,
            "samples": [[0, 1], [0, 1, 2], [0]], "weights": [1.5, 1, 0.5]},
           {"type": "sampled", "name": "allocs", "unit": "bytes", "startValue": 0, "endValue": 1,
            "samples": [[0, 2]], "weights": [4096]},
           {"type": "sampled", "name": "counts", "unit": "none", "startValue": 0, "endValue": 1,
            "samples": [[1]], "weights": [5]}"#))
        .unwrap();
    let types: Vec<(&str, &str)> =
        (0..p.sample_types.len()).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();
    assert_eq!(types, [("samples", "count"), ("space", "bytes"), ("time", "nanoseconds")]);
    assert_eq!(threads(&p), ["worker 1", "allocs", "counts"]);
    // Sampled stacks count 1 each; `none` weights are counts themselves.
    assert_eq!((p.total(0), p.total(1), p.total(2)), (3 + 1 + 5, 4096, 3000));
    assert_eq!(flat(&p, "time"), BTreeMap::from([("main".into(), 500), ("work".into(), 1500), ("io".into(), 1000)]));
    assert_eq!(flat(&p, "space"), BTreeMap::from([("io".into(), 4096)]));
}

#[test]
fn malformed_speedscope_files_are_typed_errors() {
    let sampled = |samples: &str, weights: &str| {
        doc(&format!(
            r#"{{"type": "sampled", "name": "t", "unit": "seconds", "startValue": 0, "endValue": 1,
                "samples": {samples}, "weights": {weights}}}"#
        ))
    };
    let e = parse(&sampled("[[0, 7]]", "[1]")).unwrap_err();
    assert_eq!(e, Error::DanglingReference { what: "profile 't' sample 0".into(), target: "frame", id: 7 });
    let e = parse(&sampled("[[0], [1]]", "[1]")).unwrap_err();
    assert!(e.to_string().contains("2 samples but 1 weights"), "{e}");
    for weight in [r#""NaN""#, "null", "1e300", "-1"] {
        let e = parse(&sampled("[[0]]", &format!("[{weight}]"))).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{weight}: {e}");
    }
    let e = parse(&doc(r#"{"type": "sampled", "unit": "furlongs", "samples": [], "weights": []}"#)).unwrap_err();
    assert!(e.to_string().contains("unknown unit 'furlongs'"), "{e}");
    let evented = |events: &str| {
        doc(&format!(
            r#"{{"type": "evented", "name": "t", "unit": "none", "startValue": 0, "endValue": 9, "events": {events}}}"#
        ))
    };
    let e = parse(&evented(r#"[{"type": "O", "at": 5, "frame": 0}, {"type": "C", "at": 4, "frame": 0}]"#)).unwrap_err();
    assert!(e.to_string().contains("back in time"), "{e}");
    let e = parse(&evented(r#"[{"type": "O", "at": 0, "frame": 0}, {"type": "C", "at": 1, "frame": 1}]"#)).unwrap_err();
    assert!(e.to_string().contains("closes frame 1 while frame 0 is open"), "{e}");
    let e = parse(&evented(r#"[{"type": "C", "at": 1, "frame": 1}]"#)).unwrap_err();
    assert!(e.to_string().contains("no frame is open"), "{e}");
    let e = parse(&doc("")).unwrap_err();
    assert!(e.to_string().contains("profiles list is empty"), "{e}");
    let e = parse(br#"{"$schema": "https://www.speedscope.app/file-format-schema.json"}"#).unwrap_err();
    assert!(e.to_string().contains("no shared.frames"), "{e}");
}

#[path = "json_mutation/mod.rs"]
mod json_mutation;

mod mutations {
    use super::json_mutation::{mutate, replacement};
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn mutated_speedscope_documents_never_panic(
            mutations in proptest::collection::vec((any::<prop::sample::Index>(), replacement()), 1..6),
        ) {
            let seed = json!({
                "$schema": "https://www.speedscope.app/file-format-schema.json",
                "shared": {"frames": [{"name": "a", "file": "x.py", "line": 1}, {"name": "b"}, {"name": "c", "col": 3}]},
                "profiles": [
                    {"type": "sampled", "name": "t1", "unit": "seconds", "startValue": 0, "endValue": 1,
                     "samples": [[0, 1], [0, 1, 2], []], "weights": [0.25, 0.5, 0.25]},
                    {"type": "evented", "name": "t2", "unit": "microseconds", "startValue": 0, "endValue": 9,
                     "events": [{"type": "O", "at": 0, "frame": 0}, {"type": "O", "at": 1, "frame": 2},
                                {"type": "C", "at": 4, "frame": 2}, {"type": "C", "at": 9, "frame": 0}]}
                ]
            });
            let bytes = mutate(&seed, &mutations);
            if let Err(e) = stacklens_core::parse(&bytes) {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}
