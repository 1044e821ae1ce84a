//! The `stacklens` binary as a CI job uses it: output shapes, numbers and exit codes.

mod common;

use common::fixtures;
use std::path::Path;
use std::process::{Command, Output};

fn stacklens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stacklens")).args(args).output().expect("runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// The text output of a successful run.
fn text(args: &[&str]) -> String {
    let out = stacklens(args);
    assert!(out.status.success(), "{args:?}: exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A `-top` report from "Showing nodes" on: the part that has no file name, time or
/// filter list, and that ours prints exactly as pprof does.
fn from_showing(report: &str) -> &str {
    let at = report.find("Showing nodes").unwrap_or_else(|| panic!("no 'Showing nodes' in:\n{report}"));
    &report[at..]
}

/// `stacklens top FILE --nodecount N --nodefraction 0.005 ARGS…` (pprof's -top defaults).
fn top_like_pprof(file: &Path, nodecount: usize, args: &[&str]) -> String {
    let n = nodecount.to_string();
    let mut all = vec!["top", file.to_str().unwrap(), "--nodecount", &n, "--nodefraction", "0.005"];
    all.extend_from_slice(args);
    let ours = text(&all);
    assert!(ours.starts_with("Type: "), "{ours}");
    ours
}

#[test]
fn top_json_has_raw_values_in_pprof_order() {
    let Some(f) = fixtures() else { return };
    let cpu = f.join("go/base/cpu.pb.gz");
    let v = json(&stacklens(&["top", cpu.to_str().unwrap(), "--format", "json", "--nodecount", "3"]));
    assert_eq!(v["sampleType"], "cpu");
    assert_eq!(v["unit"], "nanoseconds");
    assert_eq!(v["total"], 7_080_000_000i64);
    let names: Vec<&str> = v["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["compress/flate.(*compressor).findMatch", "runtime.asyncPreempt", "compress/flate.(*compressor).deflate"]
    );
    assert_eq!(v["functions"][0]["flat"], 1_340_000_000i64);
    assert_eq!(v["functions"][0]["cum"], 2_110_000_000i64);
}

#[test]
fn top_text_reads_like_pprof() {
    let Some(f) = fixtures() else { return };
    let cpu = f.join("go/base/cpu.pb.gz");
    let out = stacklens(&["top", cpu.to_str().unwrap(), "--nodecount", "20", "--nodefraction", "0.005"]);
    assert!(out.status.success());
    let ours = String::from_utf8(out.stdout).unwrap();
    let theirs = std::fs::read_to_string(f.join("go/base/cpu.pprof-top.txt")).unwrap();
    // Everything from "Showing nodes" on is identical to go tool pprof's output.
    let tail = |s: &str| s[s.find("Showing nodes").unwrap()..].to_owned();
    assert_eq!(tail(&ours), tail(&theirs));
}

/// `go tool pprof -symbolize=none -list REGEX FLAGS… FILE` (`args`), run in `dir`.
fn pprof_list(go: &Path, dir: &Path, args: &[&str]) -> String {
    common::pprof(go, dir, &[], &[&["-list"], args].concat())
}

#[test]
fn list_text_equals_go_tool_pprof() {
    let Some(f) = fixtures() else { return };
    let Some(go) = common::go() else { return };
    let gen = f.join("gen");
    let gen = gen.to_str().unwrap();
    for profile in ["go/base/cpu.pb.gz", "go/base/heap.pb.gz", "go/compare/mutex.pb.gz"] {
        let file = f.join(profile);
        let file = file.to_str().unwrap();
        // Sources found through --source-dir (pprof's -source_path), and Go's own by their absolute names.
        let reference = pprof_list(go, &f, &[r"main\.|sync\.", "-source_path", gen, file]);
        assert!(reference.contains("ROUTINE ======================== main."), "{reference}");
        assert_eq!(text(&["list", r"main\.|sync\.", file, "--source-dir", gen]), reference, "{profile}");
    }
    // Without --source-dir: the current folder, whose name pprof finds in the profile's paths.
    let cpu = f.join("go/base/cpu.pb.gz");
    let cpu = cpu.to_str().unwrap();
    let reference = pprof_list(go, &f, &[r"main\.compress", "-sample_index=samples", cpu]);
    let out = Command::new(env!("CARGO_BIN_EXE_stacklens"))
        .args(["list", r"main\.compress", cpu, "--sample-index", "samples"])
        .current_dir(&f)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), reference);

    // Sources copied elsewhere: pprof needs -trim_path; a shorter end of the name finds them.
    let elsewhere = common::temp_dir("list-sources");
    std::fs::copy(f.join("gen/workload.go"), elsewhere.join("workload.go")).unwrap();
    let elsewhere = elsewhere.to_str().unwrap();
    let missing = text(&["list", r"main\.\(\*ledger\)", cpu]);
    assert!(missing.contains(" Error: open /src/stacklens/shared/fixtures/gen/workload.go: no such file"), "{missing}");
    let trim = "/src/stacklens/shared/fixtures/gen";
    let reference = pprof_list(go, &f, &[r"main\.\(\*ledger\)", "-trim_path", trim, "-source_path", elsewhere, cpu]);
    let found = text(&["list", r"main\.\(\*ledger\)", cpu, "--source-dir", elsewhere]);
    assert_eq!(found.replace(&format!("{trim}/"), ""), reference);

    let none = stacklens(&["list", "nothing_matches", cpu]);
    assert_eq!(none.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no matches found for regexp: nothing_matches"));
    let json = json(&stacklens(&["list", r"^main\.compressBlock$", cpu, "--format", "json"]));
    assert_eq!(json["functions"][0]["files"][0]["lines"].as_array().unwrap().len(), 3, "{json}");
}

/// The node and edge lines of a DOT graph, sorted; pprof's `minlen=2` (for edges from
/// nodes with label nodelets, which we do not draw) left out.
fn graph_lines(dot: &str) -> Vec<String> {
    let is_node = |t: &str| t.len() > 1 && t.starts_with('N') && t[1..].bytes().all(|b| b.is_ascii_digit());
    let mut lines: Vec<String> = dot
        .lines()
        .filter(|line| {
            let tokens: Vec<&str> = line.splitn(4, ' ').collect();
            match tokens[..] {
                [a, "->", b, ..] => is_node(a) && is_node(b),
                [a, b, ..] => is_node(a) && b.starts_with("[label=\""),
                _ => false,
            }
        })
        .map(|line| line.replace(" minlen=2", ""))
        .collect();
    lines.sort();
    lines
}

#[test]
fn graph_dot_lines_equal_go_tool_pprof() {
    let Some(f) = fixtures() else { return };
    let Some(go) = common::go() else { return };
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("go/base/cpu.pb.gz", &[], &[]),
        (
            "go/compare/heap.pb.gz",
            &["--sample-index", "alloc_space", "--nodecount", "20"],
            &["-sample_index=alloc_space", "-nodecount=20"],
        ),
        (
            "go/base/goroutine.pb.gz",
            &["--nodefraction", "0.01", "--edgefraction", "0.01"],
            &["-nodefraction=0.01", "-edgefraction=0.01"],
        ),
    ];
    for (file, ours, flags) in cases {
        let path = f.join(file);
        let mut args = vec!["graph", path.to_str().unwrap()];
        args.extend_from_slice(ours);
        let dot = text(&args);
        assert!(dot.starts_with("digraph \"fixturegen\" {"), "{dot}");
        let expected = graph_lines(&common::pprof(go, &f, &[&path], &[&["-dot"], *flags].concat()));
        assert!(expected.len() > 10, "{file}: {expected:?}");
        assert_eq!(graph_lines(&dot), expected, "{file} {ours:?}");
    }
    let cpu = f.join("go/base/cpu.pb.gz");
    let v = json(&stacklens(&["graph", cpu.to_str().unwrap(), "--format", "json", "--nodecount", "5"]));
    assert_eq!((v["sampleType"].as_str(), v["total"].as_i64()), (Some("cpu"), Some(7_080_000_000)));
    assert_eq!(v["nodes"][0]["name"], "main.(*service).handleRequest");
    assert!(v["nodes"].as_array().unwrap().len() <= 5 && !v["edges"].as_array().unwrap().is_empty());
    let unknown = stacklens(&["graph", cpu.to_str().unwrap(), "--focus-node", "no.such"]);
    assert_eq!(unknown.status.code(), Some(5));
}

#[test]
fn diff_json_and_regression_gate() {
    let Some(f) = fixtures() else { return };
    let (base, new) = (f.join("go/base/cpu.pb.gz"), f.join("go/compare/cpu.pb.gz"));
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let v = json(&stacklens(&["diff", b, n, "--format", "json"]));
    assert_eq!((v["baseTotal"].as_i64(), v["compareTotal"].as_i64()), (Some(7_080_000_000), Some(6_900_000_000)));
    assert_eq!(v["regressions"].as_array().unwrap().len(), 35);
    assert_eq!(v["improvements"].as_array().unwrap().len(), 23);
    assert_eq!(v["unchanged"], 312);
    // matrixMultiply's time is in its inlined callee dotRowCol: flat 0, cum +0.24s.
    let mm = v["regressions"].as_array().unwrap().iter().find(|r| r["name"] == "main.matrixMultiply").unwrap();
    assert_eq!((mm["flatDelta"].as_i64(), mm["cumDelta"].as_i64()), (Some(0), Some(240_000_000)));
    // findMatch's self time grew by 9.18% of the base total.
    let gate = stacklens(&["diff", b, n, "--fail-on-regression", "5"]);
    assert_eq!(gate.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gate.stderr).contains("compress/flate.(*compressor).findMatch"));
    assert_eq!(stacklens(&["diff", b, n, "--fail-on-regression", "10"]).status.code(), Some(0));
}

#[test]
fn goroutines_json_with_comparison() {
    let Some(f) = fixtures() else { return };
    let (base, new) = (f.join("go/base/goroutine.debug2.txt"), f.join("go/compare/goroutine.debug2.txt"));
    let v = json(&stacklens(&[
        "goroutines",
        base.to_str().unwrap(),
        "--compare",
        new.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(v["goroutineCount"], 453);
    assert_eq!(v["byState"]["chan send"], 388);
    assert_eq!((v["baseCount"].as_u64(), v["compareCount"].as_u64()), (Some(453), Some(1617)));
    assert_eq!(v["growthCount"], 1164);
    let top = &v["topStacks"][0];
    assert_eq!(top["count"], 388);
    assert_eq!(top["state"], "chan send");
    assert_eq!(top["waitReason"], "chan send");
    assert_eq!(top["createdBy"], "main.(*upstreamClient).fetchWithTimeout");
    // Two stacks only in the later dump; 450 blocked goroutines (453 less 2 runnable and
    // 1 running, as the dump's headers say) in 16 groups.
    let new_states: Vec<&str> =
        v["newStacks"].as_array().unwrap().iter().map(|g| g["state"].as_str().unwrap()).collect();
    assert_eq!(new_states, ["runnable", "semacquire"]);
    assert_eq!(v["blockedCount"], 450);
    assert_eq!(v["blockedGoroutines"].as_array().unwrap().len(), 16);
    assert_eq!(v["grownStacks"][0]["delta"], 1164);
    assert!((v["goroutineGrowthRate"].as_f64().unwrap() - 1617.0 / 453.0).abs() < 1e-12);
}

#[test]
fn errors_have_messages_and_exit_codes() {
    let missing = stacklens(&["top", "/nonexistent/profile.pb.gz"]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/profile.pb.gz"));

    let dir = std::env::temp_dir().join(format!("stacklens-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "heap profile: 1: 2 [3: 4] @ heap/2\ngarbage line\n").unwrap();
    let corrupt = stacklens(&["top", bad.to_str().unwrap()]);
    assert_eq!(corrupt.status.code(), Some(4));
    let msg = String::from_utf8_lossy(&corrupt.stderr);
    assert!(msg.contains("bad.txt") && msg.contains("line 2"), "{msg}");

    let Some(f) = fixtures() else { return };
    let heap = f.join("go/base/heap.pb.gz");
    let unknown = stacklens(&["top", heap.to_str().unwrap(), "--sample-index", "nope"]);
    assert_eq!(unknown.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("inuse_space"));
    let usage = stacklens(&["top"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn top_diff_base_text_equals_pprof_for_every_stored_diff() {
    let Some(f) = fixtures() else { return };
    // gen/groundtruth.sh: go tool pprof -top -nodecount=20 -diff_base=go/base/X go/compare/X
    for (profile, args) in [
        ("cpu.pb.gz", &[][..]),
        ("heap.pb.gz", &["--sample-index", "inuse_space"][..]),
        ("goroutine.pb.gz", &[][..]),
        ("block.pb.gz", &[][..]),
    ] {
        let base = f.join("go/base").join(profile);
        let mut all = vec!["--diff-base", base.to_str().unwrap()];
        all.extend_from_slice(args);
        let ours = top_like_pprof(&f.join("go/compare").join(profile), 20, &all);
        let stem = profile.strip_suffix(".pb.gz").unwrap();
        let index = args.get(1).map(|i| format!(".{i}")).unwrap_or_default();
        let reference = std::fs::read_to_string(f.join(format!("go/compare/{stem}{index}.diff-vs-base.pprof-top.txt")));
        assert_eq!(from_showing(&ours), from_showing(&reference.unwrap()), "{profile}");
    }
    // The numbers are compare - base over the base's total: pprof's findMatch row,
    // "0.65s 9.18% 9.18% 0.75s 10.59%", in raw nanoseconds.
    let (base, new) = (f.join("go/base/cpu.pb.gz"), f.join("go/compare/cpu.pb.gz"));
    let v = json(&stacklens(&[
        "top",
        new.to_str().unwrap(),
        "--diff-base",
        base.to_str().unwrap(),
        "--nodecount",
        "2",
        "--format",
        "json",
    ]));
    assert_eq!(v["total"], 7_080_000_000i64);
    assert_eq!(v["functions"][0]["name"], "compress/flate.(*compressor).findMatch");
    assert_eq!(
        (v["functions"][0]["flat"].as_i64(), v["functions"][0]["cum"].as_i64()),
        (Some(650_000_000), Some(750_000_000))
    );
    assert_eq!(
        (v["functions"][1]["name"].as_str(), v["functions"][1]["flat"].as_i64()),
        (Some("runtime.memmove"), Some(-320_000_000))
    );
}

#[test]
fn top_cum_text_equals_pprof() {
    let Some(f) = fixtures() else { return };
    // gen/groundtruth.sh: go tool pprof -top -cum -nodecount=30 go/{base,compare}/cpu.pb.gz
    for set in ["base", "compare"] {
        let ours = top_like_pprof(&f.join(format!("go/{set}/cpu.pb.gz")), 30, &["--cum"]);
        let reference = std::fs::read_to_string(f.join(format!("go/{set}/cpu.cum.pprof-top.txt"))).unwrap();
        assert_eq!(from_showing(&ours), from_showing(&reference), "{set}");
        // Sorted by cum: the first row is the root of most samples (no flat), not the
        // hottest function (findMatch, without --cum).
        let first = ours.lines().skip_while(|l| !l.trim_start().starts_with("flat  flat%")).nth(1).unwrap();
        assert!(
            first.starts_with("         0     0%     0%  ") && first.ends_with("%  main.(*service).requestLoop"),
            "{first}"
        );
    }
}

#[test]
fn granularity_and_filters_equal_go_tool_pprof() {
    let Some(f) = fixtures() else { return };
    let Some(go) = common::go() else { return };
    // (profile, our options, pprof's flags for the same thing), each with 15 rows.
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("go/base/cpu.pb.gz", &["--granularity", "filefunctions"], &["-filefunctions"]),
        ("go/base/cpu.pb.gz", &["--granularity", "lines"], &["-lines"]),
        ("go/base/cpu.pb.gz", &["--granularity", "addresses"], &["-addresses"]),
        ("go/base/cpu.pb.gz", &["--focus", "compress/flate"], &["-focus=compress/flate"]),
        ("go/base/cpu.pb.gz", &["--ignore", "compress/flate"], &["-ignore=compress/flate"]),
        ("go/base/cpu.pb.gz", &["--hide", "^runtime\\."], &["-hide=^runtime\\."]),
        ("go/base/cpu.pb.gz", &["--show", "compress/flate"], &["-show=compress/flate"]),
        (
            "go/base/cpu.pb.gz",
            &["--focus", "sort", "--hide", "sort\\.insertion", "--cum", "--granularity", "lines"],
            &["-focus=sort", "-hide=sort\\.insertion", "-cum", "-lines"],
        ),
        (
            "go/compare/cpu.pb.gz",
            &["--diff-base", "go/base/cpu.pb.gz", "--focus", "sort"],
            &["-diff_base=go/base/cpu.pb.gz", "-focus=sort"],
        ),
        (
            "go/compare/heap.pb.gz",
            &["--sample-index", "alloc_space", "--show", "compress|bytes", "--granularity", "filefunctions"],
            &["-sample_index=alloc_space", "-show=compress|bytes", "-filefunctions"],
        ),
    ];
    let plain = from_showing(&common::pprof_top(go, &f, &f.join("go/base/cpu.pb.gz"), &["-nodecount=15"])).to_owned();
    for (file, ours, flags) in cases {
        let mut pprof_flags = vec!["-nodecount=15"];
        pprof_flags.extend_from_slice(flags);
        let reference = common::pprof_top(go, &f, &f.join(file), &pprof_flags);
        assert_ne!(from_showing(&reference), plain, "{flags:?} changes pprof's output");
        // Files named in our options are relative to the fixtures, like pprof's.
        let ours: Vec<String> = ours
            .iter()
            .map(|a| if a.starts_with("go/") { f.join(a).to_string_lossy().into_owned() } else { a.to_string() })
            .collect();
        let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
        let output = top_like_pprof(&f.join(file), 15, &ours);
        assert_eq!(from_showing(&output), from_showing(&reference), "{file} {ours:?}");
    }
    // A regex that does not compile is an analysis error: exit 5, naming the option.
    let cpu = f.join("go/base/cpu.pb.gz");
    let bad = stacklens(&["top", cpu.to_str().unwrap(), "--hide", "("]);
    assert_eq!(bad.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("hide"), "{}", String::from_utf8_lossy(&bad.stderr));
    let bad = stacklens(&["top", cpu.to_str().unwrap(), "--granularity", "bytes"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn tag_options_and_tags_equal_go_tool_pprof() {
    let Some(f) = fixtures() else { return };
    let Some(go) = common::go() else { return };
    let cpu = f.join("go/base/cpu.pb.gz");
    let ours = top_like_pprof(&cpu, 15, &["--tagfocus", "endpoint=orders", "--tagroot", "endpoint,tenant", "--cum"]);
    let flags = ["-nodecount=15", "-tagfocus=endpoint=orders", "-tagroot=endpoint,tenant", "-cum"];
    let theirs = common::pprof_top(go, &f, &cpu, &flags);
    assert!(theirs.contains(" /api/orders\n") && theirs.contains(" acme\n"), "{theirs}");
    assert_eq!(from_showing(&ours), from_showing(&theirs));
    // `tags` prints what `go tool pprof -tags` prints, with the same options.
    let heap = f.join("go/compare/heap.pb.gz");
    let ours = text(&["tags", heap.to_str().unwrap(), "--sample-index", "alloc_space", "--tagignore", "bytes=16kb"]);
    let theirs = common::pprof(go, &f, &[&heap], &["-tags", "-sample_index=alloc_space", "-tagignore=bytes=16kb"]);
    assert!(theirs.starts_with(" bytes: Total "), "{theirs}");
    assert_eq!(ours, theirs);
    // A malformed tag filter is an analysis error: exit 5, naming the option.
    let bad = stacklens(&["tags", cpu.to_str().unwrap(), "--tagfocus", "endpoint=("]);
    assert_eq!(bad.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("tagfocus"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[test]
fn diff_text_names_totals_regressions_and_stacks() {
    let Some(f) = fixtures() else { return };
    let (base, new) = (f.join("go/base/cpu.pb.gz"), f.join("go/compare/cpu.pb.gz"));
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let out = text(&["diff", b, n]);
    let lines: Vec<&str> = out.lines().collect();
    // Totals from SOURCES.md (7.08s, 6.90s); findMatch's and memmove's changes as in
    // cpu.diff-vs-base.pprof-top.txt (+0.65s = 9.18% and +0.75s = 10.59% of the base total;
    // -0.32s = 4.52%).
    assert_eq!(lines[..4], ["Type: cpu", "Total: 7.08s -> 6.90s (-2.54%)", "", "Regressions (35):"]);
    assert_eq!(lines[4], "  flat         0 ( +0.00%)  cum     0.81s (+11.44%)  main.compressBlock");
    assert_eq!(lines[5], "  flat     0.65s ( +9.18%)  cum     0.75s (+10.59%)  compress/flate.(*compressor).findMatch");
    // 20 regressions are listed, then the improvements.
    assert_eq!(
        lines[24..27],
        ["", "Improvements (23):", "  flat    -0.01s ( -0.14%)  cum    -1.72s (-24.29%)  main.sortRecords"]
    );
    assert!(lines.contains(&"  flat    -0.32s ( -4.52%)  cum    -0.32s ( -4.52%)  runtime.memmove"), "{out}");
    assert_eq!(lines[46..49], ["", "Unchanged (within ±0.07s): 312", "New stacks: 112, removed stacks: 172"]);
    // Five of each, largest first: 30 ms new under reflect.makemap, 70 ms removed in sort.
    assert_eq!(lines.len(), 59, "{out}");
    let (added, removed) = (lines[49], lines[54]);
    assert!(added.starts_with("  +      0.03s  main.(*service).requestLoop > runtime/pprof.Do > "), "{added}");
    assert!(added.ends_with(" > reflect.makemap"), "{added}");
    assert!(removed.starts_with("  -      0.07s  main.(*service).requestLoop > "), "{removed}");
    assert!(removed.ends_with(" > sort.pdqsort_func > sort.partition_func"), "{removed}");

    // --normalize is reported; --noise-threshold 5: changes within 5% of 7.08s (354 ms)
    // count as unchanged. (What -normalize scales is checked in core's analysis tests.)
    let normalized = text(&["diff", b, n, "--normalize", "--noise-threshold", "5"]);
    let lines: Vec<&str> = normalized.lines().collect();
    assert!(lines[1].starts_with("Total: ") && lines[1].ends_with(" (-2.54%) [normalized]"), "{}", lines[1]);
    assert!(normalized.contains("\nUnchanged (within ±354ms): "), "{normalized}");
}

#[test]
fn goroutines_text_shows_states_groups_and_growth() {
    let Some(f) = fixtures() else { return };
    let (base, new) = (f.join("go/base/goroutine.debug2.txt"), f.join("go/compare/goroutine.debug2.txt"));
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let out = text(&["goroutines", b, "--compare", n, "--max-stacks", "1"]);
    // States as the dump's headers count them (SOURCES.md lists all but the last three).
    let expected = "\
Goroutines: 453
      388  chan send
       27  sleep
       17  IO wait
        7  select
        6  sync.Cond.Wait
        3  semacquire
        2  chan receive
        2  runnable
        1  running

Blocked: 450 in 16 groups

Stacks (19 groups):
      388  [chan send]
           main.(*upstreamClient).fetchRemote  /src/stacklens/shared/fixtures/gen/workload.go:514
           created by main.(*upstreamClient).fetchWithTimeout

Growth: 453 -> 1617 (+1164, 3.57x)
New stacks (2):
";
    assert!(out.starts_with(expected), "{out}");
    assert!(out.contains("\n+       1  [runnable]\n           crypto/sha256.block  "), "{out}");
    assert!(out.contains("\n+       1  [semacquire]\n           sync.runtime_SemacquireMutex  "), "{out}");
    assert!(
        out.ends_with(
            "Grown stacks (1):\n  +1164 (from 388)\n     1552  [chan send]\n           \
             main.(*upstreamClient).fetchRemote  /src/stacklens/shared/fixtures/gen/workload.go:514\n           \
             created by main.(*upstreamClient).fetchWithTimeout\n"
        ),
        "{out}"
    );
    // A filter keeps the groups that mention it: the 24 janitor goroutines asleep.
    let janitor = text(&["goroutines", b, "--filter", "janitorLoop"]);
    assert!(janitor.starts_with("Goroutines: 24\n       24  sleep\n"), "{janitor}");
    // A protobuf goroutine profile has no states: they are inferred, and said to be.
    let pb = f.join("go/base/goroutine.pb.gz");
    let inferred = text(&["goroutines", pb.to_str().unwrap(), "--max-stacks", "0"]);
    assert!(inferred.starts_with("Goroutines: 453\n"), "{inferred}");
    assert!(inferred.contains("(states inferred from stack frames; a debug=2 dump has exact states)"), "{inferred}");
}

#[test]
fn top_raw_names_shows_mangled_symbols() {
    let Some(f) = fixtures() else { return };
    let perf = f.join("thirdparty/speedscope/rust-mangled.linux-perf.txt");
    let perf = perf.to_str().unwrap();
    let top2 = |extra: &[&str]| {
        let mut args = vec!["top", perf, "--format", "json", "--nodecount", "2"];
        args.extend_from_slice(extra);
        let v = json(&stacklens(&args));
        assert_eq!(v["total"], 96 * 16_949_152i64);
        let rows = v["functions"].as_array().unwrap().clone();
        rows.iter().map(|r| (r["name"].as_str().unwrap().to_owned(), r["flat"].as_i64().unwrap())).collect::<Vec<_>>()
    };
    // 15 of the 96 records (16,949,152 ns each) have this leaf; c++filt names it
    // `<alloc[b23c587ff69f26b0]::vec::Vec<f64> as core[2b1f2bbd3b605c]::ops::index::Index<usize>>::index`.
    let raw = "_RNvXsb_NtCsfiKabdrepoq_5alloc3vecINtB5_3VecdEINtNtNtCsTACXlTRjQ_4core3ops5index5IndexjE5indexCs8K9WJNlS7Dz_5trace";
    let mut_raw = "_RNvNvNtNtCsTACXlTRjQ_4core5slice3raw18from_raw_parts_mut18precondition_checkCs8K9WJNlS7Dz_5trace";
    assert_eq!(
        top2(&[]),
        [
            ("<alloc::vec::Vec<f64> as core::ops::index::Index<usize>>::index".to_owned(), 15 * 16_949_152),
            ("core::slice::raw::from_raw_parts_mut::precondition_check".to_owned(), 13 * 16_949_152),
        ]
    );
    assert_eq!(top2(&["--raw-names"]), [(raw.to_owned(), 15 * 16_949_152), (mut_raw.to_owned(), 13 * 16_949_152)]);
    let text = text(&["top", perf, "--raw-names", "--nodecount", "3"]);
    assert!(text.contains(raw), "{text}");
    assert!(!text.contains("::index"), "{text}");
}

#[test]
fn convert_writes_what_top_reads_merges_files_and_names_its_errors() {
    let Some(fx) = fixtures() else { return };
    let dir = std::env::temp_dir().join(format!("stacklens-cli-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (base, compare) = (fx.join("go/base/cpu.pb.gz"), fx.join("go/compare/cpu.pb.gz"));
    let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    // Each format by the output's name, read back by `top` with the original's numbers.
    let original = from_showing(&top_like_pprof(&base, 20, &[])).to_owned();
    for name in ["cpu.pb.gz", "cpu.folded", "cpu.speedscope.json"] {
        text(&["convert", base.to_str().unwrap(), "-o", &out(name), "--sample-index", "cpu"]);
        let back = top_like_pprof(Path::new(&out(name)), 20, &[]);
        if name.ends_with(".pb.gz") {
            assert_eq!(from_showing(&back), original, "{name}");
        } else {
            // Unit-less or re-based formats: the same rows, by name, in the same order.
            let names = |report: &str| {
                report
                    .lines()
                    .skip(3)
                    .map(|l| l.trim_end_matches(" (inline)").split_whitespace().last().unwrap().to_owned())
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(from_showing(&back)), names(&original), "{name}");
        }
    }
    // --to wins over the name; "-" is standard output.
    let folded = text(&["convert", base.to_str().unwrap(), "-o", "-", "--to", "folded", "--focus", "sha256"]);
    assert!(!folded.is_empty() && folded.lines().all(|l| l.contains("sha256")), "{folded}");
    // Two files merged, as `go tool pprof a b`: twice the samples of one.
    text(&["convert", base.to_str().unwrap(), compare.to_str().unwrap(), "-o", &out("both.pb.gz")]);
    let merged = json(&stacklens(&["top", &out("both.pb.gz"), "--format", "json"]));
    let one = |f: &Path| json(&stacklens(&["top", f.to_str().unwrap(), "--format", "json"]))["total"].as_i64().unwrap();
    assert_eq!(merged["total"].as_i64().unwrap(), one(&base) + one(&compare));
    // Errors: a name that says no format (usage, 2), profiles of other types (5).
    let unknown = stacklens(&["convert", base.to_str().unwrap(), "-o", &out("cpu.txt")]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("pass --to"));
    let heap = fx.join("go/base/heap.pb.gz");
    let mixed = stacklens(&["convert", base.to_str().unwrap(), heap.to_str().unwrap(), "-o", &out("x.pb.gz")]);
    assert_eq!(mixed.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("sample types differ"), "{mixed:?}");
    assert!(!dir.join("x.pb.gz").exists(), "nothing written on an error");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sanitize_writes_a_profile_without_paths_build_ids_or_labels_that_top_reads_the_same() {
    let Some(fx) = fixtures() else { return };
    let dir = std::env::temp_dir().join(format!("stacklens-cli-sanitize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = fx.join("go/base/cpu.pb.gz");
    let clean = dir.join("clean.pb.gz");
    let (base_arg, clean_arg) = (base.to_str().unwrap(), clean.to_str().unwrap());
    text(&["sanitize", base_arg, "-o", clean_arg, "--strip", "paths,buildids,comments,labels"]);
    // The same top report, and no labels or source files left for tags and list to show.
    assert_eq!(from_showing(&top_like_pprof(&clean, 20, &[])), from_showing(&top_like_pprof(&base, 20, &[])));
    assert!(text(&["tags", base_arg]).contains("tenant"));
    let tags = stacklens(&["tags", clean_arg]);
    assert!(!String::from_utf8_lossy(&tags.stdout).contains("tenant"), "{tags:?}");
    let list = text(&["list", "sha256.block", base_arg]);
    assert!(list.contains("/crypto/sha256/sha256block_amd64.s"), "{list}");
    let list = stacklens(&["list", "sha256.block", clean_arg]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains("sha256block_amd64"), "{list:?}");
    // --redact renames matched functions; the totals stay.
    let to_stdout = stacklens(&["sanitize", base_arg, "-o", "-", "--redact", "sha256"]);
    assert!(to_stdout.status.success() && to_stdout.stdout.starts_with(&[0x1f, 0x8b]), "gzipped pprof on stdout");
    text(&["sanitize", base_arg, "-o", clean_arg, "--redact", "sha256"]);
    let top = json(&stacklens(&["top", clean_arg, "--format", "json"]));
    let names: Vec<&str> = top["functions"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.iter().all(|n| !n.contains("sha256")) && names.iter().any(|n| n.starts_with("redacted-")));
    let original = json(&stacklens(&["top", base_arg, "--format", "json"]));
    assert_eq!(top["total"], original["total"]);
    // Usage errors (exit 2): an unknown word, nothing to remove, a bad regex.
    for (args, says) in [
        (vec!["--strip", "paths,secrets"], "cannot strip 'secrets'"),
        (vec![], "nothing to remove"),
        (vec!["--redact", "("], "redact"),
    ] {
        let out = stacklens(&[&["sanitize", base_arg, "-o", clean_arg][..], &args].concat());
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{args:?}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// The fixture files as arguments.
fn paths(f: &Path, files: &[&str]) -> Vec<String> {
    files.iter().map(|file| f.join(file).to_str().unwrap().to_owned()).collect()
}

#[test]
fn several_files_are_merged_as_go_tool_pprof_merges_them() {
    let Some(f) = fixtures() else { return };
    let Some(go) = common::go() else { return };
    // Two CPU profiles of the same program (same sample types, overlapping stacks), and
    // the two runs' heap profiles: `go tool pprof -top A B` reads them as one.
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (&["go/base/cpu.pb.gz", "go/compare/cpu.pb.gz"], &[], &[]),
        (&["go/base/cpu.pb.gz", "go/compare/cpu.pb.gz"], &["--cum"], &["-cum"]),
        (
            &["go/base/heap.pb.gz", "go/compare/heap.pb.gz", "go/compare/allocs.pb.gz"],
            &["--sample-index", "alloc_space"],
            &["-sample_index=alloc_space"],
        ),
    ];
    for (files, ours, flags) in cases {
        // pprof runs in the fixtures folder, and names them from there.
        let relative: Vec<&Path> = files.iter().map(Path::new).collect();
        let reference = common::pprof_top_merged(go, &f, &relative, &[&["-nodecount=25"], *flags].concat());
        let mut args = vec!["top".to_owned()];
        args.extend(paths(&f, files));
        args.extend(["--nodecount", "25", "--nodefraction", "0.005"].map(String::from));
        args.extend(ours.iter().map(|a| a.to_string()));
        let ours = text(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(from_showing(&ours), from_showing(&reference), "{files:?} {flags:?}");
    }
    // Several bases, merged. Go 1.19's pprof keeps only the last -diff_base it is given,
    // so the reference is -diff_base of the two bases as pprof itself merges them (-proto).
    let tmp = common::temp_dir("cli-merged-base");
    let merged_base = tmp.join("base.pb.gz");
    let bases = ["go/base/heap.pb.gz", "go/base/allocs.pb.gz"];
    let output = ["-proto", "-output", merged_base.to_str().unwrap()];
    common::pprof(go, &f, &bases.map(Path::new), &output);
    let diff_base = format!("-diff_base={}", merged_base.display());
    let reference = common::pprof_top(
        go,
        &f,
        Path::new("go/compare/heap.pb.gz"),
        &["-nodecount=25", "-sample_index=inuse_space", &diff_base],
    );
    let bases = paths(&f, &bases);
    let extra = ["--diff-base", &bases[0], &bases[1], "--sample-index", "inuse_space"];
    let ours = top_like_pprof(&f.join("go/compare/heap.pb.gz"), 25, &extra);
    assert!(reference.contains("of 14.53MB total"), "the two bases: 2 × 7617933 bytes: {reference}");
    assert_eq!(from_showing(&ours), from_showing(&reference));
    let _ = std::fs::remove_dir_all(tmp);
    // The merged CPU total is the sum of both (SOURCES.md: 7.08 s and 6.90 s).
    let cpus = paths(&f, &["go/base/cpu.pb.gz", "go/compare/cpu.pb.gz"]);
    let v = json(&stacklens(&["top", &cpus[0], &cpus[1], "--format", "json", "--nodecount", "1"]));
    assert_eq!(v["total"], 13_980_000_000i64);

    // `-tags`, `-dot` and `-list` of the same two files.
    let both: Vec<&Path> = cpus.iter().map(Path::new).collect();
    let theirs = common::pprof(go, &f, &both, &["-tags"]);
    assert!(theirs.contains(" endpoint: Total "), "{theirs}");
    assert_eq!(text(&["tags", &cpus[0], &cpus[1]]), theirs);
    let expected = graph_lines(&common::pprof(go, &f, &both, &["-dot"]));
    assert!(expected.len() > 10, "{expected:?}");
    assert_eq!(graph_lines(&text(&["graph", &cpus[0], &cpus[1]])), expected);
    let gen = f.join("gen");
    let gen = gen.to_str().unwrap();
    let reference = pprof_list(go, &f, &[r"main\.compress", "-source_path", gen, &cpus[0], &cpus[1]]);
    assert!(reference.contains("ROUTINE ======================== main.compress"), "{reference}");
    assert_eq!(text(&["list", r"main\.compress", &cpus[0], &cpus[1], "--source-dir", gen]), reference);
}

#[test]
fn diff_with_several_runs_a_side_equals_the_diff_of_the_merged_files() {
    let Some(f) = fixtures() else { return };
    let dir = common::temp_dir("cli-diff-runs");
    let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    // Four heap profiles of the same types: two runs a side.
    let base = paths(&f, &["go/base/heap.pb.gz", "go/base/allocs.pb.gz"]);
    let new = paths(&f, &["go/compare/heap.pb.gz", "go/compare/allocs.pb.gz"]);
    let (base_merged, new_merged) = (out("base.pb.gz"), out("new.pb.gz"));
    text(&["convert", &base[0], &base[1], "-o", &base_merged]);
    text(&["convert", &new[0], &new[1], "-o", &new_merged]);
    for extra in [&["--format", "json"][..], &["--sample-index", "alloc_space"][..], &["--normalize"][..]] {
        let mut runs = vec!["diff", "--base", &base[0], &base[1], "--new", &new[0], &new[1]];
        runs.extend_from_slice(extra);
        let mut merged = vec!["diff", &base_merged, &new_merged];
        merged.extend_from_slice(extra);
        let (runs, merged) = (text(&runs), text(&merged));
        assert!(runs.contains("Regressions (") || runs.contains("\"regressions\""), "{runs}");
        assert_eq!(runs, merged, "{extra:?}");
    }
    // The sums: SOURCES.md's inuse_space totals, 7617933 twice in the base runs and
    // 14530408 twice in the new ones.
    let v = json(&stacklens(&[
        "diff",
        "--base",
        &base[0],
        &base[1],
        "--new",
        &new[0],
        &new[1],
        "--sample-index",
        "inuse_space",
        "--format",
        "json",
    ]));
    assert_eq!((v["baseTotal"].as_i64(), v["compareTotal"].as_i64()), (Some(2 * 7617933), Some(2 * 14530408)));
    // One run a side is `diff BASE NEW`.
    assert_eq!(text(&["diff", "--base", &base[0], "--new", &new[0]]), text(&["diff", &base[0], &new[0]]));

    // Both forms, or neither, or one side only: usage errors that say what diff takes.
    for args in [
        &["diff", &base[0], &new[0], "--base", &base[1], "--new", &new[1]][..],
        &["diff", &base[0], &new[0], "--new", &new[1]][..],
        &["diff", "--base", &base[0], &base[1]][..],
        &["diff", &base[0]][..],
        &["diff"][..],
    ] {
        let run = stacklens(args);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        let message = String::from_utf8_lossy(&run.stderr);
        assert!(message.contains("BASE NEW") && message.contains("--base FILE… --new FILE…"), "{args:?}: {message}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn merging_names_the_file_it_refuses_or_cannot_read() {
    let Some(f) = fixtures() else { return };
    let [cpu, heap, compare] = &paths(&f, &["go/base/cpu.pb.gz", "go/base/heap.pb.gz", "go/compare/cpu.pb.gz"])[..]
    else {
        unreachable!()
    };
    let dir = common::temp_dir("cli-merge-errors");
    let (merged, not_written) = (dir.join("x.pb.gz"), dir.join("y.pb.gz"));
    let (merged, not_written) = (merged.to_str().unwrap(), not_written.to_str().unwrap());
    for args in [
        &["top", cpu, compare, heap][..],
        &["diff", "--base", cpu, "--new", compare, heap],
        &["top", compare, "--diff-base", cpu, heap],
        &["tags", cpu, heap],
        &["goroutines", cpu, heap],
        &["convert", cpu, heap, "-o", not_written],
    ] {
        let run = stacklens(args);
        assert_eq!(run.status.code(), Some(5), "{args:?}");
        let message = String::from_utf8_lossy(&run.stderr);
        assert!(
            message.starts_with(&format!("stacklens: {heap}: ")) && message.contains("sample types differ"),
            "{args:?}: {message}"
        );
        assert!(message.contains("[samples/count, cpu/nanoseconds] and [alloc_objects/count"), "{message}");
    }
    assert!(!Path::new(not_written).exists(), "nothing written on an error");
    // A file that cannot be read or parsed keeps its exit status and message.
    let missing = stacklens(&["top", cpu, "/nonexistent/b.pb.gz"]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/b.pb.gz"));
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "heap profile: 1: 2 [3: 4] @ heap/2\ngarbage line\n").unwrap();
    let corrupt = stacklens(&["diff", "--base", cpu, bad.to_str().unwrap(), "--new", compare]);
    assert_eq!(corrupt.status.code(), Some(4));
    let message = String::from_utf8_lossy(&corrupt.stderr);
    assert!(message.contains("bad.txt") && message.contains("line 2"), "{message}");
    // The same file twice is merged (twice its values), as pprof does.
    text(&["convert", cpu, cpu, "-o", merged]);
    let v = json(&stacklens(&["top", merged, "--format", "json", "--nodecount", "1"]));
    assert_eq!(v["total"], 2 * 7_080_000_000i64);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn goroutines_of_several_dumps_count_every_goroutine_of_each() {
    let Some(f) = fixtures() else { return };
    let dumps = paths(&f, &["go/base/goroutine.debug2.txt", "go/compare/goroutine.debug2.txt"]);
    let (a, b) = (dumps[0].as_str(), dumps[1].as_str());
    let one = |file: &str| json(&stacklens(&["goroutines", file, "--format", "json"]));
    let (first, second) = (one(a), one(b));
    let both = json(&stacklens(&["goroutines", a, b, "--format", "json"]));
    // SOURCES.md: 453 and 1617 goroutines; the leak's 388 and 1552 in chan send.
    assert_eq!(both["goroutineCount"], 453 + 1617);
    assert_eq!(both["byState"]["chan send"], 388 + 1552);
    let states: std::collections::BTreeSet<&String> =
        first["byState"].as_object().unwrap().keys().chain(second["byState"].as_object().unwrap().keys()).collect();
    for state in states {
        let count = |v: &serde_json::Value| v["byState"][state].as_u64().unwrap_or(0);
        assert_eq!(count(&both), count(&first) + count(&second), "{state}");
    }
    assert_eq!(
        both["blockedCount"],
        first["blockedCount"].as_u64().unwrap() + second["blockedCount"].as_u64().unwrap()
    );
    assert_eq!(both["statesInferred"], false);

    // The same report as one dump holding both dumps' goroutines.
    let dir = common::temp_dir("cli-goroutines");
    let concatenated = dir.join("both.debug2.txt");
    let text_of = |file: &str| std::fs::read_to_string(file).unwrap();
    std::fs::write(&concatenated, format!("{}\n{}", text_of(a), text_of(b))).unwrap();
    let concatenated = concatenated.to_str().unwrap();
    assert_eq!(one(concatenated), both);
    assert_eq!(text(&["goroutines", a, b]), text(&["goroutines", concatenated]));

    // --compare with several later dumps: growth from the first to both.
    let growth = json(&stacklens(&["goroutines", a, "--compare", a, b, "--format", "json"]));
    assert_eq!((growth["baseCount"].as_u64(), growth["compareCount"].as_u64()), (Some(453), Some(453 + 1617)));
    assert_eq!(growth["growthCount"], 1617);
    assert_eq!(growth["goroutineCount"], 453);
    // A dump and a goroutine profile (no per-goroutine records): both counted, states inferred.
    let pb = paths(&f, &["go/compare/goroutine.pb.gz"]);
    let mixed = json(&stacklens(&["goroutines", a, &pb[0], "--format", "json"]));
    assert_eq!((mixed["goroutineCount"].as_u64(), mixed["statesInferred"].as_bool()), (Some(453 + 1617), Some(true)));
    let _ = std::fs::remove_dir_all(dir);
}
