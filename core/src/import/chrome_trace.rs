//! Chrome DevTools performance traces (Trace Event format: a JSON array of events or
//! `{"traceEvents": [...]}`), as the Performance panel saves them. The JavaScript
//! samples are in `Profile` events (one per profiled thread, with its `startTime`)
//! followed by `ProfileChunk`s carrying `cpuProfile.nodes`, `cpuProfile.samples` and
//! `timeDeltas`; chunks name their profile by `id` within the process (they are
//! written from the sampler thread, so their own `tid` is not the profiled thread).
//! Older traces have one `CpuProfile` event holding a whole profile.
//!
//! Every profile becomes samples as a `.cpuprofile` does (see [`super::v8`]: sample
//! types, the time rule, `timestamp` labels), labelled with the profiled thread: a
//! `thread` label (process and thread names from the trace's metadata events, with
//! pid:tid) and numeric `pid` and `tid` labels. A trace with no CPU profile (only
//! duration events) is refused with a message saying how to record one.

use rustc_hash::FxHashMap;
use serde_json::Value;

use super::v8::{self, CpuData, Frames, Node};
use crate::model::{Label, LabelValue, SourceFormat};
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

pub fn parse(json: &Value) -> Result<Profile> {
    let events = events(json).unwrap_or(&[]);
    let mut thread_names: FxHashMap<(i64, i64), &str> = FxHashMap::default();
    let mut process_names: FxHashMap<i64, &str> = FxHashMap::default();
    let mut profile_events: Vec<&Value> = Vec::new();
    for e in events {
        let pid = e["pid"].as_i64().unwrap_or(0);
        match e["name"].as_str() {
            Some("thread_name") => {
                if let Some(name) = e["args"]["name"].as_str() {
                    thread_names.insert((pid, e["tid"].as_i64().unwrap_or(0)), name);
                }
            }
            Some("process_name") => {
                if let Some(name) = e["args"]["name"].as_str() {
                    process_names.insert(pid, name);
                }
            }
            Some("Profile" | "ProfileChunk" | "CpuProfile") => profile_events.push(e),
            _ => {}
        }
    }
    if profile_events.is_empty() {
        let hint = if events.is_empty() {
            "a Chrome trace with no events, so no CPU profile".to_owned()
        } else {
            format!(
                "a Chrome trace of {} events without a CPU profile (no Profile or ProfileChunk events); \
                 record it in the DevTools Performance panel, or trace the disabled-by-default-v8.cpu_profiler \
                 category",
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
    let (thread_key, pid_key, tid_key) = (p.strings.intern("thread"), p.strings.intern("pid"), p.strings.intern("tid"));
    let no_unit = p.strings.intern("");
    let mut periods = Vec::new();
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
        periods.push(v8::median_interval(&times));
        let name = thread_label(&process_names, &thread_names, g.pid, g.tid);
        let labels = [
            Label { key: thread_key, value: LabelValue::Str(p.strings.intern(&name)) },
            Label { key: pid_key, value: LabelValue::Num { value: g.pid, unit: no_unit } },
            Label { key: tid_key, value: LabelValue::Num { value: g.tid, unit: no_unit } },
        ];
        let data =
            CpuData { nodes: g.nodes, samples, times: Some(times), start: g.start, end: g.end, hit_counts_only: false };
        v8::add_cpu_samples(&mut p, &mut frames, &data, &labels)?;
    }
    p.period = periods.into_iter().max().unwrap_or(0);
    Ok(p)
}

/// `Renderer CrRendererMain (6543:259)`, from the trace's metadata where it has names.
fn thread_label(processes: &FxHashMap<i64, &str>, threads: &FxHashMap<(i64, i64), &str>, pid: i64, tid: i64) -> String {
    match (processes.get(&pid), threads.get(&(pid, tid))) {
        (Some(p), Some(t)) => format!("{p} {t} ({pid}:{tid})"),
        (None, Some(t)) => format!("{t} ({pid}:{tid})"),
        (Some(p), None) => format!("{p} ({pid}:{tid})"),
        (None, None) => format!("{pid}:{tid}"),
    }
}
