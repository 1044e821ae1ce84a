// Inflates gzip files for the analysis worker (worker.js's stacklensInflate) on a thread
// of its own: the browser's DecompressionStream inflates on the thread that reads it, and
// here the analysis worker decodes each piece while the next inflates. Pieces are pushed
// as they come (a ReadableStream handed to the other worker would be pulled a piece at a
// time, inflating only while that worker waits), at most AHEAD bytes ahead of what the
// analysis worker took, so a file it decodes slowly is not queued whole beside its
// buffer. A new call, or a stop, ends the one before; past `limit` bytes it stops after
// the piece that crossed it, which the analysis worker refuses.
const AHEAD = 16 << 20;
let current = 0;
let ahead = 0;
let resume = null;

function wake() {
  resume?.();
  resume = null;
}

self.onmessage = async ({ data: { call, blob, limit, stop, taken } }) => {
  if (taken !== undefined) {
    if (call === current) ahead -= taken;
    if (ahead <= AHEAD) wake();
    return;
  }
  current = call;
  ahead = 0;
  wake(); // a call waiting for room sees it is over
  if (stop) return;
  try {
    const pieces = blob.stream().pipeThrough(new DecompressionStream('gzip')).getReader();
    let inflated = 0;
    for (;;) {
      if (ahead > AHEAD) await new Promise((r) => { resume = r; });
      const { done, value } = call === current ? await pieces.read() : {};
      if (call !== current) {
        pieces.cancel();
        return;
      }
      if (done) break;
      inflated += value.length;
      ahead += value.length;
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
