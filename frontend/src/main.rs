use wasm_bindgen::prelude::wasm_bindgen;

fn main() {
    console_error_panic_hook::set_once();
    // The same module also runs in the analysis worker, where there is no page to mount.
    if web_sys::window().is_some() {
        leptos::mount::mount_to_body(stacklens_frontend::app::App);
    }
}

/// Entry point of the analysis worker (called by worker.js).
#[wasm_bindgen]
pub fn worker_entry() {
    stacklens_frontend::worker::run();
}
