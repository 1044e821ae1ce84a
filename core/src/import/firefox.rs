//! Firefox Profiler JSON — what `samply record` writes and profiler.firefox.com saves:
//! the processed format (tables stored column by column, `stringArray`) and the raw
//! Gecko format (`schema` + `data` rows, `stringTable`, child `processes`). Every
//! thread's samples go into one profile, labelled with the thread; frames become
//! functions named as the profiler names them (addresses for unsymbolicated native
//! code, with the library as the file).
//!
//! Samples keep their times (`samples.time` in milliseconds, or its `timeDeltas`; raw
//! Gecko child processes moved onto the parent's clock by their `meta.startTime`), from
//! `meta.startTime`: each sample lasts until its thread's next one, the last one interval,
//! as Firefox Profiler's stack chart draws them.
//!
//! Firefox's old DevTools performance panel (Firefox ≤ 67) saved "Recorded Performance
//! Data": a wrapper (`label`, `duration`, `markers`, `ticks`, …) whose `profile` is a raw
//! Gecko profile. It is read as that profile; the panel's other tracks are not samples.

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::model::{Label, LabelValue, Line, LocationId, Sample, SourceFormat};
use crate::{Error, Profile, Result};

/// Whether `json` has the shape of a Firefox Profiler profile, or is a DevTools
/// recording holding one.
pub(crate) fn is_firefox(json: &Value) -> bool {
    is_profile(json) || json.get("profile").is_some_and(is_profile)
}

fn is_profile(json: &Value) -> bool {
    json.get("meta").is_some_and(Value::is_object) && json.get("threads").is_some_and(Value::is_array)
}

/// One thread's tables, whichever format they came in.
struct Thread {
    name: String,
    /// Per frame: function name, file, line, address.
    frames: Vec<(String, String, i64, u64)>,
    /// Per stack: (prefix, frame).
    stacks: Vec<(Option<usize>, usize)>,
    /// Per sample: (stack, weight).
    samples: Vec<(Option<usize>, i64)>,
    /// Per sample, when it was taken (nanoseconds since the profile's start), when every
    /// sample says.
    times: Option<Vec<i64>>,
}

fn invalid(what: impl Into<String>) -> Error {
    Error::Invalid(format!("Firefox profile: {}", what.into()))
}

/// Column `name` of a processed table, or an empty column when absent.
fn column<'a>(table: &'a Value, name: &str) -> &'a [Value] {
    table.get(name).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn index(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64).map(|n| n as usize)
}

fn string_at(strings: &[Value], i: Option<usize>) -> String {
    i.and_then(|i| strings.get(i)).and_then(Value::as_str).unwrap_or("").to_owned()
}

/// Sample times in nanoseconds from milliseconds (plus `offset_ms`); `None` unless every
/// sample has a time of sane size.
fn times_from_ms(ms: impl Iterator<Item = Option<f64>>, offset_ms: f64) -> Option<Vec<i64>> {
    ms.map(|t| {
        let ns = (t? + offset_ms) * 1e6;
        (ns.is_finite() && ns.abs() < 4e18).then(|| ns.round() as i64)
    })
    .collect()
}

/// A processed samples table's times: its `time` column, or the running sum of its
/// `timeDeltas` (newer versions).
fn processed_times(samples: &Value) -> Option<Vec<i64>> {
    let n = column(samples, "stack").len();
    let (time, deltas) = (column(samples, "time"), column(samples, "timeDeltas"));
    if time.len() == n {
        times_from_ms(time.iter().map(Value::as_f64), 0.0)
    } else if deltas.len() == n {
        // A missing delta leaves every later time unknown.
        let sums = deltas.iter().scan(Some(0.0), |t, d| {
            *t = t.zip(d.as_f64()).map(|(t, d)| t + d);
            Some(*t)
        });
        times_from_ms(sums, 0.0)
    } else {
        None
    }
}

fn processed_thread(t: &Value, libs: &[Value]) -> Result<Thread> {
    let strings =
        t.get("stringArray").or_else(|| t.get("stringTable")).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let (funcs, frames, stacks, samples) = (&t["funcTable"], &t["frameTable"], &t["stackTable"], &t["samples"]);
    let resources = &t["resourceTable"];
    // A function's file: its source file, else its library's name.
    let resource_name = |r: Option<usize>| -> String {
        let Some(r) = r else { return String::new() };
        let lib = index(column(resources, "lib").get(r)).and_then(|l| libs.get(l)).and_then(|l| l["name"].as_str());
        lib.map(str::to_owned).unwrap_or_else(|| string_at(strings, index(column(resources, "name").get(r))))
    };
    let func_names = column(funcs, "name");
    let func_files = column(funcs, "fileName");
    let func_resources = column(funcs, "resource");
    let frame_funcs = column(frames, "func");
    let frame_lines = column(frames, "line");
    let frame_addresses = column(frames, "address");
    let mut out_frames = Vec::with_capacity(frame_funcs.len());
    for (i, func) in frame_funcs.iter().enumerate() {
        let f = index(Some(func)).ok_or_else(|| invalid(format!("frame {i} has no function")))?;
        if f >= func_names.len() {
            return Err(invalid(format!("frame {i} names function {f}, but there are {}", func_names.len())));
        }
        let mut name = string_at(strings, index(func_names.get(f)));
        let file = match index(func_files.get(f)) {
            Some(s) => string_at(strings, Some(s)),
            None => resource_name(index(func_resources.get(f)).filter(|&r| (r as i64) >= 0)),
        };
        // Unsymbolicated native code: an address means something only with its library.
        if name.starts_with("0x") && !file.is_empty() {
            name = format!("{file}!{name}");
        }
        let line = frame_lines.get(i).and_then(Value::as_i64).unwrap_or(0);
        let address = frame_addresses.get(i).and_then(Value::as_i64).filter(|&a| a >= 0).unwrap_or(0) as u64;
        out_frames.push((name, file, line, address));
    }
    let out_stacks = column(stacks, "frame")
        .iter()
        .zip(column(stacks, "prefix").iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(frame, prefix)| (index(prefix), index(Some(frame)).unwrap_or(usize::MAX)))
        .collect();
    let weights = column(samples, "weight");
    let out_samples = column(samples, "stack")
        .iter()
        .enumerate()
        .map(|(i, s)| (index(Some(s)), weights.get(i).and_then(Value::as_i64).unwrap_or(1)))
        .collect();
    let name = thread_name(t);
    let times = processed_times(samples);
    Ok(Thread { name, frames: out_frames, stacks: out_stacks, samples: out_samples, times })
}

fn thread_name(t: &Value) -> String {
    let name = t["name"].as_str().unwrap_or("thread");
    match (t["processName"].as_str(), t["tid"].as_u64().or_else(|| t["pid"].as_u64())) {
        (Some(p), Some(id)) if p != name => format!("{p} {name} ({id})"),
        (_, Some(id)) => format!("{name} ({id})"),
        _ => name.to_owned(),
    }
}

/// A raw Gecko table: its `schema` (column → position) and `data` rows.
fn gecko_rows<'a>(table: &'a Value, columns: &[&str]) -> Vec<Vec<Option<&'a Value>>> {
    let schema = &table["schema"];
    let positions: Vec<Option<usize>> = columns.iter().map(|c| index(schema.get(*c))).collect();
    column(table, "data")
        .iter()
        .map(|row| positions.iter().map(|p| p.and_then(|p| row.get(p)).filter(|v| !v.is_null())).collect())
        .collect()
}

/// A raw Gecko thread; `offset_ms` moves its process's times onto the profile's clock.
fn gecko_thread(t: &Value, offset_ms: f64) -> Thread {
    let strings = column(t, "stringTable");
    let frames = gecko_rows(&t["frameTable"], &["location", "line"])
        .into_iter()
        .map(|r| {
            let name = string_at(strings, index(r[0]));
            let line = r[1].and_then(Value::as_i64).unwrap_or(0);
            (name, String::new(), line, 0)
        })
        .collect();
    let stacks = gecko_rows(&t["stackTable"], &["prefix", "frame"])
        .into_iter()
        .map(|r| (index(r[0]), index(r[1]).unwrap_or(usize::MAX)))
        .collect();
    let rows = gecko_rows(&t["samples"], &["stack", "weight", "time"]);
    let samples = rows.iter().map(|r| (index(r[0]), r[1].and_then(Value::as_i64).unwrap_or(1))).collect();
    let times = times_from_ms(rows.iter().map(|r| r[2].and_then(Value::as_f64)), offset_ms);
    Thread { name: thread_name(t), frames, stacks, samples, times }
}

/// Threads of a raw Gecko profile and of its child processes, whose times count from
/// their own `meta.startTime`.
fn gecko_threads(profile: &Value, start_ms: f64, out: &mut Vec<Thread>) {
    let offset_ms = profile["meta"]["startTime"].as_f64().map_or(0.0, |own| own - start_ms);
    out.extend(column(profile, "threads").iter().filter(|t| t.is_object()).map(|t| gecko_thread(t, offset_ms)));
    for child in column(profile, "processes") {
        gecko_threads(child, start_ms, out);
    }
}

pub fn parse(json: &Value, options: &super::ParseOptions) -> Result<Profile> {
    let mut room = super::Room::new(options);
    let json = if is_profile(json) { json } else { &json["profile"] };
    let meta = &json["meta"];
    // Raw Gecko profiles keep tables as schema + data rows.
    let gecko = column(json, "threads").iter().any(|t| t["samples"].get("schema").is_some());
    if column(json, "threads").is_empty() {
        return Err(invalid("it has no threads"));
    }
    let mut threads = Vec::new();
    if gecko {
        gecko_threads(json, meta["startTime"].as_f64().unwrap_or(0.0), &mut threads);
    } else {
        let libs = column(json, "libs");
        for t in column(json, "threads") {
            threads.push(processed_thread(t, libs)?);
        }
    }
    let interval_ms = meta["interval"].as_f64().filter(|i| *i > 0.0).unwrap_or(1.0);
    // A thread's last sample lasts one interval.
    let interval_ns = (interval_ms * 1e6).round() as i64;
    let weight_type =
        column(json, "threads").iter().find_map(|t| t["samples"]["weightType"].as_str()).unwrap_or("samples");

    let mut p = Profile::new(SourceFormat::FirefoxProfiler);
    // Sampled time like a pprof CPU profile; traced or byte weights as what they are.
    let per_weight: i64 = match weight_type {
        "tracing-ms" => {
            p.sample_types = vec![p.value_type("time", "nanoseconds")];
            1_000_000
        }
        "bytes" => {
            p.sample_types = vec![p.value_type("space", "bytes")];
            1
        }
        _ => {
            p.sample_types = vec![p.value_type("samples", "count"), p.value_type("cpu", "nanoseconds")];
            p.period_type = Some(p.value_type("cpu", "nanoseconds"));
            p.period = (interval_ms * 1e6) as i64;
            p.period
        }
    };
    let counted = p.sample_types.len() == 2;
    if let Some(start) = meta["startTime"].as_f64() {
        p.time_nanos = (start * 1e6) as i64;
    }
    let thread_key = p.strings.intern("thread");
    let mut functions: FxHashMap<(String, String), crate::model::FunctionId> = FxHashMap::default();
    for thread in &threads {
        let thread_label = Label { key: thread_key, value: LabelValue::Str(p.strings.intern(&thread.name)) };
        let mut locations: Vec<Option<LocationId>> = vec![None; thread.frames.len()];
        // Samples without a stack still end the one before them.
        let spans = thread.times.as_ref().map(|times| super::spans_until_next(times, interval_ns));
        for (k, &(stack, weight)) in thread.samples.iter().enumerate() {
            let Some(mut stack) = stack else { continue };
            let mut leaf_first = Vec::new();
            // Walk to the root; the bound stops a cycle in a corrupt table.
            for _ in 0..=thread.stacks.len() {
                let &(prefix, frame) = thread
                    .stacks
                    .get(stack)
                    .ok_or_else(|| invalid(format!("thread '{}' refers to missing stack {stack}", thread.name)))?;
                let (name, file, line, address) = thread
                    .frames
                    .get(frame)
                    .ok_or_else(|| invalid(format!("thread '{}' refers to missing frame {frame}", thread.name)))?;
                let location = match locations[frame] {
                    Some(l) => l,
                    None => {
                        let key = (name.clone(), file.clone());
                        let function = match functions.get(&key) {
                            Some(&f) => f,
                            None => {
                                let f = super::demangle::add_native_function(&mut p, name, file, 0);
                                functions.insert(key, f);
                                f
                            }
                        };
                        let l = p.add_location(*address, vec![Line { function, line: *line, column: 0 }]);
                        locations[frame] = Some(l);
                        l
                    }
                };
                leaf_first.push(location);
                match prefix {
                    Some(next) => stack = next,
                    None => break,
                }
            }
            let values = if counted {
                vec![weight, weight.saturating_mul(per_weight)]
            } else {
                vec![weight.saturating_mul(per_weight)]
            };
            room.push(&mut p.samples, Sample { locations: leaf_first, values, labels: vec![thread_label.clone()] })?;
            p.sample_times.extend(spans.as_ref().and_then(|s| s.get(k)));
        }
    }
    // Times for some threads only are no timeline.
    if p.sample_times.len() != p.samples.len() {
        p.sample_times.clear();
    }
    Ok(p)
}

/// A symbol of samply's sidecar: its address range in its library and where it is.
struct Symbol {
    rva: u64,
    size: u64,
    name: String,
    file: Option<String>,
    line: Option<i64>,
}

/// Names the native functions of a processed profile from samply's `.syms.json`
/// sidecar (`samply record --unstable-presymbolicate`): each unsymbolicated function
/// (one per address) gets the name, file and line of the symbol covering its address
/// in its library. Returns how many functions were named.
pub fn symbolicate(profile: &mut Value, syms: &Value) -> Result<usize> {
    let strings = column(syms, "string_table");
    let text = |i: Option<&Value>| index(i).and_then(|i| strings.get(i)).and_then(Value::as_str).map(str::to_owned);
    // Per library, sorted by rva.
    let mut tables: FxHashMap<String, Vec<Symbol>> = FxHashMap::default();
    for lib in column(syms, "data") {
        let Some(name) = lib["debug_name"].as_str() else { continue };
        let mut table: Vec<_> = column(lib, "symbol_table")
            .iter()
            .filter_map(|s| {
                let outer = column(s, "frames").last();
                Some(Symbol {
                    rva: s["rva"].as_u64()?,
                    size: s["size"].as_u64().unwrap_or(0),
                    name: text(s.get("symbol"))?,
                    file: outer.and_then(|f| text(f.get("file"))),
                    line: outer.and_then(|f| f["line"].as_i64()),
                })
            })
            .collect();
        table.sort_by_key(|s| s.rva);
        tables.insert(name.to_owned(), table);
    }
    let lib_names: Vec<Option<String>> = column(profile, "libs")
        .iter()
        .map(|l| l["debugName"].as_str().or(l["name"].as_str()).map(str::to_owned))
        .collect();
    let mut named = 0;
    // `meta` is marked symbolicated at the end, which needs an object (or nothing) there.
    if profile.get("meta").is_some_and(|m| !m.is_object() && !m.is_null()) {
        return Err(invalid("its meta is not an object"));
    }
    let threads =
        profile.get_mut("threads").and_then(Value::as_array_mut).ok_or_else(|| invalid("it has no threads"))?;
    for thread in threads {
        // The address of each function: samply makes one function per address.
        let frame_funcs: Vec<Option<usize>> =
            column(&thread["frameTable"], "func").iter().map(|f| index(Some(f))).collect();
        let frame_addresses: Vec<Option<u64>> =
            column(&thread["frameTable"], "address").iter().map(Value::as_u64).collect();
        let mut address_of: FxHashMap<usize, u64> = FxHashMap::default();
        for (f, a) in frame_funcs.iter().zip(&frame_addresses) {
            if let (Some(f), Some(a)) = (f, a) {
                address_of.entry(*f).or_insert(*a);
            }
        }
        let resource_libs: Vec<Option<usize>> =
            column(&thread["resourceTable"], "lib").iter().map(|l| index(Some(l))).collect();
        let func_resources: Vec<Option<usize>> =
            column(&thread["funcTable"], "resource").iter().map(|r| index(Some(r))).collect();
        let mut renamed: Vec<(usize, String, Option<String>, Option<i64>)> = Vec::new();
        for (func, resource) in func_resources.iter().enumerate() {
            let lib = resource
                .and_then(|r| resource_libs.get(r).copied().flatten())
                .and_then(|l| lib_names.get(l).cloned().flatten());
            let (Some(lib), Some(&address)) = (lib, address_of.get(&func)) else { continue };
            let Some(table) = tables.get(&lib) else { continue };
            let at = table.partition_point(|s| s.rva <= address);
            if let Some(s) = at.checked_sub(1).map(|i| &table[i]) {
                if address < s.rva + s.size.max(1) {
                    renamed.push((func, s.name.clone(), s.file.clone(), s.line));
                }
            }
        }
        if renamed.is_empty() {
            continue;
        }
        let strings = thread
            .get_mut("stringArray")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| invalid("a thread has no stringArray"))?;
        let mut intern = |s: String| {
            strings.push(Value::String(s));
            strings.len() - 1
        };
        let mut names = Vec::with_capacity(renamed.len());
        for (func, name, file, line) in renamed {
            names.push((func, intern(name), file.map(&mut intern), line));
        }
        let funcs = &mut thread["funcTable"];
        // Columns may be short in a damaged file: only cells that exist are written.
        let mut set = |column: &str, i: usize, v: Value| {
            if let Some(cell) = funcs.get_mut(column).and_then(Value::as_array_mut).and_then(|c| c.get_mut(i)) {
                *cell = v;
            }
        };
        for (func, name, file, line) in names {
            set("name", func, Value::from(name));
            if let Some(file) = file {
                set("fileName", func, Value::from(file));
            }
            if let Some(line) = line {
                set("lineNumber", func, Value::from(line));
            }
            named += 1;
        }
    }
    profile["meta"]["symbolicated"] = Value::Bool(true);
    Ok(named)
}
