//! A standalone report: one HTML file with the flame graph (the SVG writer's, inline),
//! the top table and a search over both, with no network access. Every name is escaped.

use std::fmt::Write;

use super::svg::{escape, svg};
use crate::analysis::query::Prepared;
use crate::analysis::top::{top, TopOptions};
use crate::units::{format_value, percentage_value};
use crate::Result;

/// Rows of the top table, at most.
const TOP_ROWS: usize = 500;

pub fn write(prepared: &Prepared) -> Result<Vec<u8>> {
    let flame = svg(prepared)?;
    let report = top(prepared, &TopOptions { node_count: Some(TOP_ROWS), ..TopOptions::default() })?;
    let title = format!("stacklens: {} ({})", report.sample_type, report.unit);
    let mut rows = String::new();
    for f in &report.functions {
        let _ = writeln!(
            rows,
            "<tr data-name=\"{}\"><td>{}</td><td>{:.2}%</td><td>{}</td><td>{:.2}%</td><td>{}</td></tr>",
            escape(&f.name),
            format_value(f.flat, &report.unit),
            percentage_value(f.flat, report.total),
            format_value(f.cum, &report.unit),
            percentage_value(f.cum, report.total),
            escape(&f.name),
        );
    }
    let page = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n\
         <p>Total {total}. <input id=\"search\" type=\"search\" placeholder=\"search (regex)\" aria-label=\"search\"> \
         <span id=\"shown\"></span></p>\n{flame}\n<table id=\"top\">\n\
         <thead><tr><th>flat</th><th>flat%</th><th>cum</th><th>cum%</th><th>function</th></tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n\
         <script>\n{SEARCH}</script>\n</body>\n</html>\n",
        title = escape(&title),
        total = escape(&format_value(report.total, &report.unit)),
    );
    Ok(page.into_bytes())
}

const STYLE: &str = "body { font: 14px sans-serif; margin: 1em; } h1 { font-size: 18px; } \
    table { border-collapse: collapse; margin-top: 1em; } td, th { padding: 2px 8px; text-align: right; } \
    td:last-child, th:last-child { text-align: left; font-family: monospace; } tr:nth-child(even) { background: #f2f2f2; }";

/// The search box filters the table's rows and highlights the flame graph's frames.
const SEARCH: &str = r#"(function () {
  var input = document.getElementById('search'), shown = document.getElementById('shown');
  var rows = [].slice.call(document.querySelectorAll('#top tbody tr'));
  input.addEventListener('input', function () {
    var re;
    try { re = input.value ? new RegExp(input.value) : null; } catch (e) { shown.textContent = 'invalid regex'; return; }
    var n = 0;
    rows.forEach(function (r) {
      var hit = re === null || re.test(r.getAttribute('data-name'));
      r.style.display = hit ? '' : 'none';
      if (hit) n++;
    });
    shown.textContent = re ? n + ' of ' + rows.length + ' functions' : '';
    if (window.stacklensSearch) window.stacklensSearch(input.value);
  });
})();
"#;
