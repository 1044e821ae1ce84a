// Inflates gzip files for the analysis worker (worker.js's stacklensInflate) on a thread
// of its own: the browser's DecompressionStream inflates on the thread that reads it, and
// here the analysis worker decodes each piece while the next inflates. Pieces are pushed
// as they come (a ReadableStream handed to the other worker would be pulled a piece at a
// time, inflating only while that worker waits). A new call, or a stop, ends the one
// before; past `limit` bytes it stops after the piece that crossed it, which the analysis
// worker refuses.
let current = 0;
self.onmessage = async ({ data: { call, blob, limit, stop } }) => {
  current = call;
  if (stop) return;
  try {
    const pieces = blob.stream().pipeThrough(new DecompressionStream('gzip')).getReader();
    let inflated = 0;
    for (;;) {
      const { done, value } = await pieces.read();
      if (call !== current) {
        pieces.cancel();
        return;
      }
      if (done) break;
      inflated += value.length;
      postMessage({ call, piece: value }, [value.buffer]);
      if (inflated > limit) {
        pieces.cancel();
        break;
      }
    }
    postMessage({ call, done: true });
  } catch (e) {
    postMessage({ call, failed: String(e) });
  }
};
