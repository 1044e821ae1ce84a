//! `stacklens_core::parse` on raw bytes: format detection, gzip, every importer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    match stacklens_core::parse(data) {
        Ok(p) => check(&p),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
