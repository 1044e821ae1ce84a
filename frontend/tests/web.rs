//! The page's WASM bindings, run in headless Chromium by wasm-bindgen-test-runner.

use stacklens_core::analysis::timeline::{ChartViewport, Lane, StackBox, StackChart};
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::transforms::Transform;
use stacklens_core::analysis::tree::cache::{TreeCache, MAX_TREE_NODES};
use stacklens_core::analysis::tree::CallTree;
use stacklens_core::analysis::{Filters, Query, SampleType};
use stacklens_core::ProfileKind;
use stacklens_frontend::app::encrypted::{open, seal, Link};
use stacklens_frontend::views::timeline::{box_at, lane_tops, zoomed, Scale, MIN_SPAN};
use stacklens_frontend::worker::protocol::{FirstTree, Summary, Timeline, TreeKind};
use stacklens_frontend::worker::session::{diff_profiles, diff_tree, tiny_cpu_profile, warm_up_profile, Loaded};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

/// The page's query: sample type `sample`, `filters`, and a shape (transforms, range).
fn query(sample: usize, filters: Filters, transforms: Vec<Transform>, range: Option<(i64, i64)>) -> Query {
    Query { sample: sample.into(), filters, transforms, range, ..Query::default() }
}

fn plain(sample: usize) -> Query {
    query(sample, Filters::default(), Vec::new(), None)
}

fn top_of(loaded: &Loaded, query: &Query) -> Result<TopReport, String> {
    loaded.prepared(query, |p| top(p, &TopOptions::default()))
}

fn tree_of(loaded: &Loaded, query: &Query) -> Result<CallTree, String> {
    loaded.tree_below(query, Vec::new(), MAX_TREE_NODES)
}

#[wasm_bindgen_test]
fn parses_and_ranks_in_the_browser() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let (types, default) = loaded.sample_types();
    assert_eq!(types, ["samples", "cpu"]);
    assert_eq!(default, 1);
    let top = top_of(&loaded, &plain(default)).expect("top");
    assert_eq!(top.total, 40);
    let rows: Vec<(&str, i64, i64)> = top.functions.iter().map(|f| (f.name.as_str(), f.flat, f.cum)).collect();
    assert_eq!(rows, [("hot", 30, 30), ("idle", 10, 10), ("main", 0, 40), ("work", 0, 30)]);
}

/// The worker's warm-up runs what a large file's parse and tree run, so it must parse as
/// one: 3,000 samples 10 to 40 deep, inlined lines becoming frames of their own.
#[wasm_bindgen_test]
fn the_warm_up_profile_is_a_deep_profile_with_inlined_lines() {
    let loaded = Loaded::parse("warm-up", &warm_up_profile()).expect("parses");
    assert_eq!(loaded.profile.samples.len(), 3_000);
    assert!(loaded.profile.samples.iter().all(|s| (10..=40).contains(&s.locations.len())));
    let tree = tree_of(&loaded, &plain(1)).expect("tree");
    assert_eq!(tree.total(), 3_000 * 10_000_000);
    assert!(tree.max_depth > 40, "inlined lines add frames: {}", tree.max_depth);
    assert!(tree.names.iter().any(|n| n.ends_with(".inlined")));
}

/// The tree the worker builds ahead is the one the page then asks for: the sample type a
/// link names, else the default; none for a goroutine profile, which opens in its report.
#[wasm_bindgen_test]
fn the_tree_built_ahead_has_the_key_the_page_asks_for() {
    let loaded = Loaded::parse("cpu.pb.gz", &tiny_cpu_profile()).expect("parses");
    let meta = stacklens_core::analysis::summary::meta(&loaded.profile);
    let cpu = Summary {
        kind: ProfileKind::Cpu,
        sample_types: vec!["samples".into(), "cpu".into()],
        default_sample: 1,
        meta: meta.clone(),
        mappings: Vec::new(),
    };
    let filters = Filters { focus: Some("main".into()), ..Filters::default() };
    let first = |wanted: &str| FirstTree {
        query: Query { sample: SampleType::parse(wanted), filters: filters.clone(), ..Query::default() },
    };
    let sample = |key: stacklens_frontend::worker::protocol::TreeKey| key.query.sample;
    let key = first("").key(7, &cpu).expect("a cpu profile opens in the flame graph");
    assert_eq!(
        (key.id, key.query.sample.clone(), key.kind.clone(), key.query.filters.clone()),
        (7, SampleType::Index(1), TreeKind::Plain, filters.clone())
    );
    assert_eq!(first("samples").key(7, &cpu).map(sample), Some(SampleType::Index(0)));
    assert_eq!(first("no such type").key(7, &cpu).map(sample), Some(SampleType::Index(1)));
    let goroutines =
        Summary { kind: ProfileKind::Goroutine, sample_types: vec!["goroutine".into()], default_sample: 0, ..cpu };
    assert!(first("").key(7, &goroutines).is_none(), "a goroutine profile opens in its report");
    assert_eq!(first("goroutine").key(7, &goroutines).map(sample), Some(SampleType::Index(0)));
}

#[wasm_bindgen_test]
fn goroutine_dumps_parse_in_the_browser() {
    let dump = "goroutine 1 [chan send, 2 minutes]:\nmain.f()\n\t/src/a.go:3 +0x1\n\ngoroutine 2 [chan send]:\nmain.f()\n\t/src/a.go:3 +0x1\n";
    let loaded = Loaded::parse("dump.txt", dump.as_bytes()).expect("parses");
    let top = top_of(&loaded, &plain(0)).expect("top");
    assert_eq!(top.total, 2);
    assert_eq!(top.functions[0].name, "main.f");
}

#[wasm_bindgen_test]
fn a_bad_file_names_itself_and_the_problem() {
    let err = Loaded::parse("broken.pb.gz", &[0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 1]).err().expect("fails");
    assert!(err.starts_with("broken.pb.gz: "), "{err}");
    assert!(err.contains("gzip"), "{err}");
}

#[wasm_bindgen_test]
fn flame_tree_search_and_diff_in_the_browser() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let tree = tree_of(&loaded, &plain(1)).expect("tree");
    assert_eq!(tree.total(), 40);
    let (_, covered) = tree.search(|n| n == "work" || n == "hot");
    assert_eq!(covered, 30, "hot is inside work: counted once");
    let focus = Filters { focus: Some("^idle$".into()), ..Filters::default() };
    let focused = tree_of(&loaded, &query(1, focus, Vec::new(), None)).expect("tree");
    assert_eq!(focused.total(), 10);
    let ignore = Filters { ignore: Some("(".into()), ..Filters::default() };
    let bad = top_of(&loaded, &query(1, ignore, Vec::new(), None)).expect_err("bad regex");
    assert!(bad.contains("ignore"), "{bad}");

    let again = Loaded::parse("again.pb", &tiny_cpu_profile()).expect("parses");
    let d = diff_profiles(&loaded, &again, &plain(1), false).expect("diff");
    assert_eq!((d.overall_delta_pct, d.regressions.len(), d.improvements.len()), (0.0, 0, 0));
    let t = diff_tree(&loaded, &again, &plain(1)).expect("diff tree");
    assert_eq!(t.base_values(0).total, 40);
}

#[wasm_bindgen_test]
fn windows_are_cut_from_cached_whole_trees() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let mut cache = TreeCache::new();
    let built = std::cell::Cell::new(0);
    let build = || {
        built.set(built.get() + 1);
        tree_of(&loaded, &plain(1))
    };
    let whole = cache.get_or_build("a", build).expect("tree");
    let again = cache.get_or_build("a", build).expect("tree");
    assert!(std::sync::Arc::ptr_eq(&whole, &again), "the second window reuses the tree");
    assert_eq!(built.get(), 1);

    let path = ["main".to_owned(), "work".to_owned()];
    let (window, meta) = whole.flame_window(&path, "HOT");
    let zoom = meta.zoom;
    assert_eq!(window.name(zoom), "work");
    assert_eq!(window.nodes[zoom as usize].total, 30);
    assert_eq!(meta.matched, Some(("HOT".to_owned(), 30)), "the search matches case-insensitively in the whole tree");
    assert_eq!((meta.pruned_below, meta.complete), (0, true), "a small tree has every node");
    let names: Vec<&str> = (0..window.nodes.len() as u32).map(|n| window.name(n)).collect();
    assert_eq!(names, ["root", "main", "work", "hot"], "ancestors, then the zoomed subtree; idle is outside");
    let (stale, meta) = whole.flame_window(&["main".to_owned(), "gone".to_owned()], "");
    assert_eq!((stale.name(meta.zoom), meta.matched), ("main", None), "a stale path stops at its last frame");

    for key in ["b", "c", "d"] {
        cache.get_or_build(key, build).expect("tree");
    }
    assert_eq!(cache.len(), 3, "the oldest tree was dropped");
    cache.retain(|k| *k != "d");
    assert_eq!(cache.len(), 2);
    assert!(cache.get_or_build("e", || Err::<CallTree, _>("no")).is_err());

    // The tree has 5 nodes (root, main, work, hot, idle): over a 4-node budget, each
    // tree is dropped before the next is built.
    let mut small = TreeCache::keeping(4);
    small.get_or_build("a", build).expect("tree");
    small.get_or_build("b", build).expect("tree");
    assert_eq!(small.len(), 1, "the first tree was dropped for the second");
    let mut roomy = TreeCache::keeping(10);
    roomy.get_or_build("a", build).expect("tree");
    roomy.get_or_build("b", build).expect("tree");
    assert_eq!(roomy.len(), 2, "both fit in 10 nodes");
}

#[wasm_bindgen_test]
fn shapes_transform_the_profile_every_view_reads() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let dropped = query(1, Filters::default(), vec![Transform::DropFunction { name: "idle".into() }], None);
    assert_eq!(top_of(&loaded, &dropped).expect("top").total, 30);
    let merged =
        query(1, Filters::default(), vec![Transform::MergeFunction { name: "work".into() }, Transform::Invert], None);
    let tree = tree_of(&loaded, &merged).expect("tree");
    let roots: Vec<&str> = tree.children(0).map(|n| tree.name(n)).collect();
    assert_eq!(roots, ["hot", "idle"], "inverted: the leaves are the roots, and work is gone");
    assert!(
        std::rc::Rc::ptr_eq(&loaded.shaped(&merged).expect("shaped"), &loaded.shaped(&merged).expect("shaped")),
        "one shape is applied once"
    );
    assert!(std::rc::Rc::ptr_eq(&loaded.shaped(&plain(1)).expect("plain"), &loaded.profile));
    let ranged = query(1, Filters::default(), Vec::new(), Some((0, 10)));
    let err = top_of(&loaded, &ranged).expect_err("no sample times");
    assert!(err.contains("does not say when samples were taken"), "{err}");
}

/// A Node `.cpuprofile`: main → work, work, then main → idle, then main → work, one
/// sample every 100 µs from 1000 µs to the end at 1400 µs.
const TIMED: &str = r#"{
  "nodes": [
    {"id": 1, "callFrame": {"functionName": "(root)", "url": "", "lineNumber": -1, "columnNumber": -1}, "children": [2]},
    {"id": 2, "callFrame": {"functionName": "main", "url": "file:///a.js", "lineNumber": 0, "columnNumber": 0}, "children": [3, 4]},
    {"id": 3, "callFrame": {"functionName": "work", "url": "file:///a.js", "lineNumber": 4, "columnNumber": 0}},
    {"id": 4, "callFrame": {"functionName": "idle", "url": "file:///b.js", "lineNumber": 9, "columnNumber": 0}}
  ],
  "startTime": 1000, "endTime": 1400, "samples": [3, 3, 4, 3], "timeDeltas": [0, 100, 100, 100]
}"#;

/// The chart's boxes as (depth, name, start, end), in core's order.
fn boxes(chart: &StackChart) -> Vec<(u32, &str, i64, i64)> {
    chart.boxes.iter().map(|b| (b.depth, chart.names[b.name as usize].as_str(), b.start, b.end)).collect()
}

#[wasm_bindgen_test]
fn the_timeline_draws_every_sample_and_a_window_of_it() {
    let loaded = Loaded::parse("timed.cpuprofile", TIMED.as_bytes()).expect("parses");
    let viewport = ChartViewport { width_px: 1000.0, min_width_px: 0.0, max_depth: 100 };
    let wall = 1; // wall/microseconds, the default
    let Timeline::Drawn { chart, histogram } = loaded.timeline(&plain(wall), None, &viewport, 4).expect("timeline")
    else {
        panic!("a .cpuprofile has sample times")
    };
    assert_eq!((chart.start, chart.end), (0, 400_000), "from startTime, in nanoseconds");
    assert_eq!(chart.lanes, [Lane { name: String::new(), depth: 2 }]);
    assert_eq!(
        boxes(&chart),
        [
            (0, "main", 0, 400_000),
            (1, "work", 0, 200_000),
            (1, "idle", 200_000, 300_000),
            (1, "work", 300_000, 400_000)
        ]
    );
    assert_eq!(chart.files[chart.boxes[2].name as usize], "file:///b.js");
    assert_eq!(histogram.unit, "microseconds");
    assert!(histogram.values.len() == 4 && histogram.values.iter().all(|v| (v - 100.0).abs() < 1e-9), "{histogram:?}");

    // A window: only the samples in it, the histogram still of the whole span.
    let window = Some((100_000, 300_000));
    let Timeline::Drawn { chart, histogram } = loaded.timeline(&plain(wall), window, &viewport, 4).expect("timeline")
    else {
        panic!("drawn")
    };
    assert_eq!((chart.start, chart.end, histogram.start, histogram.end), (100_000, 300_000, 0, 400_000));
    assert_eq!(
        boxes(&chart),
        [(0, "main", 100_000, 300_000), (1, "work", 100_000, 200_000), (1, "idle", 200_000, 300_000)]
    );

    // The shape's transforms apply; the other views read the range.
    let dropped = query(wall, Filters::default(), vec![Transform::DropFunction { name: "idle".into() }], None);
    let Timeline::Drawn { chart, .. } = loaded.timeline(&dropped, None, &viewport, 4).expect("timeline") else {
        panic!("drawn")
    };
    assert!(!boxes(&chart).iter().any(|b| b.1 == "idle"), "{:?}", boxes(&chart));
    let ranged = query(wall, Filters::default(), Vec::new(), Some((100_000, 300_000)));
    assert_eq!(top_of(&loaded, &ranged).expect("top").total, 200, "two samples of 100 µs");
    assert_eq!(top_of(&loaded, &plain(wall)).expect("top").total, 400);
}

#[wasm_bindgen_test]
fn a_profile_without_sample_times_says_why_it_has_no_timeline() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let answer = loaded.timeline(&plain(1), None, &ChartViewport::default(), 100).expect("an answer, not an error");
    let Timeline::Unavailable(why) = answer else { panic!("a pprof profile has no sample times") };
    assert!(why.contains("no sample times") && why.contains("does not say when samples were taken"), "{why}");
    // Bad requests are errors, not panics.
    let timed = Loaded::parse("timed.cpuprofile", TIMED.as_bytes()).expect("parses");
    let err = timed.timeline(&plain(1), Some((5, 5)), &ChartViewport::default(), 10).expect_err("an empty window");
    assert!(err.contains("empty"), "{err}");
    let err = timed.timeline(&plain(1), None, &ChartViewport::default(), 0).expect_err("no buckets");
    assert!(err.contains("buckets"), "{err}");
}

#[wasm_bindgen_test]
fn timeline_zoom_and_hit_testing() {
    let whole = (0, 1_000_000);
    assert_eq!(zoomed(whole, whole, 500_000, 0.5), Some((250_000, 750_000)), "about the middle");
    assert_eq!(zoomed(whole, whole, 0, 0.5), Some((0, 500_000)), "the left edge stays put");
    assert_eq!(zoomed((250_000, 750_000), whole, 500_000, 2.0), None, "back to the whole span");
    assert_eq!(zoomed((900_000, 1_000_000), whole, 1_000_000, 1.5), Some((850_000, 1_000_000)), "kept inside");
    assert_eq!(zoomed((0, 2_000), whole, 0, 0.01), Some((0, MIN_SPAN)), "no narrower than MIN_SPAN");
    assert_eq!(zoomed((-50, 950), (0, 1_000), -50, 1.0), None, "a pan past the start is the whole span");
    assert_eq!(zoomed((100_100, 200_100), whole, 100_100, 1.0), Some((100_100, 200_100)), "a pan");

    let scale = Scale { start: 1_000, end: 11_000, width: 1000.0 };
    assert_eq!((scale.x(6_000), scale.time(500.0), scale.time(-5.0)), (500.0, 6_000, 1_000));
    assert_eq!(scale.ticks(200.0), [2_000, 4_000, 6_000, 8_000, 10_000], "a 2 µs step for one tick per 200 px");
    assert_eq!(Scale { start: -3, end: 3, width: 600.0 }.ticks(100.0), [-3, -2, -1, 0, 1, 2, 3], "at least 1 ns");

    let b = |lane, depth, start, end, name| StackBox { lane, depth, start, end, name };
    let chart = StackChart {
        start: 0,
        end: 1_000,
        names: vec!["a".into(), "b".into(), "c".into()],
        files: vec![String::new(); 3],
        lanes: vec![Lane { name: "one".into(), depth: 2 }, Lane { name: "two".into(), depth: 1 }],
        boxes: vec![b(0, 0, 0, 1_000, 0), b(0, 1, 100, 200, 1), b(0, 1, 500, 900, 2), b(1, 0, 300, 400, 2)],
    };
    let (tops, height) = lane_tops(&chart);
    assert_eq!((tops.clone(), height), (vec![36.0, 92.0], 114.0), "axis, then each lane's name and rows");
    let scale = Scale { start: 0, end: 1_000, width: 1000.0 };
    let at = |x, y| box_at(&chart, &tops, &scale, x, y);
    assert_eq!((at(10.0, 40.0), at(150.0, 56.0), at(600.0, 60.0), at(300.0, 60.0)), (Some(0), Some(1), Some(2), None));
    assert_eq!((at(350.0, 95.0), at(350.0, 80.0), at(350.0, 10.0), at(450.0, 95.0)), (Some(3), None, None, None));
}

/// A zoom past what a pruned tree kept gets the zoomed subtree built alone: every frame,
/// a zoom deeper than the pruned tree goes, and the ancestors' values from the whole.
#[wasm_bindgen_test]
fn zooming_past_a_pruned_trees_detail_builds_the_subtree_alone() {
    let loaded = Loaded::parse("small.pb", &tiny_cpu_profile()).expect("parses");
    let tree = |below: Vec<String>, max_nodes| loaded.tree_below(&plain(1), below, max_nodes);
    let names = |t: &stacklens_core::analysis::tree::CallTree| -> Vec<(String, i64)> {
        (0..t.nodes.len() as u32).map(|n| (t.name(n).to_owned(), t.nodes[n as usize].total)).collect()
    };
    let at = |path: &[&str]| path.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // root 40, main 40, work 30, hot 30, idle 10: within 4 nodes the cut is 20 (idle goes).
    let mut cache = TreeCache::keeping(4);
    let whole = cache.get_or_build("whole", || tree(Vec::new(), 4)).expect("tree");
    assert_eq!((whole.nodes.len(), whole.pruned_below), (4, 20));
    let zoom = at(&["main", "work"]);
    let (_, meta) = whole.flame_window(&zoom, "");
    assert!(!meta.complete, "the window at work could miss frames under 20");
    let path = whole.detail_path(&zoom, &meta).expect("past the kept detail");
    assert_eq!(path, zoom);
    // Built beside the whole tree, which the cache keeps.
    let detail = cache.get_or_build_keeping("detail", whole.nodes.len(), || tree(path.clone(), 4)).expect("tree");
    assert_eq!(cache.len(), 2, "the whole tree stays");
    assert_eq!(detail.total(), 30, "only the stacks through main;work");
    let (window, meta) = whole.detail_window(&detail, &path, &zoom, meta);
    assert!(meta.complete);
    assert_eq!((window.name(meta.zoom), meta.pruned_below), ("work", 20));
    let expected = [("root", 40), ("main", 40), ("work", 30), ("hot", 30)];
    assert_eq!(names(&window), expected.map(|(n, v)| (n.to_owned(), v)), "the ancestors' values are the whole's");

    // Within 3 nodes the whole tree stops at main; a zoom at work goes on in the subtree.
    let whole = tree(Vec::new(), 3).expect("tree");
    assert_eq!(names(&whole), [("root".to_owned(), 40), ("main".to_owned(), 40)]);
    let (_, meta) = whole.flame_window(&zoom, "");
    let path = whole.detail_path(&zoom, &meta).expect("past the kept detail");
    assert_eq!(path, at(&["main"]));
    let detail = tree(path.clone(), 100).expect("tree");
    let (window, meta) = whole.detail_window(&detail, &path, &zoom, meta);
    assert_eq!(window.name(meta.zoom), "work");
    // A complete window, or one at the root, needs nothing more.
    let full = tree(Vec::new(), 100).expect("tree");
    let (_, meta) = full.flame_window(&zoom, "");
    assert_eq!(full.detail_path(&zoom, &meta), None);
}

#[wasm_bindgen_test]
async fn sealed_bytes_open_with_their_key_only() {
    let profile = b"main;serve;parse_request 30\nmain;serve;write_response 10\n";
    let (sealed, key) = seal("payments-prod.folded", profile).await.unwrap();
    assert!(sealed.starts_with(b"SLE1"));
    assert_eq!(sealed.len(), 4 + 12 + 4 + "payments-prod.folded".len() + profile.len() + 16);
    let text = String::from_utf8_lossy(&sealed);
    assert!(!text.contains("parse_request") && !text.contains("payments"), "{text}");
    assert_eq!(key.len(), 43, "{key}");
    let (name, opened) = open(&sealed, &key).await.unwrap();
    assert_eq!((name.as_str(), opened.as_slice()), ("payments-prod.folded", profile.as_slice()));

    // Two seals of one profile differ (fresh key and nonce).
    let (again, other_key) = seal("payments-prod.folded", profile).await.unwrap();
    assert_ne!((&again, &other_key), (&sealed, &key));
    // Another key, a cut key, altered bytes, bytes of something else: each a message.
    let wrong = open(&sealed, &other_key).await.unwrap_err();
    assert!(wrong.starts_with("the link's key does not open this profile"), "{wrong}");
    let cut = open(&sealed, &key[..20]).await.unwrap_err();
    assert!(cut.starts_with("the link's key is not a key"), "{cut}");
    let mut altered = sealed.clone();
    *altered.last_mut().unwrap() ^= 1;
    assert!(open(&altered, &key).await.unwrap_err().starts_with("the link's key does not open"));
    let foreign = open(b"\x1f\x8b\x08\x00 not sealed", &key).await.unwrap_err();
    assert!(foreign.contains("not an encrypted stacklens profile"), "{foreign}");
}

#[wasm_bindgen_test]
fn links_and_sources_carry_blob_and_key() {
    let link = Link { blob: "blob-0a1b".into(), key: "k3y_-".into() };
    assert_eq!(link.url("http://127.0.0.1:8080", None), "http://127.0.0.1:8080/#/e/blob-0a1b/k3y_-");
    assert_eq!(link.url("https://x", Some("team a")), "https://x/#/e/blob-0a1b/k3y_-?tenant=team%20a");
    assert_eq!(Link::from_source(&link.source()), Some(link));
    assert_eq!(Link::from_source("https://example.com/p.pb.gz"), None);
}
