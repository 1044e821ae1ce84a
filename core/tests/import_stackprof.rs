//! Ruby stackprof JSON: the fixture's totals and each function's self samples equal what
//! stackprof itself records (the top-level `samples` and each frame's `samples`, which
//! `stackprof --text` prints), read here straight from the JSON; malformed dumps get
//! typed errors.

mod common;

use std::collections::BTreeMap;

use common::{flat_by_name as flat, json_fixture};
use serde_json::Value;
use stacklens_core::model::{Profile, SourceFormat};
use stacklens_core::{parse, Error};

const FIXTURE: &str = "thirdparty/speedscope/ruby-simple-cpu-stackprof.json";

/// stackprof's own figures: each frame's self `samples`, summed by name.
fn recorded_self(json: &Value) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for frame in json["frames"].as_object().unwrap().values() {
        *out.entry(frame["name"].as_str().unwrap().to_owned()).or_default() += frame["samples"].as_i64().unwrap();
    }
    out.retain(|_, v| *v != 0);
    out
}

fn check(p: &Profile, json: &Value) {
    assert_eq!(p.source, SourceFormat::Stackprof);
    assert_eq!(p.sample_type_name(0), "samples");
    assert_eq!(p.sample_type_name(1), "cpu");
    assert_eq!(p.sample_type_unit(1), "microseconds");
    // The fixture records 489 samples at a 1000 µs interval (its top-level fields).
    let samples = json["samples"].as_i64().unwrap();
    assert_eq!(samples, 489);
    assert_eq!(json["interval"], 1000);
    assert_eq!(p.total(0), samples);
    assert_eq!(p.total(1), samples * 1000);
    let recorded = recorded_self(json);
    assert_eq!(flat(p, 0), recorded);
    let times: BTreeMap<String, i64> = recorded.iter().map(|(k, v)| (k.clone(), v * 1000)).collect();
    assert_eq!(flat(p, 1), times);
}

#[test]
fn raw_stacks_match_the_recorded_figures() {
    let Some((bytes, json)) = json_fixture(FIXTURE) else { return };
    // The raw records themselves, walked independently: [height, frames…, count].
    let raw: Vec<i64> = json["raw"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let (mut at, mut records, mut counted) = (0, 0, 0);
    while at < raw.len() {
        let height = raw[at] as usize;
        counted += raw[at + 1 + height];
        records += 1;
        at += height + 2;
    }
    let p = parse(&bytes).unwrap();
    assert_eq!(p.samples.len(), records);
    assert_eq!(p.total(0), counted);
    check(&p, &json);
    // Leaf first: the hottest stack ends in Object#d.
    let leaf = p.location(p.samples.sample(0).locations[0]);
    assert_eq!(p.line_function_name(&leaf.lines[0]), "Object#d");
}

#[test]
fn without_raw_stacks_the_call_graph_keeps_the_figures() {
    let Some((_, mut json)) = json_fixture(FIXTURE) else { return };
    json.as_object_mut().unwrap().remove("raw");
    let p = parse(&serde_json::to_vec(&json).unwrap()).unwrap();
    check(&p, &json);
}

fn error(json: &str) -> String {
    match parse(json.as_bytes()) {
        Err(e @ (Error::Invalid(_) | Error::DanglingReference { .. })) => e.to_string(),
        other => panic!("{json}: expected a typed error, got {other:?}"),
    }
}

#[test]
fn malformed_dumps_get_typed_errors() {
    let frames = r#""frames":{"1":{"name":"main","samples":1}}"#;
    let cases = [
        // Truncated: the stack height promises more frames than there are.
        (format!(r#"{{"mode":"cpu","interval":1000,{frames},"raw":[5,1,1]}}"#), "runs past the end"),
        (format!(r#"{{"mode":"cpu","interval":1000,{frames},"raw":[1,1]}}"#), "runs past the end"),
        (format!(r#"{{"mode":"cpu","interval":1000,{frames},"raw":[1,"x",1]}}"#), "not a frame id"),
        (format!(r#"{{"mode":"cpu","interval":1000,{frames},"raw":[1,2,1]}}"#), "frame id 2"),
        (format!(r#"{{"mode":"cpu","interval":1000,{frames},"raw":[1,1,-3]}}"#), "not a count"),
        (format!(r#"{{"mode":"cpu","interval":"fast",{frames},"raw":[]}}"#), "interval"),
        (format!(r#"{{"mode":"heap","interval":1,{frames},"raw":[]}}"#), "not cpu, wall or object"),
        (format!(r#"{{"mode":"object","interval":1,{frames},"raw":{{}}}}"#), "not a list"),
        (
            format!(r#"{{"mode":"wall","interval":1000,{frames},"samples":1,"raw":[1,1,9223372036854775807]}}"#),
            "overflow",
        ),
        (
            r#"{"mode":"cpu","interval":1,"frames":{"1":{"samples":1,"edges":{"7":1}}},"samples":1}"#.into(),
            "frame id 7",
        ),
    ];
    for (json, expected) in cases {
        let message = error(&json);
        assert!(message.contains(expected), "{json}: {message}");
    }
}

#[test]
fn object_mode_counts_allocations() {
    let json = r#"{"mode":"object","interval":1,"frames":{"1":{"name":"main"},"2":{"name":"alloc"}},
        "raw":[2,1,2,5,1,1,3]}"#;
    let p = parse(json.as_bytes()).unwrap();
    assert_eq!(p.sample_types.len(), 1);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("objects", "count"));
    assert_eq!(p.total(0), 8);
    assert_eq!(flat(&p, 0), BTreeMap::from([("alloc".to_owned(), 5), ("main".to_owned(), 3)]));
}
