//! GHC cost-centre profiles in their JSON form (`+RTS -pj`): `cost_centres` (id, label,
//! module, src_loc) and the `profile` tree of cost-centre stacks, each node with the
//! `ticks` and bytes (`alloc`) spent in that stack itself and its `children`.
//!
//! Each node with ticks or allocation becomes one sample whose stack is the node's path
//! from the root (`MAIN`), so a cost centre's self value is the sum over its stacks, the
//! "individual" columns of GHC's own `.prof` report. Functions are named `Module.label`
//! with the source location as the file (GHC's `<entire-module>`-style placeholders are
//! left out).
//!
//! Sample types: `ticks/count`, `time/microseconds` (ticks × `tick_interval`, which GHC
//! reports in microseconds: "798 ticks @ 1000 us"), and `alloc/bytes`; time is the
//! default.

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::model::{Line, LocationId, Sample, SourceFormat};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("GHC profile: {}", what.into()))
}

/// Whether `json` is a GHC `-pj` profile.
pub(crate) fn is_ghc(json: &Value) -> bool {
    json.get("cost_centres").is_some_and(Value::is_array) && json.get("profile").is_some_and(Value::is_object)
}

/// A node's non-negative integer field; absent counts as 0.
fn field(node: &Value, name: &str) -> Result<i64> {
    match node.get(name) {
        None => Ok(0),
        Some(v) => {
            v.as_i64().filter(|&n| n >= 0).ok_or_else(|| invalid(format!("a node's {name} is {v}, not a count")))
        }
    }
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let mut p = Profile::new(SourceFormat::Ghc);
    let interval = match json.get("tick_interval") {
        None => 0,
        Some(v) => v.as_i64().filter(|&n| n >= 0).ok_or_else(|| invalid(format!("tick_interval is {v}")))?,
    };
    p.sample_types =
        vec![p.value_type("ticks", "count"), p.value_type("time", "microseconds"), p.value_type("alloc", "bytes")];
    p.period_type = Some(p.sample_types[1]);
    p.period = interval;
    p.default_sample_type = p.sample_types[1].kind;

    let mut locations: FxHashMap<u64, LocationId> = FxHashMap::default();
    for (i, cc) in json["cost_centres"].as_array().into_iter().flatten().enumerate() {
        let id = cc["id"].as_u64().ok_or_else(|| invalid(format!("cost centre {i} has no numeric id")))?;
        let name = format!("{}.{}", cc["module"].as_str().unwrap_or(""), cc["label"].as_str().unwrap_or(""));
        let file = cc["src_loc"].as_str().filter(|s| !s.starts_with('<')).unwrap_or("");
        let function = p.add_function(&name, &name, file, 0);
        let location = p.add_location(0, vec![Line { function, line: 0, column: 0 }]);
        if locations.insert(id, location).is_some() {
            return Err(invalid(format!("cost centre id {id} appears twice")));
        }
    }

    // Depth-first; each entry is a node and its callers' stack (leaf first). The JSON
    // parser already bounds the depth.
    let mut pending: Vec<(&Value, Vec<LocationId>)> = vec![(&json["profile"], Vec::new())];
    while let Some((node, callers)) = pending.pop() {
        let id = node["id"].as_u64().ok_or_else(|| invalid(format!("a profile node has id {}", node["id"])))?;
        let location = *locations.get(&id).ok_or_else(|| Error::DanglingReference {
            what: "a profile node".into(),
            target: "cost centre",
            id,
        })?;
        let mut stack = Vec::with_capacity(callers.len() + 1);
        stack.push(location);
        stack.extend(callers);
        let (ticks, alloc) = (field(node, "ticks")?, field(node, "alloc")?);
        if ticks > 0 || alloc > 0 {
            let time = ticks.checked_mul(interval).ok_or_else(|| invalid("ticks × tick_interval overflows"))?;
            room.push(
                &mut p.samples,
                Sample { locations: stack.clone(), values: vec![ticks, time, alloc], labels: Vec::new() },
            )?;
        }
        match node.get("children") {
            None | Some(Value::Null) => {}
            Some(Value::Array(children)) => pending.extend(children.iter().rev().map(|c| (c, stack.clone()))),
            Some(other) => return Err(invalid(format!("cost centre {id}'s children are {other}, not a list"))),
        }
    }
    Ok(p)
}
