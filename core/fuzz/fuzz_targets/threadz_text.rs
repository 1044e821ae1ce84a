//! `--- threadz 1 ---` + input: threadz thread stacks and memory map.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"--- threadz 1 ---\n", data);
    if let Ok(p) = stacklens_core::import::legacy_text::parse_threadz(&input, &Default::default()) {
        check(&p);
    }
});
