//! Copying text that is known only after an await (a share link, after its upload).
//!
//! WebKit (Safari) lets a page write the clipboard only while a click still counts as
//! the user's: a copy made once the upload has answered is refused. So the copy starts
//! in the click, as a `ClipboardItem` whose text is a promise, resolved when the link is
//! known. Where `ClipboardItem` is missing, the text is written when known, as before.

use leptos::task::spawn_local;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// A copy started in a click; [`PendingCopy::finish`] gives it its text, or drops it.
pub struct PendingCopy(Pending);

enum Pending {
    /// Written as a `ClipboardItem` whose text waits on this promise's resolve and reject.
    Item(js_sys::Function, js_sys::Function),
    /// To be written when the text is known, then told to this.
    Later(Box<dyn FnOnce(Copied)>),
}

/// Whether the text reached the clipboard: the browser may refuse.
pub type Copied = Result<(), String>;

impl PendingCopy {
    /// Starts a copy now, in the user's click; `done` is told how it ended (not when it
    /// is dropped).
    pub fn start(done: impl FnOnce(Copied) + 'static) -> PendingCopy {
        let later = |done| PendingCopy(Pending::Later(Box::new(done)));
        let Some(window) = web_sys::window() else { return later(done) };
        if !js_sys::Reflect::has(&window, &JsValue::from_str("ClipboardItem")).unwrap_or(false) {
            return later(done);
        }
        let mut settle = None;
        let text = js_sys::Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
        let record = js_sys::Object::new();
        let item = js_sys::Reflect::set(&record, &JsValue::from_str("text/plain"), &text)
            .ok()
            .and_then(|_| web_sys::ClipboardItem::new_with_record_from_str_to_blob_promise(&record).ok());
        let (Some(item), Some((resolve, reject))) = (item, settle) else { return later(done) };
        let written = window.navigator().clipboard().write(&js_sys::Array::of1(&item));
        spawn_local(async move {
            match JsFuture::from(written).await {
                Ok(_) => done(Ok(())),
                Err(e) if e.as_string().as_deref() == Some(DROPPED) => {}
                Err(e) => done(Err(reason(&e))),
            }
        });
        PendingCopy(Pending::Item(resolve, reject))
    }

    /// Gives the copy its text; `None` drops it quietly.
    pub fn finish(self, text: Option<&str>) {
        match (self.0, text) {
            (Pending::Item(resolve, _), Some(text)) => {
                let _ = resolve.call1(&JsValue::NULL, &text_blob(text));
            }
            (Pending::Item(_, reject), None) => {
                let _ = reject.call1(&JsValue::NULL, &JsValue::from_str(DROPPED));
            }
            (Pending::Later(done), Some(text)) => {
                let Some(window) = web_sys::window() else { return };
                let written = window.navigator().clipboard().write_text(text);
                spawn_local(async move { done(JsFuture::from(written).await.map(|_| ()).map_err(|e| reason(&e))) });
            }
            (Pending::Later(_), None) => {}
        }
    }
}

/// The reason a dropped copy's promise is rejected with (some engines pass it through).
const DROPPED: &str = "stacklens: nothing to copy";

fn text_blob(text: &str) -> JsValue {
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("text/plain");
    web_sys::Blob::new_with_str_sequence_and_options(&js_sys::Array::of1(&JsValue::from_str(text)), &options)
        .map_or_else(|_| JsValue::from_str(text), JsValue::from)
}

/// An error's message as the browser gave it.
fn reason(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "refused".to_owned())
}
