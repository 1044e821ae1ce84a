//! Analysis semantics on real fixtures: diff classification, filters, call tree
//! invariants, flame-graph layout and goroutine growth between two snapshots.

mod common;

use stacklens_core::analysis::diff::{diff, DiffOptions};
use stacklens_core::analysis::goroutines::{analyze, compare, is_blocked, GoroutineOptions};
use stacklens_core::analysis::top::{top, TopOptions};
use stacklens_core::analysis::tree::{CallTree, Side, TreeOptions, ROOT};
use stacklens_core::analysis::Filters;
use stacklens_core::layout::{hit, layout, Viewport};
use stacklens_core::{Error, Profile};

fn load(rel: &str) -> Option<Profile> {
    let root = common::fixtures()?;
    Some(stacklens_core::parse(&common::read(&root.join(rel))).unwrap())
}

#[test]
fn cpu_diff_finds_the_regressed_code_path() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let d = diff(&base, &new, &DiffOptions::default()).unwrap();
    assert_eq!((d.base_total, d.compare_total), (7_080_000_000, 6_900_000_000));
    assert!((d.overall_delta_pct - (-2.5424)).abs() < 1e-3, "{}", d.overall_delta_pct);
    assert_eq!(d.noise_threshold, 70_800_000);
    // matrixMultiply's time is in its inlined callee: flat 0, cum +0.24s.
    let mm = d.regressions.iter().find(|f| f.name == "main.matrixMultiply").expect("matrixMultiply regressed");
    assert_eq!((mm.flat_delta, mm.cum_delta), (0, 240_000_000));
    let memmove = d.improvements.iter().find(|f| f.name == "runtime.memmove").expect("memmove improved");
    assert_eq!(memmove.flat_delta, -320_000_000);
    assert_eq!(d.functions.len(), d.regressions.len() + d.improvements.len() + d.unchanged);
    assert!(d.regressions.iter().all(|f| f.flat_delta > d.noise_threshold || f.cum_delta > d.noise_threshold));
    // Stack deltas account for every sample.
    assert!(d.new_stack_count > 0 && d.removed_stack_count > 0);
    assert!(d.new_stacks.iter().all(|s| s.base == 0 && s.compare > 0));
    assert!(d.removed_stacks.iter().all(|s| s.compare == 0 && s.base > 0));
}

#[test]
fn normalized_diff_balances_the_totals() {
    let (Some(base), Some(new)) = (load("go/base/heap.pb.gz"), load("go/compare/heap.pb.gz")) else { return };
    let d = diff(&base, &new, &DiffOptions { normalize: true, ..DiffOptions::default() }).unwrap();
    let net: i64 = d.functions.iter().map(|f| f.flat_delta).sum();
    // Rounding per function leaves at most a few bytes of imbalance.
    assert!(net.abs() < d.functions.len() as i64, "net {net}");
    assert!(d.normalized);
}

#[test]
fn diff_of_different_types_is_refused() {
    let (Some(cpu), Some(heap)) = (load("go/base/cpu.pb.gz"), load("go/base/heap.pb.gz")) else { return };
    let err = diff(&heap, &cpu, &DiffOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Incompatible(_)), "{err:?}");
}

#[test]
fn filters_follow_pprof() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let all = top(&p, &TopOptions::default()).unwrap();
    let with = |filters: Filters| top(&p, &TopOptions { filters, ..TopOptions::default() }).unwrap();
    let focus = with(Filters { focus: Some("compress/flate".into()), ..Filters::default() });
    let ignore = with(Filters { ignore: Some("compress/flate".into()), ..Filters::default() });
    assert_eq!(focus.total + ignore.total, all.total, "focus and ignore partition the samples");
    let deflate = all.functions.iter().find(|f| f.name == "compress/flate.(*compressor).deflate").unwrap();
    assert!(focus.total >= deflate.cum);
    assert!(ignore.functions.iter().all(|f| !f.name.starts_with("compress/flate")));
    let hidden = with(Filters { hide: Some("^runtime\\.".into()), ..Filters::default() });
    assert_eq!(hidden.total, all.total, "hide keeps samples");
    assert!(hidden.functions.iter().all(|f| !f.name.starts_with("runtime.")));
    let err = top(
        &p,
        &TopOptions { filters: Filters { focus: Some("(".into()), ..Filters::default() }, ..TopOptions::default() },
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidRegex { option: "focus", .. }), "{err:?}");
}

#[test]
fn unknown_sample_type_lists_the_choices() {
    let Some(p) = load("go/base/heap.pb.gz") else { return };
    let err = top(&p, &TopOptions { sample_index: "bogus".into(), ..TopOptions::default() }).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown sample type 'bogus'; this profile has: alloc_objects, alloc_space, inuse_objects, inuse_space"
    );
}

#[test]
fn call_tree_and_layout_are_consistent() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let tree = CallTree::build(&p, &TreeOptions::default()).unwrap();
    assert_eq!(tree.total(), p.total(p.default_sample_index()));
    for (i, n) in tree.nodes.iter().enumerate() {
        let children: i64 = tree.children(i as u32).map(|c| tree.nodes[c as usize].total).sum();
        assert_eq!(children + n.self_value, n.total, "node {} ({})", i, tree.name(i as u32));
        let names: Vec<&str> = tree.children(i as u32).map(|c| tree.name(c)).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "children sorted and distinct");
    }
    let all = layout(&tree, &Viewport { min_width_px: 0.0, ..Viewport::default() });
    assert_eq!(all.len(), tree.nodes.len());
    // 708 samples in 300 px: a single sample is 0.42 px wide.
    let visible = layout(&tree, &Viewport { width_px: 300.0, min_width_px: 1.0, ..Viewport::default() });
    assert!(visible.len() < all.len(), "sub-pixel frames are merged away");
    assert!(visible.iter().all(|r| r.width >= 1.0 && r.x >= 0.0 && r.x + r.width <= 300.0 + 1e-6));

    // Zoom: the chosen frame fills the width below its ancestors.
    let deflate =
        (0..tree.nodes.len() as u32).find(|&n| tree.name(n) == "compress/flate.(*compressor).deflate").unwrap();
    let zoomed = layout(&tree, &Viewport { zoom: deflate, width_px: 800.0, ..Viewport::default() });
    let depth = tree.nodes[deflate as usize].depth;
    assert_eq!(zoomed.iter().filter(|r| r.depth < depth).count() as u32, depth, "one row per ancestor");
    let z = zoomed.iter().find(|r| r.node == deflate).unwrap();
    assert_eq!((z.x, z.width), (0.0, 800.0));
    assert_eq!(hit(&zoomed, 400.0, depth), Some(deflate));
    assert_eq!(tree.path(deflate).len() as u32, depth);
    assert_eq!(tree.file(deflate), "/usr/lib/go-1.19/src/compress/flate/deflate.go");
    assert_eq!(tree.nodes[ROOT as usize].depth, 0);
}

#[test]
fn a_window_lays_out_like_the_whole_tree() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let plain = CallTree::build(&new, &TreeOptions::default()).unwrap();
    let diff = CallTree::build_diff(&base, &new, &TreeOptions::default()).unwrap();
    // Positions are compared to a thousandth of a pixel: a window adds left-out
    // siblings' widths at once where the whole tree adds them one by one.
    let drawn = |tree: &CallTree, rects: &[stacklens_core::layout::Rect]| -> Vec<(String, u32, i64, i64, i64, i64)> {
        rects
            .iter()
            .map(|r| {
                let b = tree.base_values(r.node);
                let px = |v: f64| (v * 1000.0).round() as i64;
                (tree.name(r.node).to_owned(), r.depth, px(r.x), px(r.width), b.total, b.self_value)
            })
            .collect()
    };
    for tree in [&plain, &diff] {
        let deflate =
            (0..tree.nodes.len() as u32).find(|&n| tree.name(n) == "compress/flate.(*compressor).deflate").unwrap();
        let names: Vec<&str> = tree.path(deflate).iter().map(|&n| tree.name(n)).collect();
        assert_eq!(tree.node_at_path(&names), deflate);
        let parent = tree.nodes[deflate as usize].parent;
        assert_eq!(tree.node_at_path(&[&names[..names.len() - 1], &["no such function"]].concat()), parent);
        for zoom in [ROOT, deflate] {
            let width = 300.0;
            let min_total = (tree.nodes[zoom as usize].total as f64 * 0.5 / width).floor() as i64;
            let (window, at) = tree.window(zoom, min_total, 30);
            assert!(window.nodes.len() < tree.nodes.len(), "sub-pixel subtrees are left out");
            assert_eq!(
                window.path(at).iter().map(|&n| window.name(n)).collect::<Vec<_>>(),
                tree.path(zoom).iter().map(|&n| tree.name(n)).collect::<Vec<_>>()
            );
            let viewport = |zoom| Viewport { zoom, width_px: width, max_depth: 30, ..Viewport::default() };
            assert_eq!(
                drawn(&window, &layout(&window, &viewport(at))),
                drawn(tree, &layout(tree, &viewport(zoom))),
                "same frames in the same places"
            );
            let back = CallTree::from_bytes(&window.to_bytes()).expect("a window is a valid tree");
            assert_eq!(back.nodes, window.nodes);
        }
    }
}

#[test]
fn diff_tree_carries_both_profiles() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let tree = CallTree::build_diff(&base, &new, &TreeOptions::default()).unwrap();
    assert_eq!(tree.nodes[ROOT as usize].total, 6_900_000_000);
    assert_eq!(tree.base_values(ROOT).total, 7_080_000_000);
    for (i, n) in tree.nodes.iter().enumerate() {
        let children: i64 = tree.children(i as u32).map(|c| tree.base_values(c).total).sum();
        assert_eq!(children + tree.base_values(i as u32).self_value, tree.base_values(i as u32).total, "node {i}");
        assert!(n.total >= 0);
    }
}

#[test]
fn goroutine_growth_between_snapshots() {
    let (Some(base), Some(new)) = (load("go/base/goroutine.debug2.txt"), load("go/compare/goroutine.debug2.txt"))
    else {
        return;
    };
    let c = compare(&base, &new).unwrap();
    assert_eq!((c.base_count, c.compare_count, c.growth_count), (453, 1617, 1164));
    assert!((c.goroutine_growth_rate.unwrap() - 1617.0 / 453.0).abs() < 1e-9);
    let leak = &c.grown_stacks[0];
    assert_eq!(leak.group.frames, ["main.(*upstreamClient).fetchRemote"]);
    assert_eq!((leak.base_count, leak.group.count, leak.delta), (388, 1552, 1164));
    assert!(c.new_stacks.iter().all(|g| g.count > 0));

    let report = analyze(&base, &GoroutineOptions::default()).unwrap();
    assert_eq!(report.blocked_count, report.blocked_goroutines.iter().map(|g| g.count).sum::<u64>());
    assert!(report.blocked_goroutines.iter().all(|g| is_blocked(&g.state)));
    // In this snapshot every goroutine is either blocked or on a CPU.
    assert_eq!(report.blocked_count + report.by_state["runnable"] + report.by_state["running"], 453);
    let filtered =
        analyze(&base, &GoroutineOptions { filter: Some("janitorLoop".into()), ..Default::default() }).unwrap();
    assert_eq!(filtered.goroutine_count, 24);
}

#[test]
fn goroutine_profiles_and_texts_agree_with_the_dump() {
    for set in ["base", "compare"] {
        let (Some(pb), Some(text)) =
            (load(&format!("go/{set}/goroutine.pb.gz")), load(&format!("go/{set}/goroutine.debug1.txt")))
        else {
            return;
        };
        let from_pb = analyze(&pb, &GoroutineOptions::default()).unwrap();
        let from_text = analyze(&text, &GoroutineOptions::default()).unwrap();
        assert_eq!(from_pb.goroutine_count, from_text.goroutine_count, "{set}");
        assert!(from_pb.states_inferred && from_text.states_inferred);
        // The leak's stack ends in runtime.chansend1: its state is inferred from frames.
        let leak = from_pb.top_stacks.iter().find(|g| g.frames.iter().any(|f| f.ends_with("fetchRemote"))).unwrap();
        assert_eq!(leak.state, "chan send", "{set}");
    }
    let Some(cpu) = load("go/base/cpu.pb.gz") else { return };
    assert!(matches!(analyze(&cpu, &GoroutineOptions::default()), Err(Error::NotGoroutine(_))));
}

#[test]
fn sandwich_shows_callers_and_callees() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let name = "compress/flate.(*compressor).deflate";
    let cum = top(&p, &TopOptions::default()).unwrap().functions.iter().find(|f| f.name == name).unwrap().cum;
    for side in [Side::Callers, Side::Callees] {
        let t = CallTree::sandwich(&p, &TreeOptions::default(), name, side).unwrap();
        assert_eq!(t.total(), cum, "{side:?}: every sample through the function, once");
        let top_level: Vec<&str> = t.children(ROOT).map(|c| t.name(c)).collect();
        assert_eq!(top_level, [name], "{side:?}: the function is the only child of the root");
    }
    let callers = CallTree::sandwich(&p, &TreeOptions::default(), name, Side::Callers).unwrap();
    let first = callers.children(ROOT).next().unwrap();
    let callers_of: Vec<&str> = callers.children(first).map(|c| callers.name(c)).collect();
    assert_eq!(callers_of, ["compress/flate.(*compressor).close", "compress/flate.(*compressor).write"]);
    let none = CallTree::sandwich(&p, &TreeOptions::default(), "no.such.function", Side::Callees).unwrap();
    assert_eq!(none.total(), 0);
}

#[test]
fn trees_survive_their_binary_form() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    for tree in [
        CallTree::build(&new, &TreeOptions::default()).unwrap(),
        CallTree::build_diff(&base, &new, &TreeOptions::default()).unwrap(),
    ] {
        let back = CallTree::from_bytes(&tree.to_bytes()).expect("round trip");
        assert_eq!(back.nodes, tree.nodes);
        assert_eq!(back.names, tree.names);
        assert_eq!(back.files, tree.files);
        assert_eq!(back.base, tree.base);
        assert_eq!(
            (back.sample_type.as_str(), back.unit.as_str(), back.max_depth),
            ("cpu", "nanoseconds", tree.max_depth)
        );
    }
    let bytes = CallTree::build(&new, &TreeOptions::default()).unwrap().to_bytes();
    assert!(CallTree::from_bytes(&bytes[..bytes.len() - 1]).is_none(), "truncated");
    assert!(CallTree::from_bytes(b"nope").is_none());
}

#[test]
fn profile_kinds_and_summaries() {
    use stacklens_core::analysis::summary::{package_of, sample_count, top_functions};
    use stacklens_core::ProfileKind;
    assert_eq!(package_of("compress/flate.(*compressor).deflate"), "compress/flate");
    assert_eq!(package_of("main.(*service).requestLoop.func1"), "main");
    assert_eq!(package_of("runtime.mallocgc"), "runtime");
    assert_eq!(package_of("github.com/x/y"), "github.com/x");
    assert_eq!(package_of("malloc"), "");
    let expected = [
        ("go/base/cpu.pb.gz", ProfileKind::Cpu),
        ("go/base/heap.pb.gz", ProfileKind::Memory),
        ("go/base/allocs.pb.gz", ProfileKind::Alloc),
        ("go/base/block.pb.gz", ProfileKind::Block),
        ("go/base/mutex.pb.gz", ProfileKind::Mutex),
        ("go/base/block.debug1.txt", ProfileKind::Block),
        ("go/base/mutex.debug1.txt", ProfileKind::Mutex),
        ("go/base/goroutine.pb.gz", ProfileKind::Goroutine),
        ("go/base/goroutine.debug1.txt", ProfileKind::Goroutine),
        ("go/base/goroutine.debug2.txt", ProfileKind::Goroutine),
        ("go/base/threadcreate.pb.gz", ProfileKind::Threadcreate),
        ("go/base/heap.debug1.txt", ProfileKind::Memory),
    ];
    for (file, kind) in expected {
        let Some(p) = load(file) else { return };
        assert_eq!(ProfileKind::of(&p), kind, "{file}");
        assert_eq!(ProfileKind::parse(kind.as_str()), Some(kind));
    }
    assert_eq!(ProfileKind::parse("heap"), Some(ProfileKind::Memory));
    assert!(ProfileKind::Memory.accepts(ProfileKind::Alloc) && !ProfileKind::Cpu.accepts(ProfileKind::Memory));

    // cpu.pprof-top.txt: findMatch 1.34s flat (18.93%) of 7.08s; deflate 43.50% cum.
    let Some(cpu) = load("go/base/cpu.pb.gz") else { return };
    let top = top_functions(&cpu, "", 20).unwrap();
    assert_eq!(top.len(), 20);
    assert!(top.windows(2).all(|w| w[0].self_pct >= w[1].self_pct), "sorted by self");
    let deflate = top.iter().find(|f| f.func_name == "compress/flate.(*compressor).deflate").unwrap();
    assert_eq!((deflate.package.as_str(), deflate.cumulative_pct), ("compress/flate", 43.5));
    let find_match = top.iter().find(|f| f.func_name == "compress/flate.(*compressor).findMatch").unwrap();
    // Samples of 10ms, not nanoseconds.
    assert_eq!((find_match.self_pct, find_match.sample_count), (18.93, 134));
    assert_eq!(sample_count(&cpu), 708);
}
