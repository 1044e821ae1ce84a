//! Value formatting identical to pprof's `measurement` package, so that numbers printed
//! by stacklens read exactly like `go tool pprof -top`.

struct Unit {
    name: &'static str,
    aliases: &'static [&'static str],
    factor: f64,
}

const MEMORY: &[Unit] = &[
    Unit { name: "B", aliases: &["b", "byte"], factor: 1.0 },
    Unit { name: "kB", aliases: &["kb", "kbyte", "kilobyte"], factor: 1024.0 },
    Unit { name: "MB", aliases: &["mb", "mbyte", "megabyte"], factor: 1048576.0 },
    Unit { name: "GB", aliases: &["gb", "gbyte", "gigabyte"], factor: 1073741824.0 },
    Unit { name: "TB", aliases: &["tb", "tbyte", "terabyte"], factor: 1099511627776.0 },
    Unit { name: "PB", aliases: &["pb", "pbyte", "petabyte"], factor: 1125899906842624.0 },
];

const TIME: &[Unit] = &[
    Unit { name: "ns", aliases: &["nanosecond"], factor: 1.0 },
    Unit { name: "us", aliases: &["μs", "microsecond"], factor: 1e3 },
    Unit { name: "ms", aliases: &["millisecond"], factor: 1e6 },
    Unit { name: "s", aliases: &["sec", "second"], factor: 1e9 },
    Unit { name: "hrs", aliases: &["hour", "hr"], factor: 3600e9 },
];

const GCU: &[Unit] = &[
    Unit { name: "n*GCU", aliases: &["nanogcu"], factor: 0.001 },
    Unit { name: "u*GCU", aliases: &["microgcu"], factor: 1.0 },
    Unit { name: "m*GCU", aliases: &["milligcu"], factor: 1e3 },
    Unit { name: "GCU", aliases: &["gcu"], factor: 1e6 },
    Unit { name: "k*GCU", aliases: &["kilogcu"], factor: 1e9 },
    Unit { name: "M*GCU", aliases: &["megagcu"], factor: 1e12 },
    Unit { name: "G*GCU", aliases: &["gigagcu"], factor: 1e15 },
    Unit { name: "T*GCU", aliases: &["teragcu"], factor: 1e18 },
    Unit { name: "P*GCU", aliases: &["petagcu"], factor: 1e21 },
];

/// (units, index of the default unit used when no unit fits).
const UNIT_TYPES: &[(&[Unit], usize)] = &[(MEMORY, 0), (TIME, 3), (GCU, 3)];

fn find(units: &[Unit], unit: &str) -> Option<usize> {
    let lower = unit.to_lowercase();
    let lower = if lower.len() > 2 { lower.strip_suffix('s').unwrap_or(&lower) } else { &lower };
    units.iter().position(|u| u.name == unit || u.name == lower || u.aliases.contains(&lower))
}

/// Scales `value` of `unit` to the largest unit in which it is at least 1 (pprof's
/// "minimum" output unit). Returns the scaled value and the unit label ("" for counts).
pub fn scale(value: i64, unit: &str) -> (f64, &'static str) {
    if value < 0 && value != i64::MIN {
        let (v, u) = scale(-value, unit);
        return (-v, u);
    }
    for (units, default) in UNIT_TYPES {
        let Some(from) = find(units, unit) else { continue };
        let base = value as f64 * units[from].factor;
        let mut best: Option<&Unit> = None;
        for u in units.iter() {
            if base / u.factor >= 1.0 && best.is_none_or(|b| u.factor >= b.factor) {
                best = Some(u);
            }
        }
        let u = best.unwrap_or(&units[*default]);
        return (base / u.factor, u.name);
    }
    (value as f64, "")
}

/// `1.34s`, `5.51MB`, `52001`, `0` — pprof's `ScaledLabel(v, unit, "minimum")`.
pub fn format_value(value: i64, unit: &str) -> String {
    let (v, u) = scale(value, unit);
    label(v, u)
}

/// pprof's `measurement.Scale(value, from, to)`: `to` a unit of `from`'s kind (`ms`,
/// `MB`, …; a unit of another kind gives the kind's default, seconds or bytes),
/// `minimum`/`auto` for the largest unit that keeps it at least 1; counts and unknown
/// units pass through, labelled `to` unless it names a count.
pub fn scale_to(value: i64, from: &str, to: &str) -> (f64, String) {
    if matches!(to, "minimum" | "auto") {
        let (v, u) = scale(value, from);
        return (v, u.to_owned());
    }
    for (units, default) in UNIT_TYPES {
        let Some(f) = find(units, from) else { continue };
        let to = find(units, to).map_or(&units[*default], |t| &units[t]);
        return (value as f64 * units[f].factor / to.factor, to.name.to_owned());
    }
    match to {
        "count" | "sample" | "unit" => (value as f64, String::new()),
        _ => (value as f64, to.to_owned()),
    }
}

/// pprof's `ScaledLabel(v, from, to)` for a fixed output unit.
pub fn format_value_in(value: i64, from: &str, to: &str) -> String {
    let (v, u) = scale_to(value, from, to);
    label(v, &u)
}

/// pprof's `selectOutputUnit`: one unit for a whole report, from its smallest shown
/// value (flat, or cum where flat is 0) and the total; the smallest value may go down
/// to 0.01 of the unit so that it does not force tiny units on large numbers.
pub fn report_unit(shown: impl IntoIterator<Item = (i64, i64)>, total: i64, unit: &str) -> String {
    let min = shown
        .into_iter()
        .map(|(flat, cum)| if flat != 0 { flat.unsigned_abs() } else { cum.unsigned_abs() })
        .filter(|&v| v > 0)
        .min();
    let max = total.unsigned_abs() as i64;
    let min = min.map_or(max, |m| m as i64);
    let (_, min_unit) = scale(min, unit);
    let (_, max_unit) = scale(max, unit);
    let chosen = if min_unit != max_unit && min.saturating_mul(100) < max {
        scale(min.saturating_mul(100), unit).1
    } else {
        min_unit
    };
    if chosen.is_empty() {
        unit.to_owned()
    } else {
        chosen.to_owned()
    }
}

fn label(v: f64, u: &str) -> String {
    let s = format!("{v:.2}");
    let s = s.strip_suffix(".00").unwrap_or(&s);
    if s == "0" || s == "-0" {
        return "0".to_owned();
    }
    format!("{s}{u}")
}

/// pprof's `Percentage`: `18.93%`, `  100%`, ` 0.5%`.
/// `value` as a percentage of `total`, to two decimals (as pprof prints it), for JSON.
pub fn percentage_value(value: i64, total: i64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    (value as f64 / total as f64 * 10_000.0).round() / 100.0
}

pub fn percentage(value: i64, total: i64) -> String {
    let ratio = if total != 0 { (value as f64 / total as f64).abs() * 100.0 } else { 0.0 };
    if (99.95..=100.05).contains(&ratio) {
        "  100%".to_owned()
    } else if ratio >= 1.0 {
        format!("{ratio:5.2}%")
    } else {
        format!("{:>5}%", format_g2(ratio))
    }
}

/// Go's `%.2g`: two significant digits, trailing zeros dropped, exponent when tiny.
fn format_g2(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    let exp = x.abs().log10().floor() as i32;
    // Rounding can carry into the next power of ten (0.0999 -> 0.1).
    let rounded: f64 = format!("{:.1e}", x).parse().unwrap_or(x);
    let exp = if rounded.abs() >= 10f64.powi(exp + 1) { exp + 1 } else { exp };
    if !(-4..2).contains(&exp) {
        let mantissa = rounded / 10f64.powi(exp);
        let m = format!("{mantissa:.1}");
        let m = m.strip_suffix(".0").unwrap_or(&m);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (1 - exp).max(0) as usize;
    let s = format!("{rounded:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_like_pprof() {
        assert_eq!(format_value(1_340_000_000, "nanoseconds"), "1.34s");
        assert_eq!(format_value(2_587_100_000_000, "nanoseconds"), "2587.10s");
        assert_eq!(format_value(25_000_000_000, "nanoseconds"), "25s");
        assert_eq!(format_value(690_510_000, "nanoseconds"), "690.51ms");
        assert_eq!(format_value(7_812_500, "bytes"), "7.45MB");
        assert_eq!(format_value(52001, "count"), "52001");
        assert_eq!(format_value(0, "nanoseconds"), "0");
        assert_eq!(format_value(-320_000_000, "nanoseconds"), "-320ms");
        assert_eq!(format_value_in(-320_000_000, "nanoseconds", "s"), "-0.32s");
        assert_eq!(format_value_in(60_000_000, "nanoseconds", "s"), "0.06s");
        assert_eq!(format_value_in(52001, "count", "count"), "52001");
        assert_eq!(format_value(7_801_170_000_000, "nanoseconds"), "2.17hrs");
    }

    #[test]
    fn scales_like_pprof_measurement() {
        assert_eq!(scale_to(32, "kb", "kb"), (32.0, "kB".to_owned()));
        assert_eq!(scale_to(16384, "bytes", "kB"), (16.0, "kB".to_owned()));
        assert_eq!(scale_to(3, "hr", "minimum"), (3.0, "hrs".to_owned()));
        // Another kind's unit gives the kind's default; an unknown unit passes through.
        assert_eq!(scale_to(4_000_000, "ms", "kB"), (4000.0, "s".to_owned()));
        assert_eq!(scale_to(64, "bytes", ""), (64.0, "B".to_owned()));
        assert_eq!(scale_to(64, "", ""), (64.0, String::new()));
        assert_eq!(scale_to(7, "requests", "count"), (7.0, String::new()));
        assert_eq!(scale_to(7, "requests", "widgets"), (7.0, "widgets".to_owned()));
    }

    #[test]
    fn one_unit_per_report() {
        // cpu.pprof-top: smallest shown 0.06s, total 7.08s -> seconds
        assert_eq!(report_unit([(60_000_000, 80_000_000), (1_340_000_000, 0)], 7_080_000_000, "nanoseconds"), "s");
        // 0.04s of 5020ms total with ms values
        assert_eq!(report_unit([(56_570_000, 0)], 5_020_650_000, "nanoseconds"), "ms");
        assert_eq!(report_unit([(0, 780)], 52004, "count"), "count");
    }

    #[test]
    fn percentages_read_like_pprof() {
        assert_eq!(percentage(134, 708), "18.93%");
        assert_eq!(percentage(708, 708), "  100%");
        assert_eq!(percentage(5, 1000), "  0.5%");
        assert_eq!(percentage(1, 5994), "0.017%");
        assert_eq!(percentage(0, 10), "    0%");
        assert_eq!(percentage(1, 208335), "0.00048%");
    }
}
