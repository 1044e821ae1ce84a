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

/// A local process profiled with `samply record` (the seed's pipelines).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pipeline {
    pub name: String,
    pub pid: Option<u32>,
    /// A file holding the process id (one per line when the pipeline has several
    /// processes; `ordinal` picks one).
    pub pid_file: Option<std::path::PathBuf>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

impl Pipeline {
    /// The process ids, read now (a pid file may change between runs).
    pub fn pids(&self) -> Result<Vec<u32>, String> {
        match (&self.pid, &self.pid_file) {
            (Some(pid), _) => Ok(vec![*pid]),
            (None, Some(file)) => {
                let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
                text.split_whitespace()
                    .map(|p| p.parse().map_err(|_| format!("{}: '{p}' is not a process id", file.display())))
                    .collect()
            }
            (None, None) => Err(format!("pipeline '{}' names neither pid nor pidFile", self.name)),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    #[serde(default, rename = "target")]
    pub targets: Vec<Target>,
    #[serde(default, rename = "pipeline")]
    pub pipelines: Vec<Pipeline>,
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

    pub fn pipeline(&self, name: &str) -> Option<&Pipeline> {
        self.pipelines.iter().find(|p| p.name == name)
    }

    pub fn find(&self, service: &str) -> Option<&Target> {
        self.targets.iter().find(|t| t.service == service)
    }
}
