//! V8 profiles as Node and Chrome DevTools save them:
//!
//! * `.cpuprofile` (`node --cpu-prof`, DevTools, the inspector's `Profiler.stop`): a node
//!   table (`nodes`, each with a `callFrame` and `children` or `parent` ids), one node id
//!   per sample in `samples`, and `timeDeltas` in microseconds (the first relative to
//!   `startTime`). Old profiles (Node ≤ 10, Chrome ≤ 57) nest the nodes under `head` and
//!   give absolute `timestamps` instead of deltas.
//! * `.heapprofile` (DevTools' sampling heap profiler, `node --heap-prof`): a tree under
//!   `head` whose nodes carry the bytes allocated in the node itself (`selfSize`).
//!
//! Sample types of a CPU profile: `samples/count` and, when the file has times,
//! `wall/microseconds`. The time of a sample is the time until the next sample (what
//! DevTools and speedscope show); the last sample runs until `endTime` when that is
//! after it, else it gets 0. V8 sometimes records a negative delta (samples out of
//! order): samples are then put in time order first, so no duration is negative.
//! Every sample keeps its time as a numeric `timestamp` label in nanoseconds (on the
//! profiler's clock, which is not the wall clock), and its span (from `startTime`, its
//! wall time long) in [`Profile::sample_times`].
//!
//! V8 numbers lines and columns from 0; functions and lines here are 1-based.

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::model::{Label, LabelValue, Line, LocationId, Sample, SampleTime, SourceFormat};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("V8 CPU profile: {}", what.into()))
}

/// Whether `json` is a `.cpuprofile`: a node table or an old `head` tree without the
/// heap profile's `selfSize`, or samples with times (so that a missing node table is
/// reported as such).
pub(crate) fn is_cpuprofile(json: &Value) -> bool {
    let Some(map) = json.as_object() else { return false };
    let array = |k: &str| map.get(k).is_some_and(Value::is_array);
    let old_head = map.get("head").is_some_and(|h| h.is_object() && h.get("selfSize").is_none());
    (array("nodes") && (array("samples") || map.contains_key("startTime")))
        || old_head
        || (array("samples") && (array("timeDeltas") || array("timestamps")))
}

/// Whether `json` is a sampling heap profile (`.heapprofile`).
pub(crate) fn is_heapprofile(json: &Value) -> bool {
    json.get("head").is_some_and(|h| h.get("selfSize").is_some() && h.get("callFrame").is_some())
}

/// One node of the call tree; `frame` holds `functionName`, `url`, `lineNumber`,
/// `columnNumber` (the node's `callFrame`, or the node itself in old profiles).
pub(crate) struct Node<'a> {
    pub id: u64,
    pub frame: &'a Value,
    /// Explicit parent id (trace chunks give parents instead of children).
    pub parent: Option<u64>,
    pub children: Vec<u64>,
    pub hit_count: i64,
}

impl<'a> Node<'a> {
    /// A node of the flat `nodes` table.
    pub(crate) fn from_json(node: &'a Value, position: usize) -> Result<Self> {
        let id = node["id"].as_u64().ok_or_else(|| invalid(format!("node {position} has no numeric id")))?;
        let frame = node.get("callFrame").filter(|f| f.is_object()).unwrap_or(node);
        let children = match node.get("children") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(c)) => c
                .iter()
                .map(|c| c.as_u64().ok_or_else(|| invalid(format!("node {id} has a child that is not an id: {c}"))))
                .collect::<Result<_>>()?,
            Some(other) => return Err(invalid(format!("node {id} has children {other}, not a list of ids"))),
        };
        let parent = match node.get("parent") {
            None | Some(Value::Null) => None,
            Some(p) => Some(p.as_u64().ok_or_else(|| invalid(format!("node {id} has parent {p}, not an id")))?),
        };
        Ok(Node { id, frame, parent, children, hit_count: node["hitCount"].as_i64().unwrap_or(0) })
    }
}

/// A CPU profile in the shape V8 reports it, whichever file it came from.
pub(crate) struct CpuData<'a> {
    pub nodes: Vec<Node<'a>>,
    /// Node id of each sample.
    pub samples: Vec<u64>,
    /// Time of each sample in microseconds, when the file has times.
    pub times: Option<Vec<i64>>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// No `samples` list: each node's `hitCount` is its number of samples.
    pub hit_counts_only: bool,
}

/// A JSON number as whole microseconds: finite and far from overflowing.
pub(crate) fn micros(v: &Value, what: impl FnOnce() -> String) -> Result<i64> {
    match v.as_i64() {
        Some(n) if n.unsigned_abs() < 1 << 53 => Ok(n),
        _ => match v.as_f64() {
            Some(f) if f.is_finite() && f.abs() < 9e15 => Ok(f.round() as i64),
            _ => Err(invalid(format!("{} is {v}, not a time in microseconds", what()))),
        },
    }
}

/// Absolute times from `start` and one delta per sample.
pub(crate) fn times_from_deltas<'a>(start: i64, deltas: impl IntoIterator<Item = &'a Value>) -> Result<Vec<i64>> {
    let mut t = start;
    let mut out = Vec::new();
    for (i, d) in deltas.into_iter().enumerate() {
        let d = micros(d, || format!("time delta {i}"))?;
        t = t.checked_add(d).filter(|t| t.unsigned_abs() < 1 << 60).ok_or_else(|| invalid("time deltas overflow"))?;
        out.push(t);
    }
    Ok(out)
}

fn node_ids(list: Option<&Value>, what: &str) -> Result<Vec<u64>> {
    match list {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| s.as_u64().ok_or_else(|| invalid(format!("{what} {i} is {s}, not a node id"))))
            .collect(),
        Some(other) => Err(invalid(format!("{what}s is {other}, not a list"))),
        None => Ok(Vec::new()),
    }
}

/// Reads a `.cpuprofile` document into [`CpuData`].
fn read_cpuprofile(json: &Value) -> Result<CpuData<'_>> {
    let mut nodes = Vec::new();
    if let Some(list) = json.get("nodes") {
        let list = list.as_array().ok_or_else(|| invalid("nodes is not a list"))?;
        for (i, n) in list.iter().enumerate() {
            nodes.push(Node::from_json(n, i)?);
        }
    } else if let Some(head) = json.get("head").filter(|h| h.is_object()) {
        // Old format: nested nodes, each its own call frame. Iterative: hostile depth.
        let mut pending = vec![head];
        while let Some(n) = pending.pop() {
            let children: Vec<&Value> = n["children"].as_array().map(|c| c.iter().collect()).unwrap_or_default();
            let id = n["id"].as_u64().ok_or_else(|| invalid("a node of the head tree has no numeric id"))?;
            let mut node = Node { id, frame: n, parent: None, children: Vec::new(), hit_count: 0 };
            node.hit_count = n["hitCount"].as_i64().unwrap_or(0);
            for c in &children {
                let child =
                    c["id"].as_u64().ok_or_else(|| invalid(format!("a child of node {id} has no numeric id")))?;
                node.children.push(child);
            }
            nodes.push(node);
            pending.extend(children.into_iter().rev());
        }
    } else {
        return Err(invalid("it has no nodes (neither a nodes list nor a head tree)"));
    }
    if nodes.is_empty() {
        return Err(invalid("its nodes list is empty"));
    }
    let hit_counts_only = json.get("samples").is_none();
    let samples = node_ids(json.get("samples"), "sample")?;
    let start = json.get("startTime").map(|s| micros(s, || "startTime".into())).transpose()?;
    let end = json.get("endTime").map(|s| micros(s, || "endTime".into())).transpose()?;
    let (times, start, end) = if let Some(deltas) = json.get("timeDeltas") {
        let deltas = deltas.as_array().ok_or_else(|| invalid("timeDeltas is not a list"))?;
        if deltas.len() != samples.len() {
            return Err(invalid(format!("it has {} samples but {} timeDeltas", samples.len(), deltas.len())));
        }
        (Some(times_from_deltas(start.unwrap_or(0), deltas)?), start, end)
    } else if let Some(stamps) = json.get("timestamps") {
        let stamps = stamps.as_array().ok_or_else(|| invalid("timestamps is not a list"))?;
        let stamps: Vec<i64> =
            stamps.iter().enumerate().map(|(i, t)| micros(t, || format!("timestamp {i}"))).collect::<Result<_>>()?;
        // Old profiles: absolute microseconds, sometimes led by the start time; their
        // startTime and endTime are in (truncated) seconds and not used.
        let times = match stamps.len().checked_sub(samples.len()) {
            Some(0) => stamps,
            Some(1) => stamps[1..].to_vec(),
            _ => {
                return Err(invalid(format!("it has {} samples but {} timestamps", samples.len(), stamps.len())));
            }
        };
        (Some(times), None, None)
    } else {
        (None, start, end)
    };
    Ok(CpuData { nodes, samples, times, start, end, hit_counts_only })
}

/// Functions and locations shared by every profile of one document, by call frame.
#[derive(Default)]
pub(crate) struct Frames {
    by_frame: FxHashMap<(String, String, i64, i64), LocationId>,
}

/// The name shown for a call frame: anonymous functions get their file and line.
pub(crate) fn frame_name(frame: &Value) -> String {
    let name = frame["functionName"].as_str().unwrap_or("");
    if !name.is_empty() {
        return name.to_owned();
    }
    let url = frame["url"].as_str().unwrap_or("");
    match (url.rsplit('/').next().filter(|b| !b.is_empty()), one_based(&frame["lineNumber"])) {
        (Some(base), line) if line > 0 => format!("(anonymous {base}:{line})"),
        (Some(base), _) => format!("(anonymous {base})"),
        _ => "(anonymous)".to_owned(),
    }
}

/// A 0-based V8 line or column as 1-based; 0 when absent or negative.
fn one_based(v: &Value) -> i64 {
    v.as_i64().filter(|&n| (0..i64::MAX).contains(&n)).map_or(0, |n| n + 1)
}

impl Frames {
    pub(crate) fn location(&mut self, p: &mut Profile, frame: &Value) -> LocationId {
        let name = frame_name(frame);
        let url = frame["url"].as_str().unwrap_or("").to_owned();
        let (line, column) = (one_based(&frame["lineNumber"]), one_based(&frame["columnNumber"]));
        let key = (name, url, line, column);
        if let Some(&l) = self.by_frame.get(&key) {
            return l;
        }
        let function = p.add_function(&key.0, &key.0, &key.1, line);
        let l = p.add_location(0, vec![Line { function, line, column }]);
        self.by_frame.insert(key, l);
        l
    }
}

/// Whether a node is V8's synthetic `(root)`, which is left out of stacks.
fn is_root(node: &Node<'_>) -> bool {
    node.frame["functionName"].as_str() == Some("(root)")
}

/// Sample types of a V8 CPU profile: `samples/count`, then `wall/microseconds` if timed.
pub(crate) fn cpu_sample_types(p: &mut Profile, timed: bool) {
    p.sample_types = vec![p.value_type("samples", "count")];
    if timed {
        let wall = p.value_type("wall", "microseconds");
        p.sample_types.push(wall);
        p.period_type = Some(wall);
    }
}

/// Appends the samples of `data` to `p` (whose sample types [`cpu_sample_types`] set),
/// each with `labels` and, when timed, its `timestamp` and its span from `origin` (µs)
/// in [`Profile::sample_times`].
pub(crate) fn add_cpu_samples(
    p: &mut Profile,
    frames: &mut Frames,
    data: &CpuData<'_>,
    labels: &[Label],
    origin: i64,
    room: &mut super::Room,
) -> Result<()> {
    let timed = p.sample_types.len() == 2;
    let n = data.nodes.len();
    let mut index: FxHashMap<u64, usize> = FxHashMap::default();
    for (i, node) in data.nodes.iter().enumerate() {
        if index.insert(node.id, i).is_some() {
            return Err(invalid(format!("node id {} appears twice", node.id)));
        }
    }
    let mut parent: Vec<Option<usize>> = vec![None; n];
    for (i, node) in data.nodes.iter().enumerate() {
        if let Some(pid) = node.parent {
            let what = format!("node {}'s parent", node.id);
            parent[i] = Some(*index.get(&pid).ok_or(Error::DanglingReference { what, target: "node", id: pid })?);
        }
    }
    for (i, node) in data.nodes.iter().enumerate() {
        for &c in &node.children {
            let what = format!("node {}'s children", node.id);
            let child = *index.get(&c).ok_or(Error::DanglingReference { what, target: "node", id: c })?;
            parent[child].get_or_insert(i);
        }
    }
    // Leaf-first stack of each node, built on first use (only for nodes with samples,
    // so they hold no more than the samples counted in `room`).
    let mut stacks: Vec<Option<Vec<LocationId>>> = vec![None; n];
    let mut stack_of = |p: &mut Profile, node: usize| -> Result<Vec<LocationId>> {
        if let Some(s) = &stacks[node] {
            return Ok(s.clone());
        }
        let mut out = Vec::new();
        let mut at = Some(node);
        let mut steps = 0;
        while let Some(i) = at {
            steps += 1;
            if steps > n {
                return Err(invalid(format!("the parents of node {} form a cycle", data.nodes[node].id)));
            }
            if !(is_root(&data.nodes[i]) && parent[i].is_none()) {
                out.push(frames.location(p, data.nodes[i].frame));
            }
            at = parent[i];
        }
        stacks[node] = Some(out.clone());
        Ok(out)
    };

    if data.hit_counts_only {
        for (i, node) in data.nodes.iter().enumerate() {
            if node.hit_count > 0 {
                let locations = stack_of(p, i)?;
                let mut values = vec![node.hit_count];
                if timed {
                    values.push(0);
                }
                room.push(&mut p.samples, Sample { locations, values, labels: labels.to_vec() })?;
            }
        }
        return Ok(());
    }

    let mut order: Vec<usize> = (0..data.samples.len()).collect();
    if let Some(times) = &data.times {
        if times.windows(2).any(|w| w[1] < w[0]) {
            order.sort_by_key(|&i| times[i]);
        }
    }
    let timestamp_key = p.strings.intern("timestamp");
    let nanoseconds = p.strings.intern("nanoseconds");
    for (k, &i) in order.iter().enumerate() {
        let id = data.samples[i];
        let what = || format!("sample {i}");
        let node = *index.get(&id).ok_or_else(|| Error::DanglingReference { what: what(), target: "node", id })?;
        let locations = stack_of(p, node)?;
        let mut values = vec![1];
        let mut sample_labels = labels.to_vec();
        if timed {
            let wall = match &data.times {
                Some(times) => {
                    let t = times[i];
                    let next = order.get(k + 1).map(|&j| times[j]).or(data.end).unwrap_or(t);
                    sample_labels.push(Label {
                        key: timestamp_key,
                        value: LabelValue::Num { value: t.saturating_mul(1000), unit: nanoseconds },
                    });
                    let wall = next.saturating_sub(t).max(0);
                    let start = t.saturating_sub(origin).saturating_mul(1000);
                    p.sample_times.push(SampleTime { start, duration: wall.saturating_mul(1000) });
                    wall
                }
                None => 0,
            };
            values.push(wall);
        }
        room.push(&mut p.samples, Sample { locations, values, labels: sample_labels })?;
    }
    Ok(())
}

/// Imports a `.cpuprofile`.
pub fn parse_cpuprofile(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let data = read_cpuprofile(json)?;
    let mut p = Profile::new(SourceFormat::V8CpuProfile);
    cpu_sample_types(&mut p, data.times.is_some());
    if let Some(times) = &data.times {
        p.period = super::median_interval([times.as_slice()]);
        let first = data.start.or(times.first().copied()).unwrap_or(0);
        let last = data.end.or(times.iter().max().copied()).unwrap_or(first);
        p.duration_nanos = last.saturating_sub(first).max(0).saturating_mul(1000);
    }
    // Sample times count from the profile's start, else from its earliest sample.
    let origin = data.start.or(data.times.as_ref().and_then(|t| t.iter().min().copied())).unwrap_or(0);
    add_cpu_samples(&mut p, &mut Frames::default(), &data, &[], origin, &mut room)?;
    Ok(p)
}

/// Imports a sampling heap profile: one sample per node that allocated, valued at its
/// `selfSize` (`space/bytes`), with the node's path from the root as its stack.
pub fn parse_heapprofile(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let head = &json["head"];
    let mut p = Profile::new(SourceFormat::V8HeapProfile);
    p.sample_types = vec![p.value_type("space", "bytes")];
    let mut frames = Frames::default();
    // Depth-first; each entry is a node and its caller stack (leaf first).
    let mut pending: Vec<(&Value, Vec<LocationId>)> = vec![(head, Vec::new())];
    let mut root = true;
    while let Some((node, callers)) = pending.pop() {
        let frame =
            node.get("callFrame").filter(|f| f.is_object()).ok_or_else(|| heap_invalid("a node has no callFrame"))?;
        let mut stack = callers;
        // The synthetic (root) is left out, as in CPU profiles.
        if !(root && frame["functionName"].as_str() == Some("(root)")) {
            stack.insert(0, frames.location(&mut p, frame));
        }
        root = false;
        let size = match node.get("selfSize") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_i64()
                .or_else(|| v.as_f64().filter(|f| f.is_finite() && f.abs() < 9e15).map(|f| f.round() as i64))
                .ok_or_else(|| heap_invalid(format!("a node's selfSize is {v}, not a number of bytes")))?,
        };
        if size < 0 {
            return Err(heap_invalid(format!("a node's selfSize is negative ({size})")));
        }
        if size > 0 {
            room.push(&mut p.samples, Sample { locations: stack.clone(), values: vec![size], labels: Vec::new() })?;
        }
        match node.get("children") {
            None | Some(Value::Null) => {}
            Some(Value::Array(children)) => {
                pending.extend(children.iter().rev().map(|c| (c, stack.clone())));
            }
            Some(other) => return Err(heap_invalid(format!("a node's children are {other}, not a list"))),
        }
    }
    Ok(p)
}

fn heap_invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("V8 heap profile: {}", what.into()))
}
