//! Labels (pprof's tags): `-tagfocus`, `-tagignore`, `-tagroot`, `-tagleaf` in `top`
//! against `go tool pprof -top` run now, the `-tags` report byte for byte, the label
//! summary's numbers, and the errors for malformed tag filters.

mod common;
use common::top_check::{check_against_pprof_run_now, options_for, rows};

use stacklens_core::analysis::labels::LabelSummary;
use stacklens_core::analysis::tags::label_summary;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::tree::{CallTree, TreeOptions, ROOT};
use stacklens_core::analysis::{Filters, Query};
use stacklens_core::report::tags::tags;
use stacklens_core::{Error, Profile, Result};

/// The label summary of `profile` under `query`.
fn labels_of(profile: &Profile, query: Query) -> Result<LabelSummary> {
    query.prepare(profile).and_then(|prepared| label_summary(&prepared))
}

fn load(root: &std::path::Path, file: &str) -> Profile {
    stacklens_core::parse(&common::read(&root.join(file))).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn tag_filters_and_label_frames_equal_go_tool_pprof_run_now() {
    let Some(root) = common::fixtures() else { return };
    let Some(go) = common::go() else { return };
    // The Go CPU profiles label samples with `endpoint` and `tenant`; Go heap profiles
    // label them with a unitless number, `bytes`.
    let cases: &[(&str, &[&str])] = &[
        ("go/base/cpu.pb.gz", &["-tagfocus=endpoint=/api/report"]),
        ("go/base/cpu.pb.gz", &["-tagfocus=endpoint=search,orders"]),
        ("go/base/cpu.pb.gz", &["-tagignore=tenant=acme|globex"]),
        // A bare regex matches `key:value`; with several, each must match a label.
        ("go/base/cpu.pb.gz", &["-tagfocus=orders"]),
        ("go/base/cpu.pb.gz", &["-tagfocus=endpoint:/api/search,tenant:initech"]),
        ("go/base/cpu.pb.gz", &["-tagfocus=tenant=umbrella", "-tagignore=search", "-cum"]),
        ("go/base/cpu.pb.gz", &["-tagroot=endpoint", "-cum"]),
        ("go/base/cpu.pb.gz", &["-tagleaf=tenant"]),
        ("go/base/cpu.pb.gz", &["-tagroot=endpoint,tenant", "-tagleaf=tenant", "-filefunctions", "-cum"]),
        ("go/base/cpu.pb.gz", &["-tagleaf=endpoint", "-lines", "-hide=runtime"]),
        // Label frames are frames: focus and hide see them.
        ("go/compare/cpu.pb.gz", &["-tagroot=endpoint", "-focus=^/api/search$", "-cum"]),
        ("go/compare/cpu.pb.gz", &["-tagroot=tenant", "-tagleaf=endpoint", "-hide=^/api/report$"]),
        ("go/compare/cpu.pb.gz", &["-diff_base=go/base/cpu.pb.gz", "-tagfocus=tenant=acme"]),
        ("go/compare/cpu.pb.gz", &["-diff_base=go/base/cpu.pb.gz", "-tagroot=endpoint", "-cum"]),
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=1kb:4kb"]),
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=:64kb"]),
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=512b"]),
        ("go/base/heap.pb.gz", &["-sample_index=alloc_space", "-tagignore=bytes=16kb"]),
        ("go/base/heap.pb.gz", &["-sample_index=alloc_objects", "-tagfocus=2kb:"]),
        // A range without a unit never matches bytes; an empty range nothing; a key no
        // sample has, nothing.
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=64:"]),
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=4kb:1kb"]),
        ("go/base/cpu.pb.gz", &["-tagfocus=ms=10:"]),
        // Numbers without a unit are written as they are.
        ("go/compare/heap.pb.gz", &["-sample_index=alloc_space", "-tagleaf=bytes"]),
        ("go/compare/heap.pb.gz", &["-tagroot=bytes", "-tagfocus=:32kb", "-cum"]),
    ];
    let failures = check_against_pprof_run_now(&root, go, cases);
    assert!(failures.is_empty(), "{} of {} differ from pprof:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn tags_report_equals_go_tool_pprof_tags_byte_for_byte() {
    let Some(root) = common::fixtures() else { return };
    let Some(go) = common::go() else { return };
    let cases: &[(&str, &[&str])] = &[
        ("go/base/cpu.pb.gz", &[]),
        ("go/compare/cpu.pb.gz", &["-sample_index=samples"]),
        ("go/base/heap.pb.gz", &[]),
        ("go/compare/heap.pb.gz", &["-sample_index=alloc_objects"]),
        ("go/base/allocs.pb.gz", &[]),
        ("go/base/goroutine.pb.gz", &[]),
        ("go/base/cpu.pb.gz", &["-tagfocus=tenant=acme", "-tagshow=end"]),
        ("go/base/cpu.pb.gz", &["-taghide=tenant", "-focus=compress"]),
        ("go/base/cpu.pb.gz", &["-hide=.", "-tagignore=orders"]),
        ("go/base/heap.pb.gz", &["-tagfocus=bytes=1kb:", "-sample_index=alloc_space"]),
        // No labels at all: pprof prints nothing.
        ("go/base/block.pb.gz", &[]),
        ("thirdparty/pyroscope/pyspy-1.pb.gz", &[]),
    ];
    let mut failures = Vec::new();
    for (file, flags) in cases {
        let expected = common::pprof(go, &root, &[&root.join(file)], &[&["-tags"], *flags].concat());
        let (query, _, _) = options_for(&root, flags);
        let summary = labels_of(&load(&root, file), query).unwrap();
        let ours = tags(&summary);
        if ours != expected {
            failures.push(format!("{file} {flags:?}:\nours:\n{ours:?}\npprof:\n{expected:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn label_summary_shares_are_of_the_profile_total() {
    let Some(root) = common::fixtures() else { return };
    let cpu = load(&root, "go/base/cpu.pb.gz");
    let summary = labels_of(&cpu, Query::default()).unwrap();
    assert_eq!(
        (summary.sample_type.as_str(), summary.unit.as_str(), summary.total),
        ("cpu", "nanoseconds", 7_080_000_000)
    );
    let keys: Vec<&str> = summary.keys.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(keys, ["endpoint", "tenant"]);
    let endpoint = &summary.keys[0];
    assert_eq!(endpoint.unit, None);
    let values: Vec<(&str, i64)> = endpoint.values.iter().map(|v| (v.value.as_str(), v.total)).collect();
    // -tags: 3.3s /api/report, 2.9s /api/orders, 530.0ms /api/search (Total 6.7s).
    assert_eq!(values, [("/api/report", 3_270_000_000), ("/api/orders", 2_870_000_000), ("/api/search", 530_000_000)]);
    assert_eq!(endpoint.total, 6_670_000_000);
    // The unlabelled samples (runtime and GC work) are what is left of the total.
    assert_eq!(endpoint.missing, 410_000_000);
    assert_eq!(endpoint.missing_pct, 5.79);
    assert_eq!(endpoint.values[0].total_pct, 46.19);
    // Top with the same focus agrees with the summary.
    let search = Filters { tag_focus: Some("endpoint=^/api/search$".into()), ..Filters::default() };
    let focused = Query { filters: search, ..Query::default() };
    let report = top(&focused.prepare(&cpu).unwrap(), &TopOptions::default()).unwrap();
    assert_eq!(report.functions.iter().map(|r| r.flat).sum::<i64>(), 530_000_000);
    let only_search = labels_of(&cpu, focused).unwrap();
    assert_eq!(only_search.keys[0].values.len(), 1);
    assert_eq!(only_search.keys[0].missing, 0);
    // Numeric labels carry their unit, and their values are written in it.
    let inuse_space = Query { sample: "inuse_space".into(), ..Query::default() };
    let heap = labels_of(&load(&root, "go/base/heap.pb.gz"), inuse_space).unwrap();
    assert_eq!(heap.keys[0].key, "bytes");
    assert_eq!(heap.keys[0].unit.as_deref(), Some("bytes"));
    assert_eq!(heap.keys[0].values[0].value, "16kB");
    // tag_show/tag_hide choose keys.
    let hidden = Filters { tag_hide: Some("^end".into()), ..Filters::default() };
    let keys = labels_of(&cpu, Query { filters: hidden, ..Query::default() }).unwrap().keys;
    assert_eq!(keys.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["tenant"]);
}

/// A converted profile carries the tag filters: pprof reads in it what it shows for the
/// original with the same flags.
#[test]
fn converted_profiles_carry_the_tag_filters() {
    use stacklens_core::export::{export, ExportFormat};
    let Some(root) = common::fixtures() else { return };
    let Some(go) = common::go() else { return };
    let cpu = root.join("go/base/cpu.pb.gz");
    let filters = Filters {
        tag_focus: Some("tenant=acme|initech".into()),
        tag_root: vec!["endpoint".into()],
        tag_hide: Some("tenant".into()),
        ..Filters::default()
    };
    let profile = load(&root, "go/base/cpu.pb.gz");
    let bytes = export(&Query { filters, ..Query::default() }.prepare(&profile).unwrap(), ExportFormat::Pprof).unwrap();
    let tmp = std::env::temp_dir().join(format!("stacklens-labels-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let converted = tmp.join("tagged.pb.gz");
    std::fs::write(&converted, bytes).unwrap();
    let flags = ["-nodecount=80", "-nodefraction=0", "-cum"];
    let filtered = common::pprof_top(go, &tmp, &converted, &flags);
    let original = common::pprof_top(
        go,
        &root,
        &cpu,
        &[&flags[..], &["-tagfocus=tenant=acme|initech", "-tagroot=endpoint"]].concat(),
    );
    assert!(rows(&filtered).iter().any(|r| r.ends_with(" /api/search")), "{filtered}");
    assert_eq!(rows(&filtered), rows(&original));
    let tags = |dir: &std::path::Path, file: &std::path::Path, flags: &[&str]| {
        common::pprof(go, dir, &[file], &[&["-tags"], flags].concat())
    };
    let expected = tags(&root, &cpu, &["-tagfocus=tenant=acme|initech", "-taghide=tenant"]);
    assert_eq!(tags(&tmp, &converted, &[]), expected);
    assert!(expected.contains("endpoint:") && !expected.contains("tenant"), "{expected}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Top cannot see where label frames go; the call tree can.
#[test]
fn label_frames_go_first_root_key_outermost_and_last_leaf_key_innermost() {
    let Some(root) = common::fixtures() else { return };
    let cpu = load(&root, "go/base/cpu.pb.gz");
    let keys = |list: &[&str]| list.iter().map(|k| k.to_string()).collect();
    let filters = Filters {
        tag_root: keys(&["endpoint", "tenant"]),
        tag_leaf: keys(&["tenant", "", "endpoint"]),
        ..Filters::default()
    };
    let labelled = Query { filters, ..Query::default() }.prepare(&cpu).unwrap();
    let tree = CallTree::build(&labelled, &TreeOptions::default()).unwrap();
    let summary = labels_of(&cpu, Query::default()).unwrap();
    let values = |key: usize| -> Vec<(String, i64)> {
        let k = &summary.keys[key];
        let mut v: Vec<(String, i64)> = k.values.iter().map(|v| (v.value.clone(), v.total)).collect();
        v.push(("<unknown>".to_owned(), k.missing));
        v.sort();
        v
    };
    // The root's children are the endpoints (`<unknown>` for samples without one), with
    // the values `-tags` gives them.
    let mut endpoints: Vec<(String, i64)> =
        tree.children(ROOT).map(|n| (tree.name(n).to_owned(), tree.nodes[n as usize].total)).collect();
    endpoints.sort();
    assert_eq!(endpoints, values(0));
    let tenants: Vec<String> = values(1).into_iter().map(|(name, _)| name).collect();
    let endpoint_names: Vec<String> = values(0).into_iter().map(|(name, _)| name).collect();
    for endpoint in tree.children(ROOT) {
        assert!(tree.children(endpoint).all(|n| tenants.contains(&tree.name(n).to_owned())));
    }
    // Every stack ends with its tenant, then its endpoint.
    let leaves: Vec<u32> = (1..tree.nodes.len() as u32).filter(|&n| tree.children(n).next().is_none()).collect();
    assert!(!leaves.is_empty());
    for leaf in leaves {
        let parent = tree.nodes[leaf as usize].parent;
        assert!(endpoint_names.contains(&tree.name(leaf).to_owned()), "{}", tree.name(leaf));
        assert!(tenants.contains(&tree.name(parent).to_owned()), "{}", tree.name(parent));
    }
}

#[test]
fn malformed_tag_filters_are_typed_errors() {
    let Some(root) = common::fixtures() else { return };
    let cpu = load(&root, "go/base/cpu.pb.gz");
    let with = |filters: Filters| {
        let query = Query { filters, ..Query::default() };
        query.prepare(&cpu).and_then(|prepared| top(&prepared, &TopOptions::default())).unwrap_err()
    };
    let focus = |spec: &str| with(Filters { tag_focus: Some(spec.into()), ..Filters::default() });
    assert!(matches!(focus("endpoint=("), Error::InvalidRegex { option: "tagfocus", .. }), "{:?}", focus("endpoint=("));
    assert!(matches!(focus("(,x"), Error::InvalidRegex { option: "tagfocus", .. }));
    let ignore = with(Filters { tag_ignore: Some("[".into()), ..Filters::default() });
    assert!(matches!(ignore, Error::InvalidRegex { option: "tagignore", .. }));
    // pprof panics on a number that does not fit 64 bits; we say so.
    match focus("bytes=99999999999999999999kb:") {
        Error::InvalidTagFilter { option: "tagfocus", filter, reason } => {
            assert_eq!(filter, "99999999999999999999kb:");
            assert!(reason.contains("99999999999999999999"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let show = with(Filters { tag_show: Some("(".into()), ..Filters::default() });
    assert!(matches!(show, Error::InvalidRegex { option: "tagshow", .. }));
    let hide_star = Filters { tag_hide: Some("*".into()), ..Filters::default() };
    let hide = labels_of(&cpu, Query { filters: hide_star, ..Query::default() }).unwrap_err();
    assert!(matches!(hide, Error::InvalidRegex { option: "taghide", .. }));
}
