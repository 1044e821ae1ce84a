//! The JFR importer (`import::jfr::parse`) on one chunk whose 68-byte header the target
//! writes, so that the fuzzer's time goes into the metadata, constant pools and events
//! rather than into keeping the chunk size in step with the input. Input: a features
//! byte (bit 0: compressed integers), a little-endian u32 giving the metadata event's
//! offset in the body (modulo the body's length + 1), then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core_fuzz::check;

const HEADER_LEN: i64 = 68;

fuzz_target!(|data: &[u8]| {
    let Some(([features, offset @ ..], body)) = data.split_first_chunk::<5>() else { return };
    let body_len = body.len() as i64;
    let metadata = HEADER_LEN + i64::from(u32::from_le_bytes(*offset)) % (body_len + 1);
    let mut chunk = b"FLR\0\0\x02\0\x01".to_vec();
    // Size, constant pool offset, metadata offset, start ns, duration ns, start ticks, ticks/s.
    for field in [HEADER_LEN + body_len, HEADER_LEN, metadata, 0, 0, 0, 1_000_000_000] {
        chunk.extend(field.to_be_bytes());
    }
    chunk.extend(i32::from(features & 1).to_be_bytes());
    chunk.extend_from_slice(body);
    match stacklens_core::import::jfr::parse(&chunk, &Default::default()) {
        Ok(p) => check(&p),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
