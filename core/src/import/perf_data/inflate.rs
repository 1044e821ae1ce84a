//! `perf record -z`: the records perf read from its ring buffers are packed with zstd
//! into `PERF_RECORD_COMPRESSED` (and, since Linux 6.16, `COMPRESSED2`) records. This
//! turns such a file or pipe into the plain one perf would have written without `-z`,
//! with ruzstd (pure Rust, so the page reads it too; the reader crate's own support is
//! zstd's C library, which does not build for wasm32).
//!
//! The payloads are one zstd stream: perf keeps one compression context for the whole
//! recording and flushes it at the end of each record, so a block may run on into the
//! next record and a record may end mid-block. The records perf wrote uncompressed
//! between them (`FINISHED_ROUND` markers, which bound how far the reader sorts by time)
//! are put back where perf's own reader meets them: after the records whose blocks had
//! ended by then. Where that place is not known (in the stream's first window, see
//! [`Decoded::len`]), a marker is left out: two rounds become one, which sorts the same.

use std::ops::Range;

use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

use super::layout::{Reader, RecordsAt, RECORD_COMPRESSED, RECORD_COMPRESSED2, RECORD_FINISHED_ROUND};

/// zstd's frame magic, little-endian.
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// Where a file's header holds the size of its data section.
const DATA_SIZE_AT: usize = 48;
/// An empty raw block marked last: ends a stream perf never ended, so that the decoder
/// hands over all it holds.
const LAST_EMPTY_BLOCK: [u8; 3] = [1, 0, 0];

/// Why inflating failed.
pub(super) enum InflateError {
    /// The records would inflate past this many bytes.
    TooLarge(u64),
    Corrupt(String),
}

/// `bytes` (a perf.data file or pipe whose records `records` are, some compressed) with
/// every compressed record replaced by the records it holds; at most `limit` bytes of
/// them.
pub(super) fn inflate(bytes: &[u8], records: &RecordsAt, limit: u64) -> Result<Vec<u8>, InflateError> {
    let r = Reader::of_file(bytes);
    let range = records.range.clone();
    // Records before the first compressed one are copied as they are; after it, the
    // payloads are gathered into one stream and the plain records remembered by how
    // many payloads came before them.
    let mut stream = Vec::new();
    let mut payload_ends = Vec::new();
    let mut plain_after: Vec<(Range<usize>, usize)> = Vec::new();
    let mut first_compressed = None;
    let mut at = range.start;
    while at < range.end {
        // `check` has walked these records: each lies within them.
        let kind = r.u32_at(at).map_err(InflateError::Corrupt)?;
        let end = at + usize::from(r.u16_at(at + 6).map_err(InflateError::Corrupt)?);
        if kind == RECORD_COMPRESSED || kind == RECORD_COMPRESSED2 {
            first_compressed.get_or_insert(at);
            let payload = if kind == RECORD_COMPRESSED2 {
                // A u64 of the payload's size, then the payload, then padding to 8 bytes.
                let stated = r.u64_at(at + 8).map_err(InflateError::Corrupt)?;
                let start = at + 16;
                match usize::try_from(stated).ok().and_then(|s| start.checked_add(s)).filter(|&e| e <= end) {
                    Some(payload_end) if start <= end => start..payload_end,
                    _ => {
                        return Err(InflateError::Corrupt(format!(
                            "the compressed record at byte {at} states {stated} bytes of data, more than it holds"
                        )))
                    }
                }
            } else {
                at + 8..end
            };
            stream.extend_from_slice(&bytes[payload]);
            payload_ends.push(stream.len());
        } else if first_compressed.is_some() {
            plain_after.push((at..end, payload_ends.len()));
        }
        at = end;
    }
    let Some(first_compressed) = first_compressed else {
        return Ok(bytes.to_vec());
    };
    let decoded = decode(&stream, &payload_ends, limit)?;
    let boundaries = decoded.record_boundaries();
    // The plain records after the first compressed one, each after the decoded records
    // that perf's reader had met before it.
    let mut out = Vec::with_capacity(bytes.len() + decoded.bytes.len());
    out.extend_from_slice(&bytes[..first_compressed]);
    let mut copied = 0;
    for (record, payloads_before) in plain_after {
        let place = payloads_before.checked_sub(1).map_or(Some(0), |i| decoded.ends[i]);
        let is_marker = r.u32_at(record.start).ok() == Some(RECORD_FINISHED_ROUND);
        let place = match place {
            Some(place) => boundaries[..boundaries.partition_point(|&b| b <= place)].last().copied().unwrap_or(0),
            None if is_marker => continue,
            None => copied,
        };
        let place = place.max(copied);
        out.extend_from_slice(&decoded.bytes[copied..place]);
        out.extend_from_slice(&bytes[record]);
        copied = place;
    }
    out.extend_from_slice(&decoded.bytes[copied..]);
    let data_len = out.len() - range.start;
    out.extend_from_slice(&bytes[range.end..]);
    if let Some(features) = records.file_features {
        patch_file_header(&mut out, r.big_endian, &range, data_len, features);
    }
    Ok(out)
}

/// The decoded stream, and for each payload how much of it had been decoded when the
/// payload ended (in whole blocks), where that is known.
struct Decoded {
    bytes: Vec<u8>,
    ends: Vec<Option<usize>>,
}

impl Decoded {
    /// Where each whole record of the decoded stream starts, and where the last ends.
    fn record_boundaries(&self) -> Vec<usize> {
        let mut boundaries = vec![0];
        let mut at = 0;
        while let Some(size) = self.bytes.get(at + 6..at + 8).map(|s| usize::from(u16::from_le_bytes([s[0], s[1]]))) {
            if size < 8 || at + size > self.bytes.len() {
                break;
            }
            at += size;
            boundaries.push(at);
        }
        boundaries
    }
}

/// Decodes the zstd stream `stream` (one frame, or several one after another), noting
/// how much was decoded at each of `payload_ends`.
fn decode(stream: &[u8], payload_ends: &[usize], limit: u64) -> Result<Decoded, InflateError> {
    let corrupt = |e: &dyn std::fmt::Display| InflateError::Corrupt(format!("its zstd-compressed records: {e}"));
    let mut decoder = FrameDecoder::new();
    let (mut bytes, mut ends) = (Vec::new(), Vec::with_capacity(payload_ends.len()));
    let mut source = stream;
    let mut frame: Option<FrameHeader> = None;
    // Whether the current frame has handed anything over: then it holds back exactly
    // its window.
    let mut collected = false;
    loop {
        // What had been decoded at this point, a block boundary: known between frames,
        // and once the frame has handed over more than its window.
        let decoded = match &frame {
            None => Some(bytes.len()),
            Some(header) => collected.then(|| bytes.len() + header.window),
        };
        let consumed = stream.len() - source.len();
        while ends.len() < payload_ends.len() && payload_ends[ends.len()] <= consumed {
            ends.push(decoded);
        }
        match &frame {
            None if source.is_empty() => break,
            None => {
                frame = Some(frame_header(source).map_err(|e| corrupt(&e))?);
                decoder.reset(&mut source).map_err(|e| corrupt(&e))?;
                collected = false;
                continue;
            }
            // perf never ends its frame: an empty last block ends it, so that the
            // decoder hands over the window it holds back.
            Some(header) if source.is_empty() => {
                let checksum: &[u8] = if header.checksum { &[0; 4] } else { &[] };
                let last = [&LAST_EMPTY_BLOCK[..], checksum].concat();
                decoder.decode_blocks(&last[..], BlockDecodingStrategy::UptoBlocks(1)).map_err(|e| corrupt(&e))?;
            }
            Some(_) => {
                decoder.decode_blocks(&mut source, BlockDecodingStrategy::UptoBlocks(1)).map_err(|e| corrupt(&e))?;
            }
        }
        if (bytes.len() + decoder.can_collect()) as u64 > limit {
            return Err(InflateError::TooLarge(limit));
        }
        let more = decoder.collect().unwrap_or_default();
        collected |= !more.is_empty();
        bytes.extend_from_slice(&more);
        if decoder.is_finished() {
            frame = None;
        }
    }
    Ok(Decoded { bytes, ends })
}

/// What decoding needs of a zstd frame's header (RFC 8878, 3.1.1.1).
struct FrameHeader {
    /// What ruzstd's decoder holds back until the frame ends (for a single-segment
    /// frame, which states its size, all of it: never handed over early).
    window: usize,
    /// Whether a checksum follows the last block.
    checksum: bool,
}

fn frame_header(frame: &[u8]) -> Result<FrameHeader, String> {
    let short = || "a zstd frame header is cut short".to_owned();
    let magic = frame.get(..4).ok_or_else(short)?;
    let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    if magic != ZSTD_MAGIC {
        return Err(format!("a zstd frame should begin with {ZSTD_MAGIC:#x}, not {magic:#x}"));
    }
    let descriptor = *frame.get(4).ok_or_else(short)?;
    let checksum = descriptor & 0x04 != 0;
    if descriptor & 0x20 != 0 {
        return Ok(FrameHeader { window: usize::MAX, checksum });
    }
    let window = *frame.get(5).ok_or_else(short)?;
    let base = 1u64 << (10 + (window >> 3));
    let window = usize::try_from(base + base / 8 * u64::from(window & 7)).unwrap_or(usize::MAX);
    Ok(FrameHeader { window, checksum })
}

/// A file whose records at `range` were replaced by `data_len` bytes: its header's data
/// size, and the offsets of the feature sections after the data moved by the difference.
fn patch_file_header(out: &mut [u8], big_endian: bool, range: &Range<usize>, data_len: usize, features: usize) {
    let put = |out: &mut [u8], at: usize, value: u64| {
        let value = if big_endian { value.to_be_bytes() } else { value.to_le_bytes() };
        out[at..at + 8].copy_from_slice(&value);
    };
    put(out, DATA_SIZE_AT, data_len as u64);
    // The feature table follows the data: an offset and a size for each section.
    let shift = data_len.wrapping_sub(range.len()) as u64;
    for entry in (range.start + data_len..).step_by(16).take(features) {
        let offset = Reader::of_file(out).u64_at(entry).unwrap_or(0);
        if offset >= range.end as u64 {
            put(out, entry, offset.wrapping_add(shift));
        }
    }
}
