//! Our `top` against `go tool pprof -top` output for every fixture that has one:
//! the same rows in the same order, the same flat and cum after pprof's display
//! rounding, the same total, the same dropped-node count and inline markers.

mod common;

use std::path::{Path, PathBuf};

use stacklens_core::analysis::diff::diff_top;
use stacklens_core::analysis::top::{top, Inlining, TopOptions};
use stacklens_core::analysis::Granularity;
use stacklens_core::units::{format_value_in, report_unit};

/// What a `*.pprof-top.txt` file says.
#[derive(Debug)]
struct Expected {
    sample_type: String,
    total: String,
    dropped: Option<usize>,
    shown_of: Option<usize>,
    rows: Vec<ExpectedRow>,
}

#[derive(Debug)]
struct ExpectedRow {
    flat: String,
    cum: String,
    name: String,
    inline: Option<Inlining>,
}

fn parse_expected(text: &str) -> Expected {
    let mut e =
        Expected { sample_type: String::new(), total: String::new(), dropped: None, shown_of: None, rows: vec![] };
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
            e.rows.push(ExpectedRow { flat: tokens[0].into(), cum: tokens[3].into(), name, inline });
        } else if let Some(t) = line.strip_prefix("Type: ") {
            e.sample_type = t.trim().into();
        } else if line.starts_with("Showing nodes accounting for") {
            // "... , 77.12% of 7.08s total"
            let of = line.rsplit_once(" of ").expect("total").1;
            e.total = of.trim_end_matches(" total").trim().into();
        } else if let Some(rest) = line.strip_prefix("Dropped ") {
            e.dropped = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if let Some(rest) = line.strip_prefix("Showing top ") {
            e.shown_of = rest.rsplit(' ').next().and_then(|n| n.parse().ok());
        } else if line.trim_start().starts_with("flat  flat%") {
            in_table = true;
        }
    }
    e
}

/// One ground-truth case derived from a file name.
struct Case {
    expected: PathBuf,
    profile: PathBuf,
    base: Option<PathBuf>,
    sample_index: String,
    granularity: Granularity,
    cum: bool,
    node_count: usize,
}

fn case_for(expected: &Path) -> Option<Case> {
    let dir = expected.parent()?;
    let file = expected.file_name()?.to_str()?;
    let stem = file.strip_suffix(".pprof-top.txt")?;
    let mut case = Case {
        expected: expected.to_owned(),
        profile: PathBuf::new(),
        base: None,
        sample_index: String::new(),
        granularity: Granularity::Functions,
        cum: false,
        node_count: 20,
    };
    let (mut name, diff) = match stem.strip_suffix(".diff-vs-base") {
        Some(s) => (s.to_owned(), true),
        None => (stem.to_owned(), false),
    };
    if let Some(s) = name.strip_suffix(".cum") {
        name = s.to_owned();
        case.cum = true;
        case.node_count = 30;
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
    case.sample_index = index;
    let profile =
        if dir.join(&file_part).is_file() { dir.join(&file_part) } else { dir.join(format!("{file_part}.pb.gz")) };
    if !profile.is_file() {
        panic!("no profile found for ground truth {}", expected.display());
    }
    if file_part.ends_with(".debug1.txt") {
        // The ground truth for legacy texts was made with -addresses.
        case.granularity = Granularity::Addresses;
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

/// Rows as (name, flat, cum, inline) plus the total, from our engine.
struct Actual {
    sample_type: String,
    unit: String,
    total: i64,
    dropped: usize,
    shown_of: usize,
    rows: Vec<(String, i64, i64, Option<Inlining>)>,
}

fn run_case(case: &Case) -> Actual {
    let compare = stacklens_core::parse(&common::read(&case.profile))
        .unwrap_or_else(|e| panic!("{}: {e}", case.profile.display()));
    let options = TopOptions {
        sample_index: case.sample_index.clone(),
        granularity: case.granularity,
        cum: case.cum,
        node_count: Some(case.node_count),
        node_fraction: 0.005,
        ..TopOptions::default()
    };
    let r = match &case.base {
        None => top(&compare, &options).unwrap(),
        Some(base_path) => {
            let base = stacklens_core::parse(&common::read(base_path)).unwrap();
            diff_top(&base, &compare, &options).unwrap()
        }
    };
    Actual {
        sample_type: r.sample_type,
        unit: r.unit,
        total: r.total,
        dropped: r.dropped_nodes,
        shown_of: r.node_total - r.dropped_nodes,
        rows: r.functions.into_iter().map(|f| (f.name, f.flat, f.cum, f.inline)).collect(),
    }
}

fn check(case: &Case) -> Result<(), String> {
    let expected = parse_expected(&std::fs::read_to_string(&case.expected).unwrap());
    let actual = run_case(case);
    let unit = report_unit(actual.rows.iter().map(|r| (r.1, r.2)), actual.total, &actual.unit);
    let fmt = |v: i64| format_value_in(v, &actual.unit, &unit);
    let mut problems = Vec::new();
    if expected.sample_type != actual.sample_type {
        problems.push(format!("type {} != {}", actual.sample_type, expected.sample_type));
    }
    if fmt(actual.total) != expected.total {
        problems.push(format!("total {} != {}", fmt(actual.total), expected.total));
    }
    if let Some(d) = expected.dropped {
        if d != actual.dropped {
            problems.push(format!("dropped {} != {d}", actual.dropped));
        }
    }
    if let Some(n) = expected.shown_of {
        if n != actual.shown_of {
            problems.push(format!("nodes {} != {n}", actual.shown_of));
        }
    }
    if expected.rows.len() != actual.rows.len() {
        problems.push(format!("{} rows != {}", actual.rows.len(), expected.rows.len()));
    }
    for (i, (e, a)) in expected.rows.iter().zip(&actual.rows).enumerate() {
        // With -addresses pprof knows no names for legacy texts; compare the address.
        let name_ok =
            if case.granularity == Granularity::Addresses { a.0.get(..16) == e.name.get(..16) } else { a.0 == e.name };
        let diff_case = case.base.is_some();
        if !name_ok || fmt(a.1) != e.flat || fmt(a.2) != e.cum || (!diff_case && a.3 != e.inline) {
            problems.push(format!(
                "row {i}: ours {} {} {} {:?}; pprof {} {} {} {:?}",
                fmt(a.1),
                fmt(a.2),
                a.0,
                a.3,
                e.flat,
                e.cum,
                e.name,
                e.inline
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("{}:\n  {}", case.expected.display(), problems.join("\n  ")))
    }
}

#[test]
fn top_equals_go_tool_pprof_on_every_ground_truth() {
    let Some(root) = common::fixtures() else { return };
    let files = ground_truth_files(&root);
    assert!(files.len() >= 40, "expected the 40+ ground-truth files, found {}", files.len());
    let mut failures = Vec::new();
    let mut checked = 0;
    for f in &files {
        let Some(case) = case_for(f) else { continue };
        checked += 1;
        if let Err(e) = check(&case) {
            failures.push(e);
        }
    }
    assert!(checked >= 40, "only {checked} cases derived");
    assert!(failures.is_empty(), "{} of {checked} differ from pprof:\n{}", failures.len(), failures.join("\n"));
}
