//! The flame-graph call tree over any parsed profile: build, its binary form, paths,
//! search, windows and sandwich (callers/callees) views. The first 64 input bytes
//! choose the options and the node to look at; the rest is the profile.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::tree::{CallTree, Side, TreeOptions};
use stacklens_core_fuzz::{check_round_trip, check_tree, split, Options};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = split(data);
    let mut u = Unstructured::new(&head);
    let o = Options::read(&mut u);
    let Ok(p) = stacklens_core::parse(rest) else { return };
    let Ok(prepared) = o.query.prepare(&p) else { return };
    let options = TreeOptions::default();
    let Ok(tree) = CallTree::build(&prepared, &options) else { return };
    check_tree(&tree);
    check_round_trip(&tree);
    let pick = u.arbitrary::<u32>().unwrap_or(0) % tree.nodes.len() as u32;
    let names: Vec<&str> = tree.path(pick).iter().map(|&n| tree.name(n)).collect();
    assert_eq!(tree.node_at_path(&names), pick, "a node's path leads back to it");
    let name = tree.name(pick).to_owned();
    let (hits, _covered) = tree.search(|n| n == name);
    assert!(hits[pick as usize]);
    let min_total: i64 = u.arbitrary().unwrap_or(0);
    let max_depth: u32 = u.arbitrary().unwrap_or(u32::MAX);
    let (window, at) = tree.window(pick, min_total, max_depth);
    check_tree(&window);
    check_round_trip(&window);
    assert_eq!(window.name(at), name);
    let side = if u.arbitrary().unwrap_or(false) { Side::Callers } else { Side::Callees };
    if let Ok(s) = CallTree::sandwich(&prepared, &options, &name, side) {
        check_tree(&s);
    }
});
