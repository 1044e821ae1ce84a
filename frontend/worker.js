// Starts stacklens's own WASM module in this worker. The page sends, once, the URL of its
// wasm-bindgen glue and its compiled WebAssembly.Module; worker_entry() then takes over
// onmessage and answers analysis requests (see frontend/src/worker.rs).
self.onmessage = async (event) => {
  const { glue, module } = event.data;
  const bundle = await import(glue);
  const exports = await bundle.default({ module_or_path: module });
  // Read by scripts/bench-browser.mjs: the worker's WebAssembly memory.
  self.stacklensMemory = exports.memory;
  bundle.worker_entry();
};

// A gzip blob inflated on a thread of its own (inflate-worker.js, started here before the
// first file), as a stream of its pieces (see frontend/src/worker/reading.rs); each piece
// this thread takes is acknowledged, for the inflater's limit on what is in flight. Each
// call has a number, so pieces of a stream given up on are never taken for the next one's.
if (self.Worker && self.DecompressionStream) {
  const inflater = new Worker(new URL('inflate-worker.js', self.location));
  let calls = 0;
  // An inflater that could not start (its script not served, say) is not used again: the
  // analysis worker then inflates the file itself.
  let broken = false;
  inflater.onerror = () => { broken = true; };
  self.stacklensInflate = (blob, limit) => {
    if (broken) throw new Error('the inflate worker did not start');
    const call = ++calls;
    return new ReadableStream({
      start(stream) {
        inflater.onerror = () => {
          broken = true;
          stream.error(new Error('the inflate worker failed'));
        };
        inflater.onmessage = ({ data }) => {
          if (data.call !== call) return;
          if (data.piece) {
            stream.enqueue(data.piece);
            inflater.postMessage({ call, taken: data.piece.length });
          } else if (data.done) {
            stream.close();
          } else {
            stream.error(new Error(data.failed));
          }
        };
        inflater.postMessage({ call, blob, limit });
      },
      cancel() {
        inflater.postMessage({ call: ++calls, stop: true });
      },
    });
  };
}
