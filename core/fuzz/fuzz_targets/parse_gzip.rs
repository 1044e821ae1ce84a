//! `stacklens_core::parse` on the fuzz input gzipped here, so the inflate path and the
//! parser behind it are both reached. The first byte picks: bit 0, two gzip members;
//! bit 1, an inflate limit of half the input (the `TooLarge` path).
#![no_main]

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use stacklens_core::{parse_with, Error, ParseOptions};
use stacklens_core_fuzz::check;

fn gzip(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(part).unwrap();
        out.extend(e.finish().unwrap());
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, inner)) = data.split_first() else { return };
    let gz = if mode & 1 != 0 {
        let (a, b) = inner.split_at(inner.len() / 2);
        gzip(&[a, b])
    } else {
        gzip(&[inner])
    };
    let limit = if mode & 2 != 0 { inner.len() as u64 / 2 } else { ParseOptions::default().max_inflated_bytes };
    let result = parse_with(&gz, &ParseOptions { max_inflated_bytes: limit, ..Default::default() });
    if inner.len() as u64 > limit {
        assert_eq!(result.unwrap_err(), Error::TooLarge { limit });
        return;
    }
    // Unwrapped, the same bytes must give the same outcome (gzip is one level only,
    // so inner bytes that are gzip themselves are not comparable).
    if inner.starts_with(&[0x1f, 0x8b]) {
        return;
    }
    let plain = stacklens_core::parse(inner);
    match (&result, &plain) {
        (Ok(a), Ok(b)) => {
            check(a);
            assert_eq!(a.samples.len(), b.samples.len());
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("gzipped {:?} but plain {:?}", result.as_ref().err(), plain.as_ref().err()),
    }
});
