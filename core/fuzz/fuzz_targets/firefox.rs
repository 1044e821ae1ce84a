//! Firefox Profiler JSON (processed and raw Gecko): any JSON value goes straight to the
//! importer (detection only asks for `meta` and `threads`). A top-level `syms` member is
//! used as a samply `.syms.json` sidecar for `symbolicate` first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use stacklens_core::import::firefox;
use stacklens_core_fuzz::check;

fuzz_target!(|data: &[u8]| {
    let Ok(mut json) = serde_json::from_slice::<Value>(data) else { return };
    if let Some(syms) = json.get("syms").cloned() {
        let _ = firefox::symbolicate(&mut json, &syms);
    }
    if let Ok(p) = firefox::parse(&json, &Default::default()) {
        check(&p);
    }
});
