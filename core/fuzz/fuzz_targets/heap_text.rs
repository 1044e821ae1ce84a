//! `heap profile: ` + input: Go debug=1 heap and tcmalloc heapz/heapz_v2/heapprofile/growthz
//! texts (the input supplies the rest of the header line, so every header kind is reached).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::{check, with_header};

fuzz_target!(|data: &[u8]| {
    let input = with_header(b"heap profile: ", data);
    if let Ok(p) = stacklens_core::import::legacy_text::parse_heap(&input, &Default::default()) {
        check(&p);
    }
});
