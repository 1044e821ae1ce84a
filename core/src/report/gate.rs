//! The gate's report for people and CI systems: plain text, a Markdown summary for a
//! pull-request comment, JUnit XML, and GitHub Actions workflow commands.

use std::fmt::Write;

use crate::analysis::gate::mann_whitney::Method;
use crate::analysis::gate::{Alternative, Change, GateReport, GateRow, Metric, Status, Verdict};
use crate::export::svg::escape as xml;
use crate::units::format_value;

/// Regressions a Markdown summary lists; the rest are counted.
pub const MARKDOWN_ROWS: usize = 10;

fn share(value: f64) -> String {
    format!("{value:.2}%")
}

fn p_value(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".to_owned()
    } else {
        format!("= {p:.3}")
    }
}

/// `+17.78 pp, +3419%` (`new` when the base median is 0).
fn effect(change: &Change) -> String {
    let relative = change.relative.map_or_else(|| "new".to_owned(), |r| format!("{r:+.0}%"));
    format!("{:+.2} pp, {relative}", change.difference)
}

fn metric(row: &GateRow) -> &'static str {
    match row.metric {
        Some(Metric::Cum) => "cum",
        _ => "flat",
    }
}

/// `= 0.004 (adjusted 0.016)`: a p-value and, when tested, its corrected value.
fn p_and_adjusted(p: f64, adjusted: Option<f64>) -> String {
    let adjusted =
        adjusted.map_or_else(String::new, |a| format!(" (adjusted {})", p_value(a).trim_start_matches("= ")));
    format!("{}{adjusted}", p_value(p))
}

/// `p = 0.004 (adjusted 0.016), sampling p < 0.001 (adjusted < 0.001)` (sampling when
/// samples are counted).
fn p_values(change: &Change) -> String {
    let sampling = change
        .sampling_p_value
        .map_or_else(String::new, |p| format!(", sampling p {}", p_and_adjusted(p, change.sampling_adjusted_p_value)));
    format!("p {}{sampling}", p_and_adjusted(change.p_value, change.adjusted_p_value))
}

/// `flat 0.52% → 18.30% (+17.78 pp, +3419%), p = 0.050, sampling p < 0.001`
fn change_text(row: &GateRow) -> String {
    let change = row.deciding();
    format!(
        "{} {} → {} ({}), {}",
        metric(row),
        share(change.base_median),
        share(change.compare_median),
        effect(change),
        p_values(change)
    )
}

/// The test and the sides: `one-sided Mann–Whitney U (exact), 3 base runs vs 3 compare runs`.
fn test_text(r: &GateReport) -> String {
    let sides = match r.alternative {
        Alternative::OneSided => "one-sided",
        Alternative::TwoSided => "two-sided",
    };
    let method = match r.method {
        Method::Exact => "exact",
        Method::Normal => "normal approximation",
    };
    format!("{sides} Mann–Whitney U ({method}), {} base runs vs {} compare runs", r.base_runs, r.compare_runs)
}

/// What counts as a regression by default.
fn criteria_text(r: &GateReport) -> String {
    let d = &r.defaults;
    format!(
        "a regression is a median share (flat, else cum) up by at least {} pp and {}% with adjusted p ≤ {} across \
         runs and, where samples are counted, in the runs' pooled samples",
        d.min_effect, d.min_relative, d.alpha
    )
}

/// The correction's families: `p-values Holm-corrected over 4 shares of 3 names that
/// could reach the minimum effect (66 names cannot: untested), sampling p over 46`.
fn family_text(r: &GateReport) -> String {
    let f = &r.family;
    format!(
        "p-values Holm-corrected over {} of {} that could reach the minimum effect ({} cannot: untested), \
         sampling p over {}",
        plural(f.tests, "share"),
        plural(f.names, "name"),
        plural(f.untested, "name"),
        plural(f.sampling_tests, "share")
    )
}

/// Why the runs cannot decide, and how many they need; empty unless inconclusive. Runs
/// too few to reach alpha even uncorrected are said so, before the correction.
pub fn inconclusive(r: &GateReport) -> String {
    let Some(needed) = r.runs_needed.filter(|_| r.status == Status::Inconclusive) else { return String::new() };
    let alpha = r.strictest_alpha();
    let runs =
        format!("{} base and {} compare runs give at best p = {:.4}", r.base_runs, r.compare_runs, r.smallest_p_value);
    let why = if r.smallest_p_value > alpha {
        format!("{runs}, above alpha {alpha} even before the correction over {}", plural(r.family.tests, "share"))
    } else {
        format!(
            "{runs}, which the correction over {} makes {:.3}, above alpha {alpha}",
            plural(r.family.tests, "share"),
            (r.smallest_p_value * r.family.tests as f64).min(1.0)
        )
    };
    format!("{why}: no regression could show; {needed} runs a side needed")
}

/// The verdict in a word or few: `passed`, `FAILED, 2 regressions`, `INCONCLUSIVE`.
fn status_text(r: &GateReport) -> String {
    match r.status {
        Status::Passed => "passed".to_owned(),
        Status::Failed => format!("FAILED, {}", plural(r.regression_count, "regression")),
        Status::Inconclusive => format!("INCONCLUSIVE: {}", inconclusive(r)),
    }
}

/// `total cpu per second (not gated): 952ms → 1.18s (+24%, p = 0.050)`, when known.
fn rate_text(r: &GateReport) -> Option<String> {
    let rate = r.total_per_second.as_ref()?;
    let value = |v: f64| format_value(v.round() as i64, &rate.unit);
    let relative = rate.change.relative.map_or_else(String::new, |rel| format!("{rel:+.0}%, "));
    Some(format!(
        "total {} per second (not gated): {} → {} ({relative}p {})",
        r.sample_type,
        value(rate.change.base_median),
        value(rate.change.compare_median),
        p_value(rate.change.p_value)
    ))
}

fn tested_text(r: &GateReport) -> String {
    let (functions, packages) = (plural(r.functions.len(), "function"), plural(r.packages.len(), "package"));
    format!("{functions} and {packages} tested, {} ignored by rules", r.ignored)
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The report as text: regressions and improvements, one a line.
pub fn text(r: &GateReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Type: {}; {}", r.sample_type, test_text(r));
    let _ = writeln!(out, "{}", capitalized(&criteria_text(r)));
    let _ = writeln!(out, "{}", capitalized(&family_text(r)));
    if let Some(rate) = rate_text(r) {
        let _ = writeln!(out, "{}", capitalized(&rate));
    }
    for (title, verdict) in [("Regressions", Verdict::Regression), ("Improvements", Verdict::Improvement)] {
        let rows: Vec<(&str, &GateRow)> = r.rows(verdict).collect();
        if rows.is_empty() {
            continue;
        }
        let width = rows.iter().map(|(kind, row)| kind.chars().count() + 1 + row.name.chars().count()).max();
        let _ = writeln!(out, "\n{title} ({}):", rows.len());
        for (kind, row) in rows {
            let name = format!("{kind} {}", row.name);
            let _ = writeln!(out, "  {name:<width$}  {}", change_text(row), width = width.unwrap_or(0));
        }
    }
    let _ = writeln!(out, "\n{}: {}", capitalized(&tested_text(r)), status_text(r));
    if let Some(url) = &r.diff_url {
        let _ = writeln!(out, "Diff view: {url}");
    }
    out
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// A name as Markdown code in a table cell: fenced with more backticks than it holds,
/// `|` escaped (tables split on it first), line breaks as spaces.
fn markdown_code(name: &str) -> String {
    let longest = name.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let body: String = name.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let body = body.replace('|', "\\|");
    let pad = if body.starts_with('`') || body.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// A summary for a pull-request comment (or `$GITHUB_STEP_SUMMARY`): the verdict, the
/// largest regressions as a table, and the diff view's link when there is one.
pub fn markdown(r: &GateReport) -> String {
    let mut out = String::new();
    let title = match r.status {
        Status::Passed => "passed".to_owned(),
        Status::Failed => plural(r.regression_count, "regression"),
        Status::Inconclusive => format!("inconclusive ({} runs a side needed)", r.runs_needed.unwrap_or_default()),
    };
    let _ = writeln!(out, "### stacklens gate: {title}\n");
    if r.status == Status::Inconclusive {
        let _ = writeln!(out, "**Inconclusive:** {}.\n", inconclusive(r));
    }
    let _ = writeln!(out, "{}, {}; {}; {}.\n", r.sample_type, test_text(r), criteria_text(r), family_text(r));
    let regressions: Vec<(&str, &GateRow)> = r.rows(Verdict::Regression).collect();
    if !regressions.is_empty() {
        let _ = writeln!(out, "| Regressed | Share | Median | Change | p (runs) | p (samples) |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for (kind, row) in regressions.iter().take(MARKDOWN_ROWS) {
            let change = row.deciding();
            let _ = writeln!(
                out,
                "| {kind} {} | {} | {} → {} | {} | {} | {} |",
                markdown_code(&row.name),
                metric(row),
                share(change.base_median),
                share(change.compare_median),
                effect(change),
                p_and_adjusted(change.p_value, change.adjusted_p_value).trim_start_matches("= "),
                change.sampling_p_value.map_or("–".to_owned(), |p| {
                    p_and_adjusted(p, change.sampling_adjusted_p_value).trim_start_matches("= ").to_owned()
                })
            );
        }
        if regressions.len() > MARKDOWN_ROWS {
            let _ = writeln!(out, "\nand {} more (see the job's output).", regressions.len() - MARKDOWN_ROWS);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}; {}.", capitalized(&tested_text(r)), plural(r.improvement_count, "improvement"));
    if let Some(rate) = rate_text(r) {
        let _ = writeln!(out, "\n{}.", capitalized(&rate));
    }
    if let Some(url) = &r.diff_url {
        let url = url.replace(' ', "%20").replace('(', "%28").replace(')', "%29");
        let _ = writeln!(out, "\n[Open the diff view]({url})");
    }
    out
}

fn values(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>().join(", ")
}

/// JUnit XML (GitLab's `reports: junit`, Jenkins): a test suite each for functions and
/// packages, a test case each tested name, a `<failure>` each regression.
pub fn junit(r: &GateReport) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let failures = r.regression_count;
    let errors = usize::from(r.status == Status::Inconclusive);
    let tests = r.functions.len() + r.packages.len() + errors;
    let _ = writeln!(
        out,
        "<testsuites name=\"stacklens gate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">"
    );
    if errors > 0 {
        // Not a regression, and no pass either: an error of the gate's own test case.
        let _ = writeln!(
            out,
            "  <testsuite name=\"runs\" tests=\"1\" failures=\"0\" errors=\"1\">\n    \
             <testcase classname=\"stacklens.gate\" name=\"enough runs\">\n      \
             <error type=\"inconclusive\" message=\"{}\"/>\n    </testcase>\n  </testsuite>",
            xml(&inconclusive(r))
        );
    }
    for (suite, kind, rows) in [("functions", "function", &r.functions), ("packages", "package", &r.packages)] {
        let failed = rows.iter().filter(|row| row.verdict == Verdict::Regression).count();
        let _ = writeln!(out, "  <testsuite name=\"{suite}\" tests=\"{}\" failures=\"{failed}\">", rows.len());
        for row in rows {
            let case = format!("    <testcase classname=\"stacklens.gate.{kind}\" name=\"{}\"", xml(&row.name));
            if row.verdict != Verdict::Regression {
                let _ = writeln!(out, "{case}/>");
                continue;
            }
            let change = row.deciding();
            let message = format!("{kind} {} regressed: {}", row.name, change_text(row));
            let t = &row.thresholds;
            let rule = row.rule.as_ref().map_or_else(String::new, |rule| format!(" (rule {rule})"));
            let samples =
                change.samples.map(|[base, compare]| format!("samples pooled: {base} base, {compare} compare"));
            let details = [
                Some(format!("{} share of each run's total, in percent", metric(row))),
                Some(format!("base runs: {}", values(&change.base))),
                Some(format!("compare runs: {}", values(&change.compare))),
                samples,
                Some(format!(
                    "{}; {}; thresholds: adjusted p ≤ {}, at least {} pp and {}%{rule}",
                    test_text(r),
                    family_text(r),
                    t.alpha,
                    t.min_effect,
                    t.min_relative
                )),
            ];
            let details: Vec<String> = details.iter().flatten().map(|line| xml(line)).collect();
            let _ = writeln!(
                out,
                "{case}>\n      <failure type=\"regression\" message=\"{}\">{}</failure>\n    </testcase>",
                xml(&message),
                details.join("\n")
            );
        }
        let _ = writeln!(out, "  </testsuite>");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A workflow command's data: `%`, CR and LF percent-encoded (GitHub's escapeData),
/// and for a property also `:` and `,` (escapeProperty).
fn workflow_escape(text: &str, property: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            ':' if property => out.push_str("%3A"),
            ',' if property => out.push_str("%2C"),
            c => out.push(c),
        }
    }
    out
}

/// GitHub Actions workflow commands: an `::error` annotation each regression, or one
/// `::notice` when there is none.
pub fn github(r: &GateReport) -> String {
    let mut out = String::new();
    for (kind, row) in r.rows(Verdict::Regression) {
        let title = format!("Profile regression: {}", row.name);
        let message = format!("{kind} {}: {} ({})", row.name, change_text(row), test_text(r));
        let _ = writeln!(out, "::error title={}::{}", workflow_escape(&title, true), workflow_escape(&message, false));
    }
    match r.status {
        Status::Passed => {
            let message = format!("No regression: {} ({})", tested_text(r), test_text(r));
            let _ = writeln!(out, "::notice title=stacklens gate::{}", workflow_escape(&message, false));
        }
        Status::Inconclusive => {
            let message = format!("Inconclusive: {} ({})", inconclusive(r), test_text(r));
            let _ = writeln!(out, "::warning title=stacklens gate inconclusive::{}", workflow_escape(&message, false));
        }
        Status::Failed => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_code_survives_backticks_and_pipes() {
        assert_eq!(markdown_code("main.run"), "`main.run`");
        assert_eq!(markdown_code("a|b"), "`a\\|b`");
        assert_eq!(markdown_code("f`x``"), "``` f`x`` ```");
        assert_eq!(markdown_code("a\nb"), "`a b`");
    }

    #[test]
    fn workflow_commands_escape_as_github_does() {
        assert_eq!(workflow_escape("50% a:b,c\r\n", false), "50%25 a:b,c%0D%0A");
        assert_eq!(workflow_escape("std::vector<int>, x", true), "std%3A%3Avector<int>%2C x");
    }
}
