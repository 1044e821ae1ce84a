//! Ruby stackprof JSON (`StackProf.run(raw: true, …)` then `stackprof --json`, or
//! `StackProf::Report#print_json`): a `frames` map (frame id → name, file, line, self
//! `samples`, `total_samples`, callee `edges`), the `mode` (`cpu`, `wall`, `object`) and
//! the sampling `interval` (microseconds for cpu and wall).
//!
//! * With `raw` (raw mode), the stacks themselves: records of `[height, frame id × height
//!   (root first), count]`. Each record becomes one sample.
//! * Without it, only the per-frame figures are there: the call graph (`samples` as self,
//!   `total_samples` as total, `edges` as caller→callee counts) is expanded into stacks
//!   by [`CallGraph`], which keeps each frame's self count exact.
//!
//! Sample types: `samples/count` and `cpu/microseconds` (or `wall/microseconds`), the
//! count times the interval, as stackprof's own report computes time; object mode counts
//! allocations, `objects/count`.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use super::call_graph::CallGraph;
use crate::model::{Line, LocationId, Sample, SourceFormat};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("stackprof profile: {}", what.into()))
}

/// Whether `json` is a stackprof dump: a frame map, a mode and raw stacks or samples.
pub(crate) fn is_stackprof(json: &Value) -> bool {
    json.get("frames").is_some_and(Value::is_object)
        && json.get("mode").is_some_and(Value::is_string)
        && (json.get("raw").is_some() || json.get("samples").is_some_and(Value::is_number))
}

/// One location per frame id, made when first used.
struct Frames<'a> {
    frames: &'a Map<String, Value>,
    locations: FxHashMap<&'a str, LocationId>,
}

impl<'a> Frames<'a> {
    fn location(&mut self, p: &mut Profile, id: &str) -> Result<LocationId> {
        let (key, frame) = self.frames.get_key_value(id).ok_or_else(|| Error::DanglingReference {
            what: "a stack".into(),
            target: "frame",
            id: id_number(id),
        })?;
        if let Some(&l) = self.locations.get(key.as_str()) {
            return Ok(l);
        }
        let name = frame["name"].as_str().unwrap_or("(unknown)");
        let file = frame["file"].as_str().unwrap_or("");
        let line = frame["line"].as_i64().filter(|&l| l > 0).unwrap_or(0);
        let function = p.add_function(name, name, file, line);
        let l = p.add_location(0, vec![Line { function, line, column: 0 }]);
        self.locations.insert(key, l);
        Ok(l)
    }
}

/// A frame id as a number for error messages (stackprof's ids are addresses).
fn id_number(id: &str) -> u64 {
    id.parse().unwrap_or(0)
}

/// A count in the file: a non-negative integer.
fn count(v: &Value, what: impl FnOnce() -> String) -> Result<i64> {
    v.as_i64().filter(|&n| n >= 0).ok_or_else(|| invalid(format!("{} is {v}, not a count", what())))
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let frames = json["frames"].as_object().ok_or_else(|| invalid("frames is not a map"))?;
    let mode = json["mode"].as_str().unwrap_or("");
    let mut p = Profile::new(SourceFormat::Stackprof);
    // Each sample's values from its count: the count, and the time when timed.
    let interval = match mode {
        "cpu" | "wall" => {
            let interval = count(&json["interval"], || "interval".into())?;
            p.sample_types = vec![p.value_type("samples", "count"), p.value_type(mode, "microseconds")];
            p.period_type = Some(p.sample_types[1]);
            p.period = interval;
            Some(interval)
        }
        "object" => {
            p.sample_types = vec![p.value_type("objects", "count")];
            None
        }
        _ => return Err(invalid(format!("mode is {}, not cpu, wall or object", json["mode"]))),
    };
    let values = |n: i64| -> Result<Vec<i64>> {
        match interval {
            Some(i) => Ok(vec![n, n.checked_mul(i).ok_or_else(|| invalid("sample time overflows"))?]),
            None => Ok(vec![n]),
        }
    };
    let mut locations = Frames { frames, locations: FxHashMap::default() };
    match json.get("raw") {
        Some(Value::Array(raw)) => {
            let mut at = 0;
            while at < raw.len() {
                let height = count(&raw[at], || format!("the stack height at raw[{at}]"))? as usize;
                // The height is checked against what is left before anything is allocated.
                let end = at + 1 + height.min(raw.len());
                if end >= raw.len() {
                    return Err(invalid(format!("the stack at raw[{at}] runs past the end of raw")));
                }
                let mut stack = Vec::with_capacity(height);
                for v in raw[at + 1..end].iter().rev() {
                    let id = v.as_u64().ok_or_else(|| invalid(format!("raw frame {v} is not a frame id")))?;
                    stack.push(locations.location(&mut p, &id.to_string())?);
                }
                let n = count(&raw[end], || format!("the count at raw[{end}]"))?;
                room.push(&mut p.samples, Sample { locations: stack, values: values(n)?, labels: Vec::new() })?;
                at = end + 1;
            }
        }
        Some(other) => return Err(invalid(format!("raw is {other}, not a list"))),
        None => {
            let mut graph = CallGraph::new(p.sample_types.len());
            let mut nodes = FxHashMap::default();
            for id in frames.keys() {
                let frame = locations.location(&mut p, id)?;
                nodes.insert(id.as_str(), graph.add_node(frame));
            }
            for (id, frame) in frames {
                let node = nodes[id.as_str()];
                let self_count = count(&frame["samples"], || format!("frame {id}'s samples"))?;
                graph
                    .add_self(node, locations.locations[id.as_str()], &values(self_count)?)
                    .ok_or_else(|| invalid("self counts overflow"))?;
                if let Some(total) = frame.get("total_samples") {
                    graph.set_total(node, &values(count(total, || format!("frame {id}'s total_samples"))?)?);
                }
                let edges = match frame.get("edges") {
                    None | Some(Value::Null) => continue,
                    Some(Value::Object(edges)) => edges,
                    Some(other) => return Err(invalid(format!("frame {id}'s edges are {other}, not a map"))),
                };
                for (callee, n) in edges {
                    let to = *nodes.get(callee.as_str()).ok_or_else(|| Error::DanglingReference {
                        what: format!("frame {id}'s edges"),
                        target: "frame",
                        id: id_number(callee),
                    })?;
                    let n = count(n, || format!("frame {id}'s edge to {callee}"))?;
                    graph.add_edge(node, to, &values(n)?).ok_or_else(|| invalid("edge counts overflow"))?;
                }
            }
            graph.into_samples(&mut p, &mut room)?;
        }
    }
    Ok(p)
}
