//! Sample times and the timeline views over them. Each importer's times are checked
//! against the times the file itself states (read here without the importer), and
//! `restrict` against those times; the stack chart and histogram against hand-built
//! profiles whose boxes and buckets are worked out by hand.

mod common;

use std::collections::BTreeMap;

use common::{fixtures, read};
use stacklens_core::analysis::frames::Filters;
use stacklens_core::analysis::merge::merge;
use stacklens_core::analysis::timeline::{self, ChartViewport, StackChart, TimelineOptions};
use stacklens_core::analysis::transforms;
use stacklens_core::model::{Label, LabelValue, Line, LocationId, Profile, Sample, SampleTime, SourceFormat};
use stacklens_core::{parse, Error};

#[test]
fn untimed_profiles_have_no_range_and_cannot_be_restricted() {
    let Some(dir) = fixtures() else { return };
    let p = parse(&read(&dir.join("go/base/cpu.pb.gz"))).unwrap();
    assert_eq!(timeline::time_range(&p), None);
    let err = timeline::restrict(&p, 0, 1).unwrap_err();
    assert_eq!(err.code(), "NoSampleTimes", "{err}");
    let err = timeline::stack_chart(&p, &TimelineOptions::default(), &ChartViewport::default()).unwrap_err();
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

/// A chart's boxes as (lane, depth, start, end, name).
fn boxes(chart: &StackChart) -> Vec<(u32, u32, i64, i64, &str)> {
    chart.boxes.iter().map(|b| (b.lane, b.depth, b.start, b.end, chart.names[b.name as usize].as_str())).collect()
}

fn window(start: i64, end: i64) -> TimelineOptions {
    TimelineOptions { start: Some(start), end: Some(end), ..TimelineOptions::default() }
}

fn viewport(width_px: f64, min_width_px: f64) -> ChartViewport {
    ChartViewport { width_px, min_width_px, ..ChartViewport::default() }
}

#[test]
fn stack_chart_joins_runs_of_a_frame_and_its_callers() {
    // a;b 0..20 (two samples), a;c 20..30, a 30..40, nothing 40..60, a 60..70.
    let p =
        built(&[("a;b", "", 0, 10), ("a;b", "", 10, 10), ("a;c", "", 20, 10), ("a", "", 30, 10), ("a", "", 60, 10)]);
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &viewport(700.0, 0.5)).unwrap();
    assert_eq!((chart.start, chart.end), (0, 70));
    assert_eq!(boxes(&chart), [(0, 0, 0, 40, "a"), (0, 0, 60, 70, "a"), (0, 1, 0, 20, "b"), (0, 1, 20, 30, "c")]);
    assert_eq!(chart.lanes.len(), 1);
    assert_eq!((chart.lanes[0].name.as_str(), chart.lanes[0].depth), ("", 2));

    // 10 ns a pixel, 2.5 px at least: the 20 ns gap closes, b and c are too narrow.
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &viewport(7.0, 2.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 70, "a")]);

    // A window: the samples overlapping 25..65, each box as long as its samples.
    let chart = timeline::stack_chart(&p, &window(25, 65), &viewport(400.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 20, 40, "a"), (0, 0, 60, 70, "a"), (0, 1, 20, 30, "c")]);
    assert_eq!(chart.lanes[0].depth, 2, "lanes keep their height in any window");
    let mut names = chart.names.clone();
    names.sort();
    assert_eq!(names, ["a", "c"], "only the names drawn");

    let shallow = ChartViewport { max_depth: 0, ..viewport(700.0, 0.5) };
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &shallow).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 40, "a"), (0, 0, 60, 70, "a")]);
    assert_eq!(chart.lanes[0].depth, 1);
}

#[test]
fn stack_chart_boxes_need_the_same_callers_and_lanes_are_threads() {
    let p = built(&[("a;b;x", "", 0, 10), ("a;c;x", "", 10, 10)]);
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &viewport(200.0, 0.5)).unwrap();
    let expected =
        [(0, 0, 0, 20, "a"), (0, 1, 0, 10, "b"), (0, 1, 10, 20, "c"), (0, 2, 0, 10, "x"), (0, 2, 10, 20, "x")];
    assert_eq!(boxes(&chart), expected);

    let p = built(&[("a", "T1", 0, 10), ("b;c", "T2", 0, 10), ("a", "T1", 10, 10)]);
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &viewport(200.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 20, "a"), (1, 0, 0, 10, "b"), (1, 1, 0, 10, "c")]);
    let lanes: Vec<(&str, u32)> = chart.lanes.iter().map(|l| (l.name.as_str(), l.depth)).collect();
    assert_eq!(lanes, [("T1", 1), ("T2", 2)]);

    // Filters apply as in every view: hidden frames leave the stacks.
    let options = TimelineOptions {
        filters: Filters { hide: Some("^b$".into()), ..Filters::default() },
        ..TimelineOptions::default()
    };
    let chart = timeline::stack_chart(&p, &options, &viewport(200.0, 0.5)).unwrap();
    assert_eq!(boxes(&chart), [(0, 0, 0, 20, "a"), (1, 0, 0, 10, "c")]);
}

#[test]
fn histogram_shares_each_value_over_the_time_it_covers() {
    let p = built(&[("a", "", 0, 10), ("a", "", 10, 10), ("a", "", 20, 10), ("a", "", 30, 10), ("a", "", 60, 10)]);
    let wall = TimelineOptions { sample_index: "wall".into(), ..TimelineOptions::default() };
    let h = timeline::histogram(&p, &wall, 7).unwrap();
    assert_eq!((h.start, h.end, h.sample_type.as_str(), h.unit.as_str()), (0, 70, "wall", "nanoseconds"));
    assert_eq!(h.values, [10.0, 10.0, 10.0, 10.0, 0.0, 0.0, 10.0]);

    // 5..15 across two buckets; a sample of no length counts where it starts.
    let p = built(&[("a", "", 5, 10), ("a", "", 12, 0), ("a", "", 19, 1)]);
    let h = timeline::histogram(&p, &TimelineOptions { sample_index: "samples".into(), ..window(0, 20) }, 2).unwrap();
    assert_eq!(h.values, [0.5, 2.5]);
    assert!(timeline::histogram(&p, &TimelineOptions::default(), 0).is_err());
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
    let chart = timeline::stack_chart(&p, &TimelineOptions::default(), &viewport(1000.0, 0.5)).unwrap();
    assert_drawable(&chart, 1000.0, 0.5);
    // Runs of 500 samples (half a pixel) and more: about 2000 + 1000 + 500 + … boxes.
    assert!((2_000..6_000).contains(&chart.boxes.len()), "{} boxes", chart.boxes.len());
}

#[test]
fn transforms_keep_times_in_step_and_merging_drops_them() {
    let p = built(&[("a;b", "", 0, 10), ("a;c", "", 10, 10), ("a;b", "", 20, 10)]);
    let ignored = transforms::filter(&p, &Filters { ignore: Some("^c$".into()), ..Filters::default() }).unwrap();
    assert_eq!(ignored.sample_times, [SampleTime { start: 0, duration: 10 }, SampleTime { start: 20, duration: 10 }]);
    let hidden = transforms::filter(&p, &Filters { hide: Some("^a$".into()), ..Filters::default() }).unwrap();
    assert_eq!(hidden.sample_times, p.sample_times);

    let merged = merge([&p]).unwrap();
    assert_eq!((merged.samples.len(), merged.sample_times.len()), (2, 0));
    assert_eq!(timeline::time_range(&merged), None);

    let err = timeline::restrict(&p, 10, 10).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let r = timeline::restrict(&p, 5, 25).unwrap();
    assert_eq!((r.samples.len(), r.duration_nanos), (2, 20));
}

#[test]
fn extreme_times_give_results_or_typed_errors() {
    let p = built(&[("a", "", i64::MIN, i64::MAX), ("a;b", "", -1, i64::MAX), ("b", "", i64::MAX - 1, 1)]);
    assert_eq!(timeline::time_range(&p), Some((i64::MIN, i64::MAX)));
    assert_eq!(timeline::restrict(&p, i64::MIN, i64::MAX).unwrap().samples.len(), 3);
    for window in [TimelineOptions::default(), window(i64::MIN, i64::MAX), window(-1, 0)] {
        let chart = timeline::stack_chart(&p, &window, &viewport(100.0, 0.5)).unwrap();
        assert_drawable(&chart, 100.0, 0.5);
        assert!(!chart.boxes.is_empty());
        let nothing_fits = timeline::stack_chart(&p, &window, &viewport(f64::NAN, f64::INFINITY)).unwrap();
        assert!(nothing_fits.boxes.is_empty());
        let h = timeline::histogram(&p, &window, 3).unwrap();
        assert!(h.values.iter().all(|v| v.is_finite()), "{:?}", h.values);
    }
    let err = timeline::histogram(&p, &TimelineOptions::default(), usize::MAX).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
}
