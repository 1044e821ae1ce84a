//! The address of every server API call the page makes, one function per route, so
//! the prefix and the encoding of path segments and query values live in one place.

use std::collections::BTreeMap;

use super::url_state::encode;

const API: &str = "/api/v1";

/// One series over `[from, to)` (ms since the epoch) with the labels it must have.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeRef {
    pub service: String,
    pub profile_type: String,
    pub labels: BTreeMap<String, String>,
    pub from: u64,
    pub to: u64,
}

/// `k=v,k2=v2`, as the API's `labels` parameter takes them.
pub fn label_text(labels: &BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The query string naming a range, as every range route takes it.
fn range_query(range: &RangeRef) -> String {
    format!(
        "service={}&profileType={}&from={}&to={}&labels={}",
        encode(&range.service),
        encode(&range.profile_type),
        range.from,
        range.to,
        encode(&label_text(&range.labels))
    )
}

/// `&expiresIn=…` when the link is to expire.
fn expiry_param(expires_in: Option<&str>) -> String {
    expires_in.map_or_else(String::new, |e| format!("&expiresIn={}", encode(e)))
}

/// A session's raw bytes; the tenant goes in the query so it is a plain link.
pub fn profile_raw(session: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!("{API}/profiles/{}/raw?tenant={}", encode(session), encode(t)),
        None => format!("{API}/profiles/{}/raw", encode(session)),
    }
}

/// Uploads a profile named `name`.
pub fn profile_upload(name: &str, expires_in: Option<&str>) -> String {
    format!("{API}/profiles?name={}{}", encode(name), expiry_param(expires_in))
}

/// One session.
pub fn profile(session: &str) -> String {
    format!("{API}/profiles/{}", encode(session))
}

/// Uploads an encrypted blob.
pub fn blob_upload(expires_in: Option<&str>) -> String {
    format!("{API}/blobs?{}", expiry_param(expires_in).trim_start_matches('&'))
}

/// One blob.
pub fn blob(id: &str) -> String {
    format!("{API}/blobs/{}", encode(id))
}

/// Baselines, of one profile type and only the latest ones when asked; POSTed to, a new one.
pub fn baselines(profile_type: Option<&str>, latest: Option<bool>) -> String {
    let mut url = format!("{API}/profiling/baselines");
    if let Some(latest) = latest {
        url.push_str(&format!("?latest={latest}"));
        if let Some(t) = profile_type {
            url.push_str(&format!("&profileType={}", encode(t)));
        }
    }
    url
}

/// One baseline.
pub fn baseline(id: &str) -> String {
    format!("{API}/profiling/baselines/{}", encode(id))
}

/// The diff of two sessions or ranges.
pub fn diff() -> String {
    format!("{API}/profiling/diff")
}

/// The services and profile types the time index holds.
pub fn services() -> String {
    format!("{API}/profiling/services")
}

/// A range's totals per step of `step_ms`.
pub fn series(range: &RangeRef, step_ms: u64) -> String {
    format!("{API}/profiling/series?{}&step={}", range_query(range), step_ms / 1000)
}

/// A range's label keys.
pub fn labels(range: &RangeRef) -> String {
    format!("{API}/profiling/labels?{}", range_query(range))
}

/// The values of label `key` in a range.
pub fn label_values(key: &str, range: &RangeRef) -> String {
    format!("{API}/profiling/labels/{}/values?{}", encode(key), range_query(range))
}

/// A range's profiles merged into one gzipped pprof.
pub fn merged_pprof(range: &RangeRef) -> String {
    format!("{API}/profiling/merge?{}&format=pprof", range_query(range))
}

/// A function's trend over a range, per step of `step_ms`.
pub fn function_history(function: &str, range: &RangeRef, step_ms: u64) -> String {
    format!("{API}/profiling/functions/{}/history?{}&step={}", encode(function), range_query(range), step_ms / 1000)
}
