//! `details` against `go tool pprof` run at test time: flat and cum of every node in every
//! sample type against `-top`, every node's callers and callees against `-peek`, and label
//! weights against `-tags -focus`, on Go CPU, heap, mutex and block profiles; exact sums
//! on a hand-built profile with recursion, inlining, labels and filters; the typed errors.

mod common;
use common::{pprof, pprof_top, read_pprof_top};

use std::collections::BTreeMap;
use std::path::Path;

use stacklens_core::analysis::details::{details, Binary, CallWeight, FunctionDetails, SourceFile};
use stacklens_core::analysis::labels::{LabelKeySummary, LabelSummary, LabelValueSummary};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::{Filters, Granularity, Prepared, Query};
use stacklens_core::model::{Label, LabelValue, Line, LocationId, Sample, SourceFormat};
use stacklens_core::report::tags::tags;
use stacklens_core::units::percentage_value;
use stacklens_core::{Error, Profile};

const GO_PROFILES: [&str; 4] =
    ["go/base/cpu.pb.gz", "go/base/heap.pb.gz", "go/base/mutex.pb.gz", "go/base/block.pb.gz"];

/// A profile with its folder, Go's binary and the fixtures' root, or `None` when skipping.
fn load(rel: &str) -> Option<(Profile, &'static Path, std::path::PathBuf)> {
    let root = common::fixtures()?;
    let go = common::go()?;
    let profile = stacklens_core::parse(&common::read(&root.join(rel))).unwrap();
    Some((profile, go, root))
}

/// The `-unit` under which pprof prints values of `unit` unscaled: the base unit of their
/// kind, or, for counts, any other kind's (pprof leaves values it cannot convert as they are).
fn exact_unit(unit: &str) -> &'static str {
    match unit {
        "nanoseconds" | "count" => "ns",
        "bytes" => "B",
        other => panic!("no exact pprof unit for {other}"),
    }
}

/// Flags for sample type `i` of `profile` printed unscaled, then `extra`; and the unit suffix.
fn exact_flags(profile: &Profile, i: usize, extra: &[&str]) -> (Vec<String>, &'static str) {
    let suffix = exact_unit(profile.sample_type_unit(i));
    let mut flags = vec![format!("-sample_index={i}"), format!("-unit={suffix}")];
    flags.extend(extra.iter().map(|f| f.to_string()));
    (flags, suffix)
}

fn as_strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// A value pprof printed under [`exact_unit`]: `1340000000ns`, `19.0ns`, `0`.
fn exact(printed: &str, suffix: &str) -> i64 {
    let number = printed.strip_suffix(suffix).unwrap_or(printed);
    let value: f64 = number.parse().unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(value.fract(), 0.0, "{printed}");
    value as i64
}

fn details_of(profile: &Profile, name: &str, sample_index: usize, base: &Query) -> FunctionDetails {
    let query = Query { sample: sample_index.into(), ..base.clone() };
    query.prepare(profile).and_then(|prepared| details(&prepared, name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn values_equal_pprof_top_and_our_top_in_every_sample_type() {
    for rel in GO_PROFILES {
        let Some((profile, go, root)) = load(rel) else { return };
        let types = profile.sample_types.len();
        // Our top of every sample type, by node name.
        let ours: Vec<BTreeMap<String, (i64, i64)>> = (0..types)
            .map(|i| {
                let prepared = Query { sample: i.into(), ..Query::default() }.prepare(&profile).unwrap();
                let report = top(&prepared, &TopOptions::default()).unwrap();
                report.functions.into_iter().map(|r| (r.name, (r.flat, r.cum))).collect()
            })
            .collect();
        for i in 0..types {
            let (flags, suffix) = exact_flags(&profile, i, &["-nodefraction=0"]);
            let pprof = read_pprof_top(&pprof_top(go, &root, &root.join(rel), &as_strs(&flags)));
            assert_eq!(pprof.sample_type, profile.sample_type_name(i), "{rel}");
            assert!(pprof.rows.len() >= 5, "{rel} {i}: {} rows", pprof.rows.len());
            for row in &pprof.rows {
                let d = details_of(&profile, &row.name, i, &Query::default());
                let v = &d.values[i];
                let what = format!("{rel} {} {}", row.name, v.sample_type);
                assert_eq!((v.flat, v.cum), (exact(&row.flat, suffix), exact(&row.cum, suffix)), "{what}");
                assert_eq!(v.total, exact(&pprof.total, suffix), "{what}");
                assert_eq!(d.values.len(), types, "{what}");
                for (j, v) in d.values.iter().enumerate() {
                    let expected = ours[j].get(&row.name).copied().unwrap_or((0, 0));
                    assert_eq!((v.flat, v.cum), expected, "{what} in our top of type {j}");
                }
            }
        }
    }
}

/// One node's block of `go tool pprof -peek` output.
#[derive(Debug, Default)]
struct PeekBlock {
    name: String,
    flat: i64,
    cum: i64,
    /// (name, value, calls% as printed without `%`)
    callers: Vec<(String, i64, f64)>,
    callees: Vec<(String, i64, f64)>,
}

/// Reads `-peek` output: blocks between separator lines, callers above the node's line
/// (the one with flat, flat%, sum%, cum and cum%), callees below it.
fn read_peek(text: &str, suffix: &str) -> Vec<PeekBlock> {
    let mut blocks = Vec::new();
    let mut block: Option<PeekBlock> = None;
    for line in text.lines() {
        if line.starts_with("-----") {
            blocks.extend(block.take().filter(|b| !b.name.is_empty()));
            block = Some(PeekBlock::default());
            continue;
        }
        let (Some(b), Some((values, name))) = (block.as_mut(), line.split_once('|')) else { continue };
        if line.contains("calls calls% + context") {
            continue;
        }
        let name = name.trim().trim_end_matches(" (inline)").to_owned();
        match values.split_whitespace().collect::<Vec<_>>()[..] {
            [flat, _, _, cum, _] => (b.name, b.flat, b.cum) = (name, exact(flat, suffix), exact(cum, suffix)),
            [value, pct] => {
                let pct: f64 = pct.trim_end_matches('%').parse().unwrap_or_else(|e| panic!("{line}: {e}"));
                let edge = (name, exact(value, suffix), pct);
                if b.name.is_empty() {
                    b.callers.push(edge);
                } else {
                    b.callees.push(edge);
                }
            }
            _ => panic!("unreadable peek line: {line}"),
        }
    }
    blocks.extend(block.filter(|b| !b.name.is_empty()));
    blocks
}

/// How far from the true value a percentage pprof printed may be (its `Percentage`:
/// `100%` from 99.95 on, two decimals from 1, two significant digits below).
fn percentage_precision(printed: f64) -> f64 {
    let half_unit = if printed == 100.0 {
        0.05
    } else if printed >= 1.0 {
        0.005
    } else {
        0.5 * 10f64.powf(printed.log10().floor() - 1.0)
    };
    half_unit + 1e-9
}

fn assert_edges(ours: &[CallWeight], pprof: &[(String, i64, f64)], what: &str) {
    let names_values: Vec<(&str, i64)> = ours.iter().map(|c| (c.name.as_str(), c.value)).collect();
    let expected: Vec<(&str, i64)> = pprof.iter().map(|(n, v, _)| (n.as_str(), *v)).collect();
    assert_eq!(names_values, expected, "{what}");
    for (call, (_, _, pct)) in ours.iter().zip(pprof) {
        let ours = call.share * 100.0;
        assert!((ours - pct).abs() <= percentage_precision(*pct), "{what} {}: {ours}% vs {pct}%", call.name);
    }
}

/// Compares every node's callers and callees with `go tool pprof -peek=. FLAGS` for each
/// sample type; returns the nodes compared (with the sample type) for the caller to check.
fn compare_with_peek(rel: &str, flags: &[&str], base: &Query) -> Option<Vec<(usize, PeekBlock)>> {
    let (profile, go, root) = load(rel)?;
    let mut compared = Vec::new();
    for i in 0..profile.sample_types.len() {
        let (all_flags, suffix) = exact_flags(&profile, i, flags);
        let all_flags = [&["-peek=."], &as_strs(&all_flags)[..]].concat();
        let blocks = read_peek(&pprof(go, &root, &[&root.join(rel)], &all_flags), suffix);
        assert!(blocks.len() >= 5, "{rel} {flags:?} {i}: {} blocks", blocks.len());
        for block in blocks {
            let d = details_of(&profile, &block.name, i, base);
            let what = format!("{rel} {flags:?} {} {}", block.name, d.sample_type);
            assert_eq!((d.values[i].flat, d.values[i].cum), (block.flat, block.cum), "{what}");
            assert_edges(&d.callers, &block.callers, &format!("{what} callers"));
            assert_edges(&d.callees, &block.callees, &format!("{what} callees"));
            compared.push((i, block));
        }
    }
    Some(compared)
}

#[test]
fn callers_and_callees_equal_pprof_peek_for_every_node() {
    for rel in GO_PROFILES {
        let Some(compared) = compare_with_peek(rel, &[], &Query::default()) else { return };
        if rel.ends_with("cpu.pb.gz") {
            let block = |name: &str| compared.iter().find(|(_, b)| b.name == name).map(|(_, b)| b).unwrap();
            // Recursive: json's value calls object and array, which call value again.
            let value = block("encoding/json.(*decodeState).value");
            let callers: Vec<&str> = value.callers.iter().map(|c| c.0.as_str()).collect();
            assert!(callers.contains(&"encoding/json.(*decodeState).object"), "{callers:?}");
            assert!(callers.contains(&"encoding/json.(*decodeState).array"), "{callers:?}");
            assert!(!block("sort.pdqsort_func").callees.is_empty());
            // Inlined into findMatch.
            assert_eq!(block("compress/flate.matchLen").callers[0].0, "compress/flate.(*compressor).findMatch");
        }
        if rel.ends_with("mutex.pb.gz") {
            // Unlock is inlined into record and called from audit.
            let unlock = compared.iter().find(|(i, b)| *i == 0 && b.name == "sync.(*Mutex).Unlock").unwrap();
            assert_eq!(unlock.1.callers.len(), 2);
        }
    }
}

#[test]
fn callers_and_callees_equal_pprof_peek_under_filters_and_granularities() {
    let filtered = Query {
        filters: Filters {
            focus: Some("compress/flate|sort".into()),
            hide: Some(r"runtime\.".into()),
            ..Filters::default()
        },
        ..Query::default()
    };
    // Label frames are nodes too: the endpoints call the request loop.
    let labelled = Query {
        filters: Filters {
            tag_root: vec!["endpoint".into()],
            tag_focus: Some("tenant=acme".into()),
            ..Filters::default()
        },
        ..Query::default()
    };
    let deflate = "compress/flate.(*compressor).deflate";
    let deflate_file = "compress/flate.(*compressor).deflate /usr/lib/go-1.19/src/compress/flate/deflate.go";
    // Each with a node (by the start of its name) that must have callers and callees.
    let cases = [
        (vec![r"-focus=compress/flate|sort", r"-hide=runtime\."], filtered, deflate),
        (vec!["-tagroot=endpoint", "-tagfocus=tenant=acme"], labelled, "main.(*service).requestLoop"),
        (vec!["-filefunctions"], Query { granularity: Granularity::Filefunctions, ..Query::default() }, deflate_file),
        (vec!["-lines"], Query { granularity: Granularity::Lines, ..Query::default() }, deflate_file),
    ];
    for (flags, options, node) in cases {
        let Some(compared) = compare_with_peek("go/base/cpu.pb.gz", &flags, &options) else { return };
        let called_and_calling = |b: &PeekBlock| !b.callers.is_empty() && !b.callees.is_empty();
        assert!(compared.iter().any(|(_, b)| b.name.starts_with(node) && called_and_calling(b)), "{flags:?}");
    }
}

#[test]
fn labels_equal_pprof_tags_of_the_focused_function_byte_for_byte() {
    let cases = [
        ("go/base/cpu.pb.gz", "runtime.mallocgc", 0),
        ("go/base/cpu.pb.gz", "runtime.mallocgc", 1),
        ("go/base/cpu.pb.gz", "compress/flate.(*compressor).deflate", 1),
        ("go/base/cpu.pb.gz", "encoding/json.(*decodeState).value", 0),
        // Numeric labels (`bytes`), and samples without value in the type shown.
        ("go/base/heap.pb.gz", "compress/flate.NewWriter", 1),
        ("go/base/heap.pb.gz", "main.sortRecords", 3),
    ];
    for (rel, name, i) in cases {
        let Some((profile, go, root)) = load(rel) else { return };
        let focus = format!("-focus=^{}$", regex::escape(name));
        let expected = pprof(go, &root, &[&root.join(rel)], &["-tags", &focus, &format!("-sample_index={i}")]);
        let d = details_of(&profile, name, i, &Query::default());
        let summary = LabelSummary {
            sample_type: d.sample_type.clone(),
            unit: d.unit.clone(),
            total: d.values[i].total,
            keys: d.labels.clone(),
        };
        assert_eq!(tags(&summary), expected, "{rel} {name} {i}");
        let keys: Vec<&str> = d.labels.iter().map(|k| k.key.as_str()).collect();
        let expected_keys: &[&str] = if rel.ends_with("cpu.pb.gz") { &["endpoint", "tenant"] } else { &["bytes"] };
        assert_eq!(keys, expected_keys, "{rel} {name}");
    }
}

/// main → parse → parse → leaf, with `leaf` inlined into the second `parse`; and
/// main → helper (a lineless location in `lib.so`). Two sample types; labels.
fn built() -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
    let main = p.add_function("main", "main", "main.go", 10);
    let parse = p.add_function("parse", "parse", "parse.go", 20);
    let leaf = p.add_function("leaf", "leaf", "leaf.go", 0);
    let binary = p.add_module_mapping("/bin/app");
    p.mappings[binary.0 as usize].build_id = p.strings.intern("abc123");
    let lib = p.add_module_mapping("/usr/lib/lib.so");
    let line = |function, line| Line { function, line, column: 0 };
    let at_main = p.add_location(0x10, vec![line(main, 12)]);
    let at_parse_outer = p.add_location(0x20, vec![line(parse, 25)]);
    let at_parse_inner = p.add_location(0x30, vec![line(leaf, 0), line(parse, 31)]);
    let at_helper = p.add_location(0x40, vec![]);
    for l in [at_main, at_parse_outer, at_parse_inner] {
        p.locations[l.0 as usize].mapping = Some(binary);
    }
    p.locations[at_helper.0 as usize].mapping = Some(lib);
    let endpoint = p.strings.intern("endpoint");
    let size = p.strings.intern("size");
    let bytes = p.strings.intern("bytes");
    let label = |key, value| Label { key, value };
    let (orders, search) = (LabelValue::Str(p.strings.intern("/orders")), LabelValue::Str(p.strings.intern("/search")));
    let sample = |locations: &[LocationId], values: [i64; 2], labels: Vec<Label>| Sample {
        locations: locations.to_vec(),
        values: values.to_vec(),
        labels,
    };
    p.samples = vec![
        // leaf (inlined in parse) ← parse ← parse ← main
        sample(&[at_parse_inner, at_parse_outer, at_main], [3, 30], vec![label(endpoint, orders.clone())]),
        // parse ← parse ← main
        sample(&[at_parse_outer, at_parse_outer, at_main], [2, 20], vec![label(endpoint, search.clone())]),
        // parse ← main, with no cpu value
        sample(&[at_parse_outer, at_main], [5, 0], vec![label(endpoint, orders.clone())]),
        // helper ← main
        sample(
            &[at_helper, at_main],
            [1, 10],
            vec![label(endpoint, orders), label(size, LabelValue::Num { value: 64, unit: bytes })],
        ),
    ]
    .into();
    p
}

fn call(name: &str, value: i64, share: f64) -> CallWeight {
    CallWeight { name: name.into(), value, share }
}

/// A label key's summary, `missing` being the value of the samples without the key;
/// shares are of the built profile's cpu total.
fn label_key(key: &str, unit: Option<&str>, values: &[(&str, i64)], missing: i64) -> LabelKeySummary {
    let pct = |value: i64| percentage_value(value, 60);
    LabelKeySummary {
        key: key.into(),
        unit: unit.map(str::to_owned),
        total: values.iter().map(|(_, v)| v).sum(),
        missing,
        missing_pct: pct(missing),
        values: values
            .iter()
            .map(|&(value, total)| LabelValueSummary { value: value.into(), total, total_pct: pct(total) })
            .collect(),
    }
}

#[test]
fn built_profile_sums() {
    let p = built();
    let of =
        |function: &str, query: Query| query.prepare(&p).and_then(|prepared| details(&prepared, function)).unwrap();
    let parse = of("parse", Query::default());
    let values: Vec<(&str, i64, i64, i64)> =
        parse.values.iter().map(|v| (v.sample_type.as_str(), v.flat, v.cum, v.total)).collect();
    // Recursion counts once: cum is every sample but helper's.
    assert_eq!(values, [("samples", 7, 10, 11), ("cpu", 20, 50, 60)]);
    assert_eq!((parse.sample_type.as_str(), parse.unit.as_str()), ("cpu", "nanoseconds"));
    // The sample without cpu value weighs nothing; parse → parse is no edge.
    assert_eq!(parse.callers, [call("main", 50, 1.0)]);
    assert_eq!(parse.callees, [call("leaf", 30, 0.6)]);
    assert_eq!(parse.files, [SourceFile { file: "parse.go".into(), first_line: 25, last_line: 31 }]);
    assert_eq!(parse.mappings, [Binary { file: "/bin/app".into(), build_id: "abc123".into() }]);
    // The sample without cpu value counts for its label, with 0, as in pprof's -tags.
    assert_eq!(parse.labels, [label_key("endpoint", None, &[("/orders", 30), ("/search", 20)], 0)]);

    // Counted in samples, the zero-cpu sample weighs too.
    let in_samples = of("parse", Query { sample: "samples".into(), ..Query::default() });
    assert_eq!(in_samples.callers, [call("main", 10, 1.0)]);
    assert_eq!((in_samples.labels[0].values[0].value.as_str(), in_samples.labels[0].values[0].total), ("/orders", 8));

    // A lineless location: named by its binary, no file; a numeric label with its unit.
    let helper = of("[lib.so]", Query::default());
    assert_eq!((helper.values[1].flat, helper.values[1].cum), (10, 10));
    assert!(helper.files.is_empty());
    assert_eq!(helper.mappings, [Binary { file: "/usr/lib/lib.so".into(), build_id: String::new() }]);
    let endpoint = label_key("endpoint", None, &[("/orders", 10)], 0);
    assert_eq!(helper.labels, [endpoint, label_key("size", Some("bytes"), &[("64B", 10)], 0)]);

    // A function without line numbers reports its start line; main covers one line.
    let leaf = of("leaf", Query::default());
    assert_eq!((leaf.files[0].first_line, leaf.files[0].last_line), (0, 0));
    assert_eq!(leaf.callers, [call("parse", 30, 1.0)]);
    let main = of("main", Query::default());
    // Of main's samples, those worth 50 lack `size`.
    assert_eq!(main.labels[1], label_key("size", Some("bytes"), &[("64B", 10)], 50));
    assert_eq!((main.files[0].first_line, main.files[0].last_line), (12, 12));
    assert_eq!(main.callees, [call("parse", 50, 50.0 / 60.0), call("[lib.so]", 10, 10.0 / 60.0)]);

    // Hiding parse makes main call leaf directly.
    let hidden = of(
        "main",
        Query { filters: Filters { hide: Some("^parse$".into()), ..Filters::default() }, ..Query::default() },
    );
    assert_eq!(hidden.callees, [call("leaf", 30, 0.5), call("[lib.so]", 10, 10.0 / 60.0)]);
    assert_eq!(hidden.values[1].flat, 20);

    // At line granularity, each line is a node of its own.
    let lines = of("parse parse.go:31", Query { granularity: Granularity::Lines, ..Query::default() });
    assert_eq!(lines.callers, [call("parse parse.go:25", 30, 1.0)]);
    assert_eq!(lines.files.iter().map(|f| (f.first_line, f.last_line)).collect::<Vec<_>>(), [(31, 31)]);
}

#[test]
fn unknown_or_filtered_out_functions_are_typed_errors() {
    let p = built();
    let details_under =
        |function: &str, query: Query| query.prepare(&p).and_then(|prepared| details(&prepared, function));
    let filtered = |filters: Filters| Query { filters, ..Query::default() };
    assert_eq!(details_under("nope", Query::default()), Err(Error::UnknownNode("nope".into())));
    // A node no kept sample reaches is not in the report.
    let ignored = Filters { ignore: Some("^parse$".into()), ..Filters::default() };
    assert_eq!(details_under("leaf", filtered(ignored)), Err(Error::UnknownNode("leaf".into())));
    let bad_regex = Filters { focus: Some("(".into()), ..Filters::default() };
    assert!(matches!(details_under("main", filtered(bad_regex)), Err(Error::InvalidRegex { .. })));
    let bad_type = Query { sample: "alloc_space".into(), ..Query::default() };
    assert!(matches!(details_under("main", bad_type), Err(Error::UnknownSampleType { .. })));
}

#[test]
fn options_and_details_round_trip_as_camel_case_json() {
    let query: Query = serde_json::from_str(r#"{"granularity":"lines","sample":"cpu"}"#).unwrap();
    assert_eq!((query.granularity, query.sample.to_string().as_str()), (Granularity::Lines, "cpu"));
    let p = built();
    let d = details(&Prepared::whole(&p).unwrap(), "parse").unwrap();
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["values"][1]["sampleType"], "cpu");
    assert_eq!(json["mappings"][0]["buildId"], "abc123");
    assert_eq!(json["files"][0]["firstLine"], 25);
    assert_eq!(serde_json::from_value::<FunctionDetails>(json).unwrap(), d);
}
