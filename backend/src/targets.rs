//! `--targets targets.toml`: the services the server may capture profiles from.
//!
//! ```toml
//! [[target]]
//! service = "checkout"
//! url = "http://127.0.0.1:6060/debug/pprof"   # Go's net/http/pprof
//! labels = { env = "prod" }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub service: String,
    /// The base of Go's `net/http/pprof` handlers, ending in `/debug/pprof`.
    pub url: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    #[serde(default, rename = "target")]
    pub targets: Vec<Target>,
}

impl Targets {
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--targets {}: {e}", path.display()))?;
        let targets: Targets = toml::from_str(&text).map_err(|e| format!("--targets {}: {e}", path.display()))?;
        for t in &targets.targets {
            if t.service.is_empty() || !(t.url.starts_with("http://") || t.url.starts_with("https://")) {
                return Err(format!(
                    "--targets {}: target '{}' needs a service name and an http(s) url",
                    path.display(),
                    t.service
                ));
            }
        }
        Ok(targets)
    }

    pub fn find(&self, service: &str) -> Option<&Target> {
        self.targets.iter().find(|t| t.service == service)
    }
}
