//! Chrome traces in the Trace Event format (a JSON array of events or
//! `{"traceEvents": [...]}`), of two kinds:
//!
//! * **CPU profiles**, as the DevTools Performance panel saves them. The JavaScript
//!   samples are in `Profile` events (one per profiled thread, with its `startTime`)
//!   followed by `ProfileChunk`s carrying `cpuProfile.nodes`, `cpuProfile.samples` and
//!   `timeDeltas`; chunks name their profile by `id` within the process (they are
//!   written from the sampler thread, so their own `tid` is not the profiled thread).
//!   Older traces have one `CpuProfile` event holding a whole profile. Every profile
//!   becomes samples as a `.cpuprofile` does (see [`super::v8`]: sample types, the time
//!   rule, `timestamp` labels, sample times), times counting from the earliest
//!   profile's start.
//! * **Duration events** (about:tracing, Perfetto's JSON export, `chrome://tracing`,
//!   any tool writing the format): `B`/`E` pairs and `X` complete events (`ts` and `dur`
//!   in microseconds, fractions allowed), nested into a stack per thread (`pid`, `tid`).
//!   Each stretch of time in which a thread's stack stays the same becomes one sample
//!   whose value is its length (self time), in one sample type `wall`/`nanoseconds`,
//!   with its span (from the trace's first event) in [`Profile::sample_times`]; a
//!   thread's total is the time covered by its events (gaps between top-level events
//!   are not counted). Functions are event `name`s.
//!
//! Samples are labelled with their thread: a `thread` label (process and thread names
//! from the `M` metadata events `process_name`/`thread_name`, with pid:tid) and `pid` and
//! `tid` labels (numbers; strings when the trace has string ids).
//!
//! A trace with both reads the CPU profile only (as speedscope does): its duration
//! events describe the same time at a coarser grain, and the two kinds of value cannot
//! share samples. A comment in the profile says how many duration events were left out.
//!
//! How duration events nest (the Trace Event format allows them out of order):
//! * per thread, events are taken in `ts` order; at one `ts`, ends before begins, and
//!   among begins longer `X` events (and `B`s, whose length is unknown) first, then
//!   file order, so a parent opens before a child starting at the same time;
//! * an `X` closes at `ts + dur` (`tdur` when `dur` is absent, as speedscope); with
//!   neither, or a zero `dur`, it covers no time and is skipped;
//! * an `E` closes the innermost open `B` with its name (a nameless `E` the innermost
//!   `B`), and with it whatever is still open inside it (improperly nested events are
//!   cut there; their own ends then find nothing to close). speedscope instead ignores an
//!   `E` that does not name the top of the stack; for well-nested traces both agree;
//! * an `E` that closes nothing is skipped (so does speedscope), as are frames still
//!   open at the thread's last event (closed there: no time after it; speedscope too);
//!   skips are counted in the profile's comments;
//! * a `B`/`E`/`X` without a numeric `ts`, or an `X` with a negative or non-numeric
//!   `dur`, is a typed error ([`Error::Invalid`]) naming the event; other phases
//!   (instant, counter, async, flow, sample, metadata…) are ignored.

use std::cmp::Reverse;

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::v8::{self, CpuData, Frames, Node};
use crate::model::{Label, LabelValue, Line, LocationId, Sample, SampleTime, SourceFormat, StrId};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("Chrome trace: {}", what.into()))
}

/// The events of a trace document, when it has the Trace Event shape.
fn events(json: &Value) -> Option<&[Value]> {
    match json {
        Value::Object(map) => map.get("traceEvents")?.as_array().map(Vec::as_slice),
        Value::Array(items) => {
            let first = items.first()?;
            (first.get("ph").is_some() && first.get("pid").is_some()).then_some(items.as_slice())
        }
        _ => None,
    }
}

/// Whether `json` is a Trace Event document (with or without a CPU profile).
pub(crate) fn is_chrome_trace(json: &Value) -> bool {
    events(json).is_some()
}

/// One profiled thread's chunks, gathered in time order.
struct Gathered<'a> {
    pid: i64,
    tid: i64,
    start: Option<i64>,
    end: Option<i64>,
    nodes: Vec<Node<'a>>,
    samples: Vec<&'a Value>,
    deltas: Vec<&'a Value>,
}

fn id_key(event: &Value) -> String {
    match event.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => format!("tid {}", event["tid"].as_i64().unwrap_or(0)),
    }
}

fn add_nodes<'a>(into: &mut Vec<Node<'a>>, profile: &'a Value) -> Result<()> {
    match profile.get("nodes") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(nodes)) => {
            for node in nodes {
                into.push(Node::from_json(node, into.len())?);
            }
            Ok(())
        }
        Some(other) => Err(invalid(format!("a profile's nodes are {other}, not a list"))),
    }
}

fn extend<'a>(into: &mut Vec<&'a Value>, list: Option<&'a Value>, what: &str) -> Result<()> {
    match list {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) => {
            into.extend(items.iter());
            Ok(())
        }
        Some(other) => Err(invalid(format!("{what} is {other}, not a list"))),
    }
}

fn time(v: Option<&Value>, what: &str) -> Result<Option<i64>> {
    v.filter(|v| !v.is_null()).map(|v| v8::micros(v, || what.to_owned())).transpose()
}

/// A process or thread id as the trace writes it (numbers, sometimes strings).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    fn of(v: &Value) -> Id {
        match v {
            Value::String(s) => Id::Str(s.clone()),
            v => Id::Num(v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).unwrap_or(0)),
        }
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => f.write_str(s),
        }
    }
}

/// Process and thread names from the trace's `M` events.
#[derive(Default)]
struct Names<'a> {
    processes: FxHashMap<Id, &'a str>,
    threads: FxHashMap<(Id, Id), &'a str>,
}

impl Names<'_> {
    /// `Renderer CrRendererMain (6543:259)`, from the trace's metadata where it has names.
    fn thread_label(&self, pid: &Id, tid: &Id) -> String {
        match (self.processes.get(pid), self.threads.get(&(pid.clone(), tid.clone()))) {
            (Some(p), Some(t)) => format!("{p} {t} ({pid}:{tid})"),
            (None, Some(t)) => format!("{t} ({pid}:{tid})"),
            (Some(p), None) => format!("{p} ({pid}:{tid})"),
            (None, None) => format!("{pid}:{tid}"),
        }
    }

    /// The `thread`, `pid` and `tid` labels of a thread's samples.
    fn labels(&self, p: &mut Profile, pid: &Id, tid: &Id) -> Vec<Label> {
        let name = self.thread_label(pid, tid);
        let mut labels =
            vec![Label { key: p.strings.intern("thread"), value: LabelValue::Str(p.strings.intern(&name)) }];
        for (key, id) in [("pid", pid), ("tid", tid)] {
            let value = match id {
                Id::Num(n) => LabelValue::Num { value: *n, unit: StrId(0) },
                Id::Str(s) => LabelValue::Str(p.strings.intern(s)),
            };
            labels.push(Label { key: p.strings.intern(key), value });
        }
        labels
    }
}

fn is_duration(e: &Value) -> bool {
    matches!(e["ph"].as_str(), Some("B" | "E" | "X"))
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let events = events(json).unwrap_or(&[]);
    let mut names = Names::default();
    let mut profile_events: Vec<&Value> = Vec::new();
    let mut durations = 0usize;
    for e in events {
        let pid = Id::of(&e["pid"]);
        match e["name"].as_str() {
            Some("thread_name") if e["ph"] == "M" || e["ph"].is_null() => {
                if let Some(name) = e["args"]["name"].as_str() {
                    names.threads.insert((pid, Id::of(&e["tid"])), name);
                }
            }
            Some("process_name") if e["ph"] == "M" || e["ph"].is_null() => {
                if let Some(name) = e["args"]["name"].as_str() {
                    names.processes.insert(pid, name);
                }
            }
            Some("Profile" | "ProfileChunk" | "CpuProfile") if !is_duration(e) => profile_events.push(e),
            _ => durations += usize::from(is_duration(e)),
        }
    }
    if profile_events.is_empty() {
        if durations > 0 {
            return parse_durations(events, &names, &mut room);
        }
        let hint = if events.is_empty() {
            "a Chrome trace with no events, so no CPU profile".to_owned()
        } else {
            format!(
                "a Chrome trace of {} events with neither a CPU profile (Profile or ProfileChunk events) nor \
                 duration events (ph B, E or X); record it in the DevTools Performance panel, or trace the \
                 disabled-by-default-v8.cpu_profiler category",
                events.len()
            )
        };
        return Err(Error::UnknownFormat { hint });
    }
    // Events are not always written in time order; chunks must be joined in it.
    profile_events.sort_by(|a, b| {
        let (ta, tb) = (a["ts"].as_f64().unwrap_or(0.0), b["ts"].as_f64().unwrap_or(0.0));
        ta.total_cmp(&tb)
    });
    let mut order: Vec<(i64, String)> = Vec::new();
    let mut gathered: FxHashMap<(i64, String), Gathered<'_>> = FxHashMap::default();
    for e in profile_events {
        let (pid, tid) = (e["pid"].as_i64().unwrap_or(0), e["tid"].as_i64().unwrap_or(0));
        let key = (pid, id_key(e));
        let data = &e["args"]["data"];
        let fresh = || Gathered {
            pid,
            tid,
            start: None,
            end: None,
            nodes: Vec::new(),
            samples: Vec::new(),
            deltas: Vec::new(),
        };
        if !gathered.contains_key(&key) {
            order.push(key.clone());
        }
        let g = gathered.entry(key).or_insert_with(fresh);
        match e["name"].as_str() {
            Some("Profile") => {
                g.tid = tid;
                g.start = time(data.get("startTime"), "a Profile's startTime")?.or(g.start);
            }
            Some("CpuProfile") => {
                let profile = &data["cpuProfile"];
                g.tid = tid;
                g.start = time(profile.get("startTime"), "a CpuProfile's startTime")?.or(g.start);
                g.end = time(profile.get("endTime"), "a CpuProfile's endTime")?.or(g.end);
                add_nodes(&mut g.nodes, profile)?;
                extend(&mut g.samples, profile.get("samples"), "a CpuProfile's samples")?;
                let deltas = profile.get("timeDeltas").or(data.get("timeDeltas"));
                extend(&mut g.deltas, deltas, "a CpuProfile's timeDeltas")?;
            }
            _ => {
                let profile = &data["cpuProfile"];
                add_nodes(&mut g.nodes, profile)?;
                extend(&mut g.samples, profile.get("samples"), "a ProfileChunk's samples")?;
                extend(&mut g.deltas, data.get("timeDeltas"), "a ProfileChunk's timeDeltas")?;
                g.end = time(data.get("endTime"), "a ProfileChunk's endTime")?.or(g.end);
            }
        }
    }

    let mut p = Profile::new(SourceFormat::ChromeTrace);
    v8::cpu_sample_types(&mut p, true);
    let mut frames = Frames::default();
    let mut periods = Vec::new();
    // Sample times count from the earliest profile's start (its deltas' base).
    let origin = gathered.values().filter(|g| !g.samples.is_empty()).map(|g| g.start.unwrap_or(0)).min().unwrap_or(0);
    for key in &order {
        let g = gathered.remove(key).expect("gathered under its key");
        if g.nodes.is_empty() {
            if g.samples.is_empty() {
                continue; // A profile started but never sampled.
            }
            return Err(invalid(format!("the profile {} of process {} has samples but no nodes", key.1, key.0)));
        }
        if g.deltas.len() != g.samples.len() {
            return Err(invalid(format!(
                "the profile {} of process {} has {} samples but {} timeDeltas",
                key.1,
                key.0,
                g.samples.len(),
                g.deltas.len()
            )));
        }
        let samples = g
            .samples
            .iter()
            .enumerate()
            .map(|(i, s)| s.as_u64().ok_or_else(|| invalid(format!("sample {i} is {s}, not a node id"))))
            .collect::<Result<Vec<u64>>>()?;
        let times = v8::times_from_deltas(g.start.unwrap_or(0), g.deltas.iter().copied())?;
        periods.push(super::median_interval([times.as_slice()]));
        let labels = names.labels(&mut p, &Id::Num(g.pid), &Id::Num(g.tid));
        let data =
            CpuData { nodes: g.nodes, samples, times: Some(times), start: g.start, end: g.end, hit_counts_only: false };
        v8::add_cpu_samples(&mut p, &mut frames, &data, &labels, origin, &mut room)?;
    }
    p.period = periods.into_iter().max().unwrap_or(0);
    if durations > 0 {
        let note = format!("{durations} duration events (ph B, E, X) not imported: the trace's CPU profile is");
        let note = p.strings.intern(&note);
        p.comments.push(note);
    }
    Ok(p)
}

/// One end of a duration event, in a thread's timeline.
struct Edge<'a> {
    ns: i64,
    /// Index of the event in the trace (file order, for ties and messages).
    seq: usize,
    name: Option<&'a str>,
    kind: EdgeKind,
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum EdgeKind {
    /// `B`, or the start of the `X` event `seq` lasting `span` ns.
    Begin { x: bool, span: i64 },
    /// `E`, or the end of an `X` (which closes exactly that `X`).
    End { x: bool },
}

/// An open frame: its location, and the `X` event it is (None for a `B`).
struct Open<'a> {
    location: LocationId,
    x: Option<usize>,
    name: &'a str,
}

/// Times are bounded so that sums and differences of them cannot overflow.
const MAX_MICROS: f64 = 1e15;

fn nanos(e: &Value, field: &str, seq: usize) -> Result<Option<i64>> {
    let what = || {
        let ph = e["ph"].as_str().unwrap_or("?");
        match e["name"].as_str() {
            Some(name) => format!("event {seq} ({ph} '{name}')"),
            None => format!("event {seq} ({ph})"),
        }
    };
    match e.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(f) if f.is_finite() && f.abs() < MAX_MICROS => Ok(Some((f * 1000.0).round() as i64)),
            _ => Err(invalid(format!("{} has {field} {v}, not a time in microseconds", what()))),
        },
    }
    .and_then(|t| match t {
        Some(t) if field != "ts" && t < 0 => Err(invalid(format!("{} has a negative {field} {}", what(), e[field]))),
        None if field == "ts" => Err(invalid(format!("{} has no ts", what()))),
        t => Ok(t),
    })
}

/// Self time per stack from the `B`/`E`/`X` events (see the module documentation).
fn parse_durations<'a>(events: &'a [Value], names: &Names<'_>, room: &mut super::Room) -> Result<Profile> {
    let mut threads: FxHashMap<(Id, Id), Vec<Edge<'a>>> = FxHashMap::default();
    for (seq, e) in events.iter().enumerate() {
        let ph = match e["ph"].as_str() {
            Some(ph @ ("B" | "E" | "X")) => ph,
            _ => continue,
        };
        let ns = nanos(e, "ts", seq)?.expect("ts is required");
        let name = e["name"].as_str();
        let edges = threads.entry((Id::of(&e["pid"]), Id::of(&e["tid"]))).or_default();
        match ph {
            "B" => edges.push(Edge { ns, seq, name, kind: EdgeKind::Begin { x: false, span: i64::MAX } }),
            "E" => edges.push(Edge { ns, seq, name, kind: EdgeKind::End { x: false } }),
            _ => {
                let dur = match nanos(e, "dur", seq)? {
                    Some(d) => Some(d),
                    None => nanos(e, "tdur", seq)?,
                };
                let Some(span) = dur.filter(|&d| d > 0) else { continue };
                edges.push(Edge { ns, seq, name, kind: EdgeKind::Begin { x: true, span } });
                edges.push(Edge { ns: ns + span, seq, name, kind: EdgeKind::End { x: true } });
            }
        }
    }

    let mut p = Profile::new(SourceFormat::ChromeTrace);
    let wall = p.value_type("wall", "nanoseconds");
    p.sample_types = vec![wall];
    p.period_type = Some(wall);
    let mut locations: FxHashMap<&'a str, LocationId> = FxHashMap::default();
    let mut location = |p: &mut Profile, name: &'a str| -> LocationId {
        if let Some(&l) = locations.get(name) {
            return l;
        }
        let function = p.add_function(name, name, "", 0);
        let l = p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        locations.insert(name, l);
        l
    };
    let mut keys: Vec<(Id, Id)> = threads.keys().cloned().collect();
    keys.sort();
    let (mut unmatched_ends, mut left_open) = (0usize, 0usize);
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for key in keys {
        let mut edges = threads.remove(&key).expect("a thread under its key");
        edges.sort_by(|a, b| {
            // Ends first; then the longest begin (the parent) first.
            let rank = |e: &Edge<'_>| match e.kind {
                EdgeKind::End { .. } => (0, Reverse(0)),
                EdgeKind::Begin { span, .. } => (1, Reverse(span)),
            };
            a.ns.cmp(&b.ns).then(rank(a).cmp(&rank(b))).then(a.seq.cmp(&b.seq))
        });
        let labels = names.labels(&mut p, &key.0, &key.1);
        // Stretches of time with one stack (leaf first), stretches of one stack in a row
        // joined: the thread's timeline, whose lengths are self times.
        let mut runs: Vec<(Vec<LocationId>, SampleTime)> = Vec::new();
        let mut open: Vec<Open<'a>> = Vec::new();
        let mut i = 0;
        let mut prev: Option<i64> = None;
        while i < edges.len() {
            let now = edges[i].ns;
            (first, last) = (first.min(now), last.max(now));
            if let Some(prev) = prev.filter(|&t| t < now && !open.is_empty()) {
                let stack: Vec<LocationId> = open.iter().rev().map(|o| o.location).collect();
                match runs.last_mut() {
                    Some((last, time)) if *last == stack && time.end() == prev => time.duration += now - prev,
                    _ => {
                        room.take_samples(1, stack.len() as u64)?;
                        runs.push((stack, SampleTime { start: prev, duration: now - prev }));
                    }
                }
            }
            prev = Some(now);
            // Frames closed at `now` because something around them closed, and ends
            // at `now` that found nothing open (a `B` at `now` may still take them).
            let mut cut: Vec<&str> = Vec::new();
            let mut pending: Vec<Option<&str>> = Vec::new();
            let group_end = edges[i..].iter().position(|e| e.ns != now).map_or(edges.len(), |n| i + n);
            for edge in &edges[i..group_end] {
                let name = edge.name.filter(|n| !n.is_empty());
                match edge.kind {
                    EdgeKind::End { x } => {
                        let at = if x {
                            open.iter().rposition(|o| o.x == Some(edge.seq))
                        } else {
                            open.iter().rposition(|o| o.x.is_none() && name.is_none_or(|n| n == o.name))
                        };
                        match at {
                            Some(at) => {
                                cut.extend(open.drain(at..).skip(1).filter(|o| o.x.is_none()).map(|o| o.name));
                            }
                            None if x => {} // Cut short earlier by an enclosing end.
                            None => match cut.iter().position(|c| name.is_none_or(|n| n == *c)) {
                                Some(c) => {
                                    cut.swap_remove(c);
                                }
                                None => pending.push(name),
                            },
                        }
                    }
                    EdgeKind::Begin { x, .. } => {
                        let shown = name.unwrap_or("(unnamed)");
                        // A `B` whose `E` came at the same time (and found nothing
                        // open yet) lasts no time.
                        let ended = (!x)
                            .then(|| pending.iter().position(|n| n.is_none_or(|n| n == shown)))
                            .flatten()
                            .map(|k| pending.swap_remove(k));
                        if ended.is_none() {
                            let location = location(&mut p, shown);
                            open.push(Open { location, x: x.then_some(edge.seq), name: shown });
                        }
                    }
                }
            }
            unmatched_ends += pending.len();
            i = group_end;
        }
        left_open += open.len();
        // Each run was counted in `room` as it was made.
        for (stack, time) in runs {
            p.samples.push(Sample { locations: stack, values: vec![time.duration], labels: labels.clone() });
            p.sample_times.push(time);
        }
    }
    if first <= last {
        p.duration_nanos = last - first;
        // Sample times count from the trace's first event.
        for time in &mut p.sample_times {
            time.start -= first;
        }
    }
    for (n, what) in [
        (unmatched_ends, "end events (E) closing no open event were skipped"),
        (left_open, "events still open at their thread's last event were closed there"),
    ] {
        if n > 0 {
            let note = p.strings.intern(&format!("{n} {what}"));
            p.comments.push(note);
        }
    }
    Ok(p)
}
