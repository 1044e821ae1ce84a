//! A standalone flame graph: one SVG file with a hover title per frame, click to zoom
//! and a regex search in embedded script (like inferno's and FlameGraph's), for one
//! sample type with the filters applied. Every name is escaped for XML.

use std::fmt::Write;

use crate::analysis::query::Prepared;
use crate::analysis::tree::{CallTree, TreeOptions};
use crate::layout::{layout, Viewport};
use crate::units::{format_value, percentage_value};
use crate::Result;

const WIDTH: f64 = 1200.0;
const ROW: f64 = 16.0;
const TOP: f64 = 40.0;
/// Frames narrower than this many pixels are left out (their parents keep their width).
const MIN_WIDTH: f64 = 0.1;

pub fn write(prepared: &Prepared) -> Result<Vec<u8>> {
    Ok(format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}", svg(prepared)?).into_bytes())
}

/// The `<svg>` element alone, for embedding in HTML as well.
pub(super) fn svg(prepared: &Prepared) -> Result<String> {
    let tree = CallTree::build(prepared, &TreeOptions::default())?;
    let viewport = Viewport { width_px: WIDTH, min_width_px: MIN_WIDTH, ..Viewport::default() };
    let rects = layout(&tree, &viewport);
    let depth = rects.iter().map(|r| r.depth).max().unwrap_or(0);
    let height = TOP + f64::from(depth + 1) * ROW + 10.0;
    let total = tree.total();
    let title = format!("{} ({}), total {}", tree.sample_type, tree.unit, format_value(total, &tree.unit));
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg class=\"stacklens-flamegraph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" data-width=\"{WIDTH}\">\n\
         <style>text {{ font: 12px monospace; fill: #000; }} .frame {{ cursor: pointer; }} \
         .frame:hover rect {{ stroke: #000; stroke-width: 0.5; }} .frame.hit rect {{ fill: #e040e0; }} \
         .button {{ cursor: pointer; fill: #06c; }}</style>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#f8f8f4\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" style=\"font-size: 15px\">{}</text>\n\
         <text class=\"button reset\" x=\"10\" y=\"20\">Reset zoom</text>\n\
         <text class=\"button search\" x=\"{}\" y=\"20\">Search</text>\n\
         <text class=\"matched\" x=\"{}\" y=\"{}\"></text>\n",
        WIDTH / 2.0,
        escape(&title),
        WIDTH - 60.0,
        WIDTH - 160.0,
        height - 2.0,
    );
    for rect in &rects {
        let node = &tree.nodes[rect.node as usize];
        let name = if rect.node == 0 { "all" } else { tree.name(rect.node) };
        let y = height - 10.0 - f64::from(rect.depth + 1) * ROW;
        let label =
            format!("{} ({}, {:.2}%)", name, format_value(node.total, &tree.unit), percentage_value(node.total, total));
        let _ = writeln!(
            out,
            "<g class=\"frame\" data-x=\"{:.9}\" data-w=\"{:.9}\" data-d=\"{}\"><title data-name=\"{}\">{}</title>\
             <rect x=\"{:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\" rx=\"2\"/>\
             <text x=\"{:.2}\" y=\"{}\">{}</text></g>",
            rect.x / WIDTH,
            rect.width / WIDTH,
            rect.depth,
            escape(name),
            escape(&label),
            rect.x,
            (rect.width - 0.5).max(0.1),
            ROW - 1.0,
            colour(name),
            rect.x + 3.0,
            y + ROW - 4.5,
            escape(&fit(name, rect.width)),
        );
    }
    let _ = write!(out, "<script><![CDATA[\n{}]]></script>\n</svg>\n", include_str!("assets/flamegraph.js"));
    Ok(out)
}

/// As much of `name` as fits in `width` pixels of 12px monospace (the script refits
/// labels the same way when zooming; this is what viewers without script show).
fn fit(name: &str, width: f64) -> String {
    let room = ((width - 6.0) / 7.0).floor().max(0.0) as usize;
    let length = name.chars().count();
    if room < 3 {
        String::new()
    } else if length <= room {
        name.to_owned()
    } else {
        name.chars().take(room - 2).chain("..".chars()).collect()
    }
}

/// Text for XML and HTML: markup characters and quotes as entities, control characters
/// (which XML 1.0 forbids) as U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// FlameGraph's warm palette, the same colour for the same name in every file.
fn colour(name: &str) -> String {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let part = |shift: u32| ((hash >> shift) & 0xff) as f64 / 255.0;
    format!("rgb({},{},{})", 205 + (50.0 * part(0)) as u32, (230.0 * part(8)) as u32, (55.0 * part(16)) as u32)
}
