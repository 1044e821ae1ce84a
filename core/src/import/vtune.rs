//! Intel VTune top-down tree CSV, as `vtune -report top-down -format csv` and the GUI's
//! export write it (inferno's `collapse-vtune` reads the same):
//!
//! ```text
//! Function Stack,CPU Time:Self,Module
//! Total,0.0,[Unknown]
//!  RtlUserThreadStart,0.0,ntdll.dll
//!   main,0.015,app.exe
//! ```
//!
//! A row's leading spaces are its depth in the call tree; `CPU Time:Self` is the node's
//! self time in seconds, kept exactly in nanoseconds (at most 9 decimals).

use super::named_frames::{call_tree_profile, column, csv_fields, csv_lines, TreeRow};
use super::text::{self, scaled_decimal, text_error};
use crate::model::{Profile, SourceFormat};
use crate::Result;

const FORMAT: &str = "VTune CSV";
const STACK_COLUMN: &str = "Function Stack";
const SELF_TIME_COLUMN: &str = "CPU Time:Self";
const MODULE_COLUMN: &str = "Module";

/// Whether `text` starts with VTune's top-down CSV header.
pub(crate) fn looks_like_vtune(text: &str) -> bool {
    let header = text.trim_start_matches('\u{feff}').lines().next().unwrap_or("");
    header.starts_with(STACK_COLUMN) && csv_fields(header).iter().any(|c| c == SELF_TIME_COLUMN)
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let (header, lines) = csv_lines(&text);
    let (stack, time) = (column(&header, STACK_COLUMN, FORMAT)?, column(&header, SELF_TIME_COLUMN, FORMAT)?);
    let module = header.iter().position(|c| c == MODULE_COLUMN);
    let rows: Vec<(usize, usize, Vec<String>)> = lines
        .map(|(n, line)| (n, line.len() - line.trim_start_matches(' ').len(), csv_fields(line.trim_start())))
        .collect();
    let nodes = rows.iter().map(|(n, depth, fields)| {
        let field = |i: usize| fields.get(i).map_or("", String::as_str);
        let seconds = field(time).trim();
        let nanos = scaled_decimal(seconds, 9)
            .ok_or_else(|| text_error(FORMAT, *n, format!("CPU time '{seconds}' is not a number of seconds")))?;
        let row = TreeRow {
            depth: *depth,
            function: field(stack),
            module: module.map_or("", field),
            self_values: vec![nanos],
        };
        Ok((*n, row))
    });
    call_tree_profile(FORMAT, SourceFormat::Vtune, &[("cpu", "nanoseconds")], nodes, options)
}
