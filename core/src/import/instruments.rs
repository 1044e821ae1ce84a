//! Xcode Instruments call trees copied with "Deep Copy" (⇧⌘C) and saved as text:
//! a tab-separated header naming the columns, then one row per call tree node, its
//! symbol indented by one space per level below the first row (tabs shown as `⇥`):
//!
//! ```text
//! Weight⇥Self Weight⇥Symbol Names
//! 4.93 s  100.0%⇥0 s⇥   start
//! 4.93 s  99.9%⇥0 s⇥    main
//! 2.45 s   0.0%⇥846.00 ms⇥     delta()
//! ```
//!
//! Each row with a self weight becomes one sample whose stack is the row's path from the
//! top, so every symbol's self value is what Instruments printed for it and the total is
//! their sum. The inclusive weights are not needed (and are rounded, so they would not
//! add up exactly).
//!
//! The weight unit sets the sample type: times (`ns`, `µs`, `ms`, `s`, `min`) are
//! `time/nanoseconds`; sizes (`Bytes`, `KB`, `MB`, `GB`, powers of 1024 as Instruments
//! counts them) are `space/bytes`; bare numbers are `samples/count`.

use super::text::{self, text_error};
use crate::model::{Line, LocationId, Sample, SourceFormat};
use crate::{Profile, Result};
use rustc_hash::FxHashMap as HashMap;

const FORMAT: &str = "Instruments deep copy";

/// Whether the first line of a text is a deep copy's header: tab-separated, with a
/// symbol name column.
pub(crate) fn is_deep_copy(first: &str) -> bool {
    first.contains('\t') && first.split('\t').any(|c| c.trim().starts_with("Symbol Name"))
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Measure {
    Time,
    Bytes,
    Count,
}

/// A unit's measure and its size in the measure's base unit (nanoseconds, bytes, 1).
fn unit(name: &str) -> Option<(Measure, i64)> {
    Some(match name {
        "" => (Measure::Count, 1),
        "ns" => (Measure::Time, 1),
        "µs" | "us" => (Measure::Time, 1_000),
        "ms" => (Measure::Time, 1_000_000),
        "s" => (Measure::Time, 1_000_000_000),
        "min" => (Measure::Time, 60_000_000_000),
        "Bytes" | "B" => (Measure::Bytes, 1),
        "KB" => (Measure::Bytes, 1 << 10),
        "MB" => (Measure::Bytes, 1 << 20),
        "GB" => (Measure::Bytes, 1 << 30),
        _ => return None,
    })
}

/// `846.00 ms` (a percentage may follow) in the measure's base unit, exactly: the
/// decimals are scaled as digits, not through floating point.
fn weight(cell: &str, line: usize) -> Result<(Measure, i64)> {
    let mut tokens = cell.split_whitespace();
    let number = tokens.next().ok_or_else(|| text_error(FORMAT, line, "empty weight"))?;
    let unit_name = tokens.next().filter(|t| !t.ends_with('%')).unwrap_or("");
    let bad = || text_error(FORMAT, line, format!("'{}' is not a weight", cell.trim()));
    let (measure, scale) = unit(unit_name).ok_or_else(bad)?;
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_large = || text_error(FORMAT, line, format!("weight '{}' is too large", cell.trim()));
    let mut value = int.parse::<i64>().map_err(|_| too_large())?.checked_mul(scale).ok_or_else(too_large)?;
    // Each decimal digit is worth a tenth of the one before; digits below the base unit
    // are dropped (Instruments prints two decimals).
    let mut place = scale;
    for digit in frac.bytes() {
        place /= 10;
        value = value.checked_add(i64::from(digit - b'0') * place).ok_or_else(too_large)?;
    }
    Ok((measure, value))
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let text = text::decode(bytes);
    let mut lines = text::numbered(&text);
    let (header_line, header) = text::header(&mut lines, FORMAT)?;
    let columns: Vec<&str> = header.split('\t').map(str::trim).collect();
    let column = |wanted: &dyn Fn(&str) -> bool, what: &str| {
        columns
            .iter()
            .position(|c| wanted(c))
            .ok_or_else(|| text_error(FORMAT, header_line, format!("no {what} column in the header")))
    };
    let symbol_column = column(&|c| c.starts_with("Symbol Name"), "Symbol Names")?;
    let self_column = column(&|c| c.starts_with("Self"), "Self Weight")?;

    let mut p = Profile::new(SourceFormat::Instruments);
    let mut measure: Option<Measure> = None;
    let mut locations: HashMap<&str, LocationId> = HashMap::default();
    // Root first: the path to the row being read.
    let mut path: Vec<LocationId> = Vec::new();
    let mut base_indent: Option<usize> = None;
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('\t').collect();
        let (Some(symbol), Some(self_cell)) = (cells.get(symbol_column), cells.get(self_column)) else {
            return Err(text_error(FORMAT, n, format!("expected {} tab-separated columns", columns.len())));
        };
        let name = symbol.trim_start_matches(' ');
        let indent = symbol.len() - name.len();
        let base = *base_indent.get_or_insert(indent);
        let depth = indent.checked_sub(base).filter(|&d| d <= path.len()).ok_or_else(|| {
            text_error(FORMAT, n, "indented more than one level below the row above, or left of the first row")
        })?;
        path.truncate(depth);
        let name = name.trim_end();
        let location = *locations.entry(name).or_insert_with(|| {
            let function = super::demangle::add_native_function(&mut p, name, "", 0);
            p.add_location(0, vec![Line { function, line: 0, column: 0 }])
        });
        path.push(location);
        let (row_measure, value) = weight(self_cell, n)?;
        if *measure.get_or_insert(row_measure) != row_measure {
            return Err(text_error(
                FORMAT,
                n,
                format!("weight '{}' is in another unit than the rows above", self_cell.trim()),
            ));
        }
        if value > 0 {
            room.push(
                &mut p.samples,
                Sample { locations: path.iter().rev().copied().collect(), values: vec![value], labels: Vec::new() },
            )?;
        }
    }
    let (kind, unit_name) = match measure.ok_or_else(|| text_error(FORMAT, header_line, "no rows"))? {
        Measure::Time => ("time", "nanoseconds"),
        Measure::Bytes => ("space", "bytes"),
        Measure::Count => ("samples", "count"),
    };
    p.sample_types = vec![p.value_type(kind, unit_name)];
    Ok(p)
}
