//! Work split over the machine's cores where there are threads (natively: the CLI and
//! the server); in the browser's wasm32 build the same call runs on the calling thread.

/// `items` cut into [`parts`] consecutive chunks, for [`each`].
pub(crate) fn chunks<T>(items: &[T], min_chunk: usize) -> Vec<&[T]> {
    ranges(items.len(), min_chunk).into_iter().map(|r| &items[r]).collect()
}

/// `0..len` cut into [`parts`] consecutive ranges (one, empty, when `len` is 0).
pub(crate) fn ranges(len: usize, min_chunk: usize) -> Vec<std::ops::Range<usize>> {
    let chunk = len.div_ceil(parts(len, min_chunk)).max(1);
    (0..len.div_ceil(chunk).max(1)).map(|i| i * chunk..((i + 1) * chunk).min(len)).collect()
}

/// `work` on each part, a thread a part (on the calling thread alone when there is one
/// part); the results in order.
pub(crate) fn each<P: Send, R: Send>(parts: Vec<P>, work: impl Fn(P) -> R + Sync) -> Vec<R> {
    if parts.len() <= 1 {
        return parts.into_iter().map(work).collect();
    }
    let work = &work;
    std::thread::scope(|scope| {
        let running: Vec<_> = parts.into_iter().map(|part| scope.spawn(move || work(part))).collect();
        running.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// How many chunks [`chunks`] cuts `len` items into: 1 where there are no threads,
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
