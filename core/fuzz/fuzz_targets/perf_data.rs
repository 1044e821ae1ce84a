//! perf.data files: the input is the file (seeds are the symbolization fixtures'
//! recordings; run with FUZZ_MAX_LEN=131072 so they fit whole). `perf record -z`
//! records inflate to at most 64 MiB here, not the default 1 GiB: a zstd bomb of 131 KB
//! then costs a fraction of a second, and the limit is still met (parse_gzip fuzzes it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::import::ParseOptions;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    let options = ParseOptions { max_inflated_bytes: 64 << 20, ..Default::default() };
    if let Ok(p) = stacklens_core::import::perf_data::parse(data, &options) {
        check(&p);
    }
});
