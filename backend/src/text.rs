//! Plain-text renderings of core reports for the terminal, in pprof's layout.

use std::fmt::Write;

use stacklens_core::analysis::diff::DiffReport;
use stacklens_core::analysis::goroutines::{GoroutineComparison, GoroutineGroup, GoroutineReport};
use stacklens_core::analysis::top::TopReport;
use stacklens_core::units::{format_value_in, percentage, report_unit};

/// `go tool pprof -top` layout, with pprof's one-unit-per-report formatting.
pub fn top(r: &TopReport) -> String {
    let unit = report_unit(r.functions.iter().map(|f| (f.flat, f.cum)), r.total, &r.unit);
    let v = |x: i64| format_value_in(x, &r.unit, &unit);
    let shown: i64 = r.functions.iter().map(|f| f.flat).sum();
    let mut out = String::new();
    let _ = writeln!(out, "Type: {}", r.sample_type);
    let _ = writeln!(
        out,
        "Showing nodes accounting for {}, {} of {} total",
        v(shown),
        percentage(shown, r.total).trim(),
        v(r.total)
    );
    if r.dropped_nodes > 0 {
        let nodes = if r.dropped_nodes > 1 { "nodes" } else { "node" };
        let _ = writeln!(out, "Dropped {} {nodes} (cum <= {})", r.dropped_nodes, v(r.node_cutoff));
    }
    let kept = r.node_total - r.dropped_nodes;
    if r.functions.len() < kept {
        let _ = writeln!(out, "Showing top {} nodes out of {kept}", r.functions.len());
    }
    let _ = writeln!(out, "{:>10} {:>6} {:>6} {:>10} {:>6}", "flat", "flat%", "sum%", "cum", "cum%");
    let mut sum = 0;
    for f in &r.functions {
        sum += f.flat;
        let inline = f.inline.map_or(String::new(), |i| format!(" ({})", i.as_str()));
        let _ = writeln!(
            out,
            "{:>10} {} {} {:>10} {}  {}{inline}",
            v(f.flat),
            percentage(f.flat, r.total),
            percentage(sum, r.total),
            v(f.cum),
            percentage(f.cum, r.total),
            f.name
        );
    }
    out
}

pub fn diff(r: &DiffReport) -> String {
    let unit = report_unit(r.functions.iter().map(|f| (f.flat_delta, f.cum_delta)), r.base_total, &r.unit);
    let v = |x: i64| format_value_in(x, &r.unit, &unit);
    let mut out = String::new();
    let _ = writeln!(out, "Type: {}", r.sample_type);
    let _ = writeln!(
        out,
        "Total: {} -> {} ({:+.2}%){}",
        v(r.base_total),
        v(r.compare_total),
        r.overall_delta_pct,
        if r.normalized { " [normalized]" } else { "" }
    );
    for (title, list) in [("Regressions", &r.regressions), ("Improvements", &r.improvements)] {
        let _ = writeln!(out, "\n{title} ({}):", list.len());
        for f in list.iter().take(20) {
            let _ = writeln!(
                out,
                "  flat {:>9} ({:>+6.2}%)  cum {:>9} ({:>+6.2}%)  {}",
                v(f.flat_delta),
                f.flat_delta_pct,
                v(f.cum_delta),
                f.cum_delta_pct,
                f.name
            );
        }
    }
    let _ = writeln!(out, "\nUnchanged (within ±{}): {}", v(r.noise_threshold), r.unchanged);
    let _ = writeln!(out, "New stacks: {}, removed stacks: {}", r.new_stack_count, r.removed_stack_count);
    for s in r.new_stacks.iter().take(5) {
        let _ = writeln!(out, "  + {:>10}  {}", v(s.compare), s.frames.join(" > "));
    }
    for s in r.removed_stacks.iter().take(5) {
        let _ = writeln!(out, "  - {:>10}  {}", v(s.base), s.frames.join(" > "));
    }
    out
}

fn group(out: &mut String, g: &GoroutineGroup, prefix: &str) {
    let wait = g.max_wait_minutes.map(|m| format!(", up to {m} minutes")).unwrap_or_default();
    let _ = writeln!(out, "{prefix}{:>7}  [{}{wait}]", g.count, g.state);
    for (f, at) in g.frames.iter().zip(&g.locations) {
        let _ = writeln!(out, "           {f}  {at}");
    }
    if let Some(c) = &g.created_by {
        let _ = writeln!(out, "           created by {c}");
    }
}

pub fn goroutines(r: &GoroutineReport, comparison: Option<&GoroutineComparison>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Goroutines: {}", r.goroutine_count);
    let mut states: Vec<_> = r.by_state.iter().collect();
    states.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    for (state, count) in states {
        let _ = writeln!(out, "  {count:>7}  {state}");
    }
    if r.states_inferred {
        let _ = writeln!(out, "  (states inferred from stack frames; a debug=2 dump has exact states)");
    }
    let _ = writeln!(out, "\nBlocked: {} in {} groups", r.blocked_count, r.blocked_goroutines.len());
    let _ = writeln!(out, "\nStacks ({} groups):", r.group_count);
    for g in &r.top_stacks {
        group(&mut out, g, "  ");
    }
    if let Some(c) = comparison {
        let rate = c.goroutine_growth_rate.map_or("n/a".to_owned(), |r| format!("{r:.2}x"));
        let _ = writeln!(out, "\nGrowth: {} -> {} ({:+}, {rate})", c.base_count, c.compare_count, c.growth_count);
        let _ = writeln!(out, "New stacks ({}):", c.new_stacks.len());
        for g in &c.new_stacks {
            group(&mut out, g, "+ ");
        }
        let _ = writeln!(out, "Grown stacks ({}):", c.grown_stacks.len());
        for g in &c.grown_stacks {
            let _ = writeln!(out, "  {:+} (from {})", g.delta, g.base_count);
            group(&mut out, &g.group, "  ");
        }
    }
    out
}
