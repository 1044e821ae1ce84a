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

/// Whether the blob starts as gzip does.
pub fn is_gzip(blob: &Blob) -> Result<bool, String> {
    let reader = FileReaderSync::new().map_err(|e| js_error("cannot read files here", e))?;
    Ok(stacklens_core::import::is_gzip(&read_range(&reader, blob, 0.0, blob.size().min(2.0))?.to_vec()))
}

// web-sys has `DecompressionStream` behind its unstable APIs only.
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(extends = js_sys::Object)]
    type DecompressionStream;
    #[wasm_bindgen(constructor, catch)]
    fn new(format: &str) -> Result<DecompressionStream, wasm_bindgen::JsValue>;
    #[wasm_bindgen(method, getter)]
    fn readable(this: &DecompressionStream) -> web_sys::ReadableStream;
    #[wasm_bindgen(method, getter)]
    fn writable(this: &DecompressionStream) -> web_sys::WritableStream;
}

/// Whether this browser inflates gzip itself (`DecompressionStream`).
pub fn browser_inflates() -> bool {
    js_sys::Reflect::has(&js_sys::global(), &"DecompressionStream".into()).unwrap_or(false)
}

/// The blob's gzip stream inflated by the browser's `DecompressionStream` (its native
/// zlib: several times faster than inflating in WebAssembly), into one buffer grown as
/// core grows its own, refusing more than `limit` bytes as core does. `Ok(None)` when
/// the browser could not inflate it (corrupt or truncated data, say): core then inflates
/// the bytes itself and says what is wrong with them.
pub async fn inflate_in_browser(
    blob: &Blob,
    limit: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<Option<Vec<u8>>, String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{ReadableStreamDefaultReader, ReadableStreamReadResult, ReadableWritablePair};

    let Ok(inflater) = DecompressionStream::new("gzip") else { return Ok(None) };
    // The size the gzip trailer gives (of its last member, modulo 4 GiB): room reserved
    // up front, so the usual file is one allocation (WebAssembly memory never shrinks).
    let reader = FileReaderSync::new().map_err(|e| js_error("cannot read files here", e))?;
    let size = blob.size();
    let trailer = read_range(&reader, blob, (size - 4.0).max(0.0), size)?.to_vec();
    let hint = <[u8; 4]>::try_from(trailer.as_slice()).map_or(0, u32::from_le_bytes) as u64;
    let too_large = |e: stacklens_core::Error| e.to_string();
    let mut out = Vec::new();
    stacklens_core::import::grow_inflated(&mut out, hint.min(limit) as usize, limit).map_err(too_large)?;
    let stream = blob.stream().pipe_through(&ReadableWritablePair::new(&inflater.readable(), &inflater.writable()));
    let chunks: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    loop {
        let Ok(read) = JsFuture::from(chunks.read()).await else { return Ok(None) };
        let read: ReadableStreamReadResult = read.unchecked_into();
        if read.get_done().unwrap_or(true) {
            return Ok(Some(out));
        }
        let chunk: Uint8Array = read.get_value().unchecked_into();
        let from = out.len();
        let len = chunk.length() as usize;
        if (from + len) as u64 > limit {
            let _ = chunks.cancel();
            return Err(too_large(stacklens_core::Error::TooLarge { limit }));
        }
        stacklens_core::import::grow_inflated(&mut out, len, limit).map_err(too_large)?;
        out.resize(from + len, 0);
        chunk.copy_to(&mut out[from..]);
        if hint > 0 {
            progress((out.len() as f64 / hint as f64).min(1.0));
        }
    }
}
