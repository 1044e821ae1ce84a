//! Visual Studio profiler call tree CSV (`VSPerfReport /summary:calltree`, the
//! `CallTreeSummary.csv` inferno's `collapse-vsprof` reads):
//!
//! ```text
//! Level,Function Name,Number of Calls,Elapsed Inclusive Time %,Elapsed Exclusive Time %,…,Module Name,
//! 0,"Raytracer.exe",0,100.00,0.00,0.00,0.00,"",
//! 1,"Raytracer.Tracer.Trace(int32)",471,91.25,18.39,401.92,81.02,"Raytracer.exe",
//! ```
//!
//! `Level` is the node's depth. Each exclusive column present becomes a sample type:
//! `Exclusive Samples` (sampling mode) as samples/count, `Elapsed Exclusive Time %`
//! (instrumentation mode) in hundredths of a percent, exactly as printed, and `Number of
//! Calls` as calls/count, so a function's self value is how often it was called. Counts
//! may have thousands separators (`"2,893,824"`).

use super::named_frames::{call_tree_profile, column, csv_fields, csv_lines, TreeRow};
use super::text::{self, scaled_decimal, text_error};
use crate::model::{Profile, SourceFormat};
use crate::{Error, Result};

const FORMAT: &str = "Visual Studio CSV";
const LEVEL_COLUMN: &str = "Level";
const NAME_COLUMN: &str = "Function Name";
const MODULE_COLUMN: &str = "Module Name";

/// (column, sample type, unit, decimals kept): the self values read when present.
const VALUE_COLUMNS: &[(&str, &str, &str, u32)] = &[
    ("Exclusive Samples", "samples", "count", 0),
    ("Number of Calls", "calls", "count", 0),
    ("Elapsed Exclusive Time %", "elapsed_time", "percent/100", 2),
];

/// Whether `text` starts with a Visual Studio call tree CSV header.
pub(crate) fn looks_like_vsprof(text: &str) -> bool {
    let header = text.trim_start_matches('\u{feff}').lines().next().unwrap_or("");
    let columns = csv_fields(header);
    columns.first().is_some_and(|c| c == LEVEL_COLUMN) && columns.iter().any(|c| c == NAME_COLUMN)
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let (header, lines) = csv_lines(&text);
    let (level, name) = (column(&header, LEVEL_COLUMN, FORMAT)?, column(&header, NAME_COLUMN, FORMAT)?);
    let module = header.iter().position(|c| c == MODULE_COLUMN);
    let values: Vec<(usize, &str, &str, u32)> = VALUE_COLUMNS
        .iter()
        .filter_map(|&(c, kind, unit, decimals)| Some((header.iter().position(|h| h == c)?, kind, unit, decimals)))
        .collect();
    if values.is_empty() {
        let wanted: Vec<&str> = VALUE_COLUMNS.iter().map(|c| c.0).collect();
        return Err(text_error(FORMAT, 1, format!("no exclusive value column (one of {})", wanted.join(", "))));
    }
    let types: Vec<(&str, &str)> = values.iter().map(|&(_, kind, unit, _)| (kind, unit)).collect();
    let rows: Vec<(usize, Vec<String>)> = lines.map(|(n, line)| (n, csv_fields(line))).collect();
    let nodes = rows.iter().map(|(n, fields)| {
        let field = |i: usize| fields.get(i).map_or("", |f| f.trim());
        let number = |i: usize, decimals: u32| -> Result<i64> {
            let raw = field(i);
            let digits: String = raw.chars().filter(|&c| c != ',').collect();
            scaled_decimal(&digits, decimals).ok_or_else(|| bad_number(*n, &header[i], raw))
        };
        let depth = field(level).parse().map_err(|_| bad_number(*n, LEVEL_COLUMN, field(level)))?;
        let self_values = values.iter().map(|&(i, _, _, decimals)| number(i, decimals)).collect::<Result<_>>()?;
        Ok((*n, TreeRow { depth, function: field(name), module: module.map_or("", field), self_values }))
    });
    call_tree_profile(FORMAT, SourceFormat::VisualStudio, &types, nodes, options)
}

fn bad_number(line: usize, column: &str, value: &str) -> Error {
    text_error(FORMAT, line, format!("{column} '{value}' is not a number"))
}
