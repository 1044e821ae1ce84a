//! Bounded gzip inflation (pure Rust, miniz_oxide through flate2).

use std::io::Read;

use flate2::bufread::MultiGzDecoder;

use crate::{Error, Result};

pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b
}

/// Counts how much compressed input the decoder has pulled, to report where it failed.
struct Counting<'a> {
    inner: &'a [u8],
    consumed: u64,
}

impl std::io::Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl std::io::BufRead for Counting<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(self.inner)
    }
    fn consume(&mut self, amt: usize) {
        self.inner = &self.inner[amt..];
        self.consumed += amt as u64;
    }
}

/// Inflates all gzip members, failing once the output would exceed `limit` bytes.
pub(crate) fn inflate(bytes: &[u8], limit: u64, progress: super::Progress<'_>) -> Result<Vec<u8>> {
    // ISIZE (last four bytes) is the size mod 2^32 of the last member: a hint only.
    let hint = bytes
        .get(bytes.len().saturating_sub(4)..)
        .and_then(|t| t.try_into().ok())
        .map_or(0, |t: [u8; 4]| u32::from_le_bytes(t) as u64);
    let mut out = Vec::with_capacity(hint.min(limit).min(256 << 20) as usize);
    let mut decoder = MultiGzDecoder::new(Counting { inner: bytes, consumed: 0 });
    // In 1 MiB steps, so progress can be reported from the compressed bytes consumed.
    let mut read = Ok(());
    loop {
        let room = limit.saturating_add(1).saturating_sub(out.len() as u64).min(1 << 20);
        match (&mut decoder).take(room).read_to_end(&mut out) {
            Ok(0) => break,
            Ok(_) if out.len() as u64 > limit => break,
            Ok(_) => progress(super::Stage::Inflating, decoder.get_ref().consumed as f64 / bytes.len().max(1) as f64),
            Err(e) => {
                read = Err(e);
                break;
            }
        }
    }
    match read {
        Ok(()) if out.len() as u64 > limit => Err(Error::TooLarge { limit }),
        Ok(()) => Ok(out),
        Err(e) => {
            let offset = decoder.get_ref().consumed;
            let reason = match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "unexpected end of data (truncated file)".to_owned(),
                _ => e.to_string(),
            };
            Err(Error::Gzip { offset, reason })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        assert_eq!(inflate(&gz(b"hello"), 100, &mut |_, _| {}).unwrap(), b"hello");
    }

    #[test]
    fn bomb_is_capped() {
        let big = vec![0u8; 10 << 20];
        let err = inflate(&gz(&big), 1 << 20, &mut |_, _| {}).unwrap_err();
        assert_eq!(err, Error::TooLarge { limit: 1 << 20 });
    }

    #[test]
    fn exact_limit_is_allowed() {
        assert_eq!(inflate(&gz(&[7u8; 1000]), 1000, &mut |_, _| {}).unwrap().len(), 1000);
    }

    #[test]
    fn truncated_reports_offset() {
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let z = gz(&data);
        let cut = &z[..z.len() / 2];
        match inflate(cut, 1 << 30, &mut |_, _| {}).unwrap_err() {
            Error::Gzip { offset, reason } => {
                assert!(offset > 0 && offset <= cut.len() as u64, "offset {offset}");
                assert!(reason.contains("truncated"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
