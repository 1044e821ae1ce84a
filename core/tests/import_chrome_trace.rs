//! Chrome traces made of duration events (Trace Event format `B`/`E` pairs and `X`
//! complete events): self time per stack, per thread. The third-party trace is checked
//! against a reference computed here from the raw JSON by the plainest method there is:
//! walk every microsecond of every thread and give it to the innermost event covering
//! it (the shortest: the trace's events nest properly and have whole-microsecond `ts` and
//! `dur`, which the reference asserts). Small hand-made traces pin down nesting, ordering
//! and the malformed cases.

mod common;

use std::collections::BTreeMap;
use std::io::Read;

use common::{fixtures, read};
use serde_json::Value;
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::Prepared;
use stacklens_core::model::{LabelValue, Profile, SampleRef, SourceFormat};
use stacklens_core::{parse, Error};

const TRACING: &str = "thirdparty/firefox-profiler/chrome-tracing.json.gz";
const DEVTOOLS: &str = "thirdparty/speedscope/chrome116-Trace-20230603T221323.json";

/// Self value per function name, as `top` reports it.
fn flat(p: &Profile) -> BTreeMap<String, i64> {
    let report = top(&Prepared::whole(p).unwrap(), &TopOptions::default()).unwrap();
    report.functions.iter().filter(|f| f.flat != 0).map(|f| (f.name.clone(), f.flat)).collect()
}

fn label<'a>(p: &Profile, s: SampleRef<'a>, key: &str) -> Option<&'a LabelValue> {
    s.labels.iter().find(|l| p.str(l.key) == key).map(|l| &l.value)
}

/// Total per `thread` label.
fn per_thread(p: &Profile) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let Some(LabelValue::Str(thread)) = label(p, s, "thread") else { panic!("a sample without a thread label") };
        *out.entry(p.str(*thread).to_owned()).or_default() += s.values[0];
    }
    out
}

/// Each sample's stack, root first, as `a;b;c`, with its value.
fn stacks(p: &Profile) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in &p.samples {
        let names: Vec<&str> =
            s.locations.iter().rev().map(|&l| p.line_function_name(&p.location(l).lines[0])).collect();
        *out.entry(names.join(";")).or_default() += s.values[0];
    }
    out
}

/// `BTreeMap` of owned names, for comparing with [`stacks`], [`flat`] and [`per_thread`].
fn named(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
}

fn comments(p: &Profile) -> Vec<&str> {
    p.comments.iter().map(|&c| p.str(c)).collect()
}

fn read_json(path: &std::path::Path) -> Value {
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&read(path)[..]).read_to_end(&mut bytes).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// An event's start and end (µs) and name.
type Span = (i64, i64, String);

/// The reference: (self µs per name, covered µs per (pid, tid)), one microsecond at a time.
fn reference(json: &Value) -> (BTreeMap<String, i64>, BTreeMap<(i64, i64), i64>) {
    let mut threads: BTreeMap<(i64, i64), Vec<Span>> = BTreeMap::new();
    for e in json["traceEvents"].as_array().unwrap() {
        assert_ne!(e["ph"], "B", "the reference reads X events only");
        assert_ne!(e["ph"], "E", "the reference reads X events only");
        if e["ph"] == "X" {
            let (ts, dur) = (e["ts"].as_i64().unwrap(), e["dur"].as_i64().unwrap());
            let key = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
            threads.entry(key).or_default().push((ts, ts + dur, e["name"].as_str().unwrap().to_owned()));
        }
    }
    let (mut by_name, mut covered) = (BTreeMap::new(), BTreeMap::new());
    for (key, events) in threads {
        for a in &events {
            for b in &events {
                let crossing = a.0 < b.0 && b.0 < a.1 && a.1 < b.1;
                assert!(!crossing, "{a:?} and {b:?} overlap without nesting");
            }
        }
        let (from, to) = (events.iter().map(|e| e.0).min().unwrap(), events.iter().map(|e| e.1).max().unwrap());
        for t in from..to {
            let innermost = events.iter().filter(|e| e.0 <= t && t < e.1).min_by_key(|e| e.1 - e.0);
            if let Some(e) = innermost {
                *by_name.entry(e.2.clone()).or_default() += 1;
                *covered.entry(key).or_default() += 1;
            }
        }
    }
    (by_name, covered)
}

#[test]
fn tracing_json_is_self_time_per_thread() {
    let Some(dir) = fixtures() else { return };
    let path = dir.join(TRACING);
    let p = parse(&read(&path)).unwrap();
    assert_eq!(p.source, SourceFormat::ChromeTrace);
    assert_eq!((p.sample_type_name(0), p.sample_type_unit(0), p.sample_types.len()), ("wall", "nanoseconds", 1));
    assert_eq!(comments(&p), Vec::<&str>::new(), "nothing skipped: every X event has a dur");

    let (by_name, covered) = reference(&read_json(&path));
    let micros = |m: BTreeMap<String, i64>| -> BTreeMap<String, i64> {
        m.into_iter()
            .map(|(k, v)| {
                assert_eq!(v % 1000, 0, "{k}: whole microseconds");
                (k, v / 1000)
            })
            .collect()
    };
    assert_eq!(micros(flat(&p)), by_name);
    // The same figures, written out: idle work dominates; nesting gives the tasks little
    // self time (with nesting broken, RunTask alone would have its full 1 283 µs).
    let expected = [
        ("SequenceManager::DoIdleWork", 17_599),
        ("OnLibevent", 376),
        ("Receive mojo message", 255),
        ("ThreadControllerImpl::RunTask", 210),
        ("SimpleWatcher::OnHandleReady", 157),
        ("ThreadPool_RunTask", 121),
        ("Receive mojo reply", 111),
        ("Closed mojo endpoint", 9),
    ];
    assert_eq!(by_name, named(&expected));
    assert_eq!(p.total(0), 18_838_000);

    // 13 threads with events; each one's total is the time its events cover.
    let threads = per_thread(&p);
    assert_eq!(threads.len(), 13);
    assert_eq!(covered.len(), 13);
    let mut by_ids: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for s in &p.samples {
        let num = |key| match label(&p, s, key) {
            Some(LabelValue::Num { value, .. }) => *value,
            other => panic!("{key} label {other:?}"),
        };
        *by_ids.entry((num("pid"), num("tid"))).or_default() += s.values[0] / 1000;
    }
    assert_eq!(by_ids, covered);
    assert_eq!(threads["Service: tracing.mojom.TracingService CrUtilityMain (929423:1)"], 2_641_000);
    assert_eq!(threads["Service: data_decoder.mojom.DataDecoderService Chrome_ChildIOThread (929378:4)"], 3_843_000);
    // Two tasks one after the other (25 µs and 6 µs, a 3 µs gap not counted).
    assert_eq!(threads["Service: network.mojom.NetworkService Chrome_ChildIOThread (929207:929212)"], 31_000);
    // A thread with one event: its dur.
    assert_eq!(threads["GPU Process Chrome_ChildIOThread (929206:929305)"], 3_031_000);

    // The first task of the utility thread, by hand from its three events
    // (RunTask ts 337716407971 dur 103 ⊃ OnHandleReady 407996/77 ⊃ Receive 408005/65):
    // self 26, 12 and 65 µs. That stack's total over the whole thread is larger; the
    // stack shape must be this nesting.
    let s = stacks(&p);
    let deepest = "ThreadControllerImpl::RunTask;SimpleWatcher::OnHandleReady;Receive mojo message";
    assert!(s[deepest] >= 65_000, "{s:#?}");
    assert!(!s.contains_key("Receive mojo message"), "a mojo message is never a top-level event");
}

/// The first three events of the utility thread above, alone: what speedscope's
/// call-tree (and a reading by hand) gives them.
#[test]
fn one_task_nests_as_it_should() {
    let doc = r#"{"traceEvents": [
        {"ph": "X", "name": "ThreadControllerImpl::RunTask", "pid": 929423, "tid": 1, "ts": 337716407971, "dur": 103},
        {"ph": "X", "name": "SimpleWatcher::OnHandleReady", "pid": 929423, "tid": 1, "ts": 337716407996, "dur": 77},
        {"ph": "X", "name": "Receive mojo message", "pid": 929423, "tid": 1, "ts": 337716408005, "dur": 65}]}"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!(
        stacks(&p),
        named(&[
            ("ThreadControllerImpl::RunTask", 26_000),
            ("ThreadControllerImpl::RunTask;SimpleWatcher::OnHandleReady", 12_000),
            ("ThreadControllerImpl::RunTask;SimpleWatcher::OnHandleReady;Receive mojo message", 65_000),
        ])
    );
    assert_eq!(per_thread(&p), named(&[("929423:1", 103_000)]));
}

const NESTED: &str = r#"[
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "App"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}},
    {"ph": "B", "name": "main", "pid": 1, "tid": 7, "ts": 0},
    {"ph": "B", "name": "parse", "pid": 1, "tid": 7, "ts": 10},
    {"ph": "E", "name": "parse", "pid": 1, "tid": 7, "ts": 30},
    {"ph": "X", "name": "render", "pid": 1, "tid": 7, "ts": 40, "dur": 25},
    {"ph": "X", "name": "layout", "pid": 1, "tid": 7, "ts": 45, "dur": 5},
    {"ph": "I", "name": "mark", "pid": 1, "tid": 7, "ts": 50, "s": "t"},
    {"ph": "C", "name": "counter", "pid": 1, "tid": 7, "ts": 50, "args": {"n": 3}},
    {"ph": "E", "pid": 1, "tid": 7, "ts": 100},
    {"ph": "X", "name": "work", "pid": 1, "tid": 8, "ts": 5.5, "dur": 2.25}
]"#;

fn nested_stacks() -> BTreeMap<String, i64> {
    named(&[
        ("main", 55_000),
        ("main;parse", 20_000),
        ("main;render", 20_000),
        ("main;render;layout", 5_000),
        ("work", 2_250),
    ])
}

#[test]
fn begin_end_and_complete_events_nest_per_thread() {
    let p = parse(NESTED.as_bytes()).unwrap();
    assert_eq!(stacks(&p), nested_stacks());
    assert_eq!(per_thread(&p), named(&[("App main (1:7)", 100_000), ("App (1:8)", 2_250)]));
    let tid = label(&p, p.samples.sample(0), "tid");
    assert!(matches!(tid, Some(LabelValue::Num { value: 7, .. })), "{tid:?}");
    assert_eq!(comments(&p), Vec::<&str>::new());
    assert_eq!(p.duration_nanos, 100_000);

    // The object form, events in reverse order: the same profile.
    let mut events: Vec<Value> = serde_json::from_str(NESTED).unwrap();
    events.reverse();
    let doc = serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms"});
    let p = parse(doc.to_string().as_bytes()).unwrap();
    assert_eq!(stacks(&p), nested_stacks());
}

#[test]
fn ties_open_the_parent_first() {
    // The child comes first in the file and starts with its parent; the parent's end
    // and a sibling's begin share a time.
    let doc = r#"[
        {"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": 0, "dur": 4},
        {"ph": "X", "name": "parent", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "next", "pid": 1, "tid": 1, "ts": 10, "dur": 3},
        {"ph": "B", "name": "zero", "pid": 1, "tid": 1, "ts": 13},
        {"ph": "E", "name": "zero", "pid": 1, "tid": 1, "ts": 13},
        {"ph": "X", "name": "nothing", "pid": 1, "tid": 1, "ts": 20, "dur": 0},
        {"ph": "X", "name": "no dur", "pid": 1, "tid": 1, "ts": 20}
    ]"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!(stacks(&p), named(&[("parent", 6_000), ("parent;child", 4_000), ("next", 3_000)]));
    assert_eq!(comments(&p), Vec::<&str>::new(), "the zero-length B/E pair is matched, not left open");
}

#[test]
fn mismatched_and_unclosed_events_are_documented_skips() {
    // E a closes the innermost open a and cuts b, still open inside it; b's own E then
    // closes nothing, nor does an E with no B at all. c is never closed: it ends at the
    // thread's last event (the end of X d).
    let doc = r#"[
        {"ph": "E", "name": "orphan", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0},
        {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "E", "name": "a", "pid": 1, "tid": 1, "ts": 20},
        {"ph": "E", "name": "b", "pid": 1, "tid": 1, "ts": 30},
        {"ph": "B", "name": "c", "pid": 1, "tid": 1, "ts": 40},
        {"ph": "X", "name": "d", "pid": 1, "tid": 1, "ts": 45, "dur": 5}
    ]"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!(stacks(&p), named(&[("a", 10_000), ("a;b", 10_000), ("c", 5_000), ("c;d", 5_000),]));
    assert_eq!(
        comments(&p),
        [
            "2 end events (E) closing no open event were skipped",
            "1 events still open at their thread's last event were closed there"
        ]
    );
    // Only ends: a trace, but nothing covered.
    let p = parse(br#"[{"ph": "E", "name": "x", "pid": 1, "tid": 1, "ts": 3}]"#).unwrap();
    assert_eq!((p.samples.len(), comments(&p).len()), (0, 1));
}

#[test]
fn string_ids_are_labels_too() {
    let doc = r#"{"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": "gpu", "tid": "io", "args": {"name": "IO"}},
        {"ph": "X", "name": "poll", "pid": "gpu", "tid": "io", "ts": 1, "dur": 2}]}"#;
    let p = parse(doc.as_bytes()).unwrap();
    assert_eq!(per_thread(&p), named(&[("IO (gpu:io)", 2_000)]));
    let tid = label(&p, p.samples.sample(0), "tid").unwrap();
    assert!(matches!(tid, LabelValue::Str(s) if p.str(*s) == "io"), "{tid:?}");
}

fn err(doc: &str) -> Error {
    parse(doc.as_bytes()).unwrap_err()
}

#[test]
fn malformed_events_are_typed_errors() {
    let no_ts = err(r#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "dur": 3}]"#);
    assert_eq!(no_ts, Error::Invalid("Chrome trace: event 0 (X 'a') has no ts".into()));
    let no_ts = err(r#"[{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}},
        {"ph": "B", "pid": 1, "tid": 1, "ts": null}]"#);
    assert_eq!(no_ts, Error::Invalid("Chrome trace: event 1 (B) has no ts".into()));
    let text_ts = err(r#"[{"ph": "E", "name": "a", "pid": 1, "tid": 1, "ts": "5"}]"#);
    assert_eq!(
        text_ts,
        Error::Invalid(r#"Chrome trace: event 0 (E 'a') has ts "5", not a time in microseconds"#.into())
    );
    let huge = err(r#"[{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1e300}]"#);
    assert!(matches!(&huge, Error::Invalid(m) if m.contains("not a time in microseconds")), "{huge}");
    let negative = err(r#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": -3}]"#);
    assert_eq!(negative, Error::Invalid("Chrome trace: event 0 (X 'a') has a negative dur -3".into()));
    let negative = err(r#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "tdur": -0.5}]"#);
    assert_eq!(negative, Error::Invalid("Chrome trace: event 0 (X 'a') has a negative tdur -0.5".into()));
    let bad_dur = err(r#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": [1]}]"#);
    assert!(matches!(&bad_dur, Error::Invalid(m) if m.contains("has dur [1]")), "{bad_dur}");
    for e in [&no_ts, &negative, &bad_dur] {
        assert_eq!(e.code(), "InvalidProfile");
    }

    // Phases other than B, E and X are ignored; a trace of only those has nothing to read.
    let others = err(r#"[{"ph": "I", "name": "a", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 6, "args": {"v": 1}},
        {"ph": "zz", "pid": 1, "tid": 1}]"#);
    let Error::UnknownFormat { hint } = &others else { panic!("{others:?}") };
    assert!(hint.starts_with("a Chrome trace of 3 events with neither a CPU profile"), "{hint}");
    // An unknown phase without ts next to a good event: ignored, not an error.
    let p =
        parse(br#"[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1}, {"ph": "?", "pid": 1}]"#).unwrap();
    assert_eq!(p.total(0), 1_000);
}

#[test]
fn a_devtools_trace_keeps_its_cpu_profile() {
    let Some(dir) = fixtures() else { return };
    // It has 2456 X events besides its Profile/ProfileChunk events: the CPU profile is
    // read (samples/count and wall/microseconds, as before) and the comment says so.
    let p = parse(&read(&dir.join(DEVTOOLS))).unwrap();
    assert_eq!((p.sample_type_name(0), p.sample_type_name(1)), ("samples", "wall"));
    assert_eq!(p.total(0), 1600);
    assert_eq!(comments(&p), ["2456 duration events (ph B, E, X) not imported: the trace's CPU profile is"]);
}
