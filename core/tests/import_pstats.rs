//! Python cProfile `.pstats`: the fixture's totals and each function's tottime and ncalls
//! equal `pstats.Stats(…).print_stats()` (its printed figures stored here and, when
//! python3 is installed, every function's exact figures read by Python at test time);
//! malformed marshal data gets typed errors with byte offsets.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, missing_prerequisite, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::{parse, Error, Profile};

const FIXTURE: &str = "tools/python-cprofile-A.pstats";

/// `python3 -c "import pstats; s=pstats.Stats('python-cprofile-A.pstats');
/// s.sort_stats('tottime').print_stats(30)"`: ncalls, tottime, function.
const PRINT_STATS: &[(&str, &str, &str)] = &[
    ("42", "1.266", "/home/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:343(raw_decode)"),
    ("168000", "0.461", "/src/stacklens/shared/fixtures/gen/tools/workload.py:12(<lambda>)"),
    ("44", "0.448", "{built-in method builtins.sorted}"),
    ("1", "0.356", "/src/stacklens/shared/fixtures/gen/tools/workload.py:40(main)"),
    ("134106/42", "0.206", "/src/stacklens/shared/fixtures/gen/tools/workload.py:26(fib)"),
    ("85", "0.201", "{built-in method _hashlib.openssl_sha256}"),
    ("1", "0.038", "/src/stacklens/shared/fixtures/gen/tools/workload.py:5(<listcomp>)"),
    ("1", "0.033", "/home/.pyenv/versions/3.11.7/lib/python3.11/json/encoder.py:205(iterencode)"),
    ("3", "0.030", "{built-in method _imp.create_dynamic}"),
    ("12642", "0.019", "/src/stacklens/shared/fixtures/gen/tools/workload.py:24(<genexpr>)"),
    ("42", "0.017", "/src/stacklens/shared/fixtures/gen/tools/workload.py:31(handle_request)"),
    ("42", "0.013", "/src/stacklens/shared/fixtures/gen/tools/workload.py:23(render_report)"),
    ("42", "0.010", "{method 'split' of 'str' objects}"),
    ("56", "0.008", "{method 'startswith' of 'str' objects}"),
    ("42", "0.004", "/src/stacklens/shared/fixtures/gen/tools/workload.py:14(checksum)"),
    ("154", "0.002", "{method 'join' of 'str' objects}"),
    ("42", "0.002", "/src/stacklens/shared/fixtures/gen/tools/workload.py:21(<listcomp>)"),
    ("3", "0.001", "{built-in method _imp.exec_dynamic}"),
    ("42", "0.001", "/home/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:332(decode)"),
    ("84", "0.001", "{method 'match' of 're.Pattern' objects}"),
    ("42", "0.000", "/home/.pyenv/versions/3.11.7/lib/python3.11/json/__init__.py:299(loads)"),
    ("84", "0.000", "{method 'digest' of '_hashlib.HASH' objects}"),
    ("42", "0.000", "/src/stacklens/shared/fixtures/gen/tools/workload.py:11(sort_orders)"),
    ("42", "0.000", "/src/stacklens/shared/fixtures/gen/tools/workload.py:8(decode_orders)"),
    ("5", "0.000", "{built-in method marshal.loads}"),
    ("15/6", "0.000", "/home/.pyenv/versions/3.11.7/lib/python3.11/re/_parser.py:516(_parse)"),
    ("21", "0.000", "<frozen importlib._bootstrap_external>:1604(find_spec)"),
    ("39", "0.000", "{built-in method posix.stat}"),
    ("447/419", "0.000", "{built-in method builtins.len}"),
    ("42", "0.000", "/src/stacklens/shared/fixtures/gen/tools/workload.py:20(tokenize)"),
];

/// pstats' `func_std_string`: `file:line(name)`, or `{name}` for a built-in.
fn label(p: &Profile, f: &stacklens_core::model::Function) -> String {
    let (file, name) = (p.str(f.filename), p.str(f.name));
    if file.is_empty() && f.start_line == 0 {
        match name.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
            Some(inner) => format!("{{{inner}}}"),
            None => name.to_owned(),
        }
    } else {
        format!("{file}:{}({name})", f.start_line)
    }
}

/// Self (time ns, calls) per function label.
fn self_values(p: &Profile) -> BTreeMap<String, (i64, i64)> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let f = p.function(p.location(s.locations[0]).lines[0].function);
        let e = out.entry(label(p, f)).or_insert((0, 0));
        e.0 += s.values[0];
        e.1 += s.values[1];
    }
    out
}

/// Inclusive time per function label (each sample once per function).
fn inclusive(p: &Profile) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let mut seen: Vec<String> =
            s.locations.iter().map(|&l| label(p, p.function(p.location(l).lines[0].function))).collect();
        seen.sort();
        seen.dedup();
        for k in seen {
            *out.entry(k).or_insert(0) += s.values[0];
        }
    }
    out
}

fn fixture() -> Option<(std::path::PathBuf, Vec<u8>, Profile)> {
    let dir = fixtures()?;
    let path = dir.join(FIXTURE);
    let bytes = read(&path);
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::Pstats));
    let p = parse(&bytes).unwrap();
    Some((path, bytes, p))
}

#[test]
fn totals_and_tottime_equal_print_stats() {
    let Some((path, _, p)) = fixture() else { return };
    assert_eq!(p.source, SourceFormat::Pstats);
    assert_eq!(
        (p.sample_type_name(0), p.sample_type_unit(0), p.sample_type_name(1), p.sample_type_unit(1)),
        ("time", "nanoseconds", "calls", "count")
    );
    assert_eq!(p.default_sample_index(), 0);
    // "319774 function calls (185583 primitive calls) in 3.125 seconds"; the exact sum
    // of tt is 3.124731595000001 s.
    assert_eq!(p.total(0), 3_124_731_595);
    assert_eq!(p.total(1), 319_774);
    let by_function = self_values(&p);
    assert_eq!(by_function.len(), 224);
    for (ncalls, tottime, name) in PRINT_STATS {
        let (ns, calls) = by_function[*name];
        assert_eq!(format!("{:.3}", ns as f64 / 1e9), *tottime, "{name}");
        // `nc/cc` for recursive functions: the first figure is all calls.
        assert_eq!(calls.to_string(), ncalls.split('/').next().unwrap(), "{name}");
    }
    assert_eq!(
        by_function["/home/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:343(raw_decode)"],
        (1_265_833_087, 42)
    );
    assert_eq!(by_function["/src/stacklens/shared/fixtures/gen/tools/workload.py:26(fib)"], (206_214_210, 134_106));

    // Every function, exactly, as Python reads the file.
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.is_file() {
        missing_prerequisite("python3 at /usr/bin/python3 (its pstats module reads the reference)");
        return;
    }
    let script = "import pstats,sys\ns=pstats.Stats(sys.argv[1])\n\
                  for k,(cc,nc,tt,ct,_) in s.stats.items(): print(f'{round(tt*1e9)}\\t{nc}\\t{pstats.func_std_string(k)}')";
    let out = std::process::Command::new(python).args(["-c", script]).arg(&path).output().expect("running python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected: BTreeMap<String, (i64, i64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let (ns, nc, name) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            (name.to_owned(), (ns.parse().unwrap(), nc.parse().unwrap()))
        })
        .collect();
    assert_eq!(expected.len(), 224);
    // Functions whose tt and nc are both 0 produce no sample.
    let expected: BTreeMap<String, (i64, i64)> = expected.into_iter().filter(|(_, v)| *v != (0, 0)).collect();
    assert_eq!(by_function, expected);
}

/// Inclusive time from the expanded stacks against print_stats' cumtime: equal to the
/// printed millisecond. Not to the nanosecond: cProfile's ct includes time in no
/// function's tt (the profiler's own), and `sorted` is also called from import code,
/// so its self time is split between its callers by their edges' ct.
#[test]
fn stacks_follow_the_call_graph() {
    let Some((_, _, p)) = fixture() else { return };
    let cum = inclusive(&p);
    let w = |f: &str| format!("/src/stacklens/shared/fixtures/gen/tools/workload.py:{f}");
    // (function, print_stats cumtime, this import in ns; Python's ct in ns for the record)
    let expected = [
        (w("40(main)"), "3.089", 3_088_859_718),           // ct 3_088_907_169
        (w("31(handle_request)"), "2.661", 2_661_310_667), // ct 2_661_357_529
        (w("11(sort_orders)"), "0.910", 909_785_150),      // ct 909_785_469
    ];
    for (name, printed, ns) in &expected {
        assert_eq!(cum[name], *ns, "{name}");
        assert_eq!(format!("{:.3}", cum[name] as f64 / 1e9), *printed, "{name}");
    }
    for (name, printed) in [
        (w("8(decode_orders)"), "1.277"),
        (w("14(checksum)"), "0.205"),
        ("/home/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:343(raw_decode)".to_owned(), "1.266"),
    ] {
        assert_eq!(format!("{:.3}", cum[&name] as f64 / 1e9), printed, "{name}");
    }
}

fn err(bytes: &[u8]) -> Error {
    stacklens_core::import::pstats::parse(bytes, &Default::default()).unwrap_err()
}

fn binary(offset: usize, reason: &str) -> Error {
    Error::Binary { format: "pstats", offset, reason: reason.into() }
}

/// Marshal writers for hand-made stats.
fn s(text: &str) -> Vec<u8> {
    let mut v = vec![b'z', text.len() as u8];
    v.extend_from_slice(text.as_bytes());
    v
}
fn i(n: i32) -> Vec<u8> {
    let mut v = vec![b'i'];
    v.extend_from_slice(&n.to_le_bytes());
    v
}
fn g(x: f64) -> Vec<u8> {
    let mut v = vec![b'g'];
    v.extend_from_slice(&x.to_le_bytes());
    v
}
fn tuple(items: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![b')', items.len() as u8];
    items.iter().for_each(|item| v.extend_from_slice(item));
    v
}
fn dict(items: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![b'{'];
    for (k, value) in items {
        v.extend_from_slice(k);
        v.extend_from_slice(value);
    }
    v.push(b'0');
    v
}
fn key(name: &str, line: i32) -> Vec<u8> {
    tuple(&[s("a.py"), i(line), s(name)])
}

/// main (1 s self) calls f twice (f: 2 s self, 3 s with g), f calls g once (1 s).
fn small() -> Vec<u8> {
    let stats = |cc: i32, tt: f64, ct: f64, callers: Vec<u8>| tuple(&[i(cc), i(cc), g(tt), g(ct), callers]);
    let edge = |nc: i32, tt: f64, ct: f64| tuple(&[i(nc), i(nc), g(tt), g(ct)]);
    dict(&[
        (key("main", 1), stats(1, 1.0, 5.0, dict(&[]))),
        (key("f", 5), stats(2, 2.0, 3.0, dict(&[(key("main", 1), edge(2, 2.0, 3.0))]))),
        (key("g", 9), stats(1, 1.0, 1.0, dict(&[(key("f", 5), edge(1, 1.0, 1.0))]))),
    ])
}

#[test]
fn small_stats_become_stacks() {
    let bytes = small();
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::Pstats));
    let p = parse(&bytes).unwrap();
    let stacks: BTreeMap<Vec<String>, Vec<i64>> = p
        .samples
        .iter()
        .map(|s| {
            (
                s.locations.iter().map(|&l| label(&p, p.function(p.location(l).lines[0].function))).collect(),
                s.values.to_vec(),
            )
        })
        .collect();
    let expected: BTreeMap<Vec<String>, Vec<i64>> = [
        (vec!["a.py:1(main)"], vec![1_000_000_000, 1]),
        (vec!["a.py:5(f)", "a.py:1(main)"], vec![2_000_000_000, 2]),
        (vec!["a.py:9(g)", "a.py:5(f)", "a.py:1(main)"], vec![1_000_000_000, 1]),
    ]
    .into_iter()
    .map(|(k, v)| (k.into_iter().map(String::from).collect(), v))
    .collect();
    assert_eq!(stacks, expected);
}

#[test]
fn malformed_marshal_gets_byte_offsets() {
    let bytes = small();
    // Truncated inside the first key's file name (`{` `)` 3 `z` 4 "a.p").
    assert_eq!(err(&bytes[..7]), binary(5, "truncated: string needs 4 bytes, 2 left"));
    // Truncated before the dict's end marker.
    assert_eq!(err(&bytes[..bytes.len() - 1]), binary(bytes.len() - 1, "truncated: type code needs 1 bytes, 0 left"));
    // An unknown type code where the first int should be.
    let mut unknown = bytes.clone();
    let at = 3 + s("a.py").len();
    unknown[at] = b'?';
    assert_eq!(err(&unknown), binary(at, "unknown marshal type code 0x3f"));
    // A reference to nothing.
    let mut dangling = bytes.clone();
    dangling.splice(at..at + 5, [b'r', 9, 0, 0, 0]);
    assert_eq!(err(&dangling), binary(at, "reference 9 to an object not read yet"));
    // A string length beyond the data.
    assert_eq!(err(b"{)\x03a\xff\xff\xff\x7f"), binary(4, "truncated: string of length 2147483647, 0 bytes left"));
    // Trailing bytes, and a dict that is not stats.
    let mut trailing = bytes.clone();
    trailing.push(b'N');
    assert_eq!(err(&trailing), binary(bytes.len(), "1 bytes after the stats dict"));
    assert_eq!(err(&dict(&[(key("f", 1), i(3))])), binary(0, "stats of (\"a.py\", 1, \"f\") are not a tuple"));
    // Nesting is bounded.
    let mut deep = vec![b'{'];
    deep.extend(std::iter::repeat_n([b')', 1], 100).flatten());
    assert_eq!(err(&deep), binary(65, "objects nested deeper than 32"));
}

#[test]
fn truncated_fixture_is_an_error_at_the_end() {
    let Some((_, bytes, _)) = fixture() else { return };
    // The offset is where the missing data should start.
    assert_eq!(err(&bytes[..3]), binary(3, "truncated: type code needs 1 bytes, 0 left"));
    assert_eq!(err(&bytes[..100]), binary(98, "truncated: int needs 4 bytes, 2 left"));
    assert_eq!(bytes.len(), 29_534);
    assert_eq!(err(&bytes[..14_767]), binary(14_767, "truncated: reference needs 4 bytes, 0 left"));
    assert_eq!(err(&bytes[..29_533]), binary(29_533, "truncated: type code needs 1 bytes, 0 left"));
}
