//! The stacklens page. Everything is analysed in the page by stacklens-core compiled to
//! WASM, in a worker: `app` holds the page's state, sources and panels, `views` draws
//! each view from core's reports, and `worker` runs the analysis.

pub mod app;
pub mod views;
pub mod worker;

use wasm_bindgen::JsValue;

/// `context: ` and what a JavaScript exception says: its `message` when it has one
/// (`Error`, `DOMException`), else the value itself.
pub(crate) fn js_error(context: &str, e: JsValue) -> String {
    let reason = js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string());
    format!("{context}: {}", reason.or_else(|| e.as_string()).unwrap_or_else(|| format!("{e:?}")))
}

/// The bytes of the `ArrayBuffer` a browser API promises.
pub(crate) async fn js_bytes(promise: Result<js_sys::Promise, JsValue>) -> Result<Vec<u8>, JsValue> {
    let buffer = wasm_bindgen_futures::JsFuture::from(promise?).await?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}
