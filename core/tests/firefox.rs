//! Firefox Profiler JSON (samply's output): processed and raw Gecko formats.

mod common;

use common::{fixtures, read};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Prepared;
use stacklens_core::model::LabelValue;
use stacklens_core::{parse, Error, ProfileKind};

#[test]
fn samply_processed_profile() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join("thirdparty/samply/ls-profile.json"))).unwrap();
    assert_eq!(ProfileKind::of(&p), ProfileKind::Cpu);
    // 13,069 weighted samples of 0.25 ms (summed from the file's sample tables).
    assert_eq!(p.total(0), 13_069);
    assert_eq!(p.total(1), 3_267_250_000);
    let report = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    let first = &report.functions[0];
    // Unsymbolicated: the address with its library.
    assert_eq!((first.name.as_str(), first.flat), ("libc.so.6!0xb27a8", 11_938 * 250_000));
    let threads: std::collections::BTreeSet<&str> = p
        .samples
        .iter()
        .flat_map(|s| s.labels)
        .filter_map(|l| match l.value {
            LabelValue::Str(v) if p.str(l.key) == "thread" => Some(p.str(v)),
            _ => None,
        })
        .collect();
    assert_eq!(threads.into_iter().collect::<Vec<_>>(), ["ls GeckoMain (18693)"]);
}

#[test]
fn processed_and_gecko_formats_of_one_profile_agree() {
    let Some(dir) = fixtures() else { return };
    let processed = parse(&read(&dir.join("thirdparty/firefox-profiler/processed-3.json"))).unwrap();
    let gecko = parse(&read(&dir.join("thirdparty/firefox-profiler/gecko-2.json"))).unwrap();
    // Three threads of 7 samples each (one in a child process of the Gecko profile).
    // The processed one names the library where it knows it; the raw one has only
    // addresses. Either way 0x100000f84 has 6 of the 21 ms.
    for (p, qualified) in [(&processed, true), (&gecko, false)] {
        assert_eq!((p.samples.len(), p.total(0), p.total(1)), (21, 21, 21_000_000));
        let report = top(&Prepared::whole(p).unwrap(), &TopOptions::default()).unwrap();
        let hottest = report.functions.iter().filter(|f| f.name.ends_with("0x100000f84"));
        assert_eq!(hottest.clone().map(|f| f.flat).sum::<i64>(), 6_000_000);
        assert_eq!(hottest.clone().any(|f| f.name == "firefox!0x100000f84"), qualified);
    }
}

#[test]
fn broken_firefox_tables_are_typed_errors() {
    let missing_stack = br#"{"meta": {"interval": 1}, "libs": [], "threads": [{"name": "t",
        "stringArray": ["f"], "funcTable": {"name": [0]}, "frameTable": {"func": [0]},
        "stackTable": {"frame": [0], "prefix": [null]}, "samples": {"stack": [5]}}]}"#;
    let err = parse(missing_stack).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert!(err.to_string().contains("missing stack 5"), "{err}");
    let no_threads = br#"{"meta": {}, "threads": []}"#;
    assert!(parse(no_threads).unwrap_err().to_string().contains("no threads"));
    // Other JSON is still refused as an unsupported format.
    assert!(matches!(parse(br#"{"traceEvents": []}"#).unwrap_err(), Error::UnknownFormat { .. }));
}

#[test]
fn samply_symbols_sidecar_names_functions() {
    use stacklens_core::import::firefox::symbolicate;
    // Two addresses in lib "busy": one inside `main.hot` (0x100..0x140), one outside any symbol.
    let mut profile: serde_json::Value = serde_json::from_str(
        r#"{"meta": {"interval": 1, "symbolicated": false}, "libs": [{"name": "busy", "debugName": "busy"}],
        "threads": [{"name": "t", "stringArray": ["0x120", "0x900", "busy"],
          "funcTable": {"name": [0, 1], "resource": [0, 0], "fileName": [null, null], "lineNumber": [null, null]},
          "frameTable": {"func": [0, 1], "address": [288, 2304]},
          "resourceTable": {"lib": [0], "name": [2]},
          "stackTable": {"frame": [1, 0], "prefix": [null, 0]},
          "samples": {"stack": [1, 1, 0]}}]}"#,
    )
    .unwrap();
    let syms: serde_json::Value = serde_json::from_str(
        r#"{"string_table": ["main.hot", "/src/busy.go"], "data": [{"debug_name": "busy", "code_id": "",
          "symbol_table": [{"rva": 256, "size": 64, "symbol": 0, "frames": [{"function": 0, "file": 1, "line": 7}]}]}]}"#,
    )
    .unwrap();
    assert_eq!(symbolicate(&mut profile, &syms).unwrap(), 1);
    let p = parse(&serde_json::to_vec(&profile).unwrap()).unwrap();
    let report = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    let names: Vec<(&str, i64)> = report.functions.iter().map(|f| (f.name.as_str(), f.flat)).collect();
    assert_eq!(names, [("main.hot", 2_000_000), ("busy!0x900", 1_000_000)]);
    let hot = p.functions.iter().find(|f| p.str(f.name) == "main.hot").unwrap();
    assert_eq!(p.str(hot.filename), "/src/busy.go");
}
