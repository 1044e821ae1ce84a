//! `stacklens_core::parse_with` under `max_model_bytes` (issue 32): the first two bytes
//! give the limit (in KiB, so it falls inside what small inputs expand to), the rest is
//! the profile. Every importer either stops with `ModelTooLarge`, naming that limit, or
//! builds a model whose samples count for no more than it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::import::profile_bytes;
use stacklens_core::{parse_with, Error, ParseOptions};
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    let Some((limit, input)) = data.split_first_chunk::<2>() else { return };
    let limit = u64::from(u16::from_le_bytes(*limit)) << 10;
    let options = ParseOptions { max_model_bytes: limit, ..Default::default() };
    match parse_with(input, &options) {
        Ok(p) => {
            assert!(profile_bytes(&p) <= limit, "{} bytes of samples past the limit of {limit}", profile_bytes(&p));
            check(&p);
        }
        Err(Error::ModelTooLarge { limit: named }) => assert_eq!(named, limit),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
