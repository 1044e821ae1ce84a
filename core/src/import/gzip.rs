//! Whether bytes are gzip, and their bounded inflation (pure Rust, miniz_oxide through
//! flate2): the one place that decides gzip for core, the server, the CLI and the page.

use std::io::Read;

use flate2::bufread::MultiGzDecoder;

use crate::{Error, Result};

/// The two bytes every gzip member starts with.
const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether `bytes` start as gzip does.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// The error for inflated bytes that are gzip again: one layer is inflated, and no
/// profile format is written twice compressed.
pub fn gzip_inside(inflated: &[u8]) -> Option<Error> {
    is_gzip(inflated).then(|| Error::UnknownFormat {
        hint: "gzip inside gzip: the profile was compressed twice (gunzip it once)".to_owned(),
    })
}

/// [`gzip_inside`] for gzip `bytes`, from their first two inflated bytes: the parse
/// inflates one layer and would read a second one as a malformed protobuf; this names
/// what is wrong instead, before all of it is inflated.
pub fn twice_gzipped(bytes: &[u8]) -> Option<Error> {
    if !is_gzip(bytes) {
        return None;
    }
    let mut inner = [0u8; 2];
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes);
    let mut filled = 0;
    while filled < inner.len() {
        match decoder.read(&mut inner[filled..]) {
            Ok(0) | Err(_) => return None,
            Ok(n) => filled += n,
        }
    }
    gzip_inside(&inner)
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
    let (mut out, _) = inflate_buffer(bytes, limit)?;
    let mut decoder = MultiGzDecoder::new(Counting { inner: bytes, consumed: 0 });
    // Into the room there is, in steps of at most 1 MiB so progress can be reported from
    // the compressed bytes consumed. A full buffer is grown only once a probe read shows
    // more is coming: an exact hint (the usual case) is the only allocation.
    let mut read = Ok(());
    loop {
        if out.len() == out.capacity() {
            let mut probe = [0u8; 64];
            match decoder.read(&mut probe) {
                Ok(0) => break,
                Ok(n) => {
                    grow(&mut out, n, limit)?;
                    out.extend_from_slice(&probe[..n]);
                }
                Err(e) => {
                    read = Err(e);
                    break;
                }
            }
        }
        let room = ((out.capacity() - out.len()) as u64)
            .min(limit.saturating_add(1).saturating_sub(out.len() as u64))
            .min(1 << 20);
        if room == 0 {
            // Past the limit, or full after the probe (which grows it next time round).
            if out.len() as u64 > limit {
                break;
            }
            continue;
        }
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

/// An empty buffer with room for what the gzip trailer ending `tail` says the data
/// inflates to (ISIZE, the last four bytes: the last member's size modulo 2^32, a hint
/// only, so at most 256 MiB and `limit` are reserved on its word), and that hint. Also
/// for inflaters outside core (the page's worker, with the browser's own).
pub fn inflate_buffer(tail: &[u8], limit: u64) -> Result<(Vec<u8>, u64)> {
    let hint = tail
        .get(tail.len().saturating_sub(4)..)
        .and_then(|t| t.try_into().ok())
        .map_or(0, |t: [u8; 4]| u32::from_le_bytes(t) as u64);
    let mut out = Vec::new();
    grow(&mut out, hint.min(limit).min(256 << 20) as usize, limit)?;
    Ok((out, hint))
}

/// Makes room for `extra` more bytes, doubling as `Vec` does but never past `limit + 1`
/// bytes, and failing with `OutOfMemory` instead of aborting: on wasm32 the doubling of a
/// 1 GiB buffer overflows the address space, and the browser may refuse far less. (Also
/// for inflaters outside core: the page's worker, with the browser's own.)
pub fn grow(out: &mut Vec<u8>, extra: usize, limit: u64) -> Result<()> {
    let needed = out.len().saturating_add(extra);
    if needed <= out.capacity() {
        return Ok(());
    }
    let ceiling = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX).max(needed);
    let target = out.capacity().saturating_mul(2).clamp(needed, ceiling);
    out.try_reserve_exact(target - out.len()).map_err(|_| Error::OutOfMemory { bytes: target as u64 })
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
    fn a_second_gzip_layer_is_named() {
        assert!(twice_gzipped(&gz(&gz(b"profile"))).unwrap().to_string().contains("gzip inside gzip"));
        assert!(twice_gzipped(&gz(b"profile")).is_none());
        assert!(twice_gzipped(b"profile").is_none());
        assert!(twice_gzipped(&gz(b"")).is_none());
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
    fn capacity_never_passes_the_limit() {
        // Two members, so the size hint (the last member's, 1 byte) is useless and the buffer
        // grows by doubling: 1, 2, then 4 MiB for 2.5 MiB without the ceiling.
        let limit = 5 << 19;
        let mut data = gz(&vec![1u8; limit - 1]);
        data.extend(gz(b"x"));
        let out = inflate(&data, limit as u64, &mut |_, _| {}).unwrap();
        assert_eq!((out.len(), out.capacity()), (limit, limit + 1));
    }

    #[test]
    fn an_allocation_the_system_refuses_is_an_error() {
        let mut out = vec![0u8; 16];
        assert_eq!(grow(&mut out, usize::MAX - 8, u64::MAX), Err(Error::OutOfMemory { bytes: usize::MAX as u64 }));
    }

    #[test]
    fn an_exact_size_hint_is_the_only_allocation() {
        // A one-member stream's ISIZE is its size: no room is added past it.
        let out = inflate(&gz(&[3u8; 53_000]), 1 << 30, &mut |_, _| {}).unwrap();
        assert_eq!((out.len(), out.capacity()), (53_000, 53_000));
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
