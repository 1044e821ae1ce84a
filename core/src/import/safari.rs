//! Safari Web Inspector timeline recordings (Timelines tab → Export, `.json`): under
//! `recording`, the JavaScript sampler's `sampleStackTraces` (each a `timestamp` and
//! `stackFrames`, leaf first: name, url, line, column) and, index for index,
//! `sampleDurations` in seconds. The other tracks (`records`: layout, network, CPU
//! usage; markers) are not samples and are not read.
//!
//! Sample types: `samples/count` and `wall/nanoseconds`, each sample's duration rounded
//! to the nanosecond. Functions without a name are `(anonymous)`, as the inspector
//! shows them.

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::model::{FunctionId, Line, LocationId, Sample, SourceFormat};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("Safari recording: {}", what.into()))
}

/// Whether `json` is a Web Inspector recording with JavaScript samples.
pub(crate) fn is_safari(json: &Value) -> bool {
    json["recording"].get("sampleStackTraces").is_some()
}

/// A frame's 1-based line or column; 0 when absent.
fn position(frame: &Value, name: &str) -> i64 {
    frame[name].as_i64().filter(|&n| n > 0).unwrap_or(0)
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let recording = &json["recording"];
    let traces = recording["sampleStackTraces"].as_array().ok_or_else(|| invalid("sampleStackTraces is not a list"))?;
    let durations = recording["sampleDurations"].as_array().ok_or_else(|| invalid("sampleDurations is not a list"))?;
    if traces.len() != durations.len() {
        return Err(invalid(format!("it has {} stack traces but {} durations", traces.len(), durations.len())));
    }
    let mut p = Profile::new(SourceFormat::Safari);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("wall", "nanoseconds")];
    let mut functions: FxHashMap<(&str, &str), FunctionId> = FxHashMap::default();
    let mut locations: FxHashMap<(&str, &str, i64, i64), LocationId> = FxHashMap::default();
    for (i, (trace, duration)) in traces.iter().zip(durations).enumerate() {
        let seconds = duration.as_f64().filter(|d| d.is_finite() && (0.0..9e9).contains(d));
        let nanos = (seconds.ok_or_else(|| invalid(format!("duration {i} is {duration}, not seconds")))? * 1e9).round();
        let frames = trace["stackFrames"]
            .as_array()
            .ok_or_else(|| invalid(format!("stack trace {i} has stackFrames {}, not a list", trace["stackFrames"])))?;
        let mut stack = Vec::with_capacity(frames.len());
        for frame in frames {
            let name = frame["name"].as_str().filter(|n| !n.is_empty()).unwrap_or("(anonymous)");
            let url = frame["url"].as_str().unwrap_or("");
            let (line, column) = (position(frame, "line"), position(frame, "column"));
            let location = *locations.entry((name, url, line, column)).or_insert_with(|| {
                let function = *functions.entry((name, url)).or_insert_with(|| p.add_function(name, name, url, 0));
                p.add_location(0, vec![Line { function, line, column }])
            });
            stack.push(location);
        }
        room.push(&mut p.samples, Sample { locations: stack, values: vec![1, nanos as i64], labels: Vec::new() })?;
    }
    Ok(p)
}
