//! Reading a profile the page hands over as a `Blob` (a chosen file is never copied into
//! the page): synchronously, in slices, so a large file is read once into the buffer it
//! is parsed from, and folded stacks, read line by line, are never held whole (a 1 GiB
//! file stays a few MB in the worker); binaries and debug files are read in the slices
//! the symbol reader asks for.

use js_sys::Uint8Array;
use stacklens_core::import::folded_input::{self, Feed, Rereadable};
use stacklens_core::symbols::ReadCacheOps;
use stacklens_core::Profile;
use web_sys::{Blob, FileReaderSync};

use crate::js_error;

/// How much is read at a time.
const SLICE: f64 = 16.0 * 1_048_576.0;

fn file_reader() -> Result<FileReaderSync, String> {
    FileReaderSync::new().map_err(|e| js_error("cannot read files here", e))
}

/// The blob's first `len` bytes (fewer when it is shorter).
pub fn head(blob: &Blob, len: f64) -> Result<Vec<u8>, String> {
    Ok(read_range(&file_reader()?, blob, 0.0, blob.size().min(len))?.to_vec())
}

/// Appends `piece` to `out`, straight into its tail: one copy out of JavaScript.
fn append(out: &mut Vec<u8>, piece: &Uint8Array) {
    let from = out.len();
    out.resize(from + piece.length() as usize, 0);
    piece.copy_to(&mut out[from..]);
}

/// `blob[from..to]`, as read by the browser.
fn read_range(reader: &FileReaderSync, blob: &Blob, from: f64, to: f64) -> Result<Uint8Array, String> {
    let piece = blob.slice_with_f64_and_f64(from, to).map_err(|e| js_error("cannot slice the file", e))?;
    let buffer = reader.read_as_array_buffer(&piece).map_err(|e| js_error("cannot read the file", e))?;
    Ok(Uint8Array::new(&buffer))
}

/// Gives `each` the blob's slices in order (still in JavaScript memory: each caller copies
/// them where it needs them), with the share read so far.
fn for_each_slice(blob: &Blob, mut each: impl FnMut(Uint8Array, f64) -> Result<(), String>) -> Result<(), String> {
    let reader = file_reader()?;
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
        append(&mut bytes, &piece);
        progress(done);
        Ok(())
    })?;
    Ok(bytes)
}

/// A blob as core's folded streamer reads it: a slice at a time, twice, reporting
/// the share read (to 0.3 over the first pass, to 1 over the second).
struct BlobInput<'a> {
    blob: &'a Blob,
    progress: &'a mut dyn FnMut(f64),
}

impl Rereadable for BlobInput<'_> {
    type Error = String;

    fn head(&mut self, len: usize) -> Result<Vec<u8>, String> {
        head(self.blob, len as f64)
    }

    fn each_piece(&mut self, pass: usize, feed: &mut Feed<String>) -> Result<(), String> {
        let mut scratch = Vec::new();
        let progress = &mut self.progress;
        for_each_slice(self.blob, |piece, done| {
            progress(if pass == 0 { 0.3 * done } else { 0.3 + 0.7 * done });
            scratch.resize(piece.length() as usize, 0);
            piece.copy_to(&mut scratch);
            feed(&scratch)
        })
    }
}

/// Whether the blob is folded stacks (uncompressed), the format read without holding it.
pub fn is_folded(blob: &Blob) -> Result<bool, String> {
    folded_input::is_folded(&mut BlobInput { blob, progress: &mut |_| {} })
}

/// Folded stacks read twice, a slice at a time (core's [`folded_input`]).
pub fn parse_folded(blob: &Blob, progress: &mut dyn FnMut(f64)) -> Result<Profile, String> {
    folded_input::parse_folded(&mut BlobInput { blob, progress }, |e| e.to_string())
}

/// Whether the blob starts as gzip does.
pub fn is_gzip(blob: &Blob) -> Result<bool, String> {
    Ok(stacklens_core::import::is_gzip(&head(blob, 2.0)?))
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

    /// `worker.js`'s: the blob inflated by `inflate-worker.js`, on a thread of its own,
    /// its pieces pushed into the stream as they come.
    #[wasm_bindgen(js_name = stacklensInflate, catch)]
    fn inflate_in_another_worker(blob: &Blob, limit: f64) -> Result<web_sys::ReadableStream, wasm_bindgen::JsValue>;
}

/// Whether this browser inflates gzip itself (`DecompressionStream`).
pub fn browser_inflates() -> bool {
    js_sys::Reflect::has(&js_sys::global(), &"DecompressionStream".into()).unwrap_or(false)
}

/// The blob's gzip stream inflated by the browser's `DecompressionStream` (its native
/// zlib: several times faster than inflating in WebAssembly), on another thread where
/// `worker.js` can start one (then this one decodes what came while the rest
/// inflates: `arrived` gets all of the bytes so far after each piece). The bytes go into
/// one buffer grown as core grows its own, refusing more than `limit` bytes as core
/// does. `Ok(None)` when the browser could not inflate it (corrupt or truncated data,
/// say): core then inflates the bytes itself and says what is wrong with them.
pub async fn inflate_in_browser(
    blob: &Blob,
    limit: u64,
    progress: &mut dyn FnMut(f64),
    arrived: &mut dyn FnMut(&[u8]),
) -> Result<Option<Vec<u8>>, String> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    use web_sys::{ReadableStreamDefaultReader, ReadableStreamReadResult, ReadableWritablePair};

    // Room for what the gzip trailer says, reserved up front as core does, so the usual
    // file is one allocation (WebAssembly memory never shrinks).
    let size = blob.size();
    let trailer = read_range(&file_reader()?, blob, (size - 4.0).max(0.0), size)?.to_vec();
    let text = |e: stacklens_core::Error| e.to_string();
    let (mut out, hint) = stacklens_core::import::inflate_buffer(&trailer, limit).map_err(text)?;
    let has_another_worker = js_sys::Reflect::has(&js_sys::global(), &"stacklensInflate".into()).unwrap_or(false);
    let stream = match has_another_worker.then(|| inflate_in_another_worker(blob, limit as f64)) {
        Some(Ok(stream)) => stream,
        _ => {
            let Ok(inflater) = DecompressionStream::new("gzip") else { return Ok(None) };
            blob.stream().pipe_through(&ReadableWritablePair::new(&inflater.readable(), &inflater.writable()))
        }
    };
    let chunks: ReadableStreamDefaultReader = stream.get_reader().unchecked_into();
    loop {
        let Ok(read) = JsFuture::from(chunks.read()).await else { return Ok(None) };
        let read: ReadableStreamReadResult = read.unchecked_into();
        if read.get_done().unwrap_or(true) {
            return Ok(Some(out));
        }
        let chunk: Uint8Array = read.get_value().unchecked_into();
        let len = chunk.length() as usize;
        let refused = if (out.len() + len) as u64 > limit {
            Some(stacklens_core::Error::TooLarge { limit })
        } else {
            stacklens_core::import::grow_inflated(&mut out, len, limit).err()
        };
        if let Some(e) = refused {
            // Stops the inflating (on another thread, it would go on to the end).
            let _ = chunks.cancel();
            return Err(text(e));
        }
        append(&mut out, &chunk);
        arrived(&out);
        if hint > 0 {
            progress((out.len() as f64 / hint as f64).min(1.0));
        }
    }
}

/// A blob read in slices on demand, as core's symbol reader asks for pieces of a binary
/// or debug file: a 2 GB file is never held whole, only the sections read.
pub struct BlobSlices {
    blob: Blob,
    reader: FileReaderSync,
    at: u64,
    /// The last [`WINDOWS`] aligned windows of [`WINDOW`] bytes that small reads came
    /// from, the latest last: a symbol table's names are read one small read each, in
    /// no set order, and a trip to the browser for each took minutes on a 100 MB binary
    /// (200,000 names).
    windows: Vec<(u64, Vec<u8>)>,
}

/// How much a small read brings in around it, and how many such windows are kept.
const WINDOW: u64 = 1 << 18;
const WINDOWS: usize = 64;

impl BlobSlices {
    pub fn new(blob: &Blob) -> Result<Self, String> {
        Ok(BlobSlices { blob: blob.clone(), reader: file_reader()?, at: 0, windows: Vec::new() })
    }

    /// The window starting at `start` (a multiple of [`WINDOW`]), read if not held.
    fn window(&mut self, start: u64) -> Result<&[u8], ()> {
        match self.windows.iter().position(|(at, _)| *at == start) {
            Some(i) => {
                let used = self.windows.remove(i);
                self.windows.push(used);
            }
            None => {
                let end = (start + WINDOW).min(self.blob.size() as u64);
                let bytes = read_range(&self.reader, &self.blob, start as f64, end as f64).map_err(|_| ())?.to_vec();
                if self.windows.len() == WINDOWS {
                    self.windows.remove(0);
                }
                self.windows.push((start, bytes));
            }
        }
        Ok(&self.windows.last().ok_or(())?.1)
    }
}

impl ReadCacheOps for BlobSlices {
    fn len(&mut self) -> Result<u64, ()> {
        Ok(self.blob.size() as u64)
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.at = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        let size = self.blob.size() as u64;
        let end = (self.at + buf.len() as u64).min(size);
        if end <= self.at {
            return Ok(0);
        }
        // A small read inside one window comes from it.
        let start = self.at - self.at % WINDOW;
        if end <= start + WINDOW {
            let (from, n) = ((self.at - start) as usize, (end - self.at) as usize);
            let window = self.window(start)?;
            buf[..n].copy_from_slice(window.get(from..from + n).ok_or(())?);
            self.at += n as u64;
            return Ok(n);
        }
        let piece = read_range(&self.reader, &self.blob, self.at as f64, end as f64).map_err(|_| ())?;
        let n = piece.length() as usize;
        piece.copy_to(&mut buf[..n]);
        self.at += n as u64;
        Ok(n)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), ()> {
        match self.read(buf)? {
            n if n == buf.len() => Ok(()),
            _ => Err(()),
        }
    }
}
