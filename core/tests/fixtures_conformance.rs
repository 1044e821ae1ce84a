//! Every fixture described in SOURCES.md against what SOURCES.md says of it:
//! sample types, per-type sums, record and location counts for profiles; goroutine
//! totals and per-state counts for dumps; typed errors where pprof rejects a file.

mod common;

use std::collections::HashMap;
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
        // Every described profile states both counts.
        let samples = count_before(&row.properties, "Sample records").expect("a Sample records count");
        if profile.samples.len() != samples {
            failures.push(format!("{}: {} samples != {samples}", row.path, profile.samples.len()));
        }
        let locations = count_before(&row.properties, "locations").expect("a locations count");
        if profile.locations.len() != locations {
            failures.push(format!("{}: {} locations != {locations}", row.path, profile.locations.len()));
        }
    }
    // SOURCES.md describes 33 profiles with sums; every one is checked.
    assert_eq!(checked, 33, "profiles checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn goroutine_dumps_match_their_state_counts() {
    let Some(root) = common::fixtures() else { return };
    let mut checked = 0;
    for row in rows(&root) {
        let Some(states) = row.properties.split("states: ").nth(1) else { continue };
        let total = count_before(&row.properties, "goroutines;").expect("goroutine count");
        let bytes = common::read(&root.join(&row.path));
        let profile = stacklens_core::parse(&bytes).unwrap();
        let report = analyze(&profile, &GoroutineOptions::default()).unwrap();
        assert_eq!(report.goroutine_count, total as u64, "{}", row.path);
        assert!(!report.states_inferred, "{}: a dump has exact states", row.path);
        let listed: Vec<&str> = states.split(';').next().unwrap().split(", ").collect();
        for pair in &listed {
            let (state, count) = pair.rsplit_once(' ').unwrap();
            assert_eq!(
                report.by_state.get(state).copied(),
                Some(count.parse().unwrap()),
                "{}: state {state}",
                row.path
            );
        }
        // SOURCES.md leaves out the smallest states (a few running, runnable or chan
        // receive goroutines): all states come from the dump's own `goroutine N [state…]:`
        // headers, counted here.
        let mut headers: HashMap<&str, u64> = HashMap::new();
        let text = std::str::from_utf8(&bytes).unwrap();
        for header in text.lines().filter(|l| l.starts_with("goroutine ") && l.ends_with("]:")) {
            let state = header.split_once('[').unwrap().1.split([',', ']']).next().unwrap();
            *headers.entry(state).or_default() += 1;
        }
        assert_eq!(headers.values().sum::<u64>(), total as u64, "{}", row.path);
        assert!(headers.len() > listed.len(), "{}: the dump has states SOURCES.md leaves out", row.path);
        let ours: HashMap<&str, u64> = report.by_state.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(ours, headers, "{}", row.path);
        if let Some(n) = count_before(&row.properties, "with 'N minutes' wait") {
            let waiting = profile.goroutines.iter().filter(|g| g.wait_minutes.is_some()).count();
            assert_eq!(waiting, n, "{}", row.path);
        }
        checked += 1;
    }
    // go/base, go/compare and large.
    assert_eq!(checked, 3, "dumps checked");
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
    // Each input file under thirdparty/ (reference outputs left out): how many sample
    // types it imports with, or the typed error's code for a format we do not read.
    let expected: &[(&str, Result<usize, &str>)] = &[
        ("firefox-profiler/art-trace-regular.trace.gz", Ok(1)),
        ("firefox-profiler/chrome-tracing.json.gz", Ok(1)),
        ("firefox-profiler/dhat.json.gz", Ok(5)),
        ("firefox-profiler/flamegraph.txt", Ok(1)),
        ("firefox-profiler/gecko-2.json", Ok(2)),
        ("firefox-profiler/graphviz.perf.gz", Ok(2)),
        ("firefox-profiler/hello.cjs-20231120T211435.cpuprofile", Ok(2)),
        ("firefox-profiler/processed-3.json", Ok(2)),
        ("firefox-profiler/simpleperf-cpu-clock.trace.gz", Ok(3)),
        ("flamegraph/example-perf-stacks.txt.gz", Ok(1)),
        ("flamegraph/perf-cycles-instructions-01.txt", Ok(2)),
        ("flamegraph/perf-java-stacks-01-collapsed-all.txt", Ok(1)),
        ("flamegraph/perf-java-stacks-01.txt", Ok(1)),
        ("inferno/dtrace-stack-ustack.txt", Ok(1)),
        ("inferno/macos-sample.txt", Ok(1)),
        ("inferno/perf-go-stacks.txt", Ok(2)),
        ("inferno/vsprof-CallTreeSummary.csv", Ok(2)),
        ("inferno/vtune.csv", Ok(1)),
        ("parca/alloc_space_delta.pb.gz", Ok(4)),
        ("parca/fgprof.pb.gz", Ok(2)),
        ("parca/normal-cpu.stripped.pprof", Ok(2)),
        ("pprof/cppbench.contention", Ok(2)),
        ("pprof/cppbench.cpu", Ok(2)),
        ("pprof/cppbench.cpu_no_samples_type", Ok(1)),
        ("pprof/cppbench.heap", Ok(2)),
        ("pprof/cppbench.thread", Ok(1)),
        ("pprof/go.nomappings.crash", Ok(4)),
        ("pprof/gobench.cpu", Ok(2)),
        ("pprof/large.cpu", Ok(2)),
        ("pyroscope/async-profiler-dump1.jfr.gz", Ok(1)),
        ("pyroscope/cpu_go_truncated_1.pb.gz", Ok(2)),
        ("pyroscope/dotnet-pprof-3.pb.gz", Err("InvalidProfile")),
        ("pyroscope/nodejs-wall.pb.gz", Ok(2)),
        ("pyroscope/otel-ebpf-profile.pb.bin", Ok(2)),
        ("pyroscope/profile_java.pb.gz", Ok(1)),
        ("pyroscope/profile_ruby.pb.gz", Ok(1)),
        ("pyroscope/profile_rust.pb.gz", Ok(1)),
        ("pyroscope/pyspy-1.pb.gz", Ok(1)),
        ("samply/ls-profile.json", Ok(2)),
        ("speedscope/chrome116-Trace-20230603T221323.json", Ok(2)),
        ("speedscope/chrome65-simple.cpuprofile", Ok(2)),
        ("speedscope/chrome69-Heap-20181005T144546.heapprofile", Ok(1)),
        ("speedscope/firefox63-simple-firefox.json", Ok(2)),
        ("speedscope/ghc-simple.prof", Ok(3)),
        ("speedscope/heavy.jfr", Ok(4)),
        ("speedscope/instruments16-simple-time-profile-deep-copy.txt", Ok(1)),
        ("speedscope/node10.11-example.cpuprofile", Ok(2)),
        ("speedscope/node8.5-isolate-v8.log", Ok(1)),
        ("speedscope/pmcstat-simple.txt", Ok(1)),
        ("speedscope/ruby-simple-cpu-stackprof.json", Ok(2)),
        ("speedscope/rust-mangled.linux-perf.txt", Ok(2)),
        ("speedscope/safari13.1-simple.html-recording.json", Ok(2)),
        ("speedscope/simple-with-header.linux-perf.txt", Ok(2)),
    ];
    let thirdparty = root.join("thirdparty");
    let mut dirs = vec![thirdparty.clone()];
    let mut found = Vec::new();
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = path.strip_prefix(&thirdparty).unwrap().to_string_lossy().into_owned();
            // pprof's outputs (`*.pprof-top.txt`, `*.pprof-error.txt`) and `*.string` dumps
            // are references, not inputs.
            if (name.ends_with(".txt") && name.contains(".pprof-")) || name.ends_with(".string") {
                continue;
            }
            let outcome = match stacklens_core::parse(&common::read(&path)) {
                Ok(p) => Ok(p.sample_types.len()),
                Err(e) => {
                    let typed = matches!(
                        e,
                        Error::UnknownFormat { .. } | Error::Protobuf { .. } | Error::Invalid(_) | Error::Text { .. }
                    );
                    assert!(typed && !e.to_string().is_empty(), "{name}: {e:?}");
                    Err(e.code())
                }
            };
            found.push((name, outcome));
        }
    }
    found.sort();
    let expected: Vec<(String, Result<usize, &str>)> = expected.iter().map(|(n, o)| (n.to_string(), *o)).collect();
    assert_eq!(found, expected);
}
