//! Locating the shared fixture corpus (`../shared/fixtures` beside the repository), and
//! what a test does when a prerequisite (fixtures, a tool, a server) is missing.

use std::io::Write;
use std::path::PathBuf;

pub mod hostile;
pub mod symbol_tools;
pub mod top_check;

/// The fixtures folder, or `None` when it is absent and skipping is allowed (see
/// [`missing_prerequisite`]); otherwise a missing folder fails the test.
pub fn fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("STACKLENS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    if dir.join("SOURCES.md").is_file() {
        return Some(dir);
    }
    missing_prerequisite(&format!("fixtures folder {} not found; set STACKLENS_FIXTURES", dir.display()));
    None
}

/// The programs, debug files and recordings `tests/programs/make.sh` makes on this
/// machine (`scripts/test.sh` runs it first), or `None` when they are absent and
/// skipping is allowed.
#[allow(dead_code)] // only the symbolization and perf.data tests
pub fn symbol_fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("STACKLENS_SYMBOL_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fixtures/symbols"));
    if dir.join(".made").is_file() {
        return Some(dir);
    }
    missing_prerequisite(&format!("{} (made by `bash tests/programs/make.sh`)", dir.display()));
    None
}

/// A test that cannot run without `what` fails, unless skipping was opted into with
/// `STACKLENS_ALLOW_SKIP=1` outside CI. A skip is printed and appended to the file named by
/// `STACKLENS_SKIP_LOG`, so that `scripts/test.sh` counts it as skipped, not passed.
pub fn missing_prerequisite(what: &str) {
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let allowed = std::env::var("STACKLENS_ALLOW_SKIP").is_ok_and(|v| v == "1");
    if in_ci || !allowed {
        let why = if in_ci { "CI=true requires it" } else { "set STACKLENS_ALLOW_SKIP=1 to skip instead" };
        panic!("missing prerequisite: {what} ({why})");
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIPPED: {test}: {what}");
    if let Some(log) = std::env::var_os("STACKLENS_SKIP_LOG") {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("opening the skip log");
        writeln!(file, "{test}: {what}").expect("writing the skip log");
    }
}

#[allow(dead_code)] // not every test binary reads files
pub fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Go's binary for `go tool pprof` reference outputs, or `None` when it is missing and
/// skipping is allowed (see [`missing_prerequisite`]).
#[allow(dead_code)] // only the tests that compare with pprof at test time
pub fn go() -> Option<&'static std::path::Path> {
    let go = std::path::Path::new("/usr/bin/go");
    if go.is_file() {
        return Some(go);
    }
    missing_prerequisite("Go at /usr/bin/go (go tool pprof makes the reference outputs)");
    None
}

/// `go tool pprof -symbolize=none -top FLAGS FILE`, run in `dir` (flags such as
/// `-diff_base=` name files relative to it), as the fixtures' `gen/groundtruth.sh` made the
/// stored `*.pprof-top.txt` files.
#[allow(dead_code)] // only the tests that compare with pprof at test time
pub fn pprof_top(go: &std::path::Path, dir: &std::path::Path, file: &std::path::Path, flags: &[&str]) -> String {
    pprof_top_merged(go, dir, &[file], flags)
}

/// [`pprof_top`] of several files, which pprof merges.
#[allow(dead_code)] // only the tests that compare with pprof at test time
pub fn pprof_top_merged(
    go: &std::path::Path,
    dir: &std::path::Path,
    files: &[&std::path::Path],
    flags: &[&str],
) -> String {
    pprof(go, dir, files, &[&["-top"], flags].concat())
}

/// `go tool pprof -symbolize=none FLAGS FILES` run in `dir`: its standard output, which
/// must be a success.
#[allow(dead_code)] // only the tests that compare with pprof at test time
pub fn pprof(go: &std::path::Path, dir: &std::path::Path, files: &[&std::path::Path], flags: &[&str]) -> String {
    let tmp = std::env::temp_dir().join(format!("stacklens-pprof-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let out = std::process::Command::new(go)
        .args(["tool", "pprof", "-symbolize=none"])
        .args(flags)
        .args(files)
        .current_dir(dir)
        .env("PPROF_BINARY_PATH", "/nonexistent")
        .env("PPROF_TMPDIR", &tmp)
        .output()
        .expect("running go tool pprof");
    assert!(out.status.success(), "go tool pprof {flags:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What a `go tool pprof -top` output says (a stored `*.pprof-top.txt` or one made at
/// test time): the one reader of that text for every test that compares with pprof.
#[allow(dead_code)] // only the tests that compare with pprof
#[derive(Debug)]
pub struct PprofTop {
    pub sample_type: String,
    /// Z of "Showing nodes accounting for X, Y% of Z total", as printed.
    pub total: String,
    pub dropped: Option<usize>,
    /// X of "Dropped N nodes (cum <= X)".
    pub cutoff: Option<String>,
    /// M of "Showing top N nodes out of M".
    pub shown_of: Option<usize>,
    pub rows: Vec<PprofTopRow>,
}

/// One row, values as printed (`0.65s`, `-318.70ms`, `5.03MB`).
#[allow(dead_code)]
#[derive(Debug)]
pub struct PprofTopRow {
    pub flat: String,
    /// Without the `%`.
    pub flat_pct: f64,
    pub cum: String,
    /// Without the `%`.
    pub cum_pct: f64,
    pub name: String,
    pub inline: Option<stacklens_core::analysis::top::Inlining>,
}

#[allow(dead_code)]
pub fn read_pprof_top(text: &str) -> PprofTop {
    use stacklens_core::analysis::top::Inlining;
    let mut top = PprofTop {
        sample_type: String::new(),
        total: String::new(),
        dropped: None,
        cutoff: None,
        shown_of: None,
        rows: vec![],
    };
    let mut in_table = false;
    for line in text.lines() {
        if in_table {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            assert!(tokens.len() >= 6, "bad row: {line}");
            let mut name = tokens[5..].join(" ");
            let mut inline = None;
            for (suffix, kind) in [(" (partial-inline)", Inlining::PartialInline), (" (inline)", Inlining::Inline)] {
                if let Some(stripped) = name.strip_suffix(suffix) {
                    name = stripped.to_owned();
                    inline = Some(kind);
                }
            }
            let pct = |token: &str| -> f64 {
                token.trim_end_matches('%').parse().unwrap_or_else(|e| panic!("bad percentage in {line}: {e}"))
            };
            let (flat_pct, cum_pct) = (pct(tokens[1]), pct(tokens[4]));
            top.rows.push(PprofTopRow {
                flat: tokens[0].into(),
                flat_pct,
                cum: tokens[3].into(),
                cum_pct,
                name,
                inline,
            });
        } else if let Some(t) = line.strip_prefix("Type: ") {
            top.sample_type = t.trim().into();
        } else if line.starts_with("Showing nodes accounting for") {
            // "... , 77.12% of 7.08s total"
            let of = line.rsplit_once(" of ").expect("total").1;
            top.total = of.trim_end_matches(" total").trim().into();
        } else if let Some(rest) = line.strip_prefix("Dropped ") {
            top.dropped = rest.split_whitespace().next().and_then(|n| n.parse().ok());
            top.cutoff = rest.split_once("(cum <= ").map(|(_, c)| c.trim_end_matches(')').to_owned());
        } else if let Some(rest) = line.strip_prefix("Showing top ") {
            top.shown_of = rest.rsplit(' ').next().and_then(|n| n.parse().ok());
        } else if line.trim_start().starts_with("flat  flat%") {
            in_table = true;
        }
    }
    assert!(!top.sample_type.is_empty() && !top.total.is_empty(), "no Type or total line in:\n{text}");
    assert_eq!(top.dropped.is_some(), top.cutoff.is_some(), "unreadable Dropped line in:\n{text}");
    top
}

/// Every file under the fixtures that stacklens imports (reference outputs left out).
#[allow(dead_code)] // only the tests that walk every fixture
pub fn importable_fixtures(root: &std::path::Path) -> Vec<PathBuf> {
    fixture_files(root).into_iter().filter(|p| stacklens_core::parse(&read(p)).is_ok()).collect()
}

/// Every input file under the fixtures, sorted: profiles, dumps and the files pprof
/// rejects (reference outputs, notes, generators and `large/` left out).
#[allow(dead_code)] // only the tests that walk every fixture
pub fn fixture_files(root: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "gen" && name != "large" {
                    dirs.push(p);
                }
            } else if !name.ends_with(".pprof-top.txt") && !name.ends_with(".pprof-error.txt") && !name.ends_with(".md")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Self value per function name as `top` reports it for one sample type, zeros left out.
#[allow(dead_code)] // only the importer tests that compare self values
pub fn flat_by_name(p: &stacklens_core::Profile, sample_index: usize) -> std::collections::BTreeMap<String, i64> {
    use stacklens_core::analysis::top::{top, TopOptions};
    use stacklens_core::analysis::Query;
    let prepared = Query { sample: sample_index.into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).unwrap();
    report.functions.iter().filter(|f| f.flat != 0).map(|f| (f.name.clone(), f.flat)).collect()
}

/// A JSON fixture's bytes and document, after checking that `detect` sees JSON; `None`
/// when the fixtures are absent and skipping is allowed.
#[allow(dead_code)] // only the tests of JSON importers
pub fn json_fixture(name: &str) -> Option<(Vec<u8>, serde_json::Value)> {
    let bytes = read(&fixtures()?.join(name));
    assert_eq!(stacklens_core::import::detect(&bytes), stacklens_core::import::Format::Json, "{name}");
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some((bytes, json))
}

/// Checks that each text fails to parse with `format`'s typed error at the given line,
/// with a reason containing the given words.
#[allow(dead_code)] // only the tests of text importers
pub fn assert_text_errors(format: &str, cases: &[(String, usize, &str)]) {
    for (text, line, expected) in cases {
        match stacklens_core::parse(text.as_bytes()) {
            Err(stacklens_core::Error::Text { format: f, line: l, reason }) if f == format => {
                assert_eq!(l, *line, "{text:?}: {reason}");
                assert!(reason.contains(expected), "{text:?}: {reason}");
            }
            other => panic!("{text:?}: expected a {format} error, got {other:?}"),
        }
    }
}

/// The `perf script` fixtures.
#[allow(dead_code)] // only the tests that read perf script
pub const PERF_SCRIPT_FIXTURES: &[&str] = &[
    "thirdparty/flamegraph/example-perf-stacks.txt.gz",
    "thirdparty/flamegraph/perf-cycles-instructions-01.txt",
    "thirdparty/flamegraph/perf-java-stacks-01.txt",
    "thirdparty/inferno/perf-go-stacks.txt",
    "thirdparty/speedscope/simple-with-header.linux-perf.txt",
    "thirdparty/speedscope/rust-mangled.linux-perf.txt",
    "thirdparty/firefox-profiler/graphviz.perf.gz",
];

/// The bytes, gunzipped when they are gzip.
#[allow(dead_code)] // only the tests that read fixtures themselves
pub fn inflated(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return bytes.to_vec();
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

/// A Chrome trace's `Profile` and `ProfileChunk` events, in `ts` order.
#[allow(dead_code)] // only the tests of Chrome traces
pub fn cpu_profile_events(json: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut events: Vec<&serde_json::Value> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| matches!(e["name"].as_str(), Some("Profile" | "ProfileChunk")))
        .collect();
    events.sort_by(|a, b| a["ts"].as_f64().unwrap().total_cmp(&b["ts"].as_f64().unwrap()));
    events
}
