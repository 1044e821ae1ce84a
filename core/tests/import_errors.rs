//! Hostile and broken input: every case gets a typed error naming what is wrong and
//! where, or imports correctly; nothing panics, hangs or overflows the stack.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use stacklens_core::analysis::diff::{diff, DiffOptions};
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineOptions};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::export::pprof::encode;
use stacklens_core::layout::{layout, Viewport};
use stacklens_core::model::{Line, Profile, Sample, SourceFormat};
use stacklens_core::{parse, parse_with, Error, ParseOptions};

#[path = "common/protobuf.rs"]
mod protobuf;
use protobuf::{field_bytes, field_varint, message};

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A profile with one sample type and string table ["", "samples", "count", extra…].
fn header(out: &mut Vec<u8>, extra_strings: &[&[u8]]) {
    field_bytes(
        1,
        &message(|m| {
            field_varint(1, 1, m);
            field_varint(2, 2, m);
        }),
        out,
    );
    for s in [b"".as_slice(), b"samples", b"count"].into_iter().chain(extra_strings.iter().copied()) {
        field_bytes(6, s, out);
    }
}

#[test]
fn empty_input() {
    assert_eq!(parse(b"").unwrap_err(), Error::Empty);
}

#[test]
fn text_that_is_no_profile_is_never_read_as_protobuf() {
    let hint = |text: &[u8]| match parse(text).unwrap_err() {
        Error::UnknownFormat { hint } => hint,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        hint(b"\n  hello, this is not a profile\nsecond line\n"),
        "text starting with \"hello, this is not a profile\", not a profile format stacklens reads"
    );
    let long = format!("{}\n", "x".repeat(100));
    assert_eq!(
        hint(long.as_bytes()),
        format!("text starting with \"{}…\", not a profile format stacklens reads", "x".repeat(60))
    );
    // UTF-8 cut at the end of the sniffed window is still text.
    let accents = "é".repeat(600);
    assert!(hint(accents.as_bytes()).starts_with("text starting with \"éé"));
}

#[test]
fn html_and_json_are_named_for_what_they_are() {
    let err = parse(b"<!doctype html><html><body>Not found</body></html>").unwrap_err();
    assert_eq!(err, Error::UnknownFormat { hint: "this is an HTML page, not a profile".into() });
    // A Chrome trace is recognised, but an empty one has no CPU profile to import.
    let err = parse(b"{\"traceEvents\": [], \"metadata\": {}}").unwrap_err();
    assert_eq!(err, Error::UnknownFormat { hint: "a Chrome trace with no events, so no CPU profile".into() });
    let err = parse(b"[1, 2, 3]").unwrap_err();
    assert_eq!(
        err,
        Error::UnknownFormat { hint: "a JSON array of 3 items, not a profile format stacklens reads".into() }
    );
    let Error::UnknownFormat { hint } = parse(b"{\"a\": ").unwrap_err() else { panic!("not UnknownFormat") };
    assert!(hint.starts_with("this looks like JSON but is not valid JSON (line 1, column 6"), "{hint}");
}

#[test]
fn truncated_gzip_names_the_offset() {
    let body = encode(&deep_profile(2000));
    let z = gzip(&body);
    let err = parse(&z[..z.len() / 2]).unwrap_err();
    let Error::Gzip { offset, reason } = &err else { panic!("{err:?}") };
    assert!(*offset > 0 && *offset as usize <= z.len() / 2, "{err}");
    assert!(reason.contains("truncated"), "{err}");
}

#[test]
fn gzip_bomb_is_capped() {
    let bomb = gzip(&vec![0u8; 8 << 20]);
    let err = parse_with(&bomb, &ParseOptions { max_inflated_bytes: 1 << 20, ..Default::default() }).unwrap_err();
    assert_eq!(err, Error::TooLarge { limit: 1 << 20 });
    assert_eq!(err.code(), "InputTooLarge");
}

#[test]
fn invalid_varint_names_field_and_offset() {
    let mut buf = message(|m| header(m, &[]));
    let at = buf.len();
    // sample { value: packed [ 0xff 0xff ... (never terminated) ] }
    field_bytes(2, &message(|s| field_bytes(2, &[0xff; 3], s)), &mut buf);
    let err = parse(&buf).unwrap_err();
    let Error::Protobuf { offset, reason } = &err else { panic!("{err:?}") };
    assert_eq!(*offset, at + 4, "{err}");
    assert!(reason.contains("varint"), "{err}");
}

#[test]
fn string_index_out_of_range() {
    let buf = message(|m| {
        header(m, &[]);
        field_bytes(
            5,
            &message(|f| {
                field_varint(1, 1, f);
                field_varint(2, 99, f);
            }),
            m,
        );
    });
    let err = parse(&buf).unwrap_err();
    assert_eq!(err, Error::DanglingReference { what: "function 1 name".into(), target: "string", id: 99 });
}

#[test]
fn location_id_out_of_range() {
    let buf = message(|m| {
        header(m, &[]);
        field_bytes(
            2,
            &message(|s| {
                field_bytes(1, &[7], s);
                field_bytes(2, &[1], s);
            }),
            m,
        );
    });
    let err = parse(&buf).unwrap_err();
    assert_eq!(err, Error::DanglingReference { what: "sample #0".into(), target: "location", id: 7 });
}

/// Natively, a profile's samples are decoded on several threads, 16,384 or more each:
/// the error is still the first bad sample's, wherever the chunks are cut.
#[test]
fn the_first_bad_sample_is_named_among_many() {
    let profile = |bad: &[(usize, u8)]| {
        message(|m| {
            header(m, &[]);
            field_bytes(4, &message(|l| field_varint(1, 1, l)), m);
            for i in 0..70_000 {
                let location = bad.iter().find(|b| b.0 == i).map_or(1, |b| b.1);
                field_bytes(
                    2,
                    &message(|s| {
                        field_bytes(1, &[location], s);
                        field_bytes(2, &[1], s);
                    }),
                    m,
                );
            }
        })
    };
    assert_eq!(parse(&profile(&[])).unwrap().samples.len(), 70_000);
    for bad in [[(69_999, 9), (69_998, 8)], [(40_000, 9), (60_000, 8)], [(2, 9), (69_000, 8)]] {
        let err = parse(&profile(&bad)).unwrap_err();
        let what = format!("sample #{}", bad[0].0.min(bad[1].0));
        let id = if bad[0].0 < bad[1].0 { 9 } else { 8 };
        assert_eq!(err, Error::DanglingReference { what, target: "location", id });
    }
}

#[test]
fn function_id_out_of_range() {
    let buf = message(|m| {
        header(m, &[]);
        field_bytes(
            4,
            &message(|l| {
                field_varint(1, 1, l);
                field_bytes(4, &message(|line| field_varint(1, 42, line)), l);
            }),
            m,
        );
    });
    let err = parse(&buf).unwrap_err();
    assert_eq!(err, Error::DanglingReference { what: "location 1".into(), target: "function", id: 42 });
}

#[test]
fn value_count_must_match_sample_types() {
    let buf = message(|m| {
        header(m, &[]);
        field_bytes(2, &message(|s| field_bytes(2, &[1, 2], s)), m);
    });
    let err = parse(&buf).unwrap_err();
    assert!(err.to_string().contains("sample #0 has 2 values but the profile has 1 sample types"), "{err}");
}

#[test]
fn non_utf8_names_are_kept_lossily() {
    let buf = message(|m| {
        header(m, &[b"main.\xff\xfename"]);
        field_bytes(
            5,
            &message(|f| {
                field_varint(1, 1, f);
                field_varint(2, 3, f);
            }),
            m,
        );
        field_bytes(
            4,
            &message(|l| {
                field_varint(1, 1, l);
                field_bytes(4, &message(|line| field_varint(1, 1, line)), l);
            }),
            m,
        );
        field_bytes(
            2,
            &message(|s| {
                field_bytes(1, &[1], s);
                field_bytes(2, &[5], s);
            }),
            m,
        );
    });
    let p = parse(&buf).unwrap();
    let r = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    assert_eq!(r.functions[0].name, "main.\u{fffd}\u{fffd}name");
    assert_eq!(r.total, 5);
}

/// One sample whose stack has `depth` distinct frames.
fn deep_profile(depth: usize) -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    let locations = (0..depth)
        .map(|i| {
            let f = p.add_function(&format!("f{i}"), "", "x.go", 0);
            p.add_location(i as u64 + 1, vec![Line { function: f, line: 1, column: 0 }])
        })
        .collect();
    p.samples.push(Sample { locations, values: vec![3], labels: vec![] });
    p
}

#[test]
fn ten_thousand_deep_stacks_work_everywhere() {
    let p = parse(&gzip(&encode(&deep_profile(10_000)))).unwrap();
    let r = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    assert_eq!(r.functions.len(), 10_000);
    assert!(r.functions.iter().all(|f| f.cum == 3));
    let tree = CallTree::build(&Prepared::whole(&p).unwrap(), &TreeOptions::default()).unwrap();
    assert_eq!(tree.max_depth, 10_000);
    let rects = layout(&tree, &Viewport::default());
    assert_eq!(rects.len(), 10_001);
    let (base, compare) = Query::default().prepare_pair(&p, &p).unwrap();
    let d = diff(&base, &compare, &DiffOptions::default()).unwrap();
    assert_eq!((d.regressions.len(), d.improvements.len()), (0, 0));

    let mut dump = String::from("goroutine 1 [select]:\n");
    for i in 0..10_000 {
        dump.push_str(&format!("main.f{i}(...)\n\t/src/x.go:{i}\n"));
    }
    let g = parse(dump.as_bytes()).unwrap();
    assert_eq!(g.goroutines[0].stack.len(), 10_000);
}

#[test]
fn recursion_is_not_counted_twice() {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    let a = p.add_function("a", "", "", 0);
    let b = p.add_function("b", "", "", 0);
    let la = p.add_location(1, vec![Line { function: a, line: 1, column: 0 }]);
    let lb = p.add_location(2, vec![Line { function: b, line: 1, column: 0 }]);
    // leaf first: a <- b <- a <- b <- a
    p.samples.push(Sample { locations: vec![la, lb, la, lb, la], values: vec![5], labels: vec![] });
    let r = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    let row = |n: &str| r.functions.iter().find(|f| f.name == n).map(|f| (f.flat, f.cum)).unwrap();
    assert_eq!(row("a"), (5, 5));
    assert_eq!(row("b"), (0, 5));
}

#[test]
fn legacy_text_errors_name_the_line() {
    let text = b"heap profile: 1: 2 [3: 4] @ heap/1024\n1: 2 [3: 4] @ 0x1 0x2\nthis is not a record\n";
    let err = parse(text).unwrap_err();
    let Error::Text { line, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*line, 3, "{err}");

    let err = parse(b"--- mutex:\ncycles/second=1000\nsampling period=1\n12 3 @ 0xzz\n").unwrap_err();
    assert!(matches!(err, Error::Text { line: 4, .. }), "{err:?}");

    let err = parse(b"goroutine profile: total 3\n3 @ 0x1 nonsense\n").unwrap_err();
    assert!(matches!(err, Error::Text { line: 2, .. }), "{err:?}");
}

#[test]
fn progress_is_reported_per_stage_and_grows() {
    let mut p = deep_profile(10);
    let stack = p.samples.sample(0).locations.to_vec();
    for i in 0..30_000 {
        p.samples.push(Sample { locations: stack.iter().rev().copied().collect(), values: vec![i], labels: vec![] });
    }
    let z = gzip(&encode(&p));
    let mut seen: Vec<(stacklens_core::Stage, f64)> = Vec::new();
    let parsed =
        stacklens_core::parse_with_progress(&z, &ParseOptions::default(), &mut |stage, f| seen.push((stage, f)))
            .unwrap();
    assert_eq!(parsed.samples.len(), 30_001);
    for stage in [stacklens_core::Stage::Inflating, stacklens_core::Stage::Decoding] {
        let fractions: Vec<f64> = seen.iter().filter(|s| s.0 == stage).map(|s| s.1).collect();
        assert!(!fractions.is_empty(), "{stage:?} reported");
        assert!(fractions.windows(2).all(|w| w[0] <= w[1]), "{stage:?} grows: {fractions:?}");
        assert!(fractions.iter().all(|f| (0.0..=1.0).contains(f)));
    }
    assert!(seen.len() < 300, "a few hundred reports at most, got {}", seen.len());
}

#[test]
fn huge_goroutine_counts_saturate_instead_of_overflowing() {
    // Three stacks of i64::MAX goroutines each: more than a u64 holds.
    let mut p = deep_profile(3);
    p.sample_types = vec![p.value_type("goroutine", "count")];
    let leaves: Vec<_> = p.samples.sample(0).locations.to_vec();
    p.samples =
        leaves.iter().map(|&leaf| Sample { locations: vec![leaf], values: vec![i64::MAX], labels: vec![] }).collect();
    let p = parse(&encode(&p)).unwrap();
    let report = analyze(&p, &GoroutineOptions::default()).unwrap();
    assert_eq!((report.goroutine_count, report.group_count), (u64::MAX, 3));
    assert_eq!(report.by_state.values().copied().collect::<Vec<_>>(), [u64::MAX]);
    let mut one = p.clone();
    one.samples.truncate(1);
    let growth = compare(&one, &p).unwrap();
    assert_eq!((growth.base_count, growth.compare_count), (i64::MAX as u64, u64::MAX));
    // 2^64 − 1 − (2^63 − 1) = 2^63: one more than an i64 holds.
    assert_eq!((growth.growth_count, growth.new_stacks.len()), (i64::MAX, 2));
    assert_eq!(compare(&p, &one).unwrap().growth_count, i64::MIN);
}

#[test]
fn huge_values_saturate_instead_of_overflowing() {
    let mut p = deep_profile(3);
    let stack = p.samples.sample(0).locations.to_vec();
    p.samples = vec![
        Sample { locations: stack.clone(), values: vec![i64::MAX], labels: vec![] },
        Sample { locations: stack, values: vec![i64::MAX], labels: vec![] },
    ]
    .into();
    let p = parse(&encode(&p)).unwrap();
    let r = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    assert_eq!(r.total, i64::MAX);
    assert!(r.functions.iter().all(|f| f.cum == i64::MAX));
    assert_eq!(CallTree::build(&Prepared::whole(&p).unwrap(), &TreeOptions::default()).unwrap().total(), i64::MAX);
    let (base, compare) = Query::default().prepare_pair(&p, &p).unwrap();
    let d = diff(&base, &compare, &DiffOptions::default()).unwrap();
    assert_eq!(d.regressions.len(), 0);
}

/// A location (id 1) with one line of function 1, which is named by string 3 ("main").
fn one_frame(out: &mut Vec<u8>) {
    field_bytes(
        4,
        &message(|l| {
            field_varint(1, 1, l);
            field_bytes(4, &message(|line| field_varint(1, 1, line)), l);
        }),
        out,
    );
    field_bytes(
        5,
        &message(|f| {
            field_varint(1, 1, f);
            field_varint(2, 3, f);
        }),
        out,
    );
}

#[test]
fn packed_and_unpacked_repeated_fields_decode_alike_in_any_field_order() {
    // Samples first and the string table last, as Go writes them; one sample packed,
    // one with each repeated field as separate varints.
    let buf = message(|m| {
        field_bytes(
            2,
            &message(|s| {
                field_bytes(1, &[1, 1], s);
                field_bytes(2, &[7], s);
            }),
            m,
        );
        field_bytes(
            2,
            &message(|s| {
                field_varint(1, 1, s);
                field_varint(2, 5, s);
            }),
            m,
        );
        one_frame(m);
        header(m, &[b"main"]);
    });
    let p = parse(&buf).unwrap();
    assert_eq!(p.samples.len(), 2);
    assert_eq!(p.samples.sample(0).locations.len(), 2);
    assert_eq!(p.samples.sample(0).values, vec![7]);
    assert_eq!(p.samples.sample(1).locations.len(), 1);
    assert_eq!(p.samples.sample(1).values, vec![5]);
    assert_eq!(p.strings.get(p.functions[0].name), "main");
}

#[test]
fn a_repeated_singular_message_is_merged_as_protobuf_merges() {
    // period_type twice: the second sets only the unit, so the type of the first stays.
    let buf = message(|m| {
        header(m, &[b"bytes"]);
        field_bytes(
            11,
            &message(|v| {
                field_varint(1, 1, v);
                field_varint(2, 2, v);
            }),
            m,
        );
        field_bytes(11, &message(|v| field_varint(2, 3, v)), m);
    });
    let p = parse(&buf).unwrap();
    let period = p.period_type.unwrap();
    assert_eq!((p.strings.get(period.kind), p.strings.get(period.unit)), ("samples", "bytes"));
}

#[test]
fn a_scalar_with_the_wrong_wire_type_is_malformed_protobuf() {
    let mut buf = message(|m| header(m, &[]));
    let at = buf.len();
    // period (field 12, an int64) as a length-delimited payload.
    field_bytes(12, &[1], &mut buf);
    let err = parse(&buf).unwrap_err();
    let Error::Protobuf { offset, reason } = &err else { panic!("{err:?}") };
    assert!(*offset >= at, "{err}");
    assert!(reason.contains("wire type"), "{err}");
    assert_eq!(err.code(), "MalformedProtobuf");
}

#[test]
fn many_sample_types_and_samples_with_one_value_each_are_refused_without_reserving_their_product() {
    // 200,000 sample types and 200,000 samples of one value: room for types × samples
    // values would be 320 GB.
    let mut p = deep_profile(1);
    let kind = p.value_type("v", "count");
    p.sample_types = vec![kind; 200_000];
    let stack = p.samples.sample(0).locations.to_vec();
    p.samples = (0..200_000).map(|_| Sample { locations: stack.clone(), values: vec![1], labels: vec![] }).collect();
    let err = parse(&encode(&p)).unwrap_err();
    assert_eq!(err.to_string(), "invalid profile: sample #0 has 1 values but the profile has 200000 sample types");
}
