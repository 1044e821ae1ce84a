//! Valgrind callgrind: the fixture's total and every function's self cost equal
//! `callgrind_annotate --inclusive=no` (figures stored here and, when valgrind is
//! installed, the tool run at test time); inclusive cost of the functions on the one hot
//! path equals `--inclusive=yes`; malformed input gets typed errors with line numbers.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{fixtures, missing_prerequisite, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error, Profile};

const FIXTURE: &str = "tools/callgrind.out.cworkload-A";
const WORKLOAD: &str = "/src/stacklens/shared/fixtures/gen/tools/workload.c";
const MSORT: &str = "./stdlib/./stdlib/msort.c";

/// `file:function` of a location line, as callgrind_annotate names functions.
fn key(p: &Profile, line: &stacklens_core::model::Line) -> String {
    let f = p.function(line.function);
    format!("{}:{}", p.str(f.filename), p.str(f.name))
}

/// Self cost per `file:function`: the leaf location's innermost line.
fn self_costs(p: &Profile) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let leaf = p.location(s.locations[0]);
        *out.entry(key(p, &leaf.lines[0])).or_insert(0) += s.values[0];
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Inclusive cost per `file:function`: every sample whose stack has it, once.
fn inclusive(p: &Profile) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let keys: BTreeSet<String> =
            s.locations.iter().flat_map(|&l| p.location(l).lines.iter().map(|line| key(p, line))).collect();
        for k in keys {
            *out.entry(k).or_insert(0) += s.values[0];
        }
    }
    out
}

/// `callgrind_annotate --threshold=100 --inclusive=…` rows: `file:function` → cost.
fn annotate(file: &std::path::Path, inclusive: bool) -> Option<(i64, BTreeMap<String, i64>)> {
    let tool = std::path::Path::new("/usr/bin/callgrind_annotate");
    if !tool.is_file() {
        missing_prerequisite("callgrind_annotate (valgrind) at /usr/bin/callgrind_annotate");
        return None;
    }
    let out = std::process::Command::new(tool)
        .args(["--threshold=100", if inclusive { "--inclusive=yes" } else { "--inclusive=no" }])
        .arg(file)
        .output()
        .expect("running callgrind_annotate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut total, mut rows) = (None, BTreeMap::new());
    for line in text.lines() {
        let Some((count, rest)) = line.trim_start().split_once(" (") else { continue };
        let Ok(count) = count.replace(',', "").parse::<i64>() else { continue };
        let Some((_, name)) = rest.split_once(")  ") else { continue };
        if name == "PROGRAM TOTALS" {
            total = Some(count);
            continue;
        }
        // `file:function [object]`
        let name = match name.rfind(" [") {
            Some(at) if name.ends_with(']') => &name[..at],
            _ => name,
        };
        *rows.entry(name.to_owned()).or_insert(0) += count;
    }
    Some((total.expect("PROGRAM TOTALS"), rows))
}

fn fixture() -> Option<(std::path::PathBuf, Profile)> {
    let dir = fixtures()?;
    let path = dir.join(FIXTURE);
    let bytes = read(&path);
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::Callgrind));
    let p = parse(&bytes).unwrap();
    Some((path, p))
}

#[test]
fn totals_and_self_costs_equal_callgrind_annotate() {
    let Some((path, p)) = fixture() else { return };
    assert_eq!(p.source, SourceFormat::Callgrind);
    assert_eq!((p.sample_types.len(), p.sample_type_name(0), p.sample_type_unit(0)), (1, "Ir", "count"));
    // `summary: 1272809597`, callgrind_annotate's PROGRAM TOTALS.
    assert_eq!(p.total(0), 1_272_809_597);
    let flat = self_costs(&p);
    // callgrind_annotate --inclusive=no, the top of its list.
    let w = |f: &str| format!("{WORKLOAD}:{f}");
    let m = |f: &str| format!("{MSORT}:{f}");
    assert_eq!(flat[&m("msort_with_tmp.part.0'2")], 563_367_426);
    assert_eq!(flat[&w("cmp_u64")], 215_906_997);
    assert_eq!(flat[&w("tokenize")], 157_286_720);
    assert_eq!(
        flat["./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms"],
        140_115_557
    );
    assert_eq!(flat[&w("hash_buffer")], 62_915_160);
    assert_eq!(flat[&w("dot")], 62_784_000);
    assert_eq!(flat[&m("msort_with_tmp.part.0")], 33_001_093);
    assert_eq!(flat[&w("handle_request")], 24_001_680);
    assert_eq!(flat[&w("main")], 7_340_527);
    assert_eq!(flat[&w("matrix_multiply")], 5_920_204);
    // Inlined code (`fi=`) keeps its own file, as callgrind_annotate shows it.
    assert_eq!(flat["./elf/../sysdeps/generic/dl-new-hash.h:_dl_lookup_symbol_x"], 8_166);
    assert_eq!(flat["./elf/./elf/dl-lookup.c:_dl_lookup_symbol_x"], 8_128);
    assert_eq!(flat.len(), 374);

    // Every row, against the tool itself.
    let Some((total, rows)) = annotate(&path, false) else { return };
    assert_eq!(total, 1_272_809_597);
    assert_eq!(flat, rows);
}

/// Inclusive cost per function from the expanded stacks, against callgrind_annotate
/// --inclusive=yes. Below qsort, parse_request and matrix_multiply's callees every
/// function has one caller, so the expansion gives it its whole inclusive cost, exactly.
/// Functions above shared callees (malloc, free, the PLT resolver, called from both the
/// workload and ld.so) get those callees' self cost split between the callers by edge
/// cost and rounded per stack: main, handle_request, sort_records and matrix_multiply are
/// off by one or two instructions in 1.27 billion.
#[test]
fn inclusive_costs_follow_callgrind_annotate() {
    let Some((path, p)) = fixture() else { return };
    let cum = inclusive(&p);
    let w = |f: &str| format!("{WORKLOAD}:{f}");
    let m = |f: &str| format!("{MSORT}:{f}");
    // (function, callgrind_annotate --inclusive=yes, this import)
    let expected = [
        (w("main"), 1_272_686_708, 1_272_686_709),
        (w("handle_request"), 1_265_341_264, 1_265_341_263),
        (w("sort_records"), 952_407_717, 952_407_718),
        (m("qsort"), 952_406_772, 952_406_772),
        (m("qsort_r"), 952_406_692, 952_406_692),
        (m("msort_with_tmp.part.0"), 952_391_073, 952_391_073),
        (w("parse_request"), 220_202_680, 220_202_680),
        (w("tokenize"), 157_286_720, 157_286_720),
        (w("matrix_multiply"), 68_729_187, 68_729_185),
        (w("hash_buffer"), 62_915_160, 62_915_160),
        (w("dot"), 62_784_000, 62_784_000),
    ];
    for (name, _, ours) in &expected {
        assert_eq!(cum[name], *ours, "{name}");
    }
    let Some((_, rows)) = annotate(&path, true) else { return };
    for (name, theirs, _) in &expected {
        assert_eq!(rows[name], *theirs, "{name}");
    }
}

fn error_of(text: &str) -> Error {
    stacklens_core::import::callgrind::parse(text.as_bytes(), &Default::default()).unwrap_err()
}

fn text_error(line: usize, reason: &str) -> Error {
    Error::Text { format: "callgrind", line, reason: reason.into() }
}

const HEADER: &str = "# callgrind format\nevents: Ir\n";

#[test]
fn small_profile_expands_calls_and_compression() {
    let text = format!(
        "{HEADER}fl=(1) a.c\nfn=(1) main\n10 5\ncfn=(2) f\ncalls=2 20\n+1 30\n\
         fn=(2)\n20 10\n+2 4\ncfn=(3) g\ncalls=1 30\n* 16\nfn=(3)\n30 16\n\
         fn=(4) lone\n0x10 7\nfi=(2) b.h\n* 1\n"
    );
    let bytes = text.as_bytes();
    assert_eq!(detect(bytes), Format::Of(SourceFormat::Callgrind));
    let p = parse(bytes).unwrap();
    assert_eq!(p.total(0), 5 + 14 + 16 + 7 + 1);
    let flat = self_costs(&p);
    let expected: BTreeMap<String, i64> =
        [("a.c:main", 5), ("a.c:f", 14), ("a.c:g", 16), ("a.c:lone", 7), ("b.h:lone", 1)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
    assert_eq!(flat, expected);
    let stacks: BTreeMap<Vec<String>, i64> = p
        .samples
        .iter()
        .map(|s| {
            let names = s.locations.iter().map(|&l| key(&p, p.location(l).lines.last().unwrap())).collect();
            (names, s.values[0])
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(stacks[&s(&["a.c:g", "a.c:f", "a.c:main"])], 16);
    assert_eq!(stacks[&s(&["a.c:f", "a.c:main"])], 14);
    assert_eq!(stacks[&s(&["a.c:main"])], 5);
    assert_eq!(inclusive(&p)["a.c:main"], 35);
}

#[test]
fn recursion_is_cut_and_self_stays_exact() {
    // f calls itself and g; g calls f back.
    let text = format!(
        "{HEADER}fl=a.c\nfn=main\n1 1\ncfn=f\ncalls=1 1\n1 100\nfn=f\n1 50\ncfn=f\ncalls=3 1\n1 40\n\
         cfn=g\ncalls=1 1\n1 30\nfn=g\n1 20\ncfn=f\ncalls=1 1\n1 10\n"
    );
    let p = parse(text.as_bytes()).unwrap();
    assert_eq!(p.total(0), 71);
    let flat = self_costs(&p);
    assert_eq!((flat["a.c:main"], flat["a.c:f"], flat["a.c:g"]), (1, 50, 20));
    // Stacks: main; f under main; g under f (g's call back into f is cut).
    let mut stacks: Vec<(usize, i64)> = p.samples.iter().map(|s| (s.locations.len(), s.values[0])).collect();
    stacks.sort();
    assert_eq!(stacks, vec![(1, 1), (2, 50), (3, 20)]);
}

#[test]
fn malformed_input_gets_line_numbers() {
    assert_eq!(error_of(&format!("{HEADER}fl=a.c\n10 5\n")), text_error(4, "cost line before any 'fn='"));
    assert_eq!(
        error_of(&format!("{HEADER}fl=a.c\nfn=main\ncfn=f\ncalls=1 10\nfn=f\n")),
        text_error(7, "'calls=' on line 6 is not followed by its cost line")
    );
    assert_eq!(
        error_of(&format!("{HEADER}fl=a.c\nfn=main\ncfn=f\ncalls=1 10\n")),
        text_error(6, "'calls=' on line 6 has no cost line")
    );
    assert_eq!(error_of(&format!("{HEADER}fn=(7)\n")), text_error(3, "function id (7) was never defined"));
    assert_eq!(error_of(&format!("{HEADER}fn=m\n1 2 3\n")), text_error(4, "more counts than the 1 events"));
    assert_eq!(error_of(&format!("{HEADER}fn=m\n1 x\n")), text_error(4, "'x' is not a count"));
    assert_eq!(error_of(&format!("{HEADER}fn=m\nq 1\n")), text_error(4, "unexpected line 'q 1'"));
    assert_eq!(
        error_of(&format!("{HEADER}fn=m\n1 99999999999999999999\n")),
        text_error(4, "'99999999999999999999' is not a count")
    );
    assert_eq!(
        error_of(&format!("{HEADER}fn=m\n1 9223372036854775807\n2 1\n")),
        text_error(5, "cost overflows 64 bits")
    );
    assert_eq!(error_of("# callgrind format\nfn=m\n"), text_error(2, "no 'events:' header"));
    assert_eq!(error_of("# callgrind format\n1 2\n"), text_error(2, "cost line before the 'events:' header"));
    assert_eq!(error_of(&format!("{HEADER}fn=m\ncalls=1 2\n")), text_error(4, "'calls=' without a preceding 'cfn='"));
    assert_eq!(error_of(&format!("{HEADER}fn=m\nzz=1\n")), text_error(4, "unknown specification 'zz='"));
}

#[test]
fn truncated_fixture_is_an_error_or_a_smaller_profile() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(FIXTURE));
    // Cut in the middle of the first `calls=` line's cost line: the call has no cost.
    let text = std::str::from_utf8(&bytes).unwrap();
    let at = text.find("calls=1 3281").unwrap() + "calls=1 3281 \n".len();
    assert_eq!(
        stacklens_core::import::callgrind::parse(&bytes[..at], &Default::default()).unwrap_err(),
        text_error(31, "'calls=' on line 31 has no cost line")
    );
    // Half the file ends inside `calls=2 2…`: that call never gets its cost line.
    assert_eq!(
        stacklens_core::import::callgrind::parse(&bytes[..bytes.len() / 2], &Default::default()).unwrap_err(),
        text_error(4813, "'calls=' on line 4813 has no cost line")
    );
    // Cut after the position of a cost line: what came before is a (smaller) profile.
    let at = text.find("\nfe=(31)\n1390 4\n").unwrap() + "\nfe=(31)\n1390 ".len();
    let p = parse(&bytes[..at]).unwrap();
    // callgrind_annotate --inclusive=no on the same bytes: rows sum to 536,204,284 over
    // 131 functions.
    assert_eq!((p.total(0), self_costs(&p).len()), (536_204_284, 131));
}
