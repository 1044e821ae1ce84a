//! Flame-graph layout with random viewports (zoom, width, minimum width, depth; any
//! finite numbers) over the call tree of any parsed profile, on the whole tree and on
//! a window of it, plus hit testing. The first 64 input bytes choose the options and
//! viewports; the rest is the profile.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core::analysis::{Granularity, Query};
use stacklens_core::layout::{hit, layout};
use stacklens_core_fuzz::{split, viewport};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = split(data);
    let mut u = Unstructured::new(&head);
    let granularity = [Granularity::Functions, Granularity::Lines][usize::from(u.arbitrary::<bool>().unwrap_or(false))];
    let Ok(p) = stacklens_core::parse(rest) else { return };
    let Ok(prepared) = Query { granularity, ..Query::default() }.prepare(&p) else { return };
    let Ok(tree) = CallTree::build(&prepared, &TreeOptions::default()) else { return };
    let whole = viewport(&mut u, tree.nodes.len());
    let rects = layout(&tree, &whole);
    assert!(rects.len() <= tree.nodes.len());
    assert!(rects.iter().all(|r| (r.node as usize) < tree.nodes.len()));
    let x: f64 = u.arbitrary().unwrap_or(0.0);
    if let Some(n) = hit(&rects, x, u.arbitrary().unwrap_or(0)) {
        assert!((n as usize) < tree.nodes.len());
    }
    let min_total: i64 = u.arbitrary().unwrap_or(0);
    let (window, _) = tree.window(whole.zoom, min_total, whole.max_depth);
    let vp = viewport(&mut u, window.nodes.len());
    let rects = layout(&window, &vp);
    assert!(rects.iter().all(|r| (r.node as usize) < window.nodes.len()));
});
