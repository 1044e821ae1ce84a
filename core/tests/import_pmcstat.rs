//! FreeBSD pmcstat callgraph text: the fixture's total and each function's self samples
//! equal its unindented lines (read here with a plain line scan), whose percentages
//! agree with the header's run total; malformed texts get typed errors with line
//! numbers.

mod common;

use std::collections::BTreeMap;

use common::{assert_text_errors, fixtures, flat_by_name, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::parse;

const FIXTURE: &str = "thirdparty/speedscope/pmcstat-simple.txt";

#[test]
fn fixture_matches_its_sampled_functions() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(FIXTURE));
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::Pmcstat));
    let text = String::from_utf8(bytes.clone()).unwrap();
    // The header: `@ inst_retired.any [35705 samples]`, the whole run.
    let run_total: f64 = 35705.0;
    assert!(text.starts_with("@ inst_retired.any [35705 samples]"));
    // Unindented lines: `20.86%  [7447]     zfs_lz4_compress @ /boot/kernel/zfs.ko`.
    let mut sampled: BTreeMap<String, i64> = BTreeMap::new();
    for line in text.lines().skip(1).filter(|l| !l.is_empty() && !l.starts_with(' ')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let percent: f64 = fields[0].trim_end_matches('%').parse().unwrap();
        let count: i64 = fields[1].trim_matches(['[', ']']).parse().unwrap();
        // The percentage is of the run's total, to the two decimals printed.
        assert!((percent - 100.0 * count as f64 / run_total).abs() < 0.006, "{line}");
        *sampled.entry(fields[2].to_owned()).or_default() += count;
    }
    // The fixture shows two of the run's trees: 7447 + 5156 samples.
    assert_eq!(sampled, BTreeMap::from([("zfs_lz4_compress".into(), 7447), ("fletcher_2_native".into(), 5156)]));

    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::Pmcstat);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("samples", "count"));
    assert_eq!(p.total(0), 7447 + 5156);
    assert_eq!(flat_by_name(&p, 0), sampled);
    assert_eq!(p.str(p.comments[0]), "event inst_retired.any: 35705 samples in the run");
    // The deepest chain: fletcher_2_native called via … amd64_syscall, 1489 samples,
    // 16 frames, leaf first. Callers that account for less than their callee leave the
    // rest at the callee: 5156 - 2610 = 2546 samples with fletcher_2_native alone.
    let deepest = p.samples.iter().max_by_key(|s| s.locations.len()).unwrap();
    let names: Vec<&str> = deepest.locations.iter().map(|l| p.line_function_name(&p.location(*l).lines[0])).collect();
    assert_eq!((names.len(), names[0], names[15]), (16, "fletcher_2_native", "amd64_syscall"));
    assert_eq!(deepest.values, [1489]);
    assert!(p.samples.iter().any(|s| s.locations.len() == 1 && s.values == [2546]));
    // Objects hold until the next one: fork_exit under zfs_lz4_compress is in the kernel.
    let kernel = p.mappings.iter().position(|m| p.str(m.filename) == "/boot/kernel/kernel").unwrap();
    let fork_exit = p.samples.sample(0).locations.last().unwrap();
    assert_eq!(p.location(*fork_exit).mapping.map(|m| m.0 as usize), Some(kernel));
}

#[test]
fn several_events_get_a_sample_type_each() {
    let text = "@ cycles [3 samples]\n\n100.0%  [3]  f @ /bin/a\n 100.0%  [3]   main\n\n\
                @ instructions [5 samples]\n\n100.0%  [5]  g\n";
    let p = parse(text.as_bytes()).unwrap();
    let types: Vec<&str> = (0..2).map(|i| p.sample_type_name(i)).collect();
    assert_eq!(types, ["cycles_samples", "instructions_samples"]);
    assert_eq!((p.total(0), p.total(1)), (3, 5));
}

#[test]
fn malformed_texts_get_typed_errors() {
    let header = "@ inst_retired.any [10 samples]\n\n";
    let cases = [
        (format!("{header}10.0%  [1]  f\n  10.0%  [1]    g\n"), 4, "more than one level"),
        (format!("{header}10.0%  [1]  f\n 100.0%  [2]   g\n"), 3, "more than its 1"),
        (format!("{header}10.0%  [1]  f\nsomething else\n"), 4, "expected 'N%"),
        // Truncated mid-line.
        (format!("{header}10.0%  [1"), 3, "expected 'N%"),
        (format!("{header}10.0%  [99999999999999999999]  f\n"), 3, "too large"),
    ];
    assert_text_errors("pmcstat", &cases);
}
