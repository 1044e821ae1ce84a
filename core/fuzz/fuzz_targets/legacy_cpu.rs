//! The legacy binary CPU profile (gperftools, Go before 1.9) after its header. The first
//! input byte picks the header: bits 0-1 the word shape (4 LE, 4 BE, 8 LE, 8 BE),
//! bit 2 Java; the header is `0, 3, java, 10000 µs, 0`, the rest of the input follows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let (size, big_endian) = [(4, false), (4, true), (8, false), (8, true)][usize::from(mode & 3)];
    let java = u64::from(mode >> 2 & 1);
    let mut input = Vec::with_capacity(5 * size + rest.len());
    for word in [0u64, 3, java, 10_000, 0] {
        let bytes = word.to_le_bytes();
        let mut w = bytes[..size].to_vec();
        if big_endian {
            w.reverse();
        }
        input.extend(w);
    }
    input.extend_from_slice(rest);
    if let Ok(p) = stacklens_core::import::legacy_cpu::parse(&input, &Default::default()) {
        check(&p);
    }
});
