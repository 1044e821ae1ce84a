//! Safari Web Inspector recordings: the total is the recording's samples and the sum of
//! its `sampleDurations`, and each function's self time is the durations of the samples
//! whose stack starts (leaf first) at it, read here straight from the JSON; malformed
//! recordings get typed errors.

mod common;

use std::collections::BTreeMap;

use common::{flat_by_name, json_fixture};
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error};

const FIXTURE: &str = "thirdparty/speedscope/safari13.1-simple.html-recording.json";

#[test]
fn recording_matches_its_samples_and_durations() {
    let Some((bytes, json)) = json_fixture(FIXTURE) else { return };
    let recording = &json["recording"];
    let traces = recording["sampleStackTraces"].as_array().unwrap();
    let durations = recording["sampleDurations"].as_array().unwrap();
    let nanos: Vec<i64> = durations.iter().map(|d| (d.as_f64().unwrap() * 1e9).round() as i64).collect();
    let (mut count, mut wall) = (BTreeMap::new(), BTreeMap::new());
    for (trace, ns) in traces.iter().zip(&nanos) {
        let leaf = &trace["stackFrames"][0];
        let name = match leaf["name"].as_str().unwrap() {
            "" => "(anonymous)",
            name => name,
        };
        *count.entry(name.to_owned()).or_insert(0i64) += 1;
        *wall.entry(name.to_owned()).or_insert(0i64) += ns;
    }
    // 23 samples, 34.006755 ms of JavaScript (the durations summed in nanoseconds).
    assert_eq!(traces.len(), 23);
    let total: i64 = nanos.iter().sum();
    assert_eq!(total, 34_006_755);

    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::Safari);
    assert_eq!((p.sample_type_name(1), p.sample_type_unit(1)), ("wall", "nanoseconds"));
    assert_eq!((p.total(0), p.total(1)), (23, total));
    assert_eq!(flat_by_name(&p, 0), count);
    assert_eq!(flat_by_name(&p, 1), wall);
}

#[test]
fn malformed_recordings_get_typed_errors() {
    let recording = |traces: &str, durations: &str| {
        format!(r#"{{"version":1,"recording":{{"sampleStackTraces":{traces},"sampleDurations":{durations}}}}}"#)
    };
    let frame = r#"{"stackFrames":[{"name":"f","url":"a.js","line":1,"column":2}]}"#;
    assert_eq!(parse(recording(&format!("[{frame}]"), "[0.5]").as_bytes()).unwrap().total(1), 500_000_000);
    let cases = [
        // Truncated: fewer durations than stack traces.
        (recording(&format!("[{frame},{frame}]"), "[0.5]"), "2 stack traces but 1 durations"),
        (recording(&format!("[{frame}]"), r#"["fast"]"#), "not seconds"),
        (recording(&format!("[{frame}]"), "[-1]"), "not seconds"),
        (recording(r#"[{"stackFrames":7}]"#, "[1]"), "not a list"),
        (recording("{}", "[]"), "sampleStackTraces is not a list"),
    ];
    for (json, expected) in cases {
        match parse(json.as_bytes()) {
            Err(Error::Invalid(message)) => assert!(message.contains(expected), "{json}: {message}"),
            other => panic!("{json}: expected a typed error, got {other:?}"),
        }
    }
}
