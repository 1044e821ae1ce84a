//! Goroutine analysis (states, groups, blocked goroutines, filter, limit) over any
//! parsed profile — dumps, debug=1 texts, goroutine protos — and a snapshot compared
//! with itself (no growth). The first 64 input bytes choose the options.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::goroutines::{analyze, compare, GoroutineOptions};
use stacklens_core_fuzz::{split, Options};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = split(data);
    let o = Options::read(&mut Unstructured::new(&head));
    let Ok(p) = stacklens_core::parse(rest) else { return };
    let max_stacks = o.top.node_count;
    if let Ok(r) = analyze(&p, &GoroutineOptions { filter: o.filter, max_stacks }) {
        assert!(r.top_stacks.len() <= r.group_count);
        assert!(r.blocked_count <= r.goroutine_count);
    }
    if let Ok(c) = compare(&p, &p) {
        assert_eq!(c.growth_count, 0, "a snapshot compared with itself has not grown");
        assert!(c.new_stacks.is_empty() && c.grown_stacks.is_empty());
    }
});
