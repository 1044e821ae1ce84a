//! Work split over the machine's cores where there are threads (natively: the CLI and
//! the server); in the browser's wasm32 build the same call runs on the calling thread.

/// `work(first, chunk)` over `out` cut into [`parts`] consecutive chunks, `first` being
/// the index of the chunk's first item in `out`; each chunk's result in order.
pub(crate) fn fill_chunks<T: Send, R: Send>(
    out: &mut [T],
    min_chunk: usize,
    work: impl Fn(usize, &mut [T]) -> R + Sync,
) -> Vec<R> {
    let parts = parts(out.len(), min_chunk);
    if parts == 1 {
        return vec![work(0, out)];
    }
    let chunk = out.len().div_ceil(parts);
    let work = &work;
    std::thread::scope(|scope| {
        let running: Vec<_> =
            out.chunks_mut(chunk).enumerate().map(|(i, c)| scope.spawn(move || work(i * chunk, c))).collect();
        running.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// How many chunks [`fill_chunks`] cuts `len` items into: 1 where there are no threads,
/// so a caller can keep its one-thread path (progress reports, say) there.
pub(crate) fn parts(len: usize, min_chunk: usize) -> usize {
    cores().min(len / min_chunk.max(1)).max(1)
}

#[cfg(not(target_arch = "wasm32"))]
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(target_arch = "wasm32")]
fn cores() -> usize {
    1
}
