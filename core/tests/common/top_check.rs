//! Our `top` against `go tool pprof -top` output: the same rows in the same order, the
//! same flat and cum after pprof's display rounding, the same total, the same
//! dropped-node count and cutoff, the same node count and inline markers.
#![allow(dead_code)] // each test binary uses its part

use std::path::{Path, PathBuf};

use stacklens_core::analysis::diff::diff_top;
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::{Granularity, Query};
use stacklens_core::units::{format_value_in, report_unit};

use super::read_pprof_top;

/// One comparison: a profile (and a base for `-diff_base`), our query and options, and
/// where pprof's output comes from (a stored file, or the pprof flags run at test time).
pub struct Case {
    pub expected: PathBuf,
    pub profile: PathBuf,
    pub base: Option<PathBuf>,
    pub query: Query,
    pub options: TopOptions,
}

/// pprof's `-top` defaults with `-nodecount=N`.
pub fn pprof_options(node_count: usize) -> TopOptions {
    TopOptions { node_count: Some(node_count), node_fraction: 0.005, ..TopOptions::default() }
}

fn run_case(case: &Case) -> TopReport {
    let compare = stacklens_core::parse(&super::read(&case.profile))
        .unwrap_or_else(|e| panic!("{}: {e}", case.profile.display()));
    match &case.base {
        None => top(&case.query.prepare(&compare).unwrap(), &case.options).unwrap(),
        Some(base_path) => {
            let base = stacklens_core::parse(&super::read(base_path)).unwrap();
            let (base, compare) = case.query.prepare_pair(&base, &compare).unwrap();
            diff_top(&base, &compare, &case.options).unwrap()
        }
    }
}

/// Our top for `case` against pprof's output; `Err` lists every difference.
pub fn check_against(case: &Case, pprof_output: &str) -> Result<(), String> {
    let expected = read_pprof_top(pprof_output);
    let actual = run_case(case);
    let unit = report_unit(actual.functions.iter().map(|r| (r.flat, r.cum)), actual.total, &actual.unit);
    let fmt = |v: i64| format_value_in(v, &actual.unit, &unit);
    let mut problems = Vec::new();
    if expected.sample_type != actual.sample_type {
        problems.push(format!("type {} != {}", actual.sample_type, expected.sample_type));
    }
    if fmt(actual.total) != expected.total {
        problems.push(format!("total {} != {}", fmt(actual.total), expected.total));
    }
    // pprof prints "Dropped N nodes" only when N > 0, and "Showing top K nodes out of N"
    // only when the node count cut rows: without it, every remaining node is a row.
    let dropped = expected.dropped.unwrap_or(0);
    if dropped != actual.dropped_nodes {
        problems.push(format!("dropped {} != {dropped}", actual.dropped_nodes));
    }
    if let Some(cutoff) = &expected.cutoff {
        if &fmt(actual.node_cutoff) != cutoff {
            problems.push(format!("dropped cutoff {} != {cutoff}", fmt(actual.node_cutoff)));
        }
    }
    let shown_of = expected.shown_of.unwrap_or(expected.rows.len());
    if shown_of != actual.node_total - actual.dropped_nodes {
        problems.push(format!("nodes {} != {shown_of}", actual.node_total - actual.dropped_nodes));
    }
    if expected.rows.len() != actual.functions.len() {
        problems.push(format!("{} rows != {}", actual.functions.len(), expected.rows.len()));
    }
    for (i, (e, a)) in expected.rows.iter().zip(&actual.functions).enumerate() {
        // pprof names no frames of legacy texts (it ignores their `#` lines; we read them):
        // there, with -addresses, only the address can be compared.
        let name_ok = match e.name.strip_suffix(" <unknown>") {
            Some(address) if case.query.granularity == Granularity::Addresses => {
                address.len() == 16 && a.name.get(..17) == Some(&format!("{address} "))
            }
            _ => a.name == e.name,
        };
        if !name_ok || fmt(a.flat) != e.flat || fmt(a.cum) != e.cum || a.inline != e.inline {
            problems.push(format!(
                "row {i}: ours {} {} {} {:?}; pprof {} {} {} {:?}",
                fmt(a.flat),
                fmt(a.cum),
                a.name,
                a.inline,
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
        Err(format!("{}:\n  {}\npprof said:\n{pprof_output}", case.expected.display(), problems.join("\n  ")))
    }
}

/// The rows of a `go tool pprof -top` text as "flat cum name", for comparing two outputs.
pub fn rows(text: &str) -> Vec<String> {
    read_pprof_top(text).rows.iter().map(|r| format!("{} {} {}", r.flat, r.cum, r.name)).collect()
}

/// Our query and options for pprof's flags (the subset the cases use), so both get the
/// same ones.
pub fn options_for(root: &Path, flags: &[&str]) -> (Query, TopOptions, Option<PathBuf>) {
    let (mut query, mut options) = (Query::default(), pprof_options(80));
    let mut base = None;
    for flag in flags {
        let flag = flag.trim_start_matches('-');
        let (name, value) = flag.split_once('=').unwrap_or((flag, ""));
        let regex = Some(value.to_owned());
        let keys = || value.split(',').map(str::to_owned).collect();
        let filters = &mut query.filters;
        match name {
            "nodecount" => options.node_count = Some(value.parse().unwrap()),
            "sample_index" => query.sample = value.into(),
            "diff_base" => base = Some(root.join(value)),
            "cum" => options.cum = true,
            "filefunctions" | "lines" | "addresses" | "functions" => query.granularity = name.parse().unwrap(),
            "focus" => filters.focus = regex,
            "ignore" => filters.ignore = regex,
            "hide" => filters.hide = regex,
            "show" => filters.show = regex,
            "tagfocus" => filters.tag_focus = regex,
            "tagignore" => filters.tag_ignore = regex,
            "tagshow" => filters.tag_show = regex,
            "taghide" => filters.tag_hide = regex,
            "tagroot" => filters.tag_root = keys(),
            "tagleaf" => filters.tag_leaf = keys(),
            other => panic!("no option for pprof's -{other}"),
        }
    }
    (query, options, base)
}

/// Each (profile, pprof flags besides `-nodecount=80`) checked against pprof run now with
/// the same flags, and pprof's answer checked to differ from the one without the
/// filter/granularity flags (or the case proves nothing). Returns the failures.
pub fn check_against_pprof_run_now(root: &Path, go: &Path, cases: &[(&str, &[&str])]) -> Vec<String> {
    let mut failures = Vec::new();
    for (file, extra) in cases {
        let flags: Vec<&str> = ["-nodecount=80"].iter().chain(extra.iter()).copied().collect();
        let plain: Vec<&str> = flags
            .iter()
            .filter(|f| ["-nodecount", "-sample_index", "-diff_base"].iter().any(|k| f.starts_with(k)))
            .copied()
            .collect();
        let profile = root.join(file);
        let reference = super::pprof_top(go, root, &profile, &flags);
        assert_ne!(
            rows(&reference),
            rows(&super::pprof_top(go, root, &profile, &plain)),
            "{file} {extra:?} changes nothing"
        );
        let (query, options, base) = options_for(root, &flags);
        let expected = PathBuf::from(format!("{file} {}", flags.join(" ")));
        let case = Case { expected, profile, base, query, options };
        if let Err(e) = check_against(&case, &reference) {
            failures.push(e);
        }
    }
    failures
}
