//! speedscope's own file format (<https://www.speedscope.app/file-format-schema.json>),
//! written by py-spy, rbspy, PerfView, Austin and others: `shared.frames` (name, file,
//! line, column) and `profiles`, each `sampled` (stacks of frame indices, root first,
//! with one weight per stack) or `evented` (`O`pen and `C`lose events of frames at
//! increasing `at` values, which give each stack its self time).
//!
//! Every profile's samples go into one profile, labelled `thread` with the profile's
//! name. Units become sample types: time (`nanoseconds` … `seconds`) is
//! `time/nanoseconds`, `bytes` is `space/bytes`, `none` is `samples/count`. A sampled
//! profile also counts its stacks as `samples/count` (1 each), so a py-spy profile has
//! samples and time like a pprof CPU profile. Fractional weights are rounded to the
//! nearest unit of the sample type (nanosecond, byte, sample).
//!
//! When every profile measures time, samples keep their spans (from the earliest
//! `startValue`) in [`Profile::sample_times`], as speedscope's time order view draws
//! them: an evented sample from one event to the next, a sampled one for its weight
//! after the one before it (from `startValue`).

use serde_json::Value;

use crate::model::{Label, LabelValue, Line, LocationId, Sample, SampleTime, SourceFormat};
use crate::{Error, Profile, Result};

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("speedscope profile: {}", what.into()))
}

/// Whether `json` is a speedscope file.
pub(crate) fn is_speedscope(json: &Value) -> bool {
    let schema = json.get("$schema").and_then(Value::as_str).is_some_and(|s| s.contains("speedscope"));
    schema || (json.get("profiles").is_some_and(Value::is_array) && json["shared"]["frames"].is_array())
}

/// What a unit measures: its column and the factor to that column's unit.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Measure {
    Count,
    Bytes,
    Time,
}

fn unit(name: &str) -> Option<(Measure, f64)> {
    Some(match name {
        "none" => (Measure::Count, 1.0),
        "bytes" => (Measure::Bytes, 1.0),
        "nanoseconds" => (Measure::Time, 1.0),
        "microseconds" => (Measure::Time, 1e3),
        "milliseconds" => (Measure::Time, 1e6),
        "seconds" => (Measure::Time, 1e9),
        _ => return None,
    })
}

/// A weight in the column's unit, rounded; refuses what is not a finite, non-negative
/// number of sane size.
fn scaled(v: &Value, factor: f64, what: impl Fn() -> String) -> Result<i64> {
    let x = v.as_f64().ok_or_else(|| invalid(format!("{} is {v}, not a number", what())))?;
    let scaled = (x * factor).round();
    // Bounded so that differences of two values (evented intervals) cannot overflow.
    if !scaled.is_finite() || scaled.abs() >= 4e18 {
        return Err(invalid(format!("{} is {v}, out of range", what())));
    }
    Ok(scaled as i64)
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let frames = json["shared"]["frames"].as_array().ok_or_else(|| invalid("it has no shared.frames list"))?;
    let profiles = json["profiles"].as_array().ok_or_else(|| invalid("it has no profiles list"))?;
    if profiles.is_empty() {
        return Err(invalid("its profiles list is empty"));
    }
    // Columns: which measures occur, in a fixed order (time last: pprof's default).
    let mut measures = Vec::with_capacity(profiles.len());
    for (i, prof) in profiles.iter().enumerate() {
        let name = prof["unit"].as_str().unwrap_or("none");
        let (measure, factor) = unit(name).ok_or_else(|| invalid(format!("profile {i} has unknown unit '{name}'")))?;
        let kind = prof["type"].as_str().unwrap_or("");
        if kind != "sampled" && kind != "evented" {
            return Err(invalid(format!("profile {i} has type {}, not sampled or evented", prof["type"])));
        }
        measures.push((measure, factor, kind == "sampled"));
    }
    let has_count = measures.iter().any(|&(m, _, sampled)| m == Measure::Count || sampled);
    let has = |m: Measure| measures.iter().any(|&(x, _, _)| x == m);
    let mut p = Profile::new(SourceFormat::Speedscope);
    let column = |m: Measure| -> Option<usize> {
        match m {
            Measure::Count => has_count.then_some(0),
            Measure::Bytes => has(Measure::Bytes).then_some(usize::from(has_count)),
            Measure::Time => has(Measure::Time).then_some(usize::from(has_count) + usize::from(has(Measure::Bytes))),
        }
    };
    let count_col = column(Measure::Count);
    if has_count {
        let t = p.value_type("samples", "count");
        p.sample_types.push(t);
    }
    if has(Measure::Bytes) {
        let t = p.value_type("space", "bytes");
        p.sample_types.push(t);
    }
    if has(Measure::Time) {
        let t = p.value_type("time", "nanoseconds");
        p.sample_types.push(t);
    }
    let width = p.sample_types.len();

    // One function and location per frame, made when first used.
    let mut locations: Vec<Option<LocationId>> = vec![None; frames.len()];
    let mut location = |p: &mut Profile, at: &Value, what: &dyn Fn() -> String| -> Result<LocationId> {
        let i = at.as_u64().ok_or_else(|| invalid(format!("{} names frame {at}, not an index", what())))?;
        let slot = usize::try_from(i)
            .ok()
            .and_then(|i| locations.get_mut(i))
            .ok_or_else(|| Error::DanglingReference { what: what(), target: "frame", id: i })?;
        if let Some(l) = *slot {
            return Ok(l);
        }
        let frame = &frames[i as usize];
        let name = frame["name"].as_str().unwrap_or("");
        let name = if name.is_empty() { "(unnamed)" } else { name };
        let file = frame["file"].as_str().unwrap_or("");
        let line = frame["line"].as_i64().filter(|&l| l > 0).unwrap_or(0);
        let col = frame["col"].as_i64().filter(|&c| c > 0).unwrap_or(0);
        let function = super::demangle::add_native_function(p, name, file, line);
        let l = p.add_location(0, vec![Line { function, line, column: col }]);
        *slot = Some(l);
        Ok(l)
    };

    let thread_key = p.strings.intern("thread");
    // Sample times count from the earliest `startValue` of the profiles measuring time
    // (or their earliest sample).
    let mut origin = i64::MAX;
    for (pi, (prof, &(measure, factor, sampled))) in profiles.iter().zip(&measures).enumerate() {
        let name = prof["name"].as_str().map_or_else(|| format!("profile {pi}"), str::to_owned);
        let timed = measure == Measure::Time;
        let start_value = prof.get("startValue").and_then(|v| scaled(v, factor, String::new).ok());
        if let Some(start) = start_value.filter(|_| timed) {
            origin = origin.min(start);
        }
        let labels = vec![Label { key: thread_key, value: LabelValue::Str(p.strings.intern(&name)) }];
        let value_col = column(measure).expect("a column for every measure present");
        let values = |weight: i64| {
            let mut v = vec![0; width];
            if let Some(c) = count_col.filter(|_| sampled) {
                v[c] = 1;
            }
            v[value_col] = weight;
            v
        };
        if sampled {
            let samples =
                prof["samples"].as_array().ok_or_else(|| invalid(format!("profile '{name}' has no samples list")))?;
            let weights =
                prof["weights"].as_array().ok_or_else(|| invalid(format!("profile '{name}' has no weights list")))?;
            if weights.len() != samples.len() {
                return Err(invalid(format!(
                    "profile '{name}' has {} samples but {} weights",
                    samples.len(),
                    weights.len()
                )));
            }
            // As speedscope's time order view: each sample as long as its weight, in order.
            let mut clock = start_value.unwrap_or(0);
            for (si, (stack, weight)) in samples.iter().zip(weights).enumerate() {
                let what = || format!("profile '{name}' sample {si}");
                let weight = scaled(weight, factor, || format!("the weight of {}", what()))?;
                if weight < 0 {
                    return Err(invalid(format!("{} has a negative weight", what())));
                }
                let stack = stack.as_array().ok_or_else(|| invalid(format!("{} is not a list of frames", what())))?;
                let mut leaf_first = Vec::with_capacity(stack.len());
                for f in stack.iter().rev() {
                    leaf_first.push(location(&mut p, f, &what)?);
                }
                room.push(
                    &mut p.samples,
                    Sample { locations: leaf_first, values: values(weight), labels: labels.clone() },
                )?;
                if timed {
                    p.sample_times.push(SampleTime { start: clock, duration: weight });
                    clock = clock.saturating_add(weight);
                }
            }
        } else {
            let events =
                prof["events"].as_array().ok_or_else(|| invalid(format!("profile '{name}' has no events list")))?;
            // Open frames (root first) and the time the stack last changed.
            let mut open: Vec<(LocationId, u64)> = Vec::new();
            let mut last_at: Option<i64> = None;
            for (ei, e) in events.iter().enumerate() {
                let what = || format!("profile '{name}' event {ei}");
                let at = scaled(&e["at"], factor, || format!("the time of {}", what()))?;
                if let Some(last) = last_at {
                    if at < last {
                        return Err(invalid(format!("{} goes back in time (events must be in time order)", what())));
                    }
                    if at > last && !open.is_empty() {
                        let leaf_first = open.iter().rev().map(|&(l, _)| l).collect();
                        room.push(
                            &mut p.samples,
                            Sample { locations: leaf_first, values: values(at - last), labels: labels.clone() },
                        )?;
                        if timed {
                            p.sample_times.push(SampleTime { start: last, duration: at - last });
                        }
                    }
                }
                last_at = Some(at);
                let frame = e["frame"].as_u64().ok_or_else(|| invalid(format!("{} has no frame index", what())))?;
                match e["type"].as_str() {
                    Some("O") => {
                        let l = location(&mut p, &e["frame"], &what)?;
                        open.push((l, frame));
                    }
                    Some("C") => match open.last() {
                        Some(&(_, top)) if top == frame => {
                            open.pop();
                        }
                        Some(&(_, top)) => {
                            return Err(invalid(format!("{} closes frame {frame} while frame {top} is open", what())));
                        }
                        None => return Err(invalid(format!("{} closes frame {frame}, but no frame is open", what()))),
                    },
                    _ => return Err(invalid(format!("{} has type {}, not O or C", what(), e["type"]))),
                }
            }
            // Frames still open at the end get no time after the last event.
        }
    }
    // Only a file whose every profile measures time has a timeline.
    if p.sample_times.len() == p.samples.len() {
        let origin = p.sample_times.iter().map(|t| t.start).fold(origin, i64::min);
        for time in &mut p.sample_times {
            time.start = time.start.saturating_sub(origin);
        }
    } else {
        p.sample_times.clear();
    }
    Ok(p)
}
