//! Xcode Instruments "Deep Copy" text: the fixture's total equals its top row's weight
//! and each symbol's self time equals the sum of its `Self Weight` cells (read here with
//! a plain split on tabs); malformed texts get typed errors with line numbers.

mod common;

use std::collections::BTreeMap;

use common::{assert_text_errors, fixtures, flat_by_name, read};
use stacklens_core::import::{detect, Format};
use stacklens_core::model::SourceFormat;
use stacklens_core::parse;

const FIXTURE: &str = "thirdparty/speedscope/instruments16-simple-time-profile-deep-copy.txt";

/// `846.00 ms` or `0 s` in nanoseconds (the fixture has only these two units).
fn nanoseconds(cell: &str) -> i64 {
    let (number, unit) = cell.split_once(' ').unwrap();
    let scale = match unit {
        "ms" => 1e6,
        "s" => 1e9,
        _ => panic!("unit {unit}"),
    };
    (number.parse::<f64>().unwrap() * scale).round() as i64
}

#[test]
fn fixture_matches_its_self_weights() {
    let Some(dir) = fixtures() else { return };
    let bytes = read(&dir.join(FIXTURE));
    assert_eq!(detect(&bytes), Format::Of(SourceFormat::Instruments));
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut self_by_symbol: BTreeMap<String, i64> = BTreeMap::new();
    for row in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = row.split('\t').collect();
        *self_by_symbol.entry(cells[2].trim().to_owned()).or_default() += nanoseconds(cells[1]);
    }
    self_by_symbol.retain(|_, v| *v != 0);
    // The top row, `4.93 s  100.0%	0 s	   start`, holds the whole profile.
    let total: i64 = self_by_symbol.values().sum();
    assert_eq!(total, 4_930_000_000);

    let p = parse(&bytes).unwrap();
    assert_eq!(p.source, SourceFormat::Instruments);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("time", "nanoseconds"));
    assert_eq!(p.total(0), total);
    assert_eq!(flat_by_name(&p, 0), self_by_symbol);
    // Stacks run from the leaf up to `start`; delta() is called by main.
    let delta = p.samples.iter().find(|s| s.values == [846_000_000]).unwrap();
    let names: Vec<&str> = delta.locations.iter().map(|l| p.line_function_name(&p.location(*l).lines[0])).collect();
    assert_eq!(names, ["delta()", "main", "start"]);
}

#[test]
fn sizes_and_counts_set_the_sample_type() {
    let p =
        parse("Bytes Used\tSelf\tSymbol Name\n1.50 KB  100.0%\t512 Bytes\t main\n1 KB  66.6%\t1 KB\t  f\n".as_bytes())
            .unwrap();
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0)), ("space", "bytes"));
    assert_eq!(p.total(0), 512 + 1024);
    let p = parse("Weight\tSelf Weight\tSymbol Names\n3  100.0%\t1\tmain\n2  66.6%\t2\t f\n".as_bytes()).unwrap();
    assert_eq!((p.sample_type_name(0), p.total(0)), ("samples", 3));
}

#[test]
fn malformed_texts_get_typed_errors() {
    let header = "Weight\tSelf Weight\tSymbol Names\n";
    let cases = [
        (format!("{header}1 ms  100.0%\t1 ms\t main\n1 ms  1.0%\t1 ms\t   f\n"), 3, "more than one level"),
        (format!("{header}1 ms  100.0%\t1 ms\t  main\n1 ms  1.0%\t1 ms\t f\n"), 3, "left of the first row"),
        (format!("{header}1 ms  100.0%\t1 parsecs\t main\n"), 2, "not a weight"),
        (format!("{header}1 ms  100.0%\t1 ms\t main\n1 KB  1.0%\t1 KB\t  f\n"), 3, "another unit"),
        (format!("{header}1 ms  100.0%\t99999999999999 s\t main\n"), 2, "too large"),
        // Truncated mid-row.
        (format!("{header}1 ms  100.0%\t1 ms\t main\n1 ms  1.0%"), 3, "tab-separated columns"),
        ("Weight\tSymbol Names\n1 ms\tmain\n".into(), 1, "no Self Weight column"),
        (header.into(), 1, "no rows"),
    ];
    assert_text_errors("Instruments deep copy", &cases);
}
