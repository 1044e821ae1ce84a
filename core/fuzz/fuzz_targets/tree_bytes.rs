//! `CallTree::from_bytes` (the page reads trees a Web Worker sends) on any bytes; a tree
//! it accepts must be safe for every accessor, windows and layout.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::tree::CallTree;
use stacklens_core::layout::{layout, Viewport};

fuzz_target!(|data: &[u8]| {
    let Some(t) = CallTree::from_bytes(data) else { return };
    stacklens_core_fuzz::check_round_trip(&t);
    let last = t.nodes.len() as u32 - 1;
    let _ = t.path(last);
    let _ = t.children(0).count();
    let _ = t.search(|_| true);
    let _ = t.node_at_path(&[t.name(last)]);
    let _ = layout(&t, &Viewport::default());
    let _ = layout(&t, &Viewport { zoom: last, min_width_px: 0.0, ..Viewport::default() });
    let (w, at) = t.window(last, 0, u32::MAX);
    let _ = layout(&w, &Viewport { zoom: at, min_width_px: 0.0, ..Viewport::default() });
});
