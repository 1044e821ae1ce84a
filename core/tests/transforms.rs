//! The Firefox Profiler's stack transforms on the model: each on small built profiles
//! (stacks read back from the model), their short form and JSON, how they compose with
//! pprof's filters, and what they keep of a real profile's totals.

mod common;

use std::collections::BTreeMap;

use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::transforms::{format_transforms, parse_transforms, Transform};
use stacklens_core::analysis::tree::{CallTree, TreeOptions, ROOT};
use stacklens_core::analysis::{Filters, Prepared, Query};
use stacklens_core::export::pprof::write;
use stacklens_core::model::{FunctionId, Label, LabelValue, Line, Profile, Sample, SampleTime, SourceFormat};
use stacklens_core::Error;

/// A profile with one sample per stack (names root first, `+` joining the lines of one
/// location: `inner+outer`), values `[count, 10 × count]` and a label `n` = its index.
fn profile(stacks: &[(&str, i64)]) -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    let mut functions: BTreeMap<String, FunctionId> = BTreeMap::new();
    let key = p.strings.intern("n");
    for (i, (stack, count)) in stacks.iter().enumerate() {
        let mut locations = Vec::new();
        for frame in stack.split(';').filter(|f| !f.is_empty()).rev() {
            let lines = frame
                .split('+')
                .map(|name| {
                    let function =
                        *functions.entry(name.to_owned()).or_insert_with(|| p.add_function(name, name, "", 0));
                    Line { function, line: 1, column: 0 }
                })
                .collect();
            locations.push(p.add_location(0x100 + p.locations.len() as u64, lines));
        }
        let label = Label { key, value: LabelValue::Num { value: i as i64, unit: stacklens_core::model::StrId(0) } };
        p.samples.push(Sample { locations, values: vec![*count, count * 10], labels: vec![label] });
    }
    p
}

/// Each sample's stack as names root first (inlined lines expanded), with its values,
/// read from the model.
fn stacks(p: &Profile) -> Vec<(String, Vec<i64>)> {
    p.samples
        .iter()
        .map(|s| {
            let names: Vec<&str> = s
                .locations
                .iter()
                .rev()
                .flat_map(|l| p.location(*l).lines.iter().rev())
                .map(|line| p.line_function_name(line))
                .collect();
            (names.join(";"), s.values.to_vec())
        })
        .collect()
}

/// The stacks after `transform`, with their counts.
fn after(stacks_in: &[(&str, i64)], transform: Transform) -> Vec<(String, i64)> {
    let out = profile(stacks_in).transform(&[transform]).unwrap();
    stacks(&out).into_iter().map(|(s, v)| (s, v[0])).collect()
}

fn owned(expected: &[(&str, i64)]) -> Vec<(String, i64)> {
    expected.iter().map(|(s, v)| (s.to_string(), *v)).collect()
}

#[test]
fn merge_function_gives_its_self_to_its_caller() {
    let input = [("a;b;c", 1), ("a;b", 2), ("b;c", 3), ("b", 4), ("a;x+b;c", 5)];
    let merged = after(&input, Transform::MergeFunction { name: "b".into() });
    // A stack of only the merged function keeps its sample, with no frame left.
    assert_eq!(merged, owned(&[("a;c", 1), ("a", 2), ("c", 3), ("", 4), ("a;x;c", 5)]));
}

#[test]
fn collapse_recursion_joins_direct_calls_only() {
    let input = [("a;b;b;b;c", 1), ("a;b;c;b", 2), ("b+b;b", 3)];
    let collapsed = after(&input, Transform::CollapseRecursion { name: "b".into() });
    assert_eq!(collapsed, owned(&[("a;b;c", 1), ("a;b;c;b", 2), ("b", 3)]));
}

#[test]
fn collapse_package_names_one_frame_after_the_package() {
    let input = [
        ("main.f;runtime.a;runtime.b;main.g;runtime.c", 1),
        ("std::vec::push;std::alloc::grow;app::run", 2),
        ("runtime/internal/atomic.Load;runtime.x", 3),
    ];
    let go = after(&input, Transform::CollapsePackage { prefix: "runtime".into() });
    assert_eq!(
        go,
        owned(&[
            ("main.f;runtime;main.g;runtime", 1),
            ("std::vec::push;std::alloc::grow;app::run", 2),
            ("runtime/internal/atomic.Load;runtime", 3),
        ])
    );
    let cpp = after(&input, Transform::CollapsePackage { prefix: "std".into() });
    assert_eq!(cpp[1], ("std;app::run".to_owned(), 2));
}

#[test]
fn drop_function_and_focus_subtree_keep_some_samples() {
    let input = [("a;b;c", 1), ("a;x", 2), ("b;c", 3), ("a;b", 4)];
    let dropped = after(&input, Transform::DropFunction { name: "c".into() });
    assert_eq!(dropped, owned(&[("a;x", 2), ("a;b", 4)]));
    let focused = after(&input, Transform::FocusSubtree { path: vec!["a".into(), "b".into()] });
    assert_eq!(focused, owned(&[("b;c", 1), ("b", 4)]));

    // Sample times stay with their samples.
    let mut timed = profile(&input);
    timed.sample_times = (0..4).map(|i| SampleTime { start: i * 100, duration: 10 }).collect();
    let dropped = timed.transform(&[Transform::DropFunction { name: "c".into() }]).unwrap();
    let starts: Vec<i64> = dropped.sample_times.iter().map(|t| t.start).collect();
    assert_eq!(starts, [100, 300]);
}

#[test]
fn invert_reverses_stacks_and_inlined_lines() {
    let input = [("a;b;c", 1), ("a;in+out;c", 2)];
    let inverted = after(&input, Transform::Invert);
    assert_eq!(inverted, owned(&[("c;b;a", 1), ("c;in;out;a", 2)]));
}

#[test]
fn untouched_stacks_keep_their_locations_and_samples_their_values_and_labels() {
    let input = profile(&[("a;in+out;c", 1), ("a;b", 2)]);
    let out = input.transform(&[Transform::MergeFunction { name: "b".into() }]).unwrap();
    // The first stack does not change: the same locations, so its inlining stays.
    assert_eq!(out.samples.sample(0).locations, input.samples.sample(0).locations);
    assert_eq!(stacks(&out), [("a;out;in;c".to_owned(), vec![1, 10]), ("a".to_owned(), vec![2, 20])]);
    let labels = |p: &Profile| p.samples.iter().map(|s| s.labels.to_vec()).collect::<Vec<_>>();
    assert_eq!(labels(&out), labels(&input));
    // A line taken out of its location gets one of its own, with a new id.
    let out = input.transform(&[Transform::MergeFunction { name: "in".into() }]).unwrap();
    let ids: std::collections::HashSet<u64> = out.locations.iter().map(|l| l.id).collect();
    assert_eq!(ids.len(), out.locations.len(), "location ids stay unique");
    assert_eq!(stacks(&out)[0].0, "a;out;c");
}

#[test]
fn transforms_apply_in_order_and_compose_with_filters() {
    let p = profile(&[("a;b;c", 1), ("a;c", 2), ("a;b;d", 4)]);
    let merge_then_focus =
        [Transform::MergeFunction { name: "b".into() }, Transform::FocusSubtree { path: vec!["a".into(), "c".into()] }];
    let focus_then_merge = [merge_then_focus[1].clone(), merge_then_focus[0].clone()];
    assert_eq!(stacks(&p.transform(&merge_then_focus).unwrap()).len(), 2);
    assert_eq!(stacks(&p.transform(&focus_then_merge).unwrap()).len(), 1);

    // pprof's filters then see the transformed stacks: inverted, `c` is a root and
    // focusing on it keeps the samples with c; hiding `a` leaves b's self value.
    let inverted = p.transform(&[Transform::Invert]).unwrap();
    let query = Query {
        sample: "samples".into(),
        filters: Filters { focus: Some("^c$".into()), hide: Some("^a$".into()), ..Filters::default() },
        ..Query::default()
    };
    let report = top(&query.prepare(&inverted).unwrap(), &TopOptions::default()).unwrap();
    let rows: Vec<(String, i64, i64)> = report.functions.into_iter().map(|r| (r.name, r.flat, r.cum)).collect();
    assert_eq!(rows, [("c".to_owned(), 2, 3), ("b".to_owned(), 1, 1)]);
}

#[test]
fn short_form_and_json_round_trip() {
    let all = vec![
        Transform::MergeFunction { name: "main.(*T).run".into() },
        Transform::CollapseRecursion { name: "a~b;c%d é&x=1".into() },
        Transform::CollapsePackage { prefix: "github.com/x/y".into() },
        Transform::DropFunction { name: "std::vector<int>::push_back".into() },
        Transform::FocusSubtree { path: vec!["runtime.main".into(), "main.main".into()] },
        Transform::Invert,
    ];
    let text = format_transforms(&all);
    assert_eq!(
        text,
        "mf:main.(*T).run~cr:a%7Eb%3Bc%25d%20%C3%A9%26x%3D1~cp:github.com/x/y~df:std::vector%3Cint%3E::push_back\
         ~fs:runtime.main;main.main~inv"
    );
    assert_eq!(parse_transforms(&text).unwrap(), all);
    assert_eq!(parse_transforms("").unwrap(), []);

    let json = serde_json::to_value(&all).unwrap();
    assert_eq!(json[0], serde_json::json!({"kind": "mergeFunction", "name": "main.(*T).run"}));
    assert_eq!(json[2], serde_json::json!({"kind": "collapsePackage", "prefix": "github.com/x/y"}));
    assert_eq!(json[4], serde_json::json!({"kind": "focusSubtree", "path": ["runtime.main", "main.main"]}));
    assert_eq!(json[5], serde_json::json!({"kind": "invert"}));
    assert_eq!(serde_json::from_value::<Vec<Transform>>(json).unwrap(), all);

    for bad in ["xx:a", "mf:", "mf", "mf:%zz", "mf:%C3", "inv:x", "fs:a;;b", "mf:a~"] {
        let error = parse_transforms(bad).unwrap_err();
        assert!(matches!(error, Error::InvalidTransform { .. }), "{bad}: {error:?}");
    }
    let unnamed = profile(&[("a", 1)]).transform(&[Transform::DropFunction { name: String::new() }]);
    assert!(matches!(unnamed, Err(Error::InvalidTransform { .. })));
}

/// Each function's flat value per `top`, and the tree's total, of one sample type.
fn flat_and_total(p: &Profile, sample_index: &str) -> (BTreeMap<String, i64>, i64) {
    let prepared = Query { sample: sample_index.into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    let flat = report.functions.into_iter().filter(|r| r.flat != 0).map(|r| (r.name, r.flat)).collect();
    let tree = CallTree::build(&prepared, &TreeOptions::default()).unwrap();
    (flat, tree.total())
}

#[test]
fn a_real_profile_keeps_its_totals_except_where_samples_are_dropped() {
    let Some(fixtures) = common::fixtures() else { return };
    let p = stacklens_core::parse(&common::read(&fixtures.join("go/base/cpu.pb.gz"))).unwrap();
    let (flat, total) = flat_and_total(&p, "cpu");
    assert_eq!(total, 7_080_000_000);
    let deflate = "compress/flate.(*compressor).deflate";
    let keeping = [
        Transform::MergeFunction { name: deflate.into() },
        Transform::CollapseRecursion { name: "sort.pdqsort_func".into() },
        Transform::CollapsePackage { prefix: "compress/flate".into() },
        Transform::Invert,
    ];
    for transform in &keeping {
        let out = p.transform(std::slice::from_ref(transform)).unwrap();
        assert_eq!(out.samples.len(), p.samples.len(), "{transform}");
        for index in ["samples", "cpu"] {
            assert_eq!(flat_and_total(&out, index).1, flat_and_total(&p, index).1, "{transform} {index}");
        }
        // A transformed profile is a valid one: written as pprof, it reads back the same.
        let read_back = stacklens_core::parse(&write(&out)).unwrap();
        assert_eq!(flat_and_total(&read_back, "cpu"), flat_and_total(&out, "cpu"), "{transform}");
    }
    // pdqsort calls itself; collapsed, it no longer does.
    let recursive =
        |p: &Profile| stacks(p).iter().filter(|(s, _)| s.contains("sort.pdqsort_func;sort.pdqsort_func")).count();
    assert!(recursive(&p) > 0);
    assert_eq!(recursive(&p.transform(&keeping[1..2]).unwrap()), 0);
    // Inverted, the roots are the leaves: each root's total is that function's flat value.
    let inverted_profile = p.transform(&[Transform::Invert]).unwrap();
    let inverted = CallTree::build(&Prepared::whole(&inverted_profile).unwrap(), &TreeOptions::default()).unwrap();
    let roots: BTreeMap<String, i64> =
        inverted.children(ROOT).map(|n| (inverted.name(n).to_owned(), inverted.nodes[n as usize].total)).collect();
    assert_eq!(roots, flat);
    // Merged, deflate's self value goes to its callers, and compress/flate's package
    // frame carries all of the package's self value.
    let merged = flat_and_total(&p.transform(&keeping[..1]).unwrap(), "cpu").0;
    assert!(flat[deflate] > 0 && !merged.contains_key(deflate));
    let package = flat_and_total(&p.transform(&keeping[2..3]).unwrap(), "cpu").0;
    let in_package: i64 = flat.iter().filter(|(name, _)| name.starts_with("compress/flate.")).map(|(_, v)| v).sum();
    assert_eq!(package["compress/flate"], in_package);

    // Dropping a function removes exactly the samples through it; focusing keeps exactly
    // those under the path.
    let whole = Prepared::whole(&p).unwrap();
    let through = CallTree::build(&whole, &TreeOptions::default()).unwrap().search(|n| n == deflate).1;
    let dropped = p.transform(&[Transform::DropFunction { name: deflate.into() }]).unwrap();
    assert_eq!(flat_and_total(&dropped, "cpu").1, total - through);
    assert!(through > 0);
    let tree = CallTree::build(&whole, &TreeOptions::default()).unwrap();
    let root = tree.children(ROOT).max_by_key(|&n| tree.nodes[n as usize].total).unwrap();
    let child = tree.children(root).max_by_key(|&n| tree.nodes[n as usize].total).unwrap();
    let path = vec![tree.name(root).to_owned(), tree.name(child).to_owned()];
    let focused = p.transform(&[Transform::FocusSubtree { path: path.clone() }]).unwrap();
    let focused_tree = CallTree::build(&Prepared::whole(&focused).unwrap(), &TreeOptions::default()).unwrap();
    assert_eq!(focused_tree.total(), tree.nodes[child as usize].total, "{path:?}");
    assert!(focused_tree.total() < total);
    assert_eq!(focused_tree.children(ROOT).map(|n| focused_tree.name(n)).collect::<Vec<_>>(), [path[1].as_str()]);
}
