//! Keeps locally opened files in the browser's Cache Storage, per tab, so
//! a reload restores them like the rest of the view (the hash names them). Nothing
//! leaves the machine; a tab's files are forgotten when their tab is closed and 12
//! hours have passed, or at once when the user removes them.

use js_sys::Array;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Cache, Request, Response};

const CACHE: &str = "stacklens-local-profiles";
const PREFIX: &str = "/__stacklens/local/";
const STALE_MS: f64 = 12.0 * 3600.0 * 1000.0;

/// This tab's id: sessionStorage survives a reload but not the tab.
fn tab() -> Option<String> {
    let storage = web_sys::window()?.session_storage().ok()??;
    if let Ok(Some(id)) = storage.get_item("stacklens-tab") {
        return Some(id);
    }
    let id = format!("{:016x}", (js_sys::Math::random() * 2f64.powi(53)) as u64);
    storage.set_item("stacklens-tab", &id).ok()?;
    Some(id)
}

/// Cache Storage exists only in secure contexts (https, localhost): elsewhere nothing is kept.
async fn open() -> Option<Cache> {
    let caches = web_sys::window()?.caches().ok()?;
    JsFuture::from(caches.open(CACHE)).await.ok()?.dyn_into().ok()
}

/// (tab, stored at, name) of a key this module wrote.
fn parse_key(url: &str) -> Option<(String, f64, String)> {
    let path = &url[url.find(PREFIX)? + PREFIX.len()..];
    let mut parts = path.splitn(3, '/');
    let (tab, at, name) = (parts.next()?, parts.next()?, parts.next()?);
    let name = js_sys::decode_uri_component(name).ok()?.into();
    Some((tab.to_owned(), at.parse().ok()?, name))
}

async fn keys(cache: &Cache) -> Vec<(Request, (String, f64, String))> {
    let Ok(list) = JsFuture::from(cache.keys()).await else { return Vec::new() };
    Array::from(&list)
        .iter()
        .filter_map(|r| r.dyn_into::<Request>().ok())
        .filter_map(|r| parse_key(&r.url()).map(|k| (r, k)))
        .collect()
}

/// Remembers a file opened in this tab (the browser copies it; the page does not read it).
pub fn keep(name: String, source: Blob) {
    wasm_bindgen_futures::spawn_local(async move {
        let (Some(tab), Some(cache)) = (tab(), open().await) else { return };
        let key =
            format!("{PREFIX}{tab}/{}/{}", js_sys::Date::now(), String::from(js_sys::encode_uri_component(&name)));
        if let Ok(response) = Response::new_with_opt_blob(Some(&source)) {
            let _ = JsFuture::from(cache.put_with_str(&key, &response)).await;
        }
    });
}

/// Forgets a file the user removed.
pub fn forget(name: String) {
    wasm_bindgen_futures::spawn_local(async move {
        let (Some(tab), Some(cache)) = (tab(), open().await) else { return };
        for (request, (t, _, n)) in keys(&cache).await {
            if t == tab && n == name {
                let _ = JsFuture::from(cache.delete_with_request(&request)).await;
            }
        }
    });
}

/// The bytes this tab kept for `names` (in that order; missing ones are skipped), after
/// dropping other tabs' stale files.
pub async fn restore(names: &[String]) -> Vec<(String, Blob)> {
    let (Some(tab), Some(cache)) = (tab(), open().await) else { return Vec::new() };
    let now = js_sys::Date::now();
    let mut mine = Vec::new();
    for (request, (t, at, name)) in keys(&cache).await {
        if t == tab {
            mine.push((name, request));
        } else if now - at > STALE_MS {
            let _ = JsFuture::from(cache.delete_with_request(&request)).await;
        }
    }
    let mut restored = Vec::new();
    for name in names {
        let Some((_, request)) = mine.iter().rev().find(|(n, _)| n == name) else { continue };
        let Ok(found) = JsFuture::from(cache.match_with_request(request)).await else { continue };
        let Ok(response) = found.dyn_into::<Response>() else { continue };
        let Ok(blob) = response.blob() else { continue };
        if let Ok(blob) = JsFuture::from(blob).await.and_then(|b| b.dyn_into::<Blob>()) {
            restored.push((name.clone(), blob));
        }
    }
    restored
}
