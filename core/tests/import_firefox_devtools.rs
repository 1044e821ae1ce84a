//! Firefox's old DevTools performance panel recordings ("Recorded Performance Data",
//! Firefox 63): the total is the wrapped Gecko profile's sample rows and each function's
//! self count is the number of samples whose stack ends in it, walked here through the
//! raw `schema`/`data` tables independently; malformed recordings get typed errors.

mod common;

use std::collections::BTreeMap;

use common::{flat_by_name, json_fixture};
use serde_json::Value;
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error};

const FIXTURE: &str = "thirdparty/speedscope/firefox63-simple-firefox.json";

/// Samples per leaf frame name, from the first thread's raw tables.
fn leaf_counts(thread: &Value) -> BTreeMap<String, i64> {
    let column = |table: &str, name: &str| thread[table]["schema"][name].as_u64().unwrap() as usize;
    let (stack_col, prefix_frame) = (column("samples", "stack"), column("stackTable", "frame"));
    let location = column("frameTable", "location");
    let strings = thread["stringTable"].as_array().unwrap();
    let mut out = BTreeMap::new();
    for row in thread["samples"]["data"].as_array().unwrap() {
        let stack = row[stack_col].as_u64().unwrap() as usize;
        let frame = thread["stackTable"]["data"][stack][prefix_frame].as_u64().unwrap() as usize;
        let string = thread["frameTable"]["data"][frame][location].as_u64().unwrap() as usize;
        *out.entry(strings[string].as_str().unwrap().to_owned()).or_default() += 1;
    }
    out
}

#[test]
fn recording_matches_its_gecko_tables() {
    let Some((bytes, json)) = json_fixture(FIXTURE) else { return };
    assert_eq!(json["fileType"], "Recorded Performance Data");
    let thread = &json["profile"]["threads"][0];
    let expected = leaf_counts(thread);
    let samples = thread["samples"]["data"].as_array().unwrap().len() as i64;
    // 39 samples at the recording's 1 ms interval, 27 of them in gamma.
    assert_eq!(samples, 39);
    assert_eq!(json["profile"]["meta"]["interval"], 1);
    assert_eq!(expected["gamma (http://localhost:8000/simple.js:20:14)"], 27);

    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::FirefoxProfiler);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"));
    assert_eq!(p.total(0), samples);
    assert_eq!(p.total(1), samples * 1_000_000);
    assert_eq!(flat_by_name(&p, 0), expected);
}

#[test]
fn malformed_recordings_get_typed_errors() {
    let thread = |samples: &str| {
        format!(
            r#"{{"label":"x","duration":1,"profile":{{"meta":{{"interval":1}},"threads":[{{"name":"t",
            "stringTable":["f"],"frameTable":{{"schema":{{"location":0}},"data":[[0]]}},
            "stackTable":{{"schema":{{"prefix":0,"frame":1}},"data":[[null,0]]}},
            "samples":{{"schema":{{"stack":0,"time":1}},"data":{samples}}}}}]}}}}"#
        )
    };
    assert_eq!(parse(thread("[[0,1.0]]").as_bytes()).unwrap().total(0), 1);
    let missing = parse(thread("[[4,1.0]]").as_bytes()).unwrap_err();
    assert!(matches!(&missing, Error::Invalid(m) if m.contains("missing stack 4")), "{missing}");
    let no_threads = parse(br#"{"label":"x","profile":{"meta":{},"threads":[]}}"#).unwrap_err();
    assert!(matches!(&no_threads, Error::Invalid(m) if m.contains("no threads")), "{no_threads}");
    // A recording without a Gecko profile in it is not one.
    let empty = parse(br#"{"label":"x","duration":1,"profile":{"threads":"none"}}"#).unwrap_err();
    assert!(matches!(empty, Error::UnknownFormat { .. }), "{empty}");
}
