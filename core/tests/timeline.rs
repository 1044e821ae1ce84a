//! Sample times and the timeline views over them. Each importer's times are checked
//! against the times the file itself states (read here without the importer), and
//! `restrict` against those times; the stack chart and histogram against hand-built
//! profiles whose boxes and buckets are worked out by hand.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, inflated, json_fixture, read, PERF_SCRIPT_FIXTURES};
use serde_json::Value;
use stacklens_core::analysis::frames::Filters;
use stacklens_core::analysis::timeline::{self, ChartViewport, StackChart, TimelineOptions};
use stacklens_core::analysis::{Prepared, Query};
use stacklens_core::model::{
    Label, LabelValue, Line, LocationId, Profile, Sample, SampleRef, SampleTime, SourceFormat,
};
use stacklens_core::{parse, Error};

const MS: f64 = 1e6;

/// Checks a profile's sample starts against the times the file states (any order), then
/// that `restrict` to either half of the range keeps exactly the samples that start in it.
fn check_times(p: &Profile, mut expected: Vec<i64>) {
    assert_eq!(p.sample_times.len(), p.samples.len());
    let mut starts: Vec<i64> = p.sample_times.iter().map(|t| t.start).collect();
    starts.sort_unstable();
    expected.sort_unstable();
    assert_eq!(starts, expected);
    assert!(p.sample_times.iter().all(|t| t.duration >= 0));

    let (start, end) = timeline::time_range(p).unwrap();
    assert_eq!(start, expected[0]);
    let mid = start + (end - start) / 2;
    let mut kept = 0;
    for (from, to) in [(start, mid), (mid, end + 1)] {
        let r = p.restrict(from, to).unwrap();
        let inside: Vec<(SampleRef<'_>, &SampleTime)> =
            p.samples.iter().zip(&p.sample_times).filter(|(_, t)| (from..to).contains(&t.start)).collect();
        assert_eq!(r.samples.len(), expected.iter().filter(|t| (from..to).contains(t)).count());
        assert_eq!(r.samples.iter().zip(&r.sample_times).collect::<Vec<_>>(), inside);
        assert_eq!(r.sample_times.len(), r.samples.len());
        kept += r.samples.len();
    }
    assert_eq!(kept, p.samples.len(), "the halves share out every sample");
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
fn samply_sample_times_are_the_threads_times() {
    let Some((bytes, json)) = json_fixture("thirdparty/samply/ls-profile.json") else { return };
    let p = parse(&bytes).unwrap();
    let mut expected = Vec::new();
    for thread in json["threads"].as_array().unwrap() {
        let samples = &thread["samples"];
        let times = numbers(&samples["time"]);
        for (stack, t) in samples["stack"].as_array().unwrap().iter().zip(&times) {
            if !stack.is_null() {
                expected.push((t * MS).round() as i64);
            }
        }
    }
    // 5,130 samples of which 11 have no stack, from 0 to 3273.220366 ms.
    assert_eq!((expected.len(), expected[0], *expected.last().unwrap()), (5119, 0, 3_273_220_366));
    check_times(&p, expected);
    // Each sample lasts until the next; the last one interval (0.25 ms).
    assert_eq!(p.sample_times[0], SampleTime { start: 0, duration: 248_791 });
    assert_eq!(*p.sample_times.last().unwrap(), SampleTime { start: 3_273_220_366, duration: 250_000 });
    assert_eq!(timeline::time_range(&p), Some((0, 3_273_470_366)));
}

#[test]
fn firefox_time_deltas_add_up_and_stackless_samples_end_the_one_before() {
    let profile = br#"{"meta": {"interval": 0.5}, "libs": [], "threads": [{"name": "t",
        "stringArray": ["f"], "funcTable": {"name": [0]}, "frameTable": {"func": [0]},
        "stackTable": {"frame": [0], "prefix": [null]},
        "samples": {"stack": [0, 0, null, 0], "timeDeltas": [1, 2, 1, 1.5]}}]}"#;
    let p = parse(profile).unwrap();
    let spans = |list: &[(f64, f64)]| -> Vec<SampleTime> {
        list.iter().map(|&(s, d)| SampleTime { start: (s * MS) as i64, duration: (d * MS) as i64 }).collect()
    };
    assert_eq!(p.sample_times, spans(&[(1.0, 2.0), (3.0, 1.0), (5.5, 0.5)]));
}

#[test]
fn gecko_child_processes_move_onto_the_parents_clock_as_firefox_processes_them() {
    let Some(dir) = fixtures() else { return };
    let gecko = parse(&read(&dir.join("thirdparty/firefox-profiler/gecko-2.json"))).unwrap();
    // The Firefox Profiler's own processed form of the same profile.
    let processed = parse(&read(&dir.join("thirdparty/firefox-profiler/processed-3.json"))).unwrap();
    let sorted = |p: &Profile| {
        let mut t: Vec<(i64, i64)> = p.sample_times.iter().map(|t| (t.start, t.duration)).collect();
        t.sort_unstable();
        t
    };
    assert_eq!(sorted(&gecko), sorted(&processed));
    // Two threads at 0..6 ms, the child process's at 1000..1006 ms.
    let ms = |t: i64| t * 1_000_000;
    let mut expected: Vec<i64> = (0..7).flat_map(|t| [ms(t), ms(t), ms(1000 + t)]).collect();
    expected.sort_unstable();
    check_times(&gecko, expected);
    assert_eq!(timeline::time_range(&gecko), Some((0, ms(1007))));

    // A DevTools recording: its Gecko profile's times.
    let (bytes, json) = json_fixture("thirdparty/speedscope/firefox63-simple-firefox.json").unwrap();
    let p = parse(&bytes).unwrap();
    let samples = &json["profile"]["threads"][0]["samples"];
    let at = samples["schema"]["time"].as_u64().unwrap() as usize;
    let expected: Vec<i64> =
        samples["data"].as_array().unwrap().iter().map(|r| (r[at].as_f64().unwrap() * MS).round() as i64).collect();
    assert_eq!((expected.len(), expected[0]), (39, 643_114));
    check_times(&p, expected);
}

#[test]
fn cpuprofile_times_are_its_time_deltas() {
    let Some((bytes, json)) = json_fixture("thirdparty/firefox-profiler/hello.cjs-20231120T211435.cpuprofile") else {
        return;
    };
    let p = parse(&bytes).unwrap();
    let mut t = 0;
    let expected: Vec<i64> = json["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            t += d.as_i64().unwrap();
            t * 1000
        })
        .collect();
    assert_eq!(expected.len(), json["samples"].as_array().unwrap().len());
    check_times(&p, expected);
    // The last sample runs until endTime, as its wall time says.
    let span = json["endTime"].as_i64().unwrap() - json["startTime"].as_i64().unwrap();
    assert_eq!(timeline::time_range(&p).unwrap().1, span * 1000);
    let wall: i64 = p.samples.iter().map(|s| s.values[1] * 1000).sum();
    assert_eq!(p.sample_times.iter().map(|t| t.duration).sum::<i64>(), wall);

    // Old profiles: absolute `timestamps`, counted from the first.
    let (bytes, json) = json_fixture("thirdparty/speedscope/node10.11-example.cpuprofile").unwrap();
    let p = parse(&bytes).unwrap();
    let stamps = json["timestamps"].as_array().unwrap();
    let stamps = &stamps[stamps.len() - json["samples"].as_array().unwrap().len()..];
    let first = stamps.iter().map(|s| s.as_i64().unwrap()).min().unwrap();
    check_times(&p, stamps.iter().map(|s| (s.as_i64().unwrap() - first) * 1000).collect());
}

#[test]
fn chrome_trace_cpu_profile_times_are_its_chunks_deltas() {
    let Some((bytes, json)) = json_fixture("thirdparty/speedscope/chrome116-Trace-20230603T221323.json") else {
        return;
    };
    let p = parse(&bytes).unwrap();
    // One profile: its start, then its chunks' deltas in time order.
    let events = common::cpu_profile_events(&json);
    assert_eq!(events[0]["name"], "Profile");
    let mut t = 0;
    let mut expected = Vec::new();
    for chunk in &events[1..] {
        for d in chunk["args"]["data"]["timeDeltas"].as_array().into_iter().flatten() {
            t += d.as_i64().unwrap();
            expected.push(t * 1000);
        }
    }
    assert_eq!(expected.len(), 1600);
    check_times(&p, expected);
}

#[test]
fn chrome_trace_duration_events_are_stretches_of_one_stack() {
    let Some(dir) = fixtures() else { return };
    let bytes = inflated(&read(&dir.join("thirdparty/firefox-profiler/chrome-tracing.json.gz")));
    let p = parse(&bytes).unwrap();
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let spans: Vec<(i64, i64)> = json["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["dur"].as_i64().unwrap() > 0)
        .map(|e| (e["ts"].as_i64().unwrap(), e["ts"].as_i64().unwrap() + e["dur"].as_i64().unwrap()))
        .collect();
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    assert_eq!(timeline::time_range(&p), Some((0, (last - first) * 1000)));
    // A stretch's length is its self time, and a thread's stretches follow one another.
    let mut by_thread: BTreeMap<String, Vec<SampleTime>> = BTreeMap::new();
    for (s, t) in p.samples.iter().zip(&p.sample_times) {
        assert_eq!(s.values[0], t.duration);
        by_thread.entry(format!("{:?}", s.labels)).or_default().push(*t);
    }
    for times in by_thread.values() {
        assert!(times.windows(2).all(|w| w[0].end() <= w[1].start), "in time order, apart");
    }
    let starts = p.sample_times.iter().map(|t| t.start).collect();
    check_times(&p, starts);
}

/// Each record's time (ns) as its header line prints it (`1224.147545:`).
fn perf_record_times(text: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with(char::is_whitespace) || line.is_empty() {
            continue;
        }
        let time = line.split_whitespace().find_map(|t| {
            let (secs, frac) = t.strip_suffix(':')?.split_once('.')?;
            Some(secs.parse::<i64>().ok()? * 1_000_000_000 + format!("{frac:0<9}").parse::<i64>().ok()?)
        });
        out.push(time.unwrap_or_else(|| panic!("no time in {line}")));
    }
    out
}

#[test]
fn perf_script_records_keep_their_times() {
    let Some(dir) = fixtures() else { return };
    for name in PERF_SCRIPT_FIXTURES {
        let bytes = read(&dir.join(name));
        let p = parse(&bytes).unwrap();
        let times = perf_record_times(&String::from_utf8(inflated(&bytes)).unwrap());
        let first = *times.iter().min().unwrap();
        check_times(&p, times.iter().map(|t| t - first).collect());
    }
    // FlameGraph's example: 1315 records from 7628263.042515 s to 7628273.032857 s.
    let p = parse(&read(&dir.join(PERF_SCRIPT_FIXTURES[0]))).unwrap();
    let (start, end) = timeline::time_range(&p).unwrap();
    let last = p.sample_times.iter().map(|t| t.start).max().unwrap();
    assert_eq!((p.samples.len(), start, last), (1315, 0, 9_990_342_000));
    assert!(end > last);
}

#[test]
fn speedscope_sampled_time_is_its_weights_one_after_another() {
    let Some((bytes, json)) = json_fixture("tools/pyspy-workload-A.speedscope.json") else { return };
    let p = parse(&bytes).unwrap();
    let weights = numbers(&json["profiles"][0]["weights"]);
    let mut clock = 0.0;
    let expected: Vec<i64> = weights
        .iter()
        .map(|w| {
            let start = (clock * 1e9_f64).round() as i64;
            clock += w;
            start
        })
        .collect();
    assert_eq!(expected.len(), 954);
    check_times(&p, expected);
    // py-spy's endValue: 4.77 s.
    assert_eq!(timeline::time_range(&p), Some((0, 4_770_000_000)));
}

#[test]
fn speedscope_evented_samples_last_from_one_event_to_the_next() {
    let file = br#"{"$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": "a"}, {"name": "b"}]},
        "profiles": [{"type": "evented", "name": "main", "unit": "milliseconds", "startValue": 10, "endValue": 20,
            "events": [{"type": "O", "frame": 0, "at": 11}, {"type": "O", "frame": 1, "at": 12},
                       {"type": "C", "frame": 1, "at": 14}, {"type": "C", "frame": 0, "at": 15},
                       {"type": "O", "frame": 0, "at": 17}, {"type": "C", "frame": 0, "at": 18}]}]}"#;
    let p = parse(file).unwrap();
    let ms = |t: i64| t * 1_000_000;
    let spans = |list: &[(i64, i64)]| list.iter().map(|&(s, d)| SampleTime { start: ms(s), duration: ms(d) }).collect();
    // From startValue (10 ms): a 1..2, a;b 2..4, a 4..5, a 7..8.
    let expected: Vec<SampleTime> = spans(&[(1, 1), (2, 2), (4, 1), (7, 1)]);
    assert_eq!(p.sample_times, expected);
    check_times(&p, expected.iter().map(|t| t.start).collect());

    // A profile of bytes has no times, and so neither has the file.
    let bytes = br#"{"shared": {"frames": [{"name": "a"}]}, "profiles": [
        {"type": "evented", "name": "t", "unit": "milliseconds", "events": [
            {"type": "O", "frame": 0, "at": 0}, {"type": "C", "frame": 0, "at": 1}]},
        {"type": "sampled", "name": "m", "unit": "bytes", "samples": [[0]], "weights": [5]}]}"#;
    assert!(parse(bytes).unwrap().sample_times.is_empty());
}

#[test]
fn untimed_profiles_have_no_range_and_cannot_be_restricted() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join("go/base/cpu.pb.gz"))).unwrap();
    assert_eq!(timeline::time_range(&p), None);
    let err = p.restrict(0, 1).unwrap_err();
    assert_eq!(err.code(), "NoSampleTimes", "{err}");
    let err = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &ChartViewport::default()).unwrap_err();
    assert_eq!(err.code(), "NoSampleTimes", "{err}");
}

/// A profile of samples `(root-first frames "a;b", thread, start, duration)`: values
/// `samples/count` 1 and `wall/nanoseconds` the duration.
fn built(samples: &[(&str, &str, i64, i64)]) -> Profile {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count"), p.value_type("wall", "nanoseconds")];
    let mut locations: BTreeMap<&str, LocationId> = BTreeMap::new();
    for &(stack, thread, start, duration) in samples {
        let leaf_first = stack
            .split(';')
            .rev()
            .map(|name| {
                *locations.entry(name).or_insert_with(|| {
                    let function = p.add_function(name, name, "", 0);
                    p.add_location(0, vec![Line { function, line: 0, column: 0 }])
                })
            })
            .collect();
        let labels = if thread.is_empty() {
            Vec::new()
        } else {
            vec![Label { key: p.strings.intern("thread"), value: LabelValue::Str(p.strings.intern(thread)) }]
        };
        p.samples.push(Sample { locations: leaf_first, values: vec![1, duration], labels });
        p.sample_times.push(SampleTime { start, duration });
    }
    p
}

/// `p` as the default query prepares it.
fn whole(p: &Profile) -> Prepared<'_> {
    Prepared::whole(p).unwrap()
}

/// `p` prepared for the sample type `sample` names.
fn in_type<'p>(p: &'p Profile, sample: &str) -> Prepared<'p> {
    Query { sample: sample.into(), ..Query::default() }.prepare(p).unwrap()
}

/// A chart's boxes as (lane, depth, start, end, name).
fn boxes(chart: &StackChart) -> Vec<(u32, u32, i64, i64, &str)> {
    chart.boxes.iter().map(|b| (b.lane, b.depth, b.start, b.end, chart.names[b.name as usize].as_str())).collect()
}

fn window(start: i64, end: i64) -> TimelineOptions {
    TimelineOptions { start: Some(start), end: Some(end) }
}

fn viewport(width_px: f64, min_width_px: f64) -> ChartViewport {
    ChartViewport { width_px, min_width_px, ..ChartViewport::default() }
}

#[test]
fn stack_chart_joins_runs_of_a_frame_and_its_callers() {
    // a;b 0..20 (two samples), a;c 20..30, a 30..40, nothing 40..60, a 60..70.
    let p =
        built(&[("a;b", "", 0, 10), ("a;b", "", 10, 10), ("a;c", "", 20, 10), ("a", "", 30, 10), ("a", "", 60, 10)]);
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(700.0, 0.5)).unwrap();
    assert_eq!((chart.start, chart.end), (0, 70));
    assert_eq!(boxes(&chart), [(0, 0, 0, 40, "a"), (0, 0, 60, 70, "a"), (0, 1, 0, 20, "b"), (0, 1, 20, 30, "c")]);
    assert_eq!(chart.lanes.len(), 1);
    assert_eq!((chart.lanes[0].name.as_str(), chart.lanes[0].depth), ("", 2));

    // 10 ns a pixel, 2.5 px at least: the 20 ns gap closes, b and c are too narrow.
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(7.0, 2.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 70, "a")]);

    // A window: the samples overlapping 25..65, each box as long as its samples.
    let chart = timeline::stack_chart(&whole(&p), &window(25, 65), &viewport(400.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 20, 40, "a"), (0, 0, 60, 70, "a"), (0, 1, 20, 30, "c")]);
    assert_eq!(chart.lanes[0].depth, 2, "lanes keep their height in any window");
    let mut names = chart.names.clone();
    names.sort();
    assert_eq!(names, ["a", "c"], "only the names drawn");

    let shallow = ChartViewport { max_depth: 0, ..viewport(700.0, 0.5) };
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &shallow).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 40, "a"), (0, 0, 60, 70, "a")]);
    assert_eq!(chart.lanes[0].depth, 1);
}

#[test]
fn stack_chart_boxes_need_the_same_callers_and_lanes_are_threads() {
    let p = built(&[("a;b;x", "", 0, 10), ("a;c;x", "", 10, 10)]);
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(200.0, 0.5)).unwrap();
    let expected =
        [(0, 0, 0, 20, "a"), (0, 1, 0, 10, "b"), (0, 1, 10, 20, "c"), (0, 2, 0, 10, "x"), (0, 2, 10, 20, "x")];
    assert_eq!(boxes(&chart), expected);

    let p = built(&[("a", "T1", 0, 10), ("b;c", "T2", 0, 10), ("a", "T1", 10, 10)]);
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(200.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 20, "a"), (1, 0, 0, 10, "b"), (1, 1, 0, 10, "c")]);
    let lanes: Vec<(&str, u32)> = chart.lanes.iter().map(|l| (l.name.as_str(), l.depth)).collect();
    assert_eq!(lanes, [("T1", 1), ("T2", 2)]);

    // Filters apply as in every view: hidden frames leave the stacks.
    let hidden = Query { filters: Filters { hide: Some("^b$".into()), ..Filters::default() }, ..Query::default() };
    let hidden = hidden.prepare(&p).unwrap();
    let chart = timeline::stack_chart(&hidden, &TimelineOptions::default(), &viewport(200.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 20, "a"), (1, 0, 0, 10, "c")]);
}

#[test]
fn histogram_shares_each_value_over_the_time_it_covers() {
    let p = built(&[("a", "", 0, 10), ("a", "", 10, 10), ("a", "", 20, 10), ("a", "", 30, 10), ("a", "", 60, 10)]);
    let h = timeline::histogram(&in_type(&p, "wall"), &TimelineOptions::default(), 7).unwrap();
    assert_eq!((h.start, h.end, h.sample_type.as_str(), h.unit.as_str()), (0, 70, "wall", "nanoseconds"));
    assert_eq!(h.values, [10.0, 10.0, 10.0, 10.0, 0.0, 0.0, 10.0]);

    // 5..15 across two buckets; a sample of no length counts where it starts.
    let p = built(&[("a", "", 5, 10), ("a", "", 12, 0), ("a", "", 19, 1)]);
    let h = timeline::histogram(&in_type(&p, "samples"), &window(0, 20), 2).unwrap();
    assert_eq!(h.values, [0.5, 2.5]);
    assert!(timeline::histogram(&whole(&p), &TimelineOptions::default(), 0).is_err());
}

#[test]
fn histogram_of_a_whole_fixture_adds_up_to_its_total() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join("thirdparty/samply/ls-profile.json"))).unwrap();
    for (index, total) in [("samples", p.total(0)), ("cpu", p.total(1))] {
        let h = timeline::histogram(&in_type(&p, index), &TimelineOptions::default(), 300).unwrap();
        let sum: f64 = h.values.iter().sum();
        assert!((sum - total as f64).abs() <= 1e-6 * total as f64, "{index}: {sum} != {total}");
    }
}

/// Checks that boxes of one row do not overlap and each shows at least `min_px`, so no
/// row holds more than `width_px / min_px` of them.
fn assert_drawable(chart: &StackChart, width_px: f64, min_px: f64) {
    let ns_per_px = (chart.end as f64 - chart.start as f64) / width_px;
    for pair in chart.boxes.windows(2) {
        if (pair[0].lane, pair[0].depth) == (pair[1].lane, pair[1].depth) {
            assert!(pair[0].end <= pair[1].start, "{pair:?}");
        }
    }
    let mut per_row: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for b in &chart.boxes {
        *per_row.entry((b.lane, b.depth)).or_default() += 1;
    }
    assert!(per_row.values().all(|&n| n as f64 <= width_px / min_px + 1.0));
    for b in &chart.boxes {
        let shown = (b.end.min(chart.end) as f64 - b.start.max(chart.start) as f64) / ns_per_px;
        assert!(shown >= min_px, "{b:?} shows {shown} px");
    }
}

#[test]
fn stack_chart_of_the_largest_timed_fixture_stays_small() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join(PERF_SCRIPT_FIXTURES[0]))).unwrap();
    let frames: usize = p.samples.iter().map(|s| s.locations.len()).sum();
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(1000.0, 0.5)).unwrap();
    assert_drawable(&chart, 1000.0, 0.5);
    // 1315 deep stacks in 15 threads: runs of one frame are joined, and what is left
    // is at least half a pixel wide.
    let rows: u32 = chart.lanes.iter().map(|l| l.depth).sum();
    eprintln!("{frames} frames of {} samples: {} boxes in {rows} rows", p.samples.len(), chart.boxes.len());
    assert!(chart.boxes.len() < frames / 2, "{} boxes", chart.boxes.len());
    // Fewer, wider boxes when zoomed out further.
    let coarse = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(100.0, 0.5)).unwrap();
    assert_drawable(&coarse, 100.0, 0.5);
    assert!(coarse.boxes.len() < chart.boxes.len() / 2, "{} boxes at 100 px", coarse.boxes.len());
}

#[test]
fn stack_chart_of_a_million_samples_stays_a_few_thousand_boxes() {
    // One thread wandering through 40 functions, 14 frames deep: the frame at depth d
    // changes (with all below it) once in 2^(14 - d) samples, so outer frames last
    // long and inner ones are brief.
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    let locations: Vec<LocationId> = (0..40)
        .map(|i| {
            let function = p.add_function(&format!("f{i}"), "", "", 0);
            p.add_location(0, vec![Line { function, line: 0, column: 0 }])
        })
        .collect();
    let mut seed: u64 = 7;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut stack: Vec<LocationId> = Vec::new();
    for i in 0..1_000_000 {
        let keep = (0..stack.len()).find(|&d| next(1 << (14 - d)) == 0).unwrap_or(stack.len());
        stack.truncate(keep);
        while stack.len() < 14 {
            stack.push(locations[next(40) as usize]);
        }
        p.samples.push(Sample { locations: stack.iter().rev().copied().collect(), values: vec![1], labels: vec![] });
        p.sample_times.push(SampleTime { start: i * 1000, duration: 1000 });
    }
    let chart = timeline::stack_chart(&whole(&p), &TimelineOptions::default(), &viewport(1000.0, 0.5)).unwrap();
    assert_drawable(&chart, 1000.0, 0.5);
    // Runs of 500 samples (half a pixel) and more: about 2000 + 1000 + 500 + … boxes.
    assert!((2_000..6_000).contains(&chart.boxes.len()), "{} boxes", chart.boxes.len());
}

#[test]
fn transforms_keep_times_in_step_and_merging_drops_them() {
    let p = built(&[("a;b", "", 0, 10), ("a;c", "", 10, 10), ("a;b", "", 20, 10)]);
    let ignored = p.filter(&Filters { ignore: Some("^c$".into()), ..Filters::default() }).unwrap();
    assert_eq!(ignored.sample_times, [SampleTime { start: 0, duration: 10 }, SampleTime { start: 20, duration: 10 }]);
    let hidden = p.filter(&Filters { hide: Some("^a$".into()), ..Filters::default() }).unwrap();
    assert_eq!(hidden.sample_times, p.sample_times);

    let merged = Profile::merge([&p]).unwrap();
    assert_eq!((merged.samples.len(), merged.sample_times.len()), (2, 0));
    assert_eq!(timeline::time_range(&merged), None);

    let err = p.restrict(10, 10).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let r = p.restrict(5, 25).unwrap();
    assert_eq!((r.samples.len(), r.duration_nanos), (2, 20));
}

#[test]
fn extreme_times_give_results_or_typed_errors() {
    let p = built(&[("a", "", i64::MIN, i64::MAX), ("a;b", "", -1, i64::MAX), ("b", "", i64::MAX - 1, 1)]);
    assert_eq!(timeline::time_range(&p), Some((i64::MIN, i64::MAX)));
    assert_eq!(p.restrict(i64::MIN, i64::MAX).unwrap().samples.len(), 3);
    for window in [TimelineOptions::default(), window(i64::MIN, i64::MAX), window(-1, 0)] {
        let chart = timeline::stack_chart(&whole(&p), &window, &viewport(100.0, 0.5)).unwrap();
        assert_drawable(&chart, 100.0, 0.5);
        assert!(!chart.boxes.is_empty());
        let nothing_fits = timeline::stack_chart(&whole(&p), &window, &viewport(f64::NAN, f64::INFINITY)).unwrap();
        assert!(nothing_fits.boxes.is_empty());
        let h = timeline::histogram(&whole(&p), &window, 3).unwrap();
        assert!(h.values.iter().all(|v| v.is_finite()), "{:?}", h.values);
    }
    let err = timeline::histogram(&whole(&p), &TimelineOptions::default(), usize::MAX).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}
