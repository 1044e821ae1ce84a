//! perf.data files: the input is the file (seeds are the symbolization fixtures'
//! recordings; run with FUZZ_MAX_LEN=131072 so they fit whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = stacklens_core::import::perf_data::parse(data, &Default::default()) {
        check(&p);
    }
});
