//! Work split over the machine's cores where there are threads (natively: the CLI and
//! the server); in the browser's wasm32 build the same call runs on the calling thread.

/// `work` over `items` cut into at most `parts` consecutive chunks (one per core, and
/// none smaller than `min_chunk`), each chunk's result in order.
pub(crate) fn map_chunks<T: Sync, R: Send>(
    items: &[T],
    parts: usize,
    min_chunk: usize,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let parts = parts.min(cores()).min(items.len() / min_chunk.max(1)).max(1);
    if parts == 1 {
        return vec![work(items)];
    }
    let chunk = items.len().div_ceil(parts);
    std::thread::scope(|scope| {
        let running: Vec<_> = items.chunks(chunk).map(|c| scope.spawn(|| work(c))).collect();
        // A panic in a chunk is the caller's panic, as it would be on one thread.
        running.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

#[cfg(not(target_arch = "wasm32"))]
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(target_arch = "wasm32")]
fn cores() -> usize {
    1
}
