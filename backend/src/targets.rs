//! `--targets targets.toml`: the services the server may capture profiles from, and
//! the tenant each belongs to.
//!
//! ```toml
//! [[target]]
//! service = "checkout"
//! url = "http://127.0.0.1:6060/debug/pprof"   # Go's net/http/pprof
//! labels = { env = "prod" }
//! tenant = "acme"            # who may capture it: a tenant, or "*" for all (default: "default")
//! follow_redirects = false   # a 3xx is a failed capture unless this is true
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::records::{valid_name, Tenant, DEFAULT_TENANT};

/// Who may capture from a target or run a pipeline: one tenant, or every tenant.
fn default_owner() -> String {
    DEFAULT_TENANT.to_owned()
}

/// The owner a targets file may name: a tenant's name, or `*`.
fn valid_owner(owner: &str) -> bool {
    owner == "*" || valid_name(owner, 64)
}

/// Whether `tenant` may use what `owner` (a target's or a pipeline's) names.
fn admits(owner: &str, tenant: &Tenant) -> bool {
    owner == "*" || owner == tenant.0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub service: String,
    /// The base of Go's `net/http/pprof` handlers, ending in `/debug/pprof`.
    pub url: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The tenant that may capture it (`*`: any). Targets are the operator's machines:
    /// one tenant's key must not make the server fetch another's.
    #[serde(default = "default_owner")]
    pub tenant: String,
    /// Whether a redirect from the target is followed; off, a redirect fails the capture,
    /// so a target cannot send the server to fetch an internal address.
    #[serde(default)]
    pub follow_redirects: bool,
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
    /// The tenant that may run it (`*`: any), as for targets.
    #[serde(default = "default_owner")]
    pub tenant: String,
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
        let owners = targets.targets.iter().map(|t| (&t.service, &t.tenant));
        let owners = owners.chain(targets.pipelines.iter().map(|p| (&p.name, &p.tenant)));
        for (name, owner) in owners {
            if !valid_owner(owner) {
                return Err(format!(
                    "--targets {}: '{name}' has tenant '{owner}': a tenant's name (letters, digits, '-', '_') or \"*\"",
                    path.display()
                ));
            }
        }
        Ok(targets)
    }

    /// The pipeline `name`, when `tenant` may run it (others are told it does not exist).
    pub fn pipeline(&self, name: &str, tenant: &Tenant) -> Option<&Pipeline> {
        self.pipelines.iter().find(|p| p.name == name && admits(&p.tenant, tenant))
    }

    /// The target of `service`, when `tenant` may capture it (others are told it does not exist).
    pub fn find(&self, service: &str, tenant: &Tenant) -> Option<&Target> {
        self.targets.iter().find(|t| t.service == service && admits(&t.tenant, tenant))
    }
}
