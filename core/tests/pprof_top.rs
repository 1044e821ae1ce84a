//! Our `top` against `go tool pprof -top` output: for every fixture that has a stored
//! `*.pprof-top.txt`, and for focus/ignore/hide/show, granularities, `-cum`, sample
//! indexes and `-diff_base` combinations against pprof run at test time. The same rows in
//! the same order, the same flat and cum after pprof's display rounding, the same total,
//! the same dropped-node count and cutoff, the same node count and inline markers.

mod common;
use common::read_pprof_top;
use common::top_check::{check_against, check_against_pprof_run_now, pprof_options, rows, Case};

use std::path::{Path, PathBuf};

use stacklens_core::analysis::{Granularity, Query};

fn case_for(expected: &Path) -> Option<Case> {
    let dir = expected.parent()?;
    let file = expected.file_name()?.to_str()?;
    let stem = file.strip_suffix(".pprof-top.txt")?;
    let mut case = Case {
        expected: expected.to_owned(),
        profile: PathBuf::new(),
        base: None,
        query: Query::default(),
        options: pprof_options(20),
    };
    let (mut name, diff) = match stem.strip_suffix(".diff-vs-base") {
        Some(s) => (s.to_owned(), true),
        None => (stem.to_owned(), false),
    };
    if let Some(s) = name.strip_suffix(".cum") {
        name = s.to_owned();
        case.options.cum = true;
        case.options.node_count = Some(30);
    }
    // An existing file named by the whole stem, or a stem ending in a sample type.
    let (file_part, index) = if dir.join(&name).is_file() {
        (name.clone(), String::new())
    } else {
        match name.rsplit_once('.') {
            Some((f, idx)) if dir.join(f).is_file() || dir.join(format!("{f}.pb.gz")).is_file() => {
                (f.to_owned(), idx.to_owned())
            }
            _ => (name.clone(), String::new()),
        }
    };
    case.query.sample = index.as_str().into();
    let profile =
        if dir.join(&file_part).is_file() { dir.join(&file_part) } else { dir.join(format!("{file_part}.pb.gz")) };
    if !profile.is_file() {
        panic!("no profile found for ground truth {}", expected.display());
    }
    if file_part.ends_with(".debug1.txt") {
        // The ground truth for legacy texts was made with -addresses.
        case.query.granularity = Granularity::Addresses;
    }
    if diff {
        let base_dir = dir.parent()?.join("base");
        case.base = Some(base_dir.join(profile.file_name()?));
    }
    case.profile = profile;
    Some(case)
}

fn ground_truth_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().ends_with(".pprof-top.txt") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn check(case: &Case) -> Result<(), String> {
    check_against(case, &std::fs::read_to_string(&case.expected).unwrap())
}

#[test]
fn top_equals_go_tool_pprof_on_every_ground_truth() {
    let Some(root) = common::fixtures() else { return };
    let files = ground_truth_files(&root);
    // README: "compares every row of `go tool pprof -top` output for 43 real profiles".
    assert_eq!(files.len(), 43, "ground-truth files: {files:#?}");
    let cases: Vec<Case> =
        files.iter().map(|f| case_for(f).unwrap_or_else(|| panic!("no case for {}", f.display()))).collect();
    // The kinds the README names are all among them.
    assert_eq!(cases.iter().filter(|c| c.base.is_some()).count(), 4, "-diff_base cases");
    assert_eq!(cases.iter().filter(|c| c.options.cum).count(), 2, "-cum cases");
    let addresses = cases.iter().filter(|c| c.query.granularity == Granularity::Addresses).count();
    assert_eq!(addresses, 8, "-addresses cases");
    for c in &cases {
        let e = read_pprof_top(&std::fs::read_to_string(&c.expected).unwrap());
        assert!(!e.rows.is_empty(), "{}: no rows", c.expected.display());
    }
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(failures.is_empty(), "{} of {} differ from pprof:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn filters_granularities_and_diffs_equal_go_tool_pprof_run_now() {
    let Some(root) = common::fixtures() else { return };
    let Some(go) = common::go() else { return };
    // (profile, pprof flags besides -nodecount=80), each checked against pprof with the
    // same flags, and against pprof without the filter/granularity flags (the flags must
    // change pprof's answer, or the case proves nothing).
    let cases: &[(&str, &[&str])] = &[
        ("go/base/cpu.pb.gz", &["-show=compress/flate"]),
        ("go/base/cpu.pb.gz", &["-filefunctions"]),
        ("go/base/cpu.pb.gz", &["-lines"]),
        ("go/base/cpu.pb.gz", &["-addresses"]),
        ("go/base/cpu.pb.gz", &["-focus=compress/flate"]),
        ("go/base/cpu.pb.gz", &["-ignore=compress/flate"]),
        ("go/base/cpu.pb.gz", &["-hide=^runtime\\."]),
        ("go/base/cpu.pb.gz", &["-focus=sort", "-hide=sort\\.insertion", "-cum"]),
        ("go/base/cpu.pb.gz", &["-focus=nosuchfunction"]),
        // The binary's name matches: every frame of it shown, or hidden (no rows left).
        ("go/compare/cpu.pb.gz", &["-show=fixturegen|deflate", "-hide=findMatch"]),
        ("go/compare/cpu.pb.gz", &["-hide=fixturegen"]),
        ("go/compare/cpu.pb.gz", &["-show=matchLen|typedmemmove|hash4|sort", "-filefunctions", "-cum"]),
        ("go/compare/cpu.pb.gz", &["-show=matchLen|typedmemmove|hash4|sort", "-lines"]),
        ("go/compare/cpu.pb.gz", &["-hide=findMatch|typedmemmove", "-addresses"]),
        ("go/compare/cpu.pb.gz", &["-focus=main\\.", "-ignore=runtime\\.gc", "-filefunctions"]),
        ("go/compare/cpu.pb.gz", &["-diff_base=go/base/cpu.pb.gz", "-focus=sort", "-lines"]),
        ("go/compare/cpu.pb.gz", &["-diff_base=go/base/cpu.pb.gz", "-hide=findMatch|typedmemmove"]),
        ("go/compare/cpu.pb.gz", &["-diff_base=go/base/cpu.pb.gz", "-filefunctions", "-cum"]),
        ("go/compare/heap.pb.gz", &["-sample_index=alloc_space", "-focus=compress", "-lines"]),
        ("go/compare/heap.pb.gz", &["-diff_base=go/base/heap.pb.gz", "-sample_index=inuse_objects", "-show=main"]),
        ("go/base/block.pb.gz", &["-sample_index=contentions", "-lines"]),
        // Java frames have address 0: pprof prints no address for them.
        ("thirdparty/pyroscope/profile_java.pb.gz", &["-addresses"]),
        ("thirdparty/pyroscope/profile_java.pb.gz", &["-show=java/io", "-lines"]),
        // Unsymbolized: the filters match the binaries' names.
        ("thirdparty/pprof/cppbench.cpu", &["-focus=libc", "-hide=pthread", "-addresses"]),
        ("thirdparty/pprof/cppbench.cpu", &["-show=cppbench", "-lines"]),
        ("thirdparty/pprof/large.cpu", &["-focus=time", "-hide=runtime"]),
    ];
    let failures = check_against_pprof_run_now(&root, go, cases);
    assert!(failures.is_empty(), "{} of {} differ from pprof:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// `stacklens convert --to pprof`: `go tool pprof -top` on the converted file gives our
/// `top` of the original, row for row, for every importable fixture; with a filter and
/// a sample type too. Several files converted at once are merged as pprof merges them.
#[test]
fn converted_profiles_read_the_same_in_go_tool_pprof() {
    use stacklens_core::analysis::Prepared;
    use stacklens_core::export::{export, ExportFormat};
    let Some(root) = common::fixtures() else { return };
    let Some(go) = common::go() else { return };
    let tmp = std::env::temp_dir().join(format!("stacklens-convert-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let files = common::importable_fixtures(&root);
    assert!(files.len() >= 60, "importable fixtures: {}", files.len());
    let mut failures = Vec::new();
    let mut checked = 0;
    for (n, file) in files.iter().enumerate() {
        let profile = stacklens_core::parse(&common::read(file)).unwrap();
        if profile.samples.is_empty() {
            continue; // pprof has no rows to compare (and says so)
        }
        let converted = tmp.join(format!("{n}.pb.gz"));
        std::fs::write(&converted, export(&Prepared::whole(&profile).unwrap(), ExportFormat::Pprof).unwrap()).unwrap();
        let reference = common::pprof_top(go, &tmp, &converted, &["-nodecount=20"]);
        let (expected, profile) = (file.clone(), file.clone());
        let case = Case { expected, profile, base: None, query: Query::default(), options: pprof_options(20) };
        checked += 1;
        if let Err(e) = check_against(&case, &reference) {
            failures.push(e);
        }
    }
    // Filters and the sample type are applied to what is written: pprof on the converted
    // file shows the rows pprof shows for the original with the same flags (totals
    // differ: a filtered file holds only what was kept, so no node fraction either).
    let heap = root.join("go/compare/heap.pb.gz");
    let query = Query {
        sample: "alloc_space".into(),
        filters: stacklens_core::analysis::Filters {
            focus: Some("compress".into()),
            hide: Some("flate".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let converted = tmp.join("filtered.pb.gz");
    let heap_profile = stacklens_core::parse(&common::read(&heap)).unwrap();
    let bytes = export(&query.prepare(&heap_profile).unwrap(), ExportFormat::Pprof).unwrap();
    std::fs::write(&converted, bytes).unwrap();
    let all = ["-nodecount=80", "-nodefraction=0"];
    let filtered = common::pprof_top(go, &tmp, &converted, &all);
    let original = common::pprof_top(
        go,
        &root,
        &heap,
        &[&all[..], &["-sample_index=alloc_space", "-focus=compress", "-hide=flate"]].concat(),
    );
    assert!(!rows(&original).is_empty() && rows(&original) != rows(&common::pprof_top(go, &root, &heap, &all)));
    if rows(&filtered) != rows(&original) {
        failures.push(format!(
            "filtered heap profile differs:
converted:
{filtered}
original:
{original}"
        ));
    }
    // Two files merged: pprof given both reads what our merge wrote.
    let (base, compare) = (root.join("go/base/cpu.pb.gz"), root.join("go/compare/cpu.pb.gz"));
    let both: Vec<stacklens_core::Profile> =
        [&base, &compare].iter().map(|p| stacklens_core::parse(&common::read(p)).unwrap()).collect();
    let merged = stacklens_core::Profile::merge(&both).unwrap();
    let converted = tmp.join("merged.pb.gz");
    std::fs::write(&converted, export(&Prepared::whole(&merged).unwrap(), ExportFormat::Pprof).unwrap()).unwrap();
    let ours = common::pprof_top(go, &tmp, &converted, &["-nodecount=40"]);
    let theirs = common::pprof_top_merged(go, &root, &[&base, &compare], &["-nodecount=40"]);
    assert!(!rows(&theirs).is_empty(), "pprof merged nothing:\n{theirs}");
    if rows(&ours) != rows(&theirs) || read_pprof_top(&ours).total != read_pprof_top(&theirs).total {
        failures.push(format!("merged cpu profiles differ:\nours:\n{ours}\npprof:\n{theirs}"));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(failures.is_empty(), "{} of {checked} converted profiles differ:\n{}", failures.len(), failures.join("\n"));
}
