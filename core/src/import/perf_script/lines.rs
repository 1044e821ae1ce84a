//! The lines of `perf script` output, each read on its own: a record's header line, a
//! frame line and a `file:line` srcline, and whether a text starts like this output.

/// What a record's header line says.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct EventLine<'a> {
    pub(super) comm: &'a str,
    pub(super) pid: Option<i64>,
    pub(super) tid: Option<i64>,
    pub(super) time_nanos: Option<i64>,
    pub(super) period: Option<i64>,
    pub(super) event: &'a str,
    /// What follows the event name: a frame when perf ran without call graphs.
    pub(super) rest: &'a str,
}

/// Whitespace-separated tokens with their byte offsets.
fn tokens(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((s, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `1224.147545:` → nanoseconds.
fn timestamp(token: &str) -> Option<i64> {
    let (secs, frac) = token.strip_suffix(':')?.split_once('.')?;
    if !is_digits(secs) || !is_digits(frac) || frac.len() > 9 {
        return None;
    }
    let frac_ns: i64 = format!("{frac:0<9}").parse().ok()?;
    secs.parse::<i64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

fn is_cpu(token: &str) -> bool {
    token.strip_prefix('[').and_then(|t| t.strip_suffix(']')).is_some_and(is_digits)
}

/// `6157` or `977/977` → (pid, tid).
fn pid_tid(token: &str) -> Option<(i64, Option<i64>)> {
    match token.split_once('/') {
        Some((p, t)) if is_digits(p) && is_digits(t) => Some((p.parse().ok()?, Some(t.parse().ok()?))),
        None if is_digits(token) => Some((token.parse().ok()?, None)),
        _ => None,
    }
}

/// `cpu-clock:uhH:` → `cpu-clock`; `sched:sched_switch:` stays `sched:sched_switch`.
pub(crate) fn event_name(token: &str) -> &str {
    let name = token.strip_suffix(':').unwrap_or(token);
    match name.rsplit_once(':') {
        Some((base, modifiers))
            if !base.is_empty()
                && !modifiers.is_empty()
                && modifiers.bytes().all(|b| b"ukhIGHpPSDWeb".contains(&b)) =>
        {
            base
        }
        _ => name,
    }
}

/// Parses `comm pid/tid [cpu] time: period event: rest`; the pid, tid, cpu, time and
/// period are each optional, but a time or an event name must be there.
pub(super) fn event_line(line: &str) -> Option<EventLine<'_>> {
    let toks = tokens(line);
    // The anchor: the timestamp, else the first `name:` token after the command.
    let time_at = toks.iter().position(|(_, t)| timestamp(t).is_some());
    let anchor = match time_at {
        Some(i) => i,
        None => (1..toks.len()).find(|&i| {
            let t = toks[i].1;
            t.len() > 1 && t.ends_with(':') && !is_digits(&t[..t.len() - 1])
        })?,
    };
    // Backwards from the anchor: [cpu], pid[/tid], and without a timestamp a period.
    let mut j = anchor;
    let mut period = None;
    if time_at.is_none()
        && j >= 3
        && is_digits(toks[j - 1].1)
        && (is_cpu(toks[j - 2].1) || pid_tid(toks[j - 2].1).is_some())
    {
        period = toks[j - 1].1.parse().ok();
        j -= 1;
    }
    if j >= 2 && is_cpu(toks[j - 1].1) {
        j -= 1;
    }
    let (mut pid, mut tid) = (None, None);
    if j >= 2 {
        if let Some((p, t)) = pid_tid(toks[j - 1].1) {
            (pid, tid) = (Some(p), t);
            j -= 1;
        }
    }
    let comm = if j == 0 { "" } else { line[..toks[j - 1].0 + toks[j - 1].1.len()].trim() };
    // Forwards from the anchor: [period] event:.
    let mut k = anchor;
    let mut time_nanos = None;
    if time_at.is_some() {
        time_nanos = timestamp(toks[anchor].1);
        k += 1;
        if k < toks.len() && is_digits(toks[k].1) {
            period = toks[k].1.parse().ok();
            k += 1;
        }
    }
    let (event, rest) = match toks.get(k) {
        Some(&(at, t)) if t.ends_with(':') => (event_name(t), line[at + t.len()..].trim()),
        Some(&(at, _)) => ("", line[at..].trim()),
        None => ("", ""),
    };
    Some(EventLine { comm, pid, tid, time_nanos, period, event, rest })
}

/// Whether a text starts like `perf script` output: the `--header` banner, or a first
/// record line with a pid and a timestamp.
pub(crate) fn looks_like_perf_script(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty());
    if text.starts_with("# ========\n# captured on") {
        return true;
    }
    let Some(first) = lines.find(|l| !l.starts_with('#')) else { return false };
    if first.starts_with(char::is_whitespace) {
        return false;
    }
    let toks = tokens(first);
    let Some(at) = toks.iter().position(|(_, t)| timestamp(t).is_some()) else { return false };
    let before = |i: usize| at > i && pid_tid(toks[at - i].1).is_some();
    // comm pid [cpu] time: … — the pid right before the time or before the cpu.
    (before(1) || (at >= 3 && is_cpu(toks[at - 1].1) && before(2))) && toks.len() > at + 1
}

/// One frame line: `\t 7f26cab4c0b0 sym+0x12 (/lib/libc.so.6)`, or an inlined one:
/// `\t 7f26cab4c0b0 inner+0x12 (inlined)`.
pub(super) struct Frame<'a> {
    pub(super) address: u64,
    pub(super) symbol: Option<&'a str>,
    pub(super) dso: &'a str,
    pub(super) inlined: bool,
}

/// `text (inlined)` → (`text`, true).
fn strip_inlined(s: &str) -> (&str, bool) {
    match s.strip_suffix("(inlined)") {
        Some(rest) if rest.ends_with(char::is_whitespace) => (rest.trim_end(), true),
        _ => (s, false),
    }
}

/// The index of the `(` matching the `)` that ends `s`.
fn matching_open(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in s.bytes().enumerate().rev() {
        match b {
            b')' => depth += 1,
            b'(' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

pub(super) fn frame(line: &str) -> Option<Frame<'_>> {
    let (t, inlined) = strip_inlined(line.trim());
    let (address, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
    let address = u64::from_str_radix(address.strip_prefix("0x").unwrap_or(address), 16).ok()?;
    let rest = rest.trim();
    let (symbol, dso) = match rest.strip_suffix(')').and(matching_open(rest)) {
        Some(open) if open == 0 || rest[..open].ends_with(char::is_whitespace) => {
            (rest[..open].trim(), &rest[open + 1..rest.len() - 1])
        }
        _ => (rest, ""),
    };
    // `sym+0x1f3` → `sym`: the offset is the address's, not the function's.
    let symbol = match symbol.rsplit_once("+0x") {
        Some((s, off)) if !s.is_empty() && !off.is_empty() && off.bytes().all(|b| b.is_ascii_hexdigit()) => s,
        _ => symbol,
    };
    let symbol = (!symbol.is_empty() && symbol != "[unknown]").then_some(symbol);
    Some(Frame { address, symbol, dso, inlined })
}

/// `/src/x.c:123` after a frame (srcline output) → 123, and whether it ends in
/// ` (inlined)` (which then marks the frame above it).
pub(super) fn srcline(line: &str) -> Option<(i64, bool)> {
    let (text, inlined) = strip_inlined(line.trim());
    let (file, n) = text.rsplit_once(':')?;
    (!file.is_empty() && is_digits(n)).then(|| Some((n.parse().ok()?, inlined))).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_headers_in_their_several_shapes() {
        let e = event_line("go  6157  1224.147545:     250000 cpu-clock:uhH: ").unwrap();
        assert_eq!(
            e,
            EventLine {
                comm: "go",
                pid: Some(6157),
                tid: None,
                time_nanos: Some(1_224_147_545_000),
                period: Some(250_000),
                event: "cpu-clock",
                rest: ""
            }
        );
        let e = event_line("perf   977/977   [000] 7628263.042515: cycles: ").unwrap();
        assert_eq!((e.comm, e.pid, e.tid, e.period, e.event), ("perf", Some(977), Some(977), None, "cycles"));
        let e = event_line("V8 WorkerThread 12 [001] 5.5: 3 sched:sched_switch: prev_comm=x").unwrap();
        assert_eq!(
            (e.comm, e.pid, e.period, e.event, e.rest),
            ("V8 WorkerThread", Some(12), Some(3), "sched:sched_switch", "prev_comm=x")
        );
        let e = event_line("a 1 [002] 100 cycles:ppp:  ffff81 sym+0x1 ([kernel.kallsyms])").unwrap();
        assert_eq!((e.comm, e.pid, e.time_nanos, e.period, e.event), ("a", Some(1), None, Some(100), "cycles"));
        let f = frame(e.rest).unwrap();
        assert_eq!((f.address, f.symbol, f.dso), (0xffff81, Some("sym"), "[kernel.kallsyms]"));
        assert!(event_line("just some words").is_none());
    }

    #[test]
    fn frame_lines() {
        let f = frame("\t 7f00 std::vector<int>::push_back(int const&) (/usr/lib/x.so (deleted))").unwrap();
        assert_eq!((f.symbol, f.dso), (Some("std::vector<int>::push_back(int const&)"), "/usr/lib/x.so (deleted)"));
        let f = frame("\t0 [unknown] ([unknown])").unwrap();
        assert_eq!((f.address, f.symbol, f.dso), (0, None, "[unknown]"));
        let f = frame("\tffffffff81 ([kernel.kallsyms])").unwrap();
        assert_eq!((f.symbol, f.dso), (None, "[kernel.kallsyms]"));
        assert!(frame("\tnot-hex sym (dso)").is_none());
        let f = frame("\t 11a4 inner+0x34 (inlined)").unwrap();
        assert_eq!((f.address, f.symbol, f.dso, f.inlined), (0x11a4, Some("inner"), "", true));
        let f = frame("\t 11a4 outer+0x34 (/tmp/inl)").unwrap();
        assert_eq!((f.symbol, f.dso, f.inlined), (Some("outer"), "/tmp/inl", false));
        assert_eq!(srcline("  inl.c:3 (inlined)"), Some((3, true)));
        assert_eq!(srcline("  inl.c:11"), Some((11, false)));
        assert!(frame("  inl.c:3 (inlined)").is_none());
    }
}
