//! A minimal protobuf writer for hand-made (and deliberately malformed) profiles: fields
//! are written one by one, and strings are bytes, so they can be non-UTF-8.
#![allow(dead_code)] // each test binary uses its own subset

pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn field_varint(field: u32, v: u64, out: &mut Vec<u8>) {
    varint(u64::from(field) << 3, out);
    varint(v, out);
}

pub fn field_bytes(field: u32, body: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(field) << 3 | 2, out);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

pub fn message(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::new();
    build(&mut v);
    v
}
