//! `goroutine profile: total 1` + input: Go debug=1 goroutine/threadcreate count texts
//! (count lines, `#` frame notes, `# labels:` lines, memory map).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"goroutine profile: total 1\n", data);
    if let Ok(p) = stacklens_core::import::go_text::parse_count(&input, &Default::default()) {
        check(&p);
    }
});
