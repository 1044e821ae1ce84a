//! `goroutine 1 [running]:` + input: Go goroutine dumps (debug=2 and panic tracebacks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"goroutine 1 [running]:\n", data);
    if let Ok(p) = stacklens_core::import::go_dump::parse(&input, &Default::default()) {
        check(&p);
    }
});
