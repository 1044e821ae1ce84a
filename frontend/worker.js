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
