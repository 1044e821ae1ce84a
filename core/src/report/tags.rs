//! `go tool pprof -tags`: per label key, its total and each value's share of it.

use crate::analysis::labels::LabelSummary;
use crate::units::{percentage, scale};

/// The text of `go tool pprof -tags` for a [`LabelSummary`] (pprof's `printTags`).
pub fn tags(summary: &LabelSummary) -> String {
    let amount = |value: i64| {
        let (value, unit) = scale(value, &summary.unit);
        format!("{value:.1}{unit}")
    };
    let mut text = String::new();
    for key in &summary.keys {
        text.push_str(&format!("{}:\t Total {}\n", key.key, amount(key.total)));
        for value in &key.values {
            let share =
                if key.total > 0 { format!(" ({})", percentage(value.total, key.total)) } else { String::new() };
            text.push_str(&format!(" \t{}{share}:\t {}\n", amount(value.total), value.value));
        }
        text.push('\n');
    }
    align_right(&text)
}

/// Go's `text/tabwriter` as pprof sets it up (no minimum width, padding 1, spaces,
/// `AlignRight`): tab-terminated cells are right-aligned in columns, a column being
/// the run of consecutive lines that have a cell in it; text after a line's last tab
/// is not aligned. Widths count characters, as Go's count runes.
fn align_right(text: &str) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|line| line.split('\t').collect()).collect();
    let mut out = String::with_capacity(text.len() * 2);
    let mut widths = Vec::new();
    format_block(&lines, 0, lines.len(), &mut widths, &mut out);
    out
}

/// Go's `Writer.format`: lays out lines `start..end`, whose columns left of
/// `widths.len()` have the widths given.
fn format_block(lines: &[Vec<&str>], mut start: usize, end: usize, widths: &mut Vec<usize>, out: &mut String) {
    let column = widths.len();
    let has_cell = |line: &Vec<&str>| column + 1 < line.len();
    let mut this = start;
    while this < end {
        if !has_cell(&lines[this]) {
            this += 1;
            continue;
        }
        write_lines(lines, start..this, widths, out);
        start = this;
        let mut width = 0;
        while this < end && has_cell(&lines[this]) {
            width = width.max(lines[this][column].chars().count() + 1);
            this += 1;
        }
        widths.push(width);
        format_block(lines, start, this, widths, out);
        widths.pop();
        start = this;
    }
    write_lines(lines, start..end, widths, out);
}

/// Go's `Writer.writeLines` for lines `range`: cells padded on the left to their
/// column's width, each line but the text's last ended by a newline.
fn write_lines(lines: &[Vec<&str>], range: std::ops::Range<usize>, widths: &[usize], out: &mut String) {
    for i in range {
        for (j, cell) in lines[i].iter().enumerate() {
            if let Some(&width) = widths.get(j) {
                out.extend(std::iter::repeat_n(' ', width.saturating_sub(cell.chars().count())));
            }
            out.push_str(cell);
        }
        if i + 1 < lines.len() {
            out.push('\n');
        }
    }
}
