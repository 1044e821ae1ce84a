//! Encrypted share links: the page seals the profile with a fresh AES-256-GCM key
//! (the browser's WebCrypto), uploads only the sealed bytes (`POST /api/v1/blobs`,
//! which the server stores as sent and never parses), and puts the key in the link's
//! fragment, `#/e/{blob}/{key}`: browsers never send a fragment, so the server never
//! holds the key. Opening the link fetches the blob and unseals it in the page.
//!
//! Sealed bytes: `SLE1`, a 12-byte random nonce, then AES-GCM's ciphertext and 16-byte
//! tag of: the file name's length (u32, little-endian), the name, the profile's bytes.
//! The name goes inside, as it can say as much as the profile (`payments-prod.pb.gz`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use js_sys::{Array, Object, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AesGcmParams, CryptoKey, SubtleCrypto};

use crate::{js_bytes, js_error};

/// What the sealed bytes start with: format 1.
const MAGIC: &[u8; 4] = b"SLE1";
const NONCE: usize = 12;
const TAG: usize = 16;
const KEY_BYTES: usize = 32;

/// The largest profile sealed in the page: sealing holds it twice (the bytes and
/// WebCrypto's output), on top of what the tab already holds.
pub const MAX_BYTES: f64 = 512.0 * 1024.0 * 1024.0;

/// The source string an encrypted link becomes in the address (`url=`), so that a
/// reload opens it again; never fetched as a URL.
const SOURCE_PREFIX: &str = "encrypted:";

/// A blob and the key that opens it.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub blob: String,
    pub key: String,
}

impl Link {
    /// The page's link (`{origin}/#/e/{blob}/{key}`, `?tenant=` when not the default).
    pub fn url(&self, origin: &str, tenant: Option<&str>) -> String {
        let tenant = tenant.map_or_else(String::new, |t| format!("?tenant={}", super::url_state::encode(t)));
        format!("{origin}/#/e/{}/{}{tenant}", self.blob, self.key)
    }

    /// The link as a source of the address.
    pub fn source(&self) -> String {
        format!("{SOURCE_PREFIX}{}/{}", self.blob, self.key)
    }

    /// A source that is an encrypted link.
    pub fn from_source(source: &str) -> Option<Link> {
        let (blob, key) = source.strip_prefix(SOURCE_PREFIX)?.split_once('/')?;
        Some(Link { blob: blob.to_owned(), key: key.to_owned() })
    }
}

/// The browser's WebCrypto, which exists only on secure pages (https, localhost).
fn subtle() -> Result<(web_sys::Crypto, SubtleCrypto), String> {
    let crypto = web_sys::window().ok_or("no window")?.crypto().map_err(|e| js_error("no WebCrypto", e))?;
    let subtle = js_sys::Reflect::get(&crypto, &"subtle".into()).map_err(|e| js_error("no WebCrypto", e))?;
    if subtle.is_undefined() {
        return Err("encrypted links need the page over https (or on localhost): this browser offers no WebCrypto \
                    on a plain http page"
            .to_owned());
    }
    Ok((crypto, subtle.unchecked_into()))
}

fn random(crypto: &web_sys::Crypto, n: usize) -> Result<Vec<u8>, String> {
    let mut bytes = vec![0u8; n];
    crypto.get_random_values_with_u8_array(&mut bytes).map_err(|e| js_error("no random numbers", e))?;
    Ok(bytes)
}

async fn import(subtle: &SubtleCrypto, raw: &[u8]) -> Result<CryptoKey, String> {
    let algorithm = Object::new();
    js_sys::Reflect::set(&algorithm, &"name".into(), &"AES-GCM".into()).map_err(|e| js_error("key", e))?;
    let usages = Array::of2(&"encrypt".into(), &"decrypt".into());
    let key = subtle
        .import_key_with_object("raw", &Uint8Array::from(raw), &algorithm, false, &usages)
        .map_err(|e| js_error("cannot import the key", e))?;
    let key = JsFuture::from(key).await.map_err(|e| js_error("cannot import the key", e))?;
    Ok(key.unchecked_into())
}

/// AES-GCM with `nonce`, copied into the parameters (a view of WebAssembly memory
/// would change under them once the memory is reused).
fn gcm(nonce: &[u8]) -> AesGcmParams {
    AesGcmParams::new_with_u8_array("AES-GCM", &Uint8Array::from(nonce))
}

/// Seals `profile` (named `name`) with a fresh key: the bytes to upload and the key, as
/// it goes in the link.
pub async fn seal(name: &str, profile: &[u8]) -> Result<(Vec<u8>, String), String> {
    let (crypto, subtle) = subtle()?;
    let (raw_key, nonce) = (random(&crypto, KEY_BYTES)?, random(&crypto, NONCE)?);
    let key = import(&subtle, &raw_key).await?;
    let name_len = u32::try_from(name.len()).map_err(|_| "the file name is too long".to_owned())?;
    let mut plain = Vec::with_capacity(4 + name.len() + profile.len());
    plain.extend_from_slice(&name_len.to_le_bytes());
    plain.extend_from_slice(name.as_bytes());
    plain.extend_from_slice(profile);
    let params = gcm(&nonce);
    let sealed = js_bytes(subtle.encrypt_with_object_and_u8_array(&params, &key, &plain))
        .await
        .map_err(|e| js_error("cannot encrypt", e))?;
    let mut out = Vec::with_capacity(MAGIC.len() + NONCE + sealed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok((out, URL_SAFE_NO_PAD.encode(&raw_key)))
}

/// Unseals bytes [`seal`] made with the link's `key`: the file name and the profile.
pub async fn open(sealed: &[u8], key: &str) -> Result<(String, Vec<u8>), String> {
    let raw_key = URL_SAFE_NO_PAD
        .decode(key)
        .ok()
        .filter(|k| k.len() == KEY_BYTES)
        .ok_or("the link's key is not a key (the link was cut short or altered): ask for the link again")?;
    let body = sealed
        .strip_prefix(MAGIC.as_slice())
        .filter(|b| b.len() >= NONCE + TAG)
        .ok_or("what the server holds for this link is not an encrypted stacklens profile")?;
    let (subtle, (nonce, ciphertext)) = (subtle()?.1, body.split_at(NONCE));
    let key = import(&subtle, &raw_key).await?;
    let params = gcm(nonce);
    let plain = js_bytes(subtle.decrypt_with_object_and_u8_array(&params, &key, ciphertext)).await.map_err(|_| {
        // GCM's tag: a wrong key and altered bytes fail alike, and say nothing more.
        "the link's key does not open this profile (the link was altered, or the stored bytes were): \
         ask for the link again"
            .to_owned()
    })?;
    let name_len = plain.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let name_end =
        name_len.map(|n| 4 + n).filter(|end| *end <= plain.len()).ok_or("the opened profile is cut short")?;
    let name = String::from_utf8_lossy(&plain[4..name_end]).into_owned();
    Ok((name, plain[name_end..].to_vec()))
}
