//! Writers read back: folded stacks and speedscope JSON written for every importable
//! fixture parse again through our importers with the same total and the same self and
//! total per function as the original (pprof output is checked against `go tool pprof`
//! in `pprof_top.rs`); names a format cannot carry are made safe; merging refuses
//! profiles of other types.

mod common;

use std::collections::BTreeMap;

use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Prepared;
use stacklens_core::export::{export, ExportFormat};
use stacklens_core::{parse, Error, Profile};

/// The values of names that several functions come back as.
const ALIKE: (i64, i64) = (i64::MIN, i64::MIN);

/// Function name → (flat, cum) of the default sample type, as `top` reports them; with
/// `in_nanoseconds`, times in nanoseconds (speedscope's importer converts a file's time
/// unit; folded stacks carry no unit at all).
fn by_function(profile: &Profile, in_nanoseconds: bool) -> (i64, BTreeMap<String, (i64, i64)>) {
    let report = top(&Prepared::whole(profile).unwrap(), &TopOptions::default()).unwrap();
    let scale = match report.unit.as_str() {
        _ if !in_nanoseconds => 1,
        "microseconds" => 1_000,
        "milliseconds" => 1_000_000,
        "seconds" => 1_000_000_000,
        _ => 1,
    };
    // Names that come back alike (`get` and `get (a.js:2:3)`) are one function there:
    // they are marked, and not compared.
    let mut functions = BTreeMap::new();
    for f in report.functions {
        let name = folded_name(&f.name);
        if functions.insert(name.clone(), (f.flat * scale, f.cum * scale)).is_some() {
            functions.insert(name, ALIKE);
        }
    }
    (report.total * scale, functions)
}

/// A function name as it comes back from a folded line: `;` cannot be in a frame, and
/// a trailing ` (file:line)` is read as the frame's place (py-spy's frames).
fn folded_name(name: &str) -> String {
    let name = name.replace(';', ":");
    match name.strip_suffix(')').and_then(|n| n.rsplit_once(" (")) {
        Some((function, place))
            if place.rsplit_once(':').is_some_and(|(_, line)| line.bytes().all(|b| b.is_ascii_digit())) =>
        {
            function.to_owned()
        }
        _ => name,
    }
}

#[test]
fn folded_and_speedscope_output_read_back_with_the_same_numbers() {
    let Some(root) = common::fixtures() else { return };
    let files = common::importable_fixtures(&root);
    assert!(files.len() >= 60, "importable fixtures: {}", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let profile = parse(&common::read(file)).unwrap();
        if profile.samples.is_empty() || profile.samples.iter().any(|s| s.values.iter().any(|v| *v < 0)) {
            continue; // nothing to write, or values a stack format cannot carry
        }
        for format in [ExportFormat::Folded, ExportFormat::Speedscope] {
            let in_nanoseconds = format == ExportFormat::Speedscope;
            let (total, functions) = by_function(&profile, in_nanoseconds);
            let bytes = export(&Prepared::whole(&profile).unwrap(), format).unwrap();
            let back = match parse(&bytes) {
                Ok(back) => back,
                Err(e) => {
                    failures.push(format!("{} as {}: {e}", file.display(), format.name()));
                    continue;
                }
            };
            // Both carry the default sample type only.
            let (back_total, back_functions) = by_function(&back, in_nanoseconds);
            let same = |name: &String| match (functions.get(name), back_functions.get(name)) {
                (Some(&ALIKE), _) => true,
                (ours, theirs) => ours == theirs,
            };
            let names: Vec<&String> = functions.keys().chain(back_functions.keys()).collect();
            if back_total != total || !names.iter().all(|n| same(n)) {
                let differ: Vec<_> = names.into_iter().filter(|n| !same(n)).take(3).collect();
                failures.push(format!(
                    "{} as {}: total {back_total} (was {total}); first functions that differ: {differ:?}",
                    file.display(),
                    format.name()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn folded_output_keeps_names_a_line_cannot_hold_apart() {
    let text = "main;handle<script>alert(1)</script>;a\\;b 5\nmain;x\"y 2\n";
    let profile = parse(text.as_bytes()).unwrap();
    let folded = String::from_utf8(export(&Prepared::whole(&profile).unwrap(), ExportFormat::Folded).unwrap()).unwrap();
    assert_eq!(folded.lines().count(), 2, "{folded}");
    let speedscope = export(&Prepared::whole(&profile).unwrap(), ExportFormat::Speedscope).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&speedscope).unwrap();
    let names: Vec<&str> =
        json["shared"]["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"handle<script>alert(1)</script>"), "{names:?}");
    assert!(names.contains(&"x\"y"), "{names:?}");
}

#[test]
fn the_output_format_follows_the_file_name() {
    for (name, format) in [
        ("out.pb.gz", Some(ExportFormat::Pprof)),
        ("out.pprof", Some(ExportFormat::Pprof)),
        ("OUT.FOLDED", Some(ExportFormat::Folded)),
        ("out.collapsed", Some(ExportFormat::Folded)),
        ("out.speedscope.json", Some(ExportFormat::Speedscope)),
        ("out.svg", Some(ExportFormat::Svg)),
        ("out.HTML", Some(ExportFormat::Html)),
        ("out.json", None),
        ("out", None),
    ] {
        assert_eq!(ExportFormat::from_file_name(name), format, "{name}");
    }
    assert_eq!("speedscope".parse::<ExportFormat>(), Ok(ExportFormat::Speedscope));
    assert!("svgz".parse::<ExportFormat>().unwrap_err().contains("pprof, folded, speedscope, svg, html"));
}

#[test]
fn merging_sums_equal_samples_and_refuses_other_sample_types() {
    let Some(root) = common::fixtures() else { return };
    let cpu = parse(&common::read(&root.join("go/base/cpu.pb.gz"))).unwrap();
    // Samples with equal stacks and labels are one, within a profile too (as pprof).
    let once = Profile::merge([&cpu]).unwrap();
    assert!(once.samples.len() < cpu.samples.len());
    assert_eq!(once.total(1), cpu.total(1));
    let twice = Profile::merge([&cpu, &cpu]).unwrap();
    assert_eq!(twice.samples.len(), once.samples.len(), "equal samples are one");
    assert_eq!(twice.locations.len(), cpu.locations.len());
    assert_eq!(twice.functions.len(), cpu.functions.len());
    assert_eq!(twice.mappings.len(), cpu.mappings.len());
    for i in 0..cpu.sample_types.len() {
        assert_eq!(twice.total(i), 2 * cpu.total(i));
    }
    assert_eq!(twice.duration_nanos, 2 * cpu.duration_nanos);
    assert_eq!(twice.time_nanos, cpu.time_nanos);
    let heap = parse(&common::read(&root.join("go/base/heap.pb.gz"))).unwrap();
    let refused = Profile::merge([&cpu, &heap]).unwrap_err();
    assert!(matches!(&refused, Error::Incompatible(m) if m.contains("samples/count")), "{refused}");
    assert!(matches!(Profile::merge([]), Err(Error::Invalid(_))));
}

#[test]
fn svg_and_html_escape_every_name_and_carry_every_frame() {
    let text = "main;<script>alert(1)</script>;\"quoted\" & 'single' 7\nmain;ok 3\n";
    let profile = parse(text.as_bytes()).unwrap();
    for format in [ExportFormat::Svg, ExportFormat::Html] {
        let out = String::from_utf8(export(&Prepared::whole(&profile).unwrap(), format).unwrap()).unwrap();
        assert!(!out.contains("<script>alert"), "{} has the name as markup:\n{out}", format.name());
        assert!(out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{}", format.name());
        assert!(out.contains("&quot;quoted&quot; &amp; &#39;single&#39;"), "{}", format.name());
        // The document's own scripts only: one for the flame graph (and one for the page's search).
        let scripts = out.matches("<script>").count();
        assert_eq!(scripts, if format == ExportFormat::Html { 2 } else { 1 }, "{}", format.name());
        // all, main, the script-named frame, the quoted one, ok: one <g> each.
        assert_eq!(out.matches("<g class=\"frame\"").count(), 5, "{}", format.name());
        assert!(out.contains("(10, 100.00%)"), "the root's title has the total: {}", format.name());
    }
    let html = String::from_utf8(export(&Prepared::whole(&profile).unwrap(), ExportFormat::Html).unwrap()).unwrap();
    assert!(html.contains("default-src 'none'"), "the page loads nothing");
    assert_eq!(html.matches("<tr data-name=").count(), 4, "main, the two leaves and ok");
}

/// inferno's `flamegraph`, or `None` when it is missing and skipping is allowed.
fn inferno_flamegraph() -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let installed = home.join(".cargo/bin/inferno-flamegraph");
    if installed.is_file() {
        return Some(installed);
    }
    common::missing_prerequisite("inferno-flamegraph (cargo install inferno; scripts/ensure-tools.sh installs it)");
    None
}

#[test]
fn inferno_draws_our_folded_output_with_the_same_total() {
    let Some(root) = common::fixtures() else { return };
    let Some(inferno) = inferno_flamegraph() else { return };
    for file in [
        "go/base/cpu.pb.gz",
        "go/base/heap.pb.gz",
        "thirdparty/flamegraph/perf-java-stacks-01.txt",
        "tools/python-cprofile-A.pstats",
    ] {
        let profile = parse(&common::read(&root.join(file))).unwrap();
        let folded = export(&Prepared::whole(&profile).unwrap(), ExportFormat::Folded).unwrap();
        let mut child = std::process::Command::new(&inferno)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), &folded).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "{file}: inferno warned: {}", String::from_utf8_lossy(&out.stderr));
        // inferno titles its root "all (7,080,000,000 samples, 100%)".
        let svg = String::from_utf8(out.stdout).unwrap();
        let all = svg.split("<title>all (").nth(1).unwrap_or_else(|| panic!("{file}: no root frame in inferno's SVG"));
        let drawn: i64 = all.split(' ').next().unwrap().replace(',', "").parse().unwrap();
        let index = profile.default_sample_index();
        assert_eq!(drawn, profile.total(index), "{file}: inferno's total");
    }
}
