//! Analysis semantics on real fixtures: diff classification, filters, call tree
//! invariants, flame-graph layout and goroutine growth between two snapshots.

mod common;

use std::collections::{HashMap, HashSet};

use stacklens_core::analysis::diff::{diff, movers, DiffOptions};
use stacklens_core::analysis::goroutines::{analyze, compare, is_blocked, GoroutineOptions};
use stacklens_core::analysis::top::{top, Inlining, TopOptions, TopReport};
use stacklens_core::analysis::tree::{CallTree, Side, TreeOptions, ROOT};
use stacklens_core::analysis::{Filters, Granularity, Prepared, Query, SampleType};
use stacklens_core::layout::{hit, layout, Viewport};
use stacklens_core::{Error, Profile};

fn load(rel: &str) -> Option<Profile> {
    let root = common::fixtures()?;
    Some(stacklens_core::parse(&common::read(&root.join(rel))).unwrap())
}

/// A base and a compared profile prepared for a diff with the default query.
fn pair<'p>(base: &'p Profile, compare: &'p Profile) -> (Prepared<'p>, Prepared<'p>) {
    Query::default().prepare_pair(base, compare).unwrap()
}

/// Each sample's function names, root first with inlined calls expanded, summed by stack.
/// Read from the profile model here, not by the analysis code under test: the reference
/// for stack counts and tree sizes.
fn stacks(p: &Profile, index: usize) -> HashMap<Vec<String>, i64> {
    let mut out: HashMap<Vec<String>, i64> = HashMap::new();
    for sample in p.samples.iter().filter(|s| s.values[index] != 0) {
        let frames = sample
            .locations
            .iter()
            .rev()
            .flat_map(|l| p.locations[l.0 as usize].lines.iter().rev())
            .map(|line| p.str(p.function(line.function).name).to_owned())
            .collect();
        *out.entry(frames).or_default() += sample.values[index];
    }
    out
}

/// Each function's flat value (its samples' leaf frame), the same way, with each sample's
/// value first scaled by `ratio` and rounded (as pprof's `-normalize` scales samples).
fn flat_by_function(p: &Profile, index: usize, ratio: f64) -> HashMap<String, i64> {
    let mut out: HashMap<String, i64> = HashMap::new();
    for sample in &p.samples {
        let leaf = &p.locations[sample.locations[0].0 as usize].lines[0];
        let value = (sample.values[index] as f64 * ratio).round() as i64;
        *out.entry(p.str(p.function(leaf.function).name).to_owned()).or_default() += value;
    }
    out
}

/// Every distinct root-first path through the stacks: the call tree's nodes below its root.
fn tree_paths<'a>(stacks: impl Iterator<Item = &'a Vec<String>>) -> usize {
    let paths: HashSet<&[String]> = stacks.flat_map(|s| (1..=s.len()).map(move |n| &s[..n])).collect();
    paths.len()
}

/// A report's rows as (name, flat ms, cum ms, inline): CPU values are whole 10 ms samples.
fn rows_ms(r: &TopReport) -> Vec<(&str, i64, i64, Option<Inlining>)> {
    r.functions.iter().map(|f| (f.name.as_str(), f.flat / 1_000_000, f.cum / 1_000_000, f.inline)).collect()
}

#[test]
fn cpu_diff_finds_the_regressed_code_path() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let d = diff(&prepared_base, &prepared_new, &DiffOptions::default()).unwrap();
    assert_eq!((d.base_total, d.compare_total), (7_080_000_000, 6_900_000_000));
    assert!((d.overall_delta_pct - (-2.5424)).abs() < 1e-3, "{}", d.overall_delta_pct);
    assert_eq!(d.noise_threshold, 70_800_000);
    // matrixMultiply's time is in its inlined callee: flat 0, cum +0.24s.
    let mm = d.regressions.iter().find(|f| f.name == "main.matrixMultiply").expect("matrixMultiply regressed");
    assert_eq!((mm.flat_delta, mm.cum_delta), (0, 240_000_000));
    // cpu.diff-vs-base.pprof-top.txt: findMatch 0.65s flat, 0.75s cum; memmove -0.32s;
    // partition_func -0.25s flat, -1.11s cum.
    let find_match = d.regressions.iter().find(|f| f.name == "compress/flate.(*compressor).findMatch").unwrap();
    assert_eq!((find_match.flat_delta, find_match.cum_delta), (650_000_000, 750_000_000));
    let memmove = d.improvements.iter().find(|f| f.name == "runtime.memmove").expect("memmove improved");
    assert_eq!(memmove.flat_delta, -320_000_000);
    let partition = d.improvements.iter().find(|f| f.name == "sort.partition_func").unwrap();
    assert_eq!((partition.flat_delta, partition.cum_delta), (-250_000_000, -1_110_000_000));
    assert_eq!((d.regressions.len(), d.improvements.len(), d.unchanged), (35, 23, 312));
    assert_eq!(d.functions.len(), 35 + 23 + 312);
    // The largest regression by cum: main.compressBlock, +0.81s under it, nothing in it.
    assert_eq!((d.regressions[0].name.as_str(), d.regressions[0].cum_delta), ("main.compressBlock", 810_000_000));
    assert_eq!(d.improvements[0].name, "main.sortRecords");

    // New and removed stacks against the stacks read from the profiles here.
    let index = base.default_sample_index();
    let (before, after) = (stacks(&base, index), stacks(&new, index));
    let new_stacks: Vec<_> = after.iter().filter(|(s, _)| !before.contains_key(*s)).collect();
    let removed: Vec<_> = before.iter().filter(|(s, _)| !after.contains_key(*s)).collect();
    assert_eq!((new_stacks.len(), removed.len()), (112, 172));
    assert_eq!((d.new_stack_count, d.removed_stack_count), (112, 172));
    let largest = |list: &[(&Vec<String>, &i64)]| {
        list.iter().map(|(s, v)| (-**v, (*s).clone())).min().map(|(v, s)| (s, -v)).unwrap()
    };
    let (frames, value) = largest(&new_stacks);
    assert_eq!((&d.new_stacks[0].frames, d.new_stacks[0].compare, d.new_stacks[0].base), (&frames, value, 0));
    assert_eq!(frames.last().unwrap(), "reflect.makemap");
    let (frames, value) = largest(&removed);
    assert_eq!(
        (&d.removed_stacks[0].frames, d.removed_stacks[0].base, d.removed_stacks[0].compare),
        (&frames, value, 0)
    );
    assert_eq!(value, 70_000_000);
    // The lists stop at max_stacks (50); every listed stack is only on its side.
    assert_eq!((d.new_stacks.len(), d.removed_stacks.len()), (50, 50));
    assert!(d.new_stacks.iter().all(|s| s.base == 0 && !before.contains_key(&s.frames)));
    assert!(d.removed_stacks.iter().all(|s| s.compare == 0 && !after.contains_key(&s.frames)));
}

#[test]
fn normalized_diff_balances_the_totals() {
    let (Some(base), Some(new)) = (load("go/base/heap.pb.gz"), load("go/compare/heap.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let d = diff(&prepared_base, &prepared_new, &DiffOptions { normalize: true, ..DiffOptions::default() }).unwrap();
    assert!(d.normalized);
    // inuse_space: 7617933 bytes before, 14530408 after (SOURCES.md). As pprof's -normalize
    // with -diff_base, each sample of the compared profile is scaled by base/compare and
    // rounded; the flat deltas then sum to that rounding's error.
    assert_eq!((d.base_total, d.compare_total), (7_617_933, 14_530_408));
    let index = SampleType::parse("inuse_space").resolve(&base).unwrap();
    let scaled = flat_by_function(&new, index, 7_617_933.0 / 14_530_408.0);
    let raw_base = flat_by_function(&base, index, 1.0);
    let net: i64 = d.functions.iter().map(|f| f.flat_delta).sum();
    assert_eq!(net, scaled.values().sum::<i64>() - 7_617_933);
    let writer = d.functions.iter().find(|f| f.name == "compress/flate.NewWriter").unwrap();
    let name = "compress/flate.NewWriter";
    assert_eq!(writer.flat_delta, scaled[name] - raw_base[name]);
    // go tool pprof -top -normalize -sample_index=inuse_space
    //   -diff_base=go/base/heap.pb.gz go/compare/heap.pb.gz:
    // "-308.28kB 4.14% 4.14% -199.31kB 2.68% compress/flate.NewWriter" (kB of 1024 bytes).
    let kb = |v: i64| (v as f64 * 100.0 / 1024.0).round() as i64;
    assert_eq!((kb(writer.flat_delta), kb(writer.cum_delta)), (-30828, -19931));
}

#[test]
fn a_diff_without_stacks_has_the_same_functions() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let with = diff(&prepared_base, &prepared_new, &DiffOptions::default()).unwrap();
    let without =
        diff(&prepared_base, &prepared_new, &DiffOptions { max_stacks: 0, ..DiffOptions::default() }).unwrap();
    assert_eq!((with.new_stack_count, with.removed_stack_count), (112, 172));
    assert_eq!((without.new_stack_count, without.removed_stack_count, without.changed_stacks.len()), (0, 0, 0));
    assert_eq!(without.functions, with.functions);
    assert_eq!((without.regressions.len(), without.improvements.len(), without.unchanged), (35, 23, 312));
    assert_eq!((&without.regressions, &without.improvements), (&with.regressions, &with.improvements));
}

#[test]
fn movers_are_the_largest_changes_of_self_share() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let moved = movers(&prepared_base, &prepared_new, 5).unwrap();
    // Shares of each side's own total, from the per-function flat values (the reference).
    let index = SampleType::Default.resolve(&base).unwrap();
    let (b, c) = (flat_by_function(&base, index, 1.0), flat_by_function(&new, index, 1.0));
    let (bt, ct) = (base.total(index) as f64, new.total(index) as f64);
    let mut all: Vec<(String, f64)> = b
        .keys()
        .chain(c.keys())
        .collect::<HashSet<_>>()
        .into_iter()
        .map(|name| {
            let share = |m: &HashMap<String, i64>, t: f64| *m.get(name).unwrap_or(&0) as f64 * 100.0 / t;
            (name.clone(), share(&c, ct) - share(&b, bt))
        })
        .filter(|(_, d)| *d != 0.0)
        .collect();
    all.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()).then_with(|| x.0.cmp(&y.0)));
    assert_eq!(moved.len(), 5);
    for (m, (name, delta)) in moved.iter().zip(&all) {
        assert_eq!(&m.name, name);
        assert!((m.delta_pct - delta).abs() < 1e-9, "{m:?} vs {delta}");
        assert!((m.compare_share_pct - m.base_share_pct - m.delta_pct).abs() < 1e-9);
    }
    // The same profile on both sides moves nothing.
    let (base_again, same_base) = pair(&base, &base);
    assert!(movers(&base_again, &same_base, 5).unwrap().is_empty());
}

#[test]
fn diff_of_different_types_is_refused() {
    let (Some(cpu), Some(heap)) = (load("go/base/cpu.pb.gz"), load("go/base/heap.pb.gz")) else { return };
    let err = Query::default()
        .prepare_pair(&heap, &cpu)
        .and_then(|(base, compare)| diff(&base, &compare, &DiffOptions::default()))
        .unwrap_err();
    assert!(matches!(err, Error::Incompatible(_)), "{err:?}");
}

/// `go tool pprof -top` on go/base/cpu.pb.gz with these options, as a Query and TopOptions.
fn cpu_top(p: &Profile, nodes: usize, filters: Filters, granularity: Granularity) -> TopReport {
    let prepared = Query { filters, granularity, ..Query::default() }.prepare(p).unwrap();
    top(&prepared, &TopOptions { node_count: Some(nodes), node_fraction: 0.005, ..Default::default() }).unwrap()
}

#[test]
fn filters_follow_pprof() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let with = |filters: Filters| cpu_top(&p, 6, filters, Granularity::Functions);
    // Expected values: `go tool pprof -symbolize=none -top -nodecount=6 -focus=compress/flate
    // go/base/cpu.pb.gz` (and -ignore=…, -hide=…). pprof's total is taken before filtering.
    let focus = with(Filters { focus: Some("compress/flate".into()), ..Filters::default() });
    assert_eq!((focus.total, focus.dropped_nodes, focus.node_total - focus.dropped_nodes), (7_080_000_000, 25, 42));
    assert_eq!(
        rows_ms(&focus),
        [
            ("compress/flate.(*compressor).findMatch", 1340, 2110, None),
            ("runtime.asyncPreempt", 700, 700, None),
            ("compress/flate.(*compressor).deflate", 470, 3080, None),
            ("compress/flate.matchLen", 270, 340, Some(Inlining::Inline)),
            ("compress/flate.(*huffmanBitWriter).writeTokens", 120, 260, None),
            ("compress/flate.hash4", 40, 50, Some(Inlining::Inline)),
        ]
    );
    let ignore = with(Filters { ignore: Some("compress/flate".into()), ..Filters::default() });
    assert_eq!(
        (ignore.total, ignore.dropped_nodes, ignore.node_total - ignore.dropped_nodes),
        (7_080_000_000, 94, 174)
    );
    assert_eq!(
        rows_ms(&ignore),
        [
            ("crypto/sha256.block", 450, 450, None),
            ("runtime.memmove", 370, 370, None),
            ("sort.partition_func", 330, 1330, None),
            ("runtime.findObject", 230, 250, None),
            ("runtime.typedmemmove", 200, 1040, None),
            ("main.lessOrder", 180, 190, None),
        ]
    );
    // Hiding runtime frames moves their time to the callers (reflect.typedmemmove).
    let hidden = with(Filters { hide: Some("^runtime\\.".into()), ..Filters::default() });
    assert_eq!((hidden.total, hidden.dropped_nodes, hidden.node_total - hidden.dropped_nodes), (7_080_000_000, 96, 80));
    assert_eq!(
        rows_ms(&hidden),
        [
            ("compress/flate.(*compressor).findMatch", 1770, 2110, None),
            ("reflect.typedmemmove", 1050, 1050, Some(Inlining::Inline)),
            ("compress/flate.(*compressor).deflate", 620, 3080, None),
            ("crypto/sha256.block", 450, 450, None),
            ("sort.partition_func", 350, 1330, None),
            ("compress/flate.matchLen", 340, 340, Some(Inlining::Inline)),
        ]
    );
    let bad_focus = Query { filters: Filters { focus: Some("(".into()), ..Filters::default() }, ..Query::default() };
    let err = bad_focus.prepare(&p).and_then(|prepared| top(&prepared, &TopOptions::default())).unwrap_err();
    assert!(matches!(err, Error::InvalidRegex { option: "focus", .. }), "{err:?}");
}

#[test]
fn show_and_granularities_follow_pprof() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let owned = |r: &TopReport| -> Vec<(String, i64, i64, Option<Inlining>)> {
        rows_ms(r).into_iter().map(|(n, f, c, i)| (n.to_owned(), f, c, i)).collect()
    };
    let expect = |rows: &[(&str, &str, i64, i64, bool)]| -> Vec<(String, i64, i64, Option<Inlining>)> {
        let go = "/usr/lib/go-1.19/src/";
        let inline = |i: bool| i.then_some(Inlining::Inline);
        let name = |n: &str, at: &str| if at.is_empty() { n.to_owned() } else { format!("{n} {go}{at}") };
        rows.iter().map(|&(n, at, f, c, i)| (name(n, at), f, c, inline(i))).collect()
    };
    let shown = |r: &TopReport| (r.total, r.dropped_nodes, r.node_total - r.dropped_nodes);

    // go tool pprof -symbolize=none -top -nodecount=10 -show=compress/flate go/base/cpu.pb.gz
    // Only compress/flate frames are left: each sample's time goes to its innermost one.
    let show =
        cpu_top(&p, 10, Filters { show: Some("compress/flate".into()), ..Filters::default() }, Granularity::Functions);
    assert_eq!(shown(&show), (7_080_000_000, 5, 18));
    let f = "compress/flate.";
    assert_eq!(
        owned(&show),
        expect(&[
            (&format!("{f}(*compressor).findMatch"), "", 1770, 2110, false),
            (&format!("{f}(*compressor).deflate"), "", 620, 3080, false),
            (&format!("{f}matchLen"), "", 340, 340, true),
            (&format!("{f}(*huffmanBitWriter).writeTokens"), "", 120, 260, false),
            (&format!("{f}(*huffmanBitWriter).write"), "", 60, 60, true),
            (&format!("{f}hash4"), "", 50, 50, true),
            (&format!("{f}(*huffmanBitWriter).writeCode"), "", 40, 90, false),
            (&format!("{f}(*compressor).initDeflate"), "", 30, 30, false),
            (&format!("{f}(*huffmanBitWriter).writeBits"), "", 30, 40, false),
            (&format!("{f}(*huffmanBitWriter).indexTokens"), "", 20, 30, false),
        ])
    );

    // go tool pprof -symbolize=none -top -nodecount=10 -filefunctions go/base/cpu.pb.gz
    let ff = cpu_top(&p, 10, Filters::default(), Granularity::Filefunctions);
    assert_eq!(shown(&ff), (7_080_000_000, 182, 124));
    let deflate_go = "compress/flate/deflate.go";
    assert_eq!(
        owned(&ff),
        expect(&[
            ("compress/flate.(*compressor).findMatch", deflate_go, 1340, 2110, false),
            ("runtime.asyncPreempt", "runtime/preempt_amd64.s", 780, 780, false),
            ("compress/flate.(*compressor).deflate", deflate_go, 470, 3080, false),
            ("crypto/sha256.block", "crypto/sha256/sha256block_amd64.s", 450, 450, false),
            ("runtime.memmove", "runtime/memmove_amd64.s", 370, 370, false),
            ("sort.partition_func", "sort/zsortfunc.go", 330, 1330, false),
            ("compress/flate.matchLen", deflate_go, 270, 340, true),
            ("runtime.findObject", "runtime/mbitmap.go", 230, 250, false),
            ("runtime.typedmemmove", "runtime/mbarrier.go", 200, 1040, false),
            ("main.lessOrder /src/stacklens/shared/fixtures/gen/workload.go", "", 180, 190, false),
        ])
    );

    // go tool pprof -symbolize=none -top -nodecount=10 -lines go/base/cpu.pb.gz
    let lines = cpu_top(&p, 10, Filters::default(), Granularity::Lines);
    assert_eq!(shown(&lines), (7_080_000_000, 433, 174));
    assert_eq!(
        owned(&lines),
        expect(&[
            ("runtime.asyncPreempt", "runtime/preempt_amd64.s:7", 780, 780, false),
            ("compress/flate.(*compressor).findMatch", "compress/flate/deflate.go:256", 480, 650, false),
            ("compress/flate.(*compressor).findMatch", "compress/flate/deflate.go:274", 370, 500, false),
            ("compress/flate.(*compressor).findMatch", "compress/flate/deflate.go:257", 200, 570, false),
            ("compress/flate.(*compressor).deflate", "compress/flate/deflate.go:420", 180, 230, false),
            ("compress/flate.(*compressor).deflate", "compress/flate/deflate.go:468", 130, 190, false),
            ("compress/flate.(*compressor).findMatch", "compress/flate/deflate.go:270", 110, 130, false),
            ("compress/flate.matchLen", "compress/flate/deflate.go:319", 110, 130, true),
            ("runtime.memclrNoHeapPointers", "runtime/memclr_amd64.s:127", 110, 110, false),
            ("sort.partition_func", "sort/zsortfunc.go:157", 110, 240, false),
        ])
    );
}

#[test]
fn unknown_sample_type_lists_the_choices() {
    let Some(p) = load("go/base/heap.pb.gz") else { return };
    let bogus = Query { sample: "bogus".into(), ..Query::default() };
    let err = bogus.prepare(&p).and_then(|prepared| top(&prepared, &TopOptions::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown sample type 'bogus'; this profile has: alloc_objects, alloc_space, inuse_objects, inuse_space"
    );
}

#[test]
fn call_tree_and_layout_are_consistent() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let tree = CallTree::build(&Prepared::whole(&p).unwrap(), &TreeOptions::default()).unwrap();
    assert_eq!(tree.total(), p.total(p.default_sample_index()));
    for (i, n) in tree.nodes.iter().enumerate() {
        let children: i64 = tree.children(i as u32).map(|c| tree.nodes[c as usize].total).sum();
        assert_eq!(children + n.self_value, n.total, "node {} ({})", i, tree.name(i as u32));
        let names: Vec<&str> = tree.children(i as u32).map(|c| tree.name(c)).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "children sorted and distinct");
    }
    let all = layout(&tree, &Viewport { min_width_px: 0.0, ..Viewport::default() });
    assert_eq!(all.len(), tree.nodes.len());
    // One node per distinct call path, plus the root.
    assert_eq!(tree.nodes.len(), tree_paths(stacks(&p, p.default_sample_index()).keys()) + 1);
    assert_eq!(tree.nodes.len(), 736);
    // 708 samples in 300 px: a single sample is 0.42 px wide.
    let visible = layout(&tree, &Viewport { width_px: 300.0, min_width_px: 1.0, ..Viewport::default() });
    assert_eq!(visible.len(), 241, "sub-pixel frames are merged away");
    assert!(visible.iter().all(|r| r.width >= 1.0 && r.x >= 0.0 && r.x + r.width <= 300.0 + 1e-6));
    // The root spans the whole width.
    assert_eq!((visible[0].node, visible[0].x, visible[0].width), (ROOT, 0.0, 300.0));

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

    // Continuous zoom and pan: the middle half of deflate at 800 px is the whole of it at
    // 1600 px moved 400 px left, cut to the 800 px shown.
    let half = layout(&tree, &Viewport { zoom: deflate, width_px: 800.0, from: 0.25, to: 0.75, ..Viewport::default() });
    let double = layout(&tree, &Viewport { zoom: deflate, width_px: 1600.0, ..Viewport::default() });
    let expected: Vec<(u32, f64, f64)> = double
        .iter()
        .filter(|r| r.depth < depth)
        .map(|r| (r.node, r.x, r.width.min(800.0)))
        .chain(double.iter().filter(|r| r.depth >= depth).filter_map(|r| {
            let (left, right) = ((r.x - 400.0).max(0.0), (r.x + r.width - 400.0).min(800.0));
            (right > left).then_some((r.node, left, right - left))
        }))
        .collect();
    let got: Vec<(u32, f64, f64)> = half.iter().map(|r| (r.node, r.x, r.width)).collect();
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(&expected) {
        assert!(g.0 == e.0 && (g.1 - e.1).abs() < 1e-6 && (g.2 - e.2).abs() < 1e-6, "{g:?} != {e:?}");
    }
    assert!(half.len() < double.len(), "frames outside the shown half are left out");
    let reversed =
        layout(&tree, &Viewport { zoom: deflate, width_px: 800.0, from: 0.9, to: 0.1, ..Viewport::default() });
    assert_eq!(reversed, zoomed, "a window that is no part of the span shows all of it");
}

/// What a layout draws: name, depth, place and width to a thousandth of a pixel (a
/// window adds left-out siblings' widths at once where the whole tree adds them one by
/// one), and base values.
fn drawn(tree: &CallTree, rects: &[stacklens_core::layout::Rect]) -> Vec<(String, u32, i64, i64, i64, i64)> {
    rects
        .iter()
        .map(|r| {
            let b = tree.base_values(r.node);
            let px = |v: f64| (v * 1000.0).round() as i64;
            (tree.name(r.node).to_owned(), r.depth, px(r.x), px(r.width), b.total, b.self_value)
        })
        .collect()
}

#[test]
fn a_window_lays_out_like_the_whole_tree() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let plain = CallTree::build(&prepared_new, &TreeOptions::default()).unwrap();
    let diff = CallTree::build_diff(&prepared_base, &prepared_new, &TreeOptions::default()).unwrap();
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

/// A tree built within a node budget is the whole tree without its narrowest subtrees:
/// every node it keeps has the whole tree's values, and a window no finer than what it
/// kept draws the same frames in the same places.
#[test]
fn a_pruned_tree_draws_like_the_whole_tree() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let whole = [
        CallTree::build(&prepared_new, &TreeOptions::default()).unwrap(),
        CallTree::build_diff(&prepared_base, &prepared_new, &TreeOptions::default()).unwrap(),
    ];
    for whole in whole {
        let max_nodes = whole.nodes.len() / 4;
        let options = TreeOptions { max_nodes: Some(max_nodes), ..TreeOptions::default() };
        let pruned = if whole.base.is_empty() {
            CallTree::build(&prepared_new, &options).unwrap()
        } else {
            CallTree::build_diff(&prepared_base, &prepared_new, &options).unwrap()
        };
        assert_eq!(whole.pruned_below, 0);
        let min = pruned.pruned_below;
        assert!(min > 0 && pruned.nodes.len() <= max_nodes, "{min}, {} nodes", pruned.nodes.len());
        let wide = |n: u32| whole.nodes[n as usize].total.abs().max(whole.base_values(n).total.abs()) >= min;
        let kept: Vec<u32> = (0..whole.nodes.len() as u32).filter(|&n| wide(n)).collect();
        assert_eq!(kept.len(), pruned.nodes.len(), "exactly the nodes at least {min} wide");
        // The next power-of-two finer cut would not have fitted.
        let finer = (0..whole.nodes.len() as u32)
            .filter(|&n| whole.nodes[n as usize].total.abs().max(whole.base_values(n).total.abs()) >= min / 2)
            .count();
        assert!(finer > max_nodes, "{finer} nodes at {}", min / 2);
        for (i, &n) in kept.iter().enumerate() {
            let path = |t: &CallTree, n: u32| t.path(n).iter().map(|&p| t.name(p).to_owned()).collect::<Vec<_>>();
            assert_eq!(path(&pruned, i as u32), path(&whole, n));
            let (a, b) = (pruned.nodes[i], whole.nodes[n as usize]);
            assert_eq!((a.total, a.self_value, a.depth), (b.total, b.self_value, b.depth));
            assert_eq!(pruned.base_values(i as u32), whole.base_values(n));
        }
        let deflate = |t: &CallTree| {
            (0..t.nodes.len() as u32).find(|&n| t.name(n) == "compress/flate.(*compressor).deflate").unwrap()
        };
        for (zoom_whole, zoom_pruned) in [(ROOT, ROOT), (deflate(&whole), deflate(&pruned))] {
            let width = 300.0;
            let min_total = min.max((whole.nodes[zoom_whole as usize].total as f64 * 0.5 / width).floor() as i64);
            let (a, at_a) = whole.window(zoom_whole, min_total, 30);
            let (b, at_b) = pruned.window(zoom_pruned, min_total, 30);
            let viewport = |zoom| Viewport { zoom, width_px: width, max_depth: 30, ..Viewport::default() };
            assert_eq!(drawn(&b, &layout(&b, &viewport(at_b))), drawn(&a, &layout(&a, &viewport(at_a))));
            assert_eq!(b.pruned_below, min);
        }
    }
}

/// A tree of the stacks through one node's path is that node's subtree of the whole
/// tree, node for node with the same values (and base values in a diff); the path's
/// ancestors carry only the node's value.
#[test]
fn a_tree_below_a_path_is_that_nodes_subtree() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let build = |options: &TreeOptions, diff: bool| {
        if diff {
            CallTree::build_diff(&prepared_base, &prepared_new, options).unwrap()
        } else {
            CallTree::build(&prepared_new, options).unwrap()
        }
    };
    for diff in [false, true] {
        let whole = build(&TreeOptions::default(), diff);
        let node = (0..whole.nodes.len() as u32)
            .find(|&n| whole.name(n) == "compress/flate.(*compressor).deflate")
            .expect("the fixture calls deflate");
        let path: Vec<String> = whole.path(node).iter().map(|&n| whole.name(n).to_owned()).collect();
        assert!(path.len() > 3, "{path:?}");
        let below = build(&TreeOptions { below: path.clone(), ..TreeOptions::default() }, diff);
        let at = below.node_at_path(&path);
        assert_eq!(below.path(at).len(), path.len());
        let subtree = |t: &CallTree, n: u32| -> Vec<(String, u32, i64, i64, i64, i64)> {
            let depth = t.nodes[n as usize].depth;
            (n..t.nodes[n as usize].end)
                .map(|i| {
                    let (node, b) = (t.nodes[i as usize], t.base_values(i));
                    (t.name(i).to_owned(), node.depth - depth, node.total, node.self_value, b.total, b.self_value)
                })
                .collect()
        };
        assert_eq!(subtree(&below, at), subtree(&whole, node), "diff: {diff}");
        assert_eq!(below.nodes.len() as u32, at + below.nodes[at as usize].end - at, "only the path above it");
        assert_eq!(below.total(), whole.nodes[node as usize].total);
        // Within a budget it is pruned against its own width, finer than the whole's.
        let max_nodes = (below.nodes.len() - path.len()) / 3;
        let pruned = build(&TreeOptions { below: path.clone(), max_nodes: Some(max_nodes) }, diff);
        let whole_pruned = build(&TreeOptions { max_nodes: Some(max_nodes), ..TreeOptions::default() }, diff);
        assert!(pruned.pruned_below > 0 && pruned.nodes.len() <= max_nodes, "{}", pruned.pruned_below);
        assert!(
            pruned.pruned_below < whole_pruned.pruned_below,
            "{} {}",
            pruned.pruned_below,
            whole_pruned.pruned_below
        );
        // A path no stack has: an empty tree.
        let nowhere = build(&TreeOptions { below: vec!["no such function".into()], ..TreeOptions::default() }, diff);
        assert_eq!((nowhere.nodes.len(), nowhere.total()), (1, 0));
    }
}

#[test]
fn diff_tree_carries_both_profiles() {
    let (Some(base), Some(new)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let (prepared_base, prepared_new) = pair(&base, &new);
    let tree = CallTree::build_diff(&prepared_base, &prepared_new, &TreeOptions::default()).unwrap();
    assert_eq!(tree.nodes[ROOT as usize].total, 6_900_000_000);
    assert_eq!(tree.base_values(ROOT).total, 7_080_000_000);
    for i in 0..tree.nodes.len() as u32 {
        let children: i64 = tree.children(i).map(|c| tree.base_values(c).total).sum();
        assert_eq!(children + tree.base_values(i).self_value, tree.base_values(i).total, "node {i}");
    }
    // One node per call path of either profile, plus the root.
    let index = new.default_sample_index();
    let (before, after) = (stacks(&base, index), stacks(&new, index));
    assert_eq!(tree.nodes.len(), tree_paths(before.keys().chain(after.keys())) + 1);
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
    assert_eq!(c.grown_stacks.len(), 1);
    // Two stacks only in the later dump: a hashing goroutine and one waiting on a mutex.
    let new_stacks: Vec<(u64, &str, &str)> =
        c.new_stacks.iter().map(|g| (g.count, g.state.as_str(), g.frames[0].as_str())).collect();
    assert_eq!(new_stacks, [(1, "runnable", "crypto/sha256.block"), (1, "semacquire", "sync.runtime_SemacquireMutex")]);

    let report = analyze(&base, &GoroutineOptions::default()).unwrap();
    // The dump's own `goroutine N [state…]` headers, counted here.
    let Some(root) = common::fixtures() else { return };
    let dump = std::fs::read_to_string(root.join("go/base/goroutine.debug2.txt")).unwrap();
    let mut states: HashMap<String, u64> = HashMap::new();
    for header in dump.lines().filter(|l| l.starts_with("goroutine ") && l.ends_with(":")) {
        let state = header.split_once('[').unwrap().1.split([',', ']']).next().unwrap();
        *states.entry(state.to_owned()).or_default() += 1;
    }
    assert_eq!(report.by_state.iter().map(|(k, v)| (k.clone(), *v)).collect::<HashMap<_, _>>(), states);
    assert_eq!((states["runnable"], states["running"], states["chan receive"]), (2, 1, 2));
    // Every goroutine not on a CPU is blocked: 453 - 2 runnable - 1 running.
    assert_eq!(report.blocked_count, 450);
    assert_eq!(report.blocked_goroutines.iter().map(|g| g.count).sum::<u64>(), 450);
    assert_eq!(report.blocked_goroutines.len(), 16);
    assert!(report.blocked_goroutines.iter().all(|g| is_blocked(&g.state)));
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
        // SOURCES.md: 453 goroutines in the base set, 1617 in the compare set.
        let total = if set == "base" { 453 } else { 1617 };
        assert_eq!((from_pb.goroutine_count, from_text.goroutine_count), (total, total), "{set}");
        assert!(from_pb.states_inferred && from_text.states_inferred);
        // The leak's stack ends in runtime.chansend1: its state is inferred from frames.
        let leak = from_pb.top_stacks.iter().find(|g| g.frames.iter().any(|f| f.ends_with("fetchRemote"))).unwrap();
        assert_eq!(leak.state, "chan send", "{set}");
    }
    let Some(cpu) = load("go/base/cpu.pb.gz") else { return };
    assert!(matches!(analyze(&cpu, &GoroutineOptions::default()), Err(Error::NotGoroutine(_))));
}

#[test]
fn inline_marks_leave_out_edges_below_pprofs_edge_fraction() {
    let (Some(base), Some(compare)) = (load("go/base/cpu.pb.gz"), load("go/compare/cpu.pb.gz")) else { return };
    let options = TopOptions { node_fraction: 0.005, ..TopOptions::default() };
    let mark = |p: &Profile| {
        let rows = top(&Prepared::whole(p).unwrap(), &options).unwrap().functions;
        rows.into_iter().find(|f| f.name == "reflect.typedmemmove").map(|f| f.inline)
    };
    // In the compare profile reflect.Value.Set calls it once without inlining, in one
    // 10 ms sample: above pprof's -edgefraction (0.1%) of 6.90 s, so `go tool pprof -top`
    // marks it partly inline…
    assert_eq!(mark(&compare), Some(Some(Inlining::PartialInline)));
    // …but below 0.1% of both profiles merged (13.98 s): pprof drops that edge, and the
    // calls left are all inline.
    assert_eq!(mark(&Profile::merge([&base, &compare]).unwrap()), Some(Some(Inlining::Inline)));
}

#[test]
fn merged_goroutine_dumps_are_analysed_as_one_dump_of_both() {
    let (Some(base), Some(new), Some(pb)) = (
        load("go/base/goroutine.debug2.txt"),
        load("go/compare/goroutine.debug2.txt"),
        load("go/compare/goroutine.pb.gz"),
    ) else {
        return;
    };
    let options = GoroutineOptions::default();
    let (a, b) = (analyze(&base, &options).unwrap(), analyze(&new, &options).unwrap());
    let both = Profile::merge([&base, &new]).unwrap();
    assert_eq!(both.goroutines.len(), base.goroutines.len() + new.goroutines.len());
    let merged = analyze(&both, &options).unwrap();
    assert_eq!(merged.goroutine_count, 453 + 1617);
    assert!(!merged.states_inferred, "every goroutine keeps its dump's state");
    for (state, count) in &merged.by_state {
        let each = |r: &stacklens_core::analysis::goroutines::GoroutineReport| r.by_state.get(state).copied();
        assert_eq!(*count, each(&a).unwrap_or(0) + each(&b).unwrap_or(0), "{state}");
    }
    assert_eq!(merged.blocked_count, a.blocked_count + b.blocked_count);
    // The leak's group holds both dumps' goroutines: 388 + 1552.
    assert_eq!((merged.top_stacks[0].count, merged.top_stacks[0].state.as_str()), (1940, "chan send"));

    // A dump merged with a goroutine profile, which has no per-goroutine records: the
    // samples of both are counted, with states inferred (in either order).
    for profiles in [[&base, &pb], [&pb, &base]] {
        let mixed = analyze(&Profile::merge(profiles).unwrap(), &options).unwrap();
        assert_eq!(mixed.goroutine_count, 453 + 1617);
        assert!(mixed.states_inferred);
    }
}

#[test]
fn sandwich_shows_callers_and_callees() {
    let Some(p) = load("go/base/cpu.pb.gz") else { return };
    let name = "compress/flate.(*compressor).deflate";
    let p = Prepared::whole(&p).unwrap();
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
    let (prepared_base, prepared_new) = pair(&base, &new);
    for tree in [
        CallTree::build(&prepared_new, &TreeOptions::default()).unwrap(),
        CallTree::build_diff(&prepared_base, &prepared_new, &TreeOptions::default()).unwrap(),
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
    let bytes = CallTree::build(&prepared_new, &TreeOptions::default()).unwrap().to_bytes();
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
    let top = top_functions(&Prepared::whole(&cpu).unwrap(), 20).unwrap();
    assert_eq!(top.len(), 20);
    assert!(top.windows(2).all(|w| w[0].self_pct >= w[1].self_pct), "sorted by self");
    let deflate = top.iter().find(|f| f.func_name == "compress/flate.(*compressor).deflate").unwrap();
    assert_eq!((deflate.package.as_str(), deflate.cumulative_pct), ("compress/flate", 43.5));
    let find_match = top.iter().find(|f| f.func_name == "compress/flate.(*compressor).findMatch").unwrap();
    // Samples of 10ms, not nanoseconds.
    assert_eq!((find_match.self_pct, find_match.sample_count), (18.93, 134));
    assert_eq!(sample_count(&cpu), 708);
}
