//! The `stacklens` binary as a CI job uses it: output shapes, numbers and exit codes.

mod common;

use common::fixtures;
use std::process::{Command, Output};

fn stacklens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stacklens")).args(args).output().expect("runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
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

#[test]
fn diff_json_and_regression_gate() {
    let Some(f) = fixtures() else { return };
    let (base, new) = (f.join("go/base/cpu.pb.gz"), f.join("go/compare/cpu.pb.gz"));
    let (b, n) = (base.to_str().unwrap(), new.to_str().unwrap());
    let v = json(&stacklens(&["diff", b, n, "--format", "json"]));
    assert_eq!(v["baseTotal"], 7_080_000_000i64);
    assert!(v["regressions"].as_array().unwrap().iter().any(|r| r["name"] == "main.matrixMultiply"));
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
    assert_eq!(v["growthCount"], 1164);
    let top = &v["topStacks"][0];
    assert_eq!(top["count"], 388);
    assert_eq!(top["state"], "chan send");
    assert_eq!(top["waitReason"], "chan send");
    assert_eq!(top["createdBy"], "main.(*upstreamClient).fetchWithTimeout");
    assert!(v["newStacks"].is_array() && v["blockedGoroutines"].is_array());
    assert!((v["goroutineGrowthRate"].as_f64().unwrap() - 3.5695).abs() < 1e-3);
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
