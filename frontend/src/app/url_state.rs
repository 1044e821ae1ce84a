//! View state in the URL hash (`#view=flame&sample=cpu&focus=…`), so a reload or a
//! copied link restores what the user was looking at, and `url=` sources to fetch.

use stacklens_core::analysis::Query;
use wasm_bindgen::{JsCast, JsValue};

/// The hash's fields; values are percent-encoded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HashState {
    pub view: String,
    /// The sample type (by name), filters, transforms and time range, in core's one
    /// grammar of a query ([`Query::set`], [`Query::pairs`]).
    pub query: Query,
    pub search: String,
    /// Root-first frame names of the zoomed frame.
    pub zoom: Vec<String>,
    /// Names of the loaded profiles (local files cannot be reloaded from a link).
    pub profiles: Vec<String>,
    /// Profiles to fetch.
    pub urls: Vec<String>,
}

/// Separates zoom path entries; function names never contain it.
const PATH_SEPARATOR: char = '\u{1f}';

fn decode(s: &str) -> String {
    js_sys::decode_uri_component(&s.replace('+', " ")).map(String::from).unwrap_or_else(|_| s.to_owned())
}

/// `s` as one URL component.
pub(crate) fn encode(s: &str) -> String {
    String::from(js_sys::encode_uri_component(s))
}

impl HashState {
    pub fn parse(fragment: &str) -> Self {
        let mut st = HashState::default();
        for pair in fragment.trim_start_matches(['#', '?']).split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v);
            // A link edited by hand keeps what it can: a bad list or range is ignored.
            if st.query.set(k, &v).unwrap_or(true) {
                continue;
            }
            match k {
                "view" => st.view = v,
                "search" => st.search = v,
                "zoom" => st.zoom = v.split(PATH_SEPARATOR).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
                "profile" => st.profiles.push(v),
                "url" => st.urls.push(v),
                _ => {}
            }
        }
        st
    }

    pub fn to_fragment(&self) -> String {
        let zoom = self.zoom.join(&PATH_SEPARATOR.to_string());
        let pairs = std::iter::once(("view", self.view.clone()))
            .chain(self.query.pairs())
            .chain([("search", self.search.clone()), ("zoom", zoom)]);
        let mut parts: Vec<String> =
            pairs.filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}={}", encode(&v))).collect();
        parts.extend(self.urls.iter().map(|u| format!("url={}", encode(u))));
        parts.extend(self.profiles.iter().map(|p| format!("profile={}", encode(p))));
        format!("#{}", parts.join("&"))
    }
}

/// The state from the page's current address: the hash, plus `?url=` in the query.
pub fn current() -> HashState {
    let Some(location) = web_sys::window().map(|w| w.location()) else { return HashState::default() };
    let mut st = HashState::parse(&location.hash().unwrap_or_default());
    let query = HashState::parse(&location.search().unwrap_or_default());
    // The hash repeats the query's sources after the first visit: keep one of each.
    for url in query.urls {
        if !st.urls.contains(&url) {
            st.urls.push(url);
        }
    }
    st
}

/// Replaces the hash without adding a history entry or scrolling; an unchanged hash is
/// left alone.
pub fn store(state: &HashState) {
    let Some(window) = web_sys::window() else { return };
    let fragment = state.to_fragment();
    if window.location().hash().is_ok_and(|now| now == fragment) {
        return;
    }
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&fragment));
    }
}

/// Fetches a profile's bytes (CORS permitting); the error says why it failed.
pub async fn fetch(url: &str) -> Result<web_sys::Blob, String> {
    let window = web_sys::window().ok_or("no window")?;
    let failed = |e: JsValue| format!("{url}: could not fetch ({})", e.as_string().unwrap_or_else(|| format!("{e:?}")));
    let response: web_sys::Response = wasm_bindgen_futures::JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(failed)?
        .dyn_into()
        .map_err(failed)?;
    if !response.ok() {
        return Err(format!("{url}: the server answered {} {}", response.status(), response.status_text()));
    }
    let blob = wasm_bindgen_futures::JsFuture::from(response.blob().map_err(failed)?).await.map_err(failed)?;
    blob.dyn_into().map_err(failed)
}
