//! `sanitize`: what it removes is gone from the written bytes, pprof reads the result,
//! and every total and stack is unchanged.

mod common;

use stacklens_core::analysis::sanitize::{inventory, Labels, Paths, SanitizeOptions};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Query;
use stacklens_core::export::pprof::encode;
use stacklens_core::model::LabelValue;
use stacklens_core::Profile;

fn cpu() -> Option<Profile> {
    let fx = common::fixtures()?;
    Some(stacklens_core::parse(&common::read(&fx.join("go/base/cpu.pb.gz"))).expect("parses"))
}

fn everything() -> SanitizeOptions {
    SanitizeOptions {
        paths: Paths::Remove,
        build_ids: true,
        comments: true,
        labels: Labels::All,
        redact: Some(r"^main\.".into()),
    }
}

fn totals(p: &Profile) -> Vec<i64> {
    (0..p.sample_types.len()).map(|i| p.total(i)).collect()
}

/// Flat values by function name, for the first `n` rows of top on sample type 1.
fn top_rows(p: &Profile) -> Vec<(String, i64, i64)> {
    let prepared = Query { sample: "1".into(), ..Query::default() }.prepare(p).unwrap();
    let report = top(&prepared, &TopOptions::default()).expect("top");
    report.functions.iter().map(|r| (r.name.clone(), r.flat, r.cum)).collect()
}

#[test]
fn what_is_removed_is_not_in_the_bytes_and_totals_are_unchanged() {
    let Some(p) = cpu() else { return };
    // The fixture has all of it, so the test cannot pass on an empty profile.
    let before = encode(&p);
    let paths: Vec<&str> = p.functions.iter().map(|f| p.str(f.filename)).filter(|f| f.contains('/')).collect();
    assert!(!paths.is_empty());
    let build_ids: Vec<&str> = p.mappings.iter().map(|m| p.str(m.build_id)).filter(|b| !b.is_empty()).collect();
    assert!(!build_ids.is_empty());
    assert!(p.samples.iter().any(|s| !s.labels.is_empty()));
    let tenant = "tenant";
    assert!(before.windows(tenant.len()).any(|w| w == tenant.as_bytes()));

    let clean = p.sanitize(&everything()).expect("sanitizes");
    let bytes = encode(&clean);
    let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    for gone in paths.iter().chain(&build_ids).chain([&tenant, &"main.main"]) {
        assert!(!contains(gone), "{gone} is still in the sanitized bytes");
    }
    let again = stacklens_core::parse(&bytes).expect("the sanitized bytes parse");
    assert_eq!(totals(&again), totals(&p));
    assert_eq!(again.samples.len(), p.samples.len());
    assert!(again.samples.iter().all(|s| s.labels.is_empty()));
    assert!(again.mappings.iter().all(|m| again.str(m.build_id).is_empty() && again.str(m.filename).is_empty()));

    // Redacted names keep their rows: the same values under a stable hashed name (rows
    // with equal values may swap places, as ties are ordered by name).
    let (ours, theirs) = (top_rows(&p), top_rows(&again));
    let values = |rows: &[(String, i64, i64)]| {
        let mut v: Vec<(i64, i64)> = rows.iter().map(|r| (r.1, r.2)).collect();
        v.sort();
        v
    };
    assert_eq!(values(&ours), values(&theirs));
    let kept = |rows: &[(String, i64, i64)], prefix: &str| {
        let mut names: Vec<String> = rows.iter().map(|r| r.0.clone()).filter(|n| !n.starts_with(prefix)).collect();
        names.sort();
        names
    };
    assert_eq!(kept(&ours, "main."), kept(&theirs, "redacted-"), "only main.* names change");
    let redacted = theirs.iter().filter(|r| r.0.starts_with("redacted-")).count();
    assert_eq!(redacted, ours.iter().filter(|r| r.0.starts_with("main.")).count());
    assert!(redacted > 0);
    let twice = p.sanitize(&everything()).expect("sanitizes");
    assert_eq!(encode(&twice), bytes, "the same options give the same bytes");
}

#[test]
fn base_names_and_chosen_label_keys() {
    let Some(p) = cpu() else { return };
    let options = SanitizeOptions {
        paths: Paths::BaseNames,
        labels: Labels::Keys(vec!["tenant".into()]),
        ..SanitizeOptions::default()
    };
    let clean = p.sanitize(&options).expect("sanitizes");
    for (f, g) in p.functions.iter().zip(&clean.functions) {
        let file = p.str(f.filename);
        assert_eq!(clean.str(g.filename), file.rsplit('/').next().unwrap());
        assert_eq!(clean.str(g.name), p.str(f.name), "names are kept");
    }
    let keys = |q: &Profile| {
        let mut k: Vec<String> =
            q.samples.iter().flat_map(|s| s.labels.iter().map(|l| q.str(l.key).to_owned())).collect();
        k.sort();
        k.dedup();
        k
    };
    assert_eq!(keys(&p), ["endpoint", "tenant"]);
    assert_eq!(keys(&clean), ["endpoint"]);
    assert_eq!(top_rows(&clean), top_rows(&p));
}

/// Each sample's locations, values and labels as text: what a string table renumbering
/// must not change.
fn sample_texts(p: &Profile) -> Vec<(Vec<u32>, Vec<i64>, Vec<String>)> {
    let label = |l: &stacklens_core::model::Label| match l.value {
        LabelValue::Str(v) => format!("{}={}", p.str(l.key), p.str(v)),
        LabelValue::Num { value, unit } => format!("{}={value}{}", p.str(l.key), p.str(unit)),
    };
    p.samples
        .iter()
        .map(|s| (s.locations.iter().map(|l| l.0).collect(), s.values.to_vec(), s.labels.iter().map(label).collect()))
        .collect()
}

#[test]
fn nothing_chosen_changes_nothing() {
    let Some(p) = cpu() else { return };
    let clean = p.sanitize(&SanitizeOptions::default()).expect("sanitizes");
    assert_eq!(top_rows(&clean), top_rows(&p));
    let again = stacklens_core::parse(&encode(&clean)).expect("parses");
    assert_eq!(sample_texts(&again), sample_texts(&p));
    assert_eq!(again.mappings.len(), p.mappings.len());
    for (m, n) in p.mappings.iter().zip(&again.mappings) {
        assert_eq!((again.str(n.filename), again.str(n.build_id)), (p.str(m.filename), p.str(m.build_id)));
    }
}

#[test]
fn a_bad_pattern_is_an_error() {
    let p = Profile::new(stacklens_core::model::SourceFormat::Built);
    let options = SanitizeOptions { redact: Some("(".into()), ..SanitizeOptions::default() };
    let e = p.sanitize(&options).expect_err("an unclosed group");
    assert!(e.to_string().contains("redact"), "{e}");
}

/// go tool pprof -raw on the sanitized file: no path, build id or label left, and the
/// same totals as on the original.
#[test]
fn pprof_reads_the_sanitized_file_with_the_same_totals() {
    let (Some(fx), Some(go)) = (common::fixtures(), common::go()) else { return };
    let Some(p) = cpu() else { return };
    let dir = std::env::temp_dir().join(format!("stacklens-sanitize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("clean.pb");
    std::fs::write(&file, encode(&p.sanitize(&everything()).expect("sanitizes"))).unwrap();
    let raw = common::pprof(go, &dir, &[&file], &["-raw"]);
    let original = common::pprof(go, &fx, &[&fx.join("go/base/cpu.pb.gz")], &["-raw"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(original.contains(".go:"), "pprof prints source files as file:line");
    assert!(!raw.contains(".go:"), "a source file is left:\n{raw}");
    for path in p.functions.iter().map(|f| p.str(f.filename)).chain(p.mappings.iter().map(|m| p.str(m.filename))) {
        assert!(path.is_empty() || !raw.contains(path), "{path} is left");
    }
    assert!(!raw.contains("tenant") && !raw.contains("endpoint"), "a label is left");
    for m in &p.mappings {
        let id = p.str(m.build_id);
        assert!(id.is_empty() || !raw.contains(id), "build id {id} is left");
    }
    // -raw's sample lines: "  VALUES: LOCATIONS"; their sums per sample type.
    let sums = |text: &str| {
        let samples = text.split("Samples:").nth(1).unwrap().split("Locations").next().unwrap();
        let mut sums = vec![0i64; 2];
        for line in samples.lines().skip(2) {
            let Some((values, _)) = line.split_once(':') else { continue };
            for (s, v) in sums.iter_mut().zip(values.split_whitespace()) {
                *s += v.parse::<i64>().unwrap_or(0);
            }
        }
        sums
    };
    assert_eq!(sums(&raw), sums(&original));
    assert_eq!(sums(&raw), totals(&p));
}

#[test]
fn the_strip_list() {
    let o = SanitizeOptions::strip("basenames, buildids,comments,labels=tenant,user_id").expect("valid");
    assert_eq!(
        o,
        SanitizeOptions {
            paths: Paths::BaseNames,
            build_ids: true,
            comments: true,
            labels: Labels::Keys(vec!["tenant".into(), "user_id".into()]),
            redact: None,
        }
    );
    assert_eq!(SanitizeOptions::strip("labels=a,labels").expect("valid").labels, Labels::All);
    assert_eq!(SanitizeOptions::strip("paths").expect("valid").paths, Paths::Remove);
    assert!(!SanitizeOptions::strip("").expect("valid").removes_anything());
    let e = SanitizeOptions::strip("paths,secrets").expect_err("unknown word");
    assert!(e.contains("'secrets'") && e.contains("buildids"), "{e}");
}

#[test]
fn the_inventory_says_what_sanitize_removes() {
    let Some(p) = cpu() else { return };
    let found = inventory(&p);
    assert_eq!(found.label_keys, ["endpoint", "tenant"]);
    assert!(found.paths > 0 && found.build_ids > 0, "{found:?}");
    assert_eq!(found.functions, p.functions.len());
    // Each root is a path's first three components, and they count every path at most once.
    assert!(found.path_roots.iter().all(|(root, n)| *n > 0 && root.matches('/').count() <= 4), "{found:?}");
    assert!(found.path_roots.iter().any(|(root, _)| root == "/usr/lib/go-1.19/"), "{found:?}");
    assert!(found.path_roots.iter().map(|r| r.1).sum::<usize>() <= found.paths);
    assert!(found.path_roots.windows(2).all(|w| w[0].1 >= w[1].1), "most first");
    let clean = inventory(&p.sanitize(&everything()).expect("sanitizes"));
    assert_eq!((clean.paths, clean.build_ids, clean.comments), (0, 0, 0));
    assert!(clean.label_keys.is_empty() && clean.path_roots.is_empty());
    let base = inventory(&p.sanitize(&SanitizeOptions { paths: Paths::BaseNames, ..Default::default() }).unwrap());
    assert!(base.paths > 0 && base.path_roots.iter().all(|(root, _)| !root.contains('/')), "{base:?}");
}
