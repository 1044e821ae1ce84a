//! Comparing two parsed profiles: `diff` (regressions, improvements, stack deltas,
//! normalisation, noise threshold), pprof's `-diff_base` top, the diff call tree and
//! goroutine growth. Input: 64 option bytes, a u32 (LE) base length, the base profile,
//! then the compared profile. When only one of them parses it is compared with itself.
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use stacklens_core::analysis::diff::{diff, diff_top};
use stacklens_core::analysis::goroutines::compare;
use stacklens_core::analysis::tree::{CallTree, TreeOptions};
use stacklens_core_fuzz::{check_tree, split, Options};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = split(data);
    let o = Options::read(&mut Unstructured::new(&head));
    if rest.len() < 4 {
        return;
    }
    let (len, rest) = rest.split_at(4);
    let len = (u32::from_le_bytes(len.try_into().unwrap()) as usize).min(rest.len());
    let (a, b) = rest.split_at(len);
    let (base, compared) = match (stacklens_core::parse(a), stacklens_core::parse(b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Ok(a), Err(_)) => (a.clone(), a),
        (Err(_), Ok(b)) => (b.clone(), b),
        _ => return,
    };
    let _ = compare(&base, &compared);
    let Ok((base, compared)) = o.query.prepare_pair(&base, &compared) else { return };
    if let Ok(d) = diff(&base, &compared, &o.diff()) {
        assert!(d.new_stacks.len() <= d.new_stack_count && d.removed_stacks.len() <= d.removed_stack_count);
        assert!(d.regressions.len() + d.improvements.len() <= d.functions.len());
    }
    let _ = diff_top(&base, &compared, &o.top);
    if let Ok(t) = CallTree::build_diff(&base, &compared, &TreeOptions::default()) {
        check_tree(&t);
        assert_eq!(t.base.len(), t.nodes.len());
    }
});
