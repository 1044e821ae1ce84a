//! An ELF or Mach-O binary or debug file read for symbols, then looked up: the first 8
//! input bytes are an address (little-endian), the rest is the file. Seeds are the
//! symbolization fixtures' binaries and debug files (run with FUZZ_MAX_LEN=65536 so they
//! fit whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::symbols::{AddressLookup, ObjectFile};

fuzz_target!(|data: &[u8]| {
    let Some((address, file)) = data.split_first_chunk::<8>() else { return };
    let address = u64::from_le_bytes(*address);
    if let Ok(object) = ObjectFile::parse(file) {
        let _ = object.lookup(address);
        let _ = object.lookup(object.relative_to_address(address & 0xffff));
        let _ = object.function_start(address);
        let _ = object.breakpad_id();
    }
});
