//! `--- heapz 1 ---` + input: Java heapz text (attributes, samples, frame-name lines).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"--- heapz 1 ---\n", data);
    if let Ok(p) = stacklens_core::import::legacy_text::parse_java(&input, &Default::default()) {
        check(&p);
    }
});
