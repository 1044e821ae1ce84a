//! DHAT heap profiles (`dhat-heap.json`, `dhatFileVersion` 2), as valgrind's
//! `--tool=dhat` and the `dhat` Rust crate write them, read as Firefox Profiler's dhat
//! importer does:
//!
//! * Each program point in `pps` is one sample: its stack is `fs`, indexes into the frame
//!   table `ftbl`, innermost first; `ftbl[0]` is `[root]`, which no stack names.
//! * Sample types: `tb` and `tbk` (total bytes and blocks allocated there); with block
//!   lifetimes (`bklt`), also `mb` (the point's maximum live bytes), `gb` (live bytes at
//!   the global maximum) and `eb` (live bytes at the end).
//! * A frame `0x10a3f: alloc::vec::Vec<T>::push (vec.rs:12:5)` is function, file, line
//!   and address; one without that shape is a function name alone.

use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;

use super::demangle::add_native_function;
use crate::model::{FunctionId, Line, LocationId, Profile, Sample, SourceFormat};
use crate::{Error, Result};

const VERSION: u64 = 2;

/// (field, sample type, unit, whether only files with block lifetimes have it).
const VALUES: &[(&str, &str, &str, bool)] = &[
    ("tb", "total_bytes", "bytes", false),
    ("tbk", "total_blocks", "count", false),
    ("mb", "max_bytes", "bytes", true),
    ("gb", "bytes_at_global_max", "bytes", true),
    ("eb", "bytes_at_end", "bytes", true),
];

static_regex!(frame_shape, r"^0x([0-9a-fA-F]+): (.+) \((?:in )?(.+?)(?::(\d+))?(?::(\d+))?\)$");

pub(crate) fn is_dhat(json: &Value) -> bool {
    json.get("dhatFileVersion").is_some_and(Value::is_u64) && json.get("pps").is_some_and(Value::is_array)
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("DHAT profile: {}", what.into()))
}

/// Locations for the frame table, one per entry.
fn frames(p: &mut Profile, ftbl: &[Value]) -> Result<Vec<LocationId>> {
    let mut functions: HashMap<(String, String), FunctionId> = HashMap::default();
    ftbl.iter()
        .enumerate()
        .map(|(i, frame)| {
            let frame = frame.as_str().ok_or_else(|| invalid(format!("ftbl[{i}] is not a string")))?;
            let (address, name, file, line) = match frame_shape().captures(frame) {
                Some(c) => {
                    let number = |k: usize| c.get(k).and_then(|m| m.as_str().parse::<i64>().ok()).unwrap_or(0);
                    let address = u64::from_str_radix(&c[1], 16).unwrap_or(0);
                    (address, c.get(2).map_or("", |m| m.as_str()), c.get(3).map_or("", |m| m.as_str()), number(4))
                }
                None => (0, frame, "", 0),
            };
            let key = (name.to_owned(), file.to_owned());
            let function = *functions.entry(key).or_insert_with(|| add_native_function(p, name, file, 0));
            Ok(p.add_location(address, vec![Line { function, line, column: 0 }]))
        })
        .collect()
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let version = json["dhatFileVersion"].as_u64().unwrap_or(0);
    if version != VERSION {
        return Err(invalid(format!("dhatFileVersion {version}; stacklens reads version {VERSION}")));
    }
    let lifetimes = json["bklt"].as_bool().unwrap_or(false);
    let values: Vec<_> = VALUES.iter().filter(|v| lifetimes || !v.3).collect();
    let mut p = Profile::new(SourceFormat::Dhat);
    for &&(_, kind, unit, _) in &values {
        let vt = p.value_type(kind, unit);
        p.sample_types.push(vt);
    }
    p.default_sample_type = p.strings.intern(VALUES[0].1);
    let ftbl = json["ftbl"].as_array().ok_or_else(|| invalid("no frame table (ftbl)"))?;
    let locations = frames(&mut p, ftbl)?;
    let pps = json["pps"].as_array().ok_or_else(|| invalid("no program points (pps)"))?;
    for (i, pp) in pps.iter().enumerate() {
        let fs = pp["fs"].as_array().ok_or_else(|| invalid(format!("pps[{i}] has no frames (fs)")))?;
        let stack = fs
            .iter()
            .map(|f| f.as_u64().and_then(|f| locations.get(usize::try_from(f).ok()?)).copied())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid(format!("pps[{i}].fs has an entry that is not an index into ftbl")))?;
        let sample_values = values
            .iter()
            .map(|&&(field, ..)| pp[field].as_u64().and_then(|v| i64::try_from(v).ok()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                invalid(format!(
                    "pps[{i}] lacks a count ({})",
                    values.iter().map(|v| v.0).collect::<Vec<_>>().join(", ")
                ))
            })?;
        room.push(&mut p.samples, Sample { locations: stack, values: sample_values, labels: Vec::new() })?;
    }
    Ok(p)
}
