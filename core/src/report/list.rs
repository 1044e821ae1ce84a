//! `go tool pprof -list REGEX`, byte for byte: per function and file a `ROUTINE` header,
//! its flat and cum totals, then its lines with their values and code. Core reads no
//! files: the caller passes `read`, which gives a file's text by the name the report
//! shows, or the reason it cannot (printed after ` Error: `, as pprof prints its own).

use std::collections::HashMap;
use std::fmt::Write;

use crate::analysis::source::{SourceFile, SourceReport};
use crate::units::{format_value, percentage};

/// pprof reads sources with Go's `bufio.Scanner`, which stops at a line this long; the
/// lines before it are listed, the rest of the file is not.
const SCANNER_MAX_LINE: usize = 64 * 1024;

/// The text of `go tool pprof -list`. `read` is asked once per file.
pub fn list(report: &SourceReport, mut read: impl FnMut(&str) -> Result<String, String>) -> String {
    let mut texts: HashMap<&str, Result<String, String>> = HashMap::new();
    for file in report.functions.iter().flat_map(|f| &f.files) {
        texts.entry(&file.file).or_insert_with(|| read(&file.file));
    }
    let lines: HashMap<&str, Result<Vec<&str>, &str>> =
        texts.iter().map(|(&file, text)| (file, text.as_deref().map(scanner_lines).map_err(String::as_str))).collect();

    let value = |v: i64| format_value(v, &report.unit);
    let mut out = String::new();
    let _ = writeln!(out, "Total: {}", value(report.total));
    for function in &report.functions {
        if function.files.is_empty() {
            let _ = writeln!(out, "No source information for {}", function.name);
        }
        for file in &function.files {
            let _ = writeln!(out, "ROUTINE ======================== {} in {}", function.name, file.file);
            let _ = writeln!(
                out,
                "{:>10} {:>10} (flat, cum) {} of Total",
                value(file.flat),
                value(file.cum),
                percentage(file.cum, report.total)
            );
            match &lines[file.file.as_str()] {
                Err(reason) => {
                    let _ = writeln!(out, " Error: {reason}");
                }
                Ok(code) => write_lines(&mut out, file, code, &value),
            }
        }
    }
    out
}

/// The listed lines of one function that the file has, with "." for no value.
fn write_lines(out: &mut String, file: &SourceFile, code: &[&str], value: &impl Fn(i64) -> String) {
    let or_dot = |v: i64| if v == 0 { ".".to_owned() } else { value(v) };
    for number in file.first_line..=file.last_line {
        // pprof stops where the file ends.
        let Some(text) = usize::try_from(number - 1).ok().and_then(|i| code.get(i)) else { break };
        let (flat, cum) = match file.lines.binary_search_by_key(&number, |row| row.line) {
            Ok(i) => (file.lines[i].flat, file.lines[i].cum),
            Err(_) => (0, 0),
        };
        let _ = writeln!(out, "{:>10} {:>10} {number:>6}:{text}", or_dot(flat), or_dot(cum));
    }
}

/// A file's lines as Go's `bufio.Scanner` splits them: at `\n`, less one `\r` before
/// it, no empty last line, none from a line too long for the scanner on.
fn scanner_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .take_while(|line| line.len() < SCANNER_MAX_LINE)
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_go_scanner() {
        assert!(scanner_lines("").is_empty());
        assert_eq!(scanner_lines("\n"), [""]);
        assert_eq!(scanner_lines("a\r\nb"), ["a", "b"]);
        assert_eq!(scanner_lines("a\n\nb\n"), ["a", "", "b"]);
        let long = format!("a\n{}\nc\n", "x".repeat(SCANNER_MAX_LINE));
        assert_eq!(scanner_lines(&long), ["a"]);
    }
}
