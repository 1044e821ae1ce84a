//! `--- contention:` + input: Go block/mutex debug=1 texts and C++ contentionz (attributes,
//! sample lines, `#` notes, memory map).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"--- contention:\n", data);
    if let Ok(p) = stacklens_core::import::legacy_text::parse_contention(&input, &Default::default()) {
        check(&p);
    }
});
