//! Reading a profile the page hands over as a `Blob` (a chosen file is never copied into
//! the page): synchronously, in slices, so a large file is read once into the buffer it
//! is parsed from, and folded stacks, read line by line, are never held whole (a 1 GiB
//! file stays a few MB in the worker).

use js_sys::Uint8Array;
use stacklens_core::import::folded::{parse_twice, starts_folded, HEAD};
use stacklens_core::Profile;
use web_sys::{Blob, FileReaderSync};

use crate::js_error;

/// How much is read at a time.
const SLICE: f64 = 16.0 * 1_048_576.0;

/// `blob[from..to]`, as read by the browser.
fn read_range(reader: &FileReaderSync, blob: &Blob, from: f64, to: f64) -> Result<Uint8Array, String> {
    let piece = blob.slice_with_f64_and_f64(from, to).map_err(|e| js_error("cannot slice the file", e))?;
    let buffer = reader.read_as_array_buffer(&piece).map_err(|e| js_error("cannot read the file", e))?;
    Ok(Uint8Array::new(&buffer))
}

/// Gives `each` the blob's slices in order (still in JavaScript memory: each caller copies
/// them where it needs them), with the share read so far.
fn for_each_slice(blob: &Blob, mut each: impl FnMut(Uint8Array, f64) -> Result<(), String>) -> Result<(), String> {
    let reader = FileReaderSync::new().map_err(|e| js_error("cannot read files here", e))?;
    let size = blob.size();
    let mut at = 0.0;
    while at < size {
        let end = (at + SLICE).min(size);
        each(read_range(&reader, blob, at, end)?, end / size)?;
        at = end;
    }
    Ok(())
}

/// The whole blob in one buffer, reserved at its size first so a file the tab cannot
/// hold is a message, not a crash halfway through.
pub fn read_all(blob: &Blob, progress: &mut dyn FnMut(f64)) -> Result<Vec<u8>, String> {
    let size = blob.size();
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(size as usize)
        .map_err(|_| format!("{:.0} MB is more than this browser tab can hold", size / 1_048_576.0))?;
    for_each_slice(blob, |piece, done| {
        // Straight into the buffer's tail: one copy out of JavaScript.
        let from = bytes.len();
        bytes.resize(from + piece.length() as usize, 0);
        piece.copy_to(&mut bytes[from..]);
        progress(done);
        Ok(())
    })?;
    Ok(bytes)
}

/// Whether the blob is folded stacks (uncompressed), the format read without holding it.
pub fn is_folded(blob: &Blob) -> Result<bool, String> {
    let reader = FileReaderSync::new().map_err(|e| js_error("cannot read files here", e))?;
    let head = read_range(&reader, blob, 0.0, blob.size().min(HEAD as f64))?.to_vec();
    Ok(starts_folded(&head))
}

/// Folded stacks read twice, a slice at a time ([`parse_twice`]): `progress` goes to 0.3
/// over the first pass and to 1 over the second.
pub fn parse_folded(blob: &Blob, progress: &mut dyn FnMut(f64)) -> Result<Profile, String> {
    parse_twice(
        |pass, feed| {
            let mut scratch = Vec::new();
            for_each_slice(blob, |piece, done| {
                progress(if pass == 0 { 0.3 * done } else { 0.3 + 0.7 * done });
                scratch.resize(piece.length() as usize, 0);
                piece.copy_to(&mut scratch);
                feed(&scratch)
            })
        },
        |e| e.to_string(),
    )
}
