//! Every fixture described in SOURCES.md against what SOURCES.md says of it:
//! sample types, per-type sums, record and location counts for profiles; goroutine
//! totals and per-state counts for dumps; typed errors where pprof rejects a file.

mod common;

use std::path::Path;

use stacklens_core::analysis::goroutines::{analyze, GoroutineOptions};
use stacklens_core::Error;

struct Row {
    path: String,
    properties: String,
}

fn rows(root: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(root.join("SOURCES.md")).unwrap();
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let path = cells.first()?.trim_start_matches("| ").trim_matches('`').to_owned();
            Some(Row { path, properties: (*cells.last()?).to_owned() })
        })
        .collect()
}

/// The text between `key [` and `]`.
fn bracketed<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let start = s.find(&format!("{key} ["))? + key.len() + 2;
    Some(&s[start..start + s[start..].find(']')?])
}

/// The number before ` word` (e.g. "703 Sample records").
fn count_before(s: &str, word: &str) -> Option<usize> {
    let at = s.find(word)?;
    s[..at].trim_end().rsplit([' ', ';']).next()?.parse().ok()
}

#[test]
fn profiles_match_their_descriptions() {
    let Some(root) = common::fixtures() else { return };
    let mut checked = 0;
    let mut failures = Vec::new();
    for row in rows(&root) {
        let Some(sums) = bracketed(&row.properties, "sums") else { continue };
        if row.properties.contains("rejects it") {
            continue; // covered by rejected_files_get_typed_errors
        }
        let profile = match stacklens_core::parse(&common::read(&root.join(&row.path))) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {e}", row.path));
                continue;
            }
        };
        checked += 1;
        let types: Vec<String> = (0..profile.sample_types.len())
            .map(|i| format!("{}/{}", profile.sample_type_name(i), profile.sample_type_unit(i)))
            .collect();
        let expected_types = bracketed(&row.properties, "sample types").unwrap();
        if types.join(",") != expected_types.replace(' ', ",") {
            failures.push(format!("{}: types {types:?} != [{expected_types}]", row.path));
        }
        let ours: Vec<String> = (0..profile.sample_types.len())
            .map(|i| profile.samples.iter().map(|s| s.values[i]).sum::<i64>().to_string())
            .collect();
        if ours.join(" ") != sums {
            failures.push(format!("{}: sums [{}] != [{sums}]", row.path, ours.join(" ")));
        }
        if let Some(n) = count_before(&row.properties, "Sample records") {
            if profile.samples.len() != n {
                failures.push(format!("{}: {} samples != {n}", row.path, profile.samples.len()));
            }
        }
        if let Some(n) = count_before(&row.properties, "locations") {
            if profile.locations.len() != n {
                failures.push(format!("{}: {} locations != {n}", row.path, profile.locations.len()));
            }
        }
    }
    assert!(checked >= 30, "only {checked} profiles checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn goroutine_dumps_match_their_state_counts() {
    let Some(root) = common::fixtures() else { return };
    let mut checked = 0;
    for row in rows(&root) {
        let Some(states) = row.properties.split("states: ").nth(1) else { continue };
        let total = count_before(&row.properties, "goroutines;").expect("goroutine count");
        let profile = stacklens_core::parse(&common::read(&root.join(&row.path))).unwrap();
        let report = analyze(&profile, &GoroutineOptions::default()).unwrap();
        assert_eq!(report.goroutine_count, total as u64, "{}", row.path);
        assert!(!report.states_inferred, "{}: a dump has exact states", row.path);
        for pair in states.split(';').next().unwrap().split(", ") {
            let (state, count) = pair.rsplit_once(' ').unwrap();
            assert_eq!(
                report.by_state.get(state).copied(),
                Some(count.parse().unwrap()),
                "{}: state {state}",
                row.path
            );
        }
        if let Some(n) = count_before(&row.properties, "with 'N minutes' wait") {
            let waiting = profile.goroutines.iter().filter(|g| g.wait_minutes.is_some()).count();
            assert_eq!(waiting, n, "{}", row.path);
        }
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} dumps checked");
}

#[test]
fn rejected_files_get_typed_errors() {
    let Some(root) = common::fixtures() else { return };
    // pprof: "malformed profile: found function with reserved ID=0".
    let err =
        stacklens_core::parse(&common::read(&root.join("thirdparty/pyroscope/dotnet-pprof-3.pb.gz"))).unwrap_err();
    assert_eq!(err.code(), "InvalidProfile");
    assert!(err.to_string().contains("reserved id 0"), "{err}");
    // pprof rejects Go's threadcreate debug=1 text (its `6 @` has no frames); we read it.
    for set in ["base", "compare"] {
        let p = stacklens_core::parse(&common::read(&root.join(format!("go/{set}/threadcreate.debug1.txt")))).unwrap();
        assert_eq!(p.total(0), 7, "{set}");
    }
}

#[test]
fn every_third_party_file_imports_or_gets_a_typed_error() {
    let Some(root) = common::fixtures() else { return };
    let mut dirs = vec![root.join("thirdparty")];
    let mut seen = 0;
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path.to_string_lossy();
            if name.ends_with(".txt") && (name.contains(".pprof-") || name.ends_with(".string")) {
                continue; // reference outputs, not inputs
            }
            seen += 1;
            match stacklens_core::parse(&common::read(&path)) {
                Ok(p) => assert!(!p.sample_types.is_empty(), "{name}: imported without sample types"),
                Err(e) => {
                    let known = matches!(
                        e,
                        Error::UnknownFormat { .. } | Error::Protobuf { .. } | Error::Invalid(_) | Error::Text { .. }
                    );
                    assert!(known && !e.to_string().is_empty(), "{name}: {e:?}");
                }
            }
        }
    }
    assert!(seen >= 40, "only {seen} third-party files");
}
