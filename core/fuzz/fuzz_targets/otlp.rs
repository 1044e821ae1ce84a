//! OTLP profiles: the input is a `ProfilesData` message (seeds are the eBPF profiler's
//! export and the Go fixtures converted by tests/programs/otlp.py).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = stacklens_core::import::otlp::parse(data, &Default::default()) {
        check(&p);
    }
});
