//! A Breakpad `.sym` file read and looked up: the first 8 input bytes are a module
//! offset (little-endian), the rest is the file. Seeds are the symbolization fixtures'
//! `.sym` files (run with FUZZ_MAX_LEN=65536 so that most of each fits).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::symbols::{AddressLookup, BreakpadSymbols};

fuzz_target!(|data: &[u8]| {
    let Some((address, file)) = data.split_first_chunk::<8>() else { return };
    let address = u64::from_le_bytes(*address);
    if let Ok(symbols) = BreakpadSymbols::parse(file) {
        let _ = symbols.lookup(address);
        let _ = symbols.lookup(address & 0xffff);
        let _ = symbols.module();
        let _ = symbols.code_id();
    }
});
