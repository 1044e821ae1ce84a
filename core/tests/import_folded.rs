//! Folded (collapsed) stacks: py-spy `-f raw`, FlameGraph/inferno `stackcollapse`
//! output, difffolded's two counts, decimal counts and inferno's `_[k]`/`_[j]`/`_[i]`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;

use common::{fixtures, read};
use proptest::prelude::*;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::import::{detect, folded, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error, Profile};

const FIXTURES: &[&str] = &[
    "tools/pyspy-workload-A.collapsed.txt",
    "thirdparty/flamegraph/perf-java-stacks-01-collapsed-all.txt",
    "thirdparty/firefox-profiler/flamegraph.txt",
];

/// What the file says, read without the importer: (total, self per function by the
/// leaf frame's name, number of stack lines).
fn expected(text: &str) -> (i64, BTreeMap<String, i64>, usize) {
    let (mut total, mut flat, mut lines) = (0, BTreeMap::new(), 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (stack, count) = line.trim_end().rsplit_once(' ').unwrap();
        let count: i64 = count.parse().unwrap();
        total += count;
        lines += 1;
        let Some(leaf) = stack.split(';').rfind(|f| !f.is_empty()) else { continue };
        let leaf = ["_[k]", "_[j]", "_[i]"].iter().fold(leaf, |l, s| l.strip_suffix(s).unwrap_or(l));
        // py-spy: `name (file.py:12)`.
        let leaf = match leaf.strip_suffix(')').and_then(|l| l.rsplit_once(" (")) {
            Some((name, file_line)) if file_line.contains(':') => name,
            _ => leaf,
        };
        *flat.entry(leaf.to_owned()).or_insert(0) += count;
    }
    (total, flat, lines)
}

fn flat_by_function(p: &Profile, sample_index: usize) -> BTreeMap<String, i64> {
    let prepared = Query { sample: sample_index.into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    report.functions.into_iter().filter(|f| f.flat != 0).map(|f| (f.name, f.flat)).collect()
}

fn hottest(flat: &BTreeMap<String, i64>) -> (&str, i64) {
    let (name, v) = flat.iter().max_by_key(|(n, v)| (**v, std::cmp::Reverse(n.as_str()))).unwrap();
    (name.as_str(), *v)
}

#[test]
fn every_fixture_matches_its_text() {
    let Some(dir) = fixtures() else { return };
    for name in FIXTURES {
        let bytes = read(&dir.join(name));
        assert_eq!(detect(&bytes), Format::Of(SourceFormat::Folded), "{name}");
        let p = parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.source, SourceFormat::Folded);
        assert_eq!((p.sample_type_name(0), p.sample_type_unit(0), p.sample_types.len()), ("samples", "count", 1));
        let (total, flat, lines) = expected(&String::from_utf8(bytes).unwrap());
        assert_eq!(p.total(0), total, "{name}: total");
        assert_eq!(p.samples.len(), lines, "{name}: one sample per line");
        assert_eq!(flat_by_function(&p, 0), flat, "{name}: self per function");
        // No annotation survives in a name.
        assert!(p.functions.iter().all(|f| !p.str(f.name).ends_with(']') || p.str(f.name).starts_with('[')), "{name}");
    }
}

#[test]
fn py_spy_frames_keep_file_and_line() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join("tools/pyspy-workload-A.collapsed.txt"));
    let p = parse(&bytes).unwrap();
    // 37 lines, 843 samples at 200 Hz; JSON decoding dominates.
    assert_eq!(p.total(0), 843);
    let (total, flat, _) = expected(std::str::from_utf8(&bytes).unwrap());
    assert_eq!(total, 843);
    assert_eq!(hottest(&flat), ("JSONDecoder.raw_decode", 391));
    assert_eq!(hottest(&flat_by_function(&p, 0)), ("JSONDecoder.raw_decode", 391));
    let f = p.functions.iter().position(|f| p.str(f.name) == "JSONDecoder.raw_decode").unwrap();
    assert_eq!(p.str(p.functions[f].filename), "json/decoder.py");
    let at = p.locations.iter().find(|l| l.lines.iter().any(|line| line.function.0 as usize == f)).unwrap();
    assert_eq!(at.lines[0].line, 353);
    let frozen = p.functions.iter().find(|f| p.str(f.name) == "_find_and_load").unwrap();
    assert_eq!(p.str(frozen.filename), "<frozen importlib._bootstrap>");
    // ` 6`: samples outside any Python frame, kept with an empty stack.
    assert!(p.samples.iter().any(|s| s.locations.is_empty() && s.values == [6]));
}

#[test]
fn inferno_annotations_become_mappings() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join("thirdparty/flamegraph/perf-java-stacks-01-collapsed-all.txt"))).unwrap();
    assert_eq!(p.total(0), 45);
    assert_eq!(hottest(&flat_by_function(&p, 0)), ("native_write_msr_safe", 16));
    let region = |name: &str| {
        let f = p.functions.iter().position(|f| p.str(f.name) == name).unwrap();
        let l = p.locations.iter().find(|l| l.lines.iter().any(|line| line.function.0 as usize == f)).unwrap();
        l.mapping.map(|m| p.str(p.mapping(m).filename).to_owned())
    };
    assert_eq!(region("native_write_msr_safe").as_deref(), Some("[kernel.kallsyms]"));
    assert_eq!(region("org/mozilla/javascript/ScriptableObject:.getSlot").as_deref(), Some("[jit]"));
    assert_eq!(region("__write_nocancel"), None);

    let p = parse(&read(&dir.join("thirdparty/firefox-profiler/flamegraph.txt"))).unwrap();
    assert_eq!(p.total(0), 152_364);
    let flat = flat_by_function(&p, 0);
    assert_eq!(hottest(&flat), ("core::ptr::_$LT$impl$u20$$BP$mut$u20$T$GT$::offset::h83331dc01d57b6ff", 19_477));
    assert_eq!(flat["page_fault"], 11_402);
}

#[test]
fn gzip_and_detection_from_bytes_only() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join("tools/pyspy-workload-A.collapsed.txt"));
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&bytes).unwrap();
    let p = parse(&z.finish().unwrap()).unwrap();
    assert_eq!((p.source, p.total(0)), (SourceFormat::Folded, 843));
}

#[test]
fn inline_frames_join_their_caller() {
    let p = parse(b"main;helper_[i];leaf 3\nmain;leaf 2\n").unwrap();
    assert_eq!(p.samples.sample(0).locations.len(), 2);
    let caller = p.location(p.samples.sample(0).locations[1]);
    let names: Vec<&str> = caller.lines.iter().map(|l| p.line_function_name(l)).collect();
    assert_eq!(names, ["helper", "main"], "innermost first");
    // The same physical frame without inlining is another location.
    assert_ne!(p.samples.sample(1).locations[1], p.samples.sample(0).locations[1]);
    let report = top(&Prepared::whole(&p).unwrap(), &TopOptions::default()).unwrap();
    let cum: BTreeMap<&str, i64> = report.functions.iter().map(|f| (f.name.as_str(), f.cum)).collect();
    assert_eq!((cum["main"], cum["helper"], cum["leaf"]), (5, 3, 5));
}

#[test]
fn difffolded_counts_are_one_sample_type_each() {
    let p = parse(b"main;a 3 5\nmain;b 1 0\nmain;c 0 7\n").unwrap();
    let types: Vec<(&str, &str)> = (0..2).map(|i| (p.sample_type_name(i), p.sample_type_unit(i))).collect();
    assert_eq!(types, [("samples_1", "count"), ("samples_2", "count")]);
    assert_eq!((p.total(0), p.total(1)), (4, 12));
    assert_eq!(flat_by_function(&p, 1), BTreeMap::from([("a".to_owned(), 5), ("c".to_owned(), 7)]));
}

#[test]
fn a_frame_ending_in_a_number_is_not_a_column() {
    // Only the first line ends in two numbers: the column count is the fewest.
    let p = parse(b"main;sleep 5 10\nmain;run 4\n").unwrap();
    assert_eq!(p.sample_types.len(), 1);
    assert_eq!(flat_by_function(&p, 0), BTreeMap::from([("run".to_owned(), 4), ("sleep 5".to_owned(), 10)]));
}

#[test]
fn decimal_counts_are_kept_exactly() {
    let p = parse(b"main;a 1.5\nmain;b 2.25\nmain;c 3\n").unwrap();
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count/100"));
    assert_eq!(p.samples.iter().map(|s| s.values[0]).collect::<Vec<_>>(), [150, 225, 300]);
    assert!(p.comments.iter().any(|c| p.str(*c).contains("1/100 count")));
}

#[test]
fn malformed_lines_are_typed_errors_with_line_numbers() {
    let err = folded::parse(b"main;a 5\n\nmain;b five\n", &Default::default()).unwrap_err();
    assert_eq!(err.code(), "MalformedText");
    assert!(matches!(err, Error::Text { format: "folded stacks", line: 3, .. }), "{err}");
    let err = folded::parse(b"main;a 5\nmain;b 1.0000000001\n", &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 2, ref reason, .. } if reason.contains("decimals")), "{err}");
    let err = folded::parse(b"main;a 5\nmain;b 99999999999999999999\n", &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 2, ref reason, .. } if reason.contains("too large")), "{err}");
    let err = folded::parse(b"main;a 5\nmain;b 922337203685477580.5\nmain;c 1.25\n", &Default::default()).unwrap_err();
    assert!(matches!(err, Error::Text { line: 2, .. }), "{err}");
    // Through detection, a file whose first lines are folded keeps its line numbers.
    let err = parse(b"main;a 5\nmain;b 6\nmain;c 7\nnot a stack\nmain;d 8\n").unwrap_err();
    assert!(matches!(err, Error::Text { line: 4, .. }), "{err}");
}

#[test]
fn markup_and_json_are_still_not_folded() {
    let err = parse(b"<!doctype html><html><body>Not found 404</body></html>").unwrap_err();
    assert!(matches!(err, Error::UnknownFormat { .. }), "{err}");
    assert!(matches!(parse(b"[1, 2]").unwrap_err(), Error::UnknownFormat { .. }));
    assert_eq!(detect(b"<p>total 5</p>\n"), Format::Unrecognized);
    assert_eq!(detect(b"[unknown];main 5\n"), Format::Of(SourceFormat::Folded));
    assert_eq!(detect(b"1 2\n3 4\n"), Format::Unrecognized, "numbers alone are not stacks");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_after_a_valid_first_line_never_panics(
        first in proptest::sample::select(&["main;f 1\n", "<module> (a.py:1);f (b.py:2) 3\n", "a;b_[i] 1.5 2\n", " 6\n"][..]),
        body in "[ -~\t\n;_\\[\\]().:0-9]{0,600}",
    ) {
        let text = format!("{first}{body}");
        for result in [folded::parse(text.as_bytes(), &Default::default()), parse(text.as_bytes())] {
            if let Err(e) = result {
                prop_assert!(!e.to_string().is_empty());
            }
        }
        if let Ok(p) = folded::parse(text.as_bytes(), &Default::default()) {
            for i in 0..p.sample_types.len() {
                let query = Query { sample: i.into(), ..Query::default() };
                prop_assert!(query.prepare(&p).and_then(|prepared| top(&prepared, &TopOptions::default())).is_ok());
            }
        }
    }
}

/// Both passes of [`folded::FoldedScan`] over `bytes` cut into pieces of `size`.
fn parse_in_pieces(bytes: &[u8], size: usize) -> stacklens_core::Result<Profile> {
    let mut scan = folded::FoldedScan::default();
    for piece in bytes.chunks(size) {
        scan.feed(piece)?;
    }
    let mut build = scan.finish(&Default::default())?;
    for piece in bytes.chunks(size) {
        build.feed(piece)?;
    }
    build.finish()
}

#[test]
fn pieces_give_the_same_profile_as_the_whole() {
    use stacklens_core::export::pprof::encode;
    let mut inputs: Vec<Vec<u8>> = match fixtures() {
        Some(dir) => FIXTURES.iter().map(|f| read(&dir.join(f))).collect(),
        None => Vec::new(),
    };
    inputs.extend([
        // CRLF, a last line without its newline, blank lines, two columns, decimals.
        b"main;a 1.5 2\r\n\r\nmain;b 2.25 3\r\nmain;c 3 4".to_vec(),
        // A multibyte character and an invalid byte, wherever the cut falls.
        ["m\u{e9}thode;\u{1F600} 7\nmain;b".as_bytes(), b"\xff 1\n"].concat(),
        b"main;f 10 12\nmain;g 5\n".to_vec(),
        b"<module> (workload.py:53);main (workload.py:46) 391\njava;start_thread_[k];x_[i] 7\n".to_vec(),
    ]);
    for input in &inputs {
        assert!(folded::starts_folded(&input[..input.len().min(folded::HEAD)]), "read in pieces by the page and CLI");
        let whole = encode(&folded::parse(input, &Default::default()).unwrap());
        for size in [1, 3, 64, 4096, 1 << 20] {
            let pieces = encode(&parse_in_pieces(input, size).unwrap());
            assert!(pieces == whole, "pieces of {size} bytes differ from the whole ({} bytes)", input.len());
        }
    }
    assert!(
        !folded::starts_folded(&encode(&folded::parse(&inputs[0], &Default::default()).unwrap())),
        "pprof is read whole"
    );
    // Errors name the same line either way.
    for bad in [&b"main;a 5\n\nmain;b five\n"[..], b"main;a 5\nmain;b 1.0000000001\n", b"\n\n"] {
        let whole = folded::parse(bad, &Default::default()).unwrap_err().to_string();
        assert_eq!(parse_in_pieces(bad, 2).unwrap_err().to_string(), whole);
    }
}
