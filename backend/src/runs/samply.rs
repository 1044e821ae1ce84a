//! samply pipelines: `samply record` on a local process named in `--targets`, for N
//! seconds; the profile (symbolicated from samply's sidecar by core) is stored as a
//! session held by the run.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

use super::{launch, StartError};
use crate::intake::{file_profile, Intake};
use crate::records::captures::Done;
use crate::records::refs::Holder;
use crate::records::samply::{self as runs, Run};
use crate::records::series::FiledBy;
use crate::records::{leases, now, ordered_id, Tenant};
use crate::state::{AppState, State};
use crate::targets::Pipeline;

pub const MAX_SECONDS: u64 = 300;

/// Why samply cannot record here.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("samply is not installed (cargo install samply)")]
    NotInstalled,
    #[error("process {0} is not running")]
    ProcessNotFound(u32),
    #[error("kernel.perf_event_paranoid is {0}; samply needs 1 or lower")]
    PerfEventsNotAllowed(i32),
}

/// `samply` from `STACKLENS_SAMPLY`, the PATH, or cargo's bin folder.
fn samply_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STACKLENS_SAMPLY") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join("samply")).find(|p| p.is_file())
}

/// Checks that samply can record process `pid` now; returns the samply binary.
pub fn preflight(pid: u32) -> Result<PathBuf, Unavailable> {
    let samply = samply_binary().ok_or(Unavailable::NotInstalled)?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err(Unavailable::ProcessNotFound(pid));
    }
    let paranoid =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok().and_then(|s| s.trim().parse::<i32>().ok());
    match paranoid {
        Some(level) if level > 1 => Err(Unavailable::PerfEventsNotAllowed(level)),
        _ => Ok(samply),
    }
}

/// Starts a recording in the background; one per pipeline at a time across replicas.
pub async fn begin(
    state: &State,
    tenant: &Tenant,
    pipeline: Pipeline,
    pid: u32,
    ordinal: usize,
    duration_secs: u64,
    samply: PathBuf,
) -> Result<Run, StartError> {
    // One run per process, whichever tenant asks.
    let folder = format!("system/running/samply/p{}", hex::encode(&pipeline.name));
    // samply gets 120 s after the duration to save its profile.
    let lease = leases::acquire(&state.store, &folder, duration_secs + 180).await?.ok_or(StartError::Running)?;
    let run = Run { id: ordered_id("samply"), pid, ordinal, duration_secs, started_at: now() };
    if let Err(e) = runs::start(&state.store, tenant, &pipeline.name, &run).await {
        let _ = lease.release(&state.store).await;
        return Err(e.into());
    }
    let done_key = runs::done_key(tenant, &pipeline.name, &run);
    let (run_state, run_tenant, recorded) = (state.clone(), tenant.clone(), run.clone());
    let what = format!("samply run {}", run.id);
    launch(state.clone(), lease, done_key, what, async move {
        record(&run_state, &run_tenant, &pipeline, &recorded, &samply).await
    });
    Ok(run)
}

/// Runs samply, stops it after the duration (samply stops and saves on SIGINT), and
/// stores the symbolicated profile.
async fn record(state: &AppState, tenant: &Tenant, pipeline: &Pipeline, run: &Run, samply: &Path) -> Done {
    let failed = Done::failed;
    let dir = std::env::temp_dir().join(format!("stacklens-{}", run.id));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return failed(format!("cannot create {}: {e}", dir.display()));
    }
    let output = dir.join("profile.json.gz");
    let child = tokio::process::Command::new(samply)
        .args(["record", "--save-only", "--no-open", "--unstable-presymbolicate", "-o"])
        .arg(&output)
        .args(["-p", &run.pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot run {}: {e}", samply.display())),
    };
    tokio::time::sleep(Duration::from_secs(run.duration_secs)).await;
    if let Some(id) = child.id() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(id as i32), nix::sys::signal::Signal::SIGINT);
    }
    let finished = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output()).await;
    let result = match finished {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return failed(format!("samply failed: {e}")),
        Err(_) => return failed("samply did not finish within 120 s of being stopped".to_owned()),
    };
    if !output.is_file() {
        let why = String::from_utf8_lossy(&result.stderr).trim().to_owned();
        return failed(format!("samply wrote no profile ({}): {why}", result.status));
    }
    let syms = dir.join("profile.json.syms.json");
    let converted = tokio::task::spawn_blocking(move || symbolicated(&output, &syms)).await;
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = match converted {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return failed(e),
        Err(e) => return failed(format!("symbolication stopped: {e}")),
    };
    let mut labels: BTreeMap<String, String> = pipeline.labels.clone();
    labels.insert("pipeline".to_owned(), pipeline.name.clone());
    labels.insert("ordinal".to_owned(), run.ordinal.to_string());
    let intake = Intake {
        service: pipeline.name.clone(),
        name: format!("samply-{}-{}.json.gz", pipeline.name, run.ordinal),
        labels,
        claimed: None,
        filed_by: Some(FiledBy::Samply),
        at: None,
        expires: None,
    };
    match file_profile(state, tenant, Bytes::from(bytes), intake, &Holder::Record(run.id.clone())).await {
        Ok(stored) => Done::stored(stored.record.id),
        Err(e) => failed(format!("the recorded profile was not stored: {e}")),
    }
}

/// samply's gzipped profile with the names from its `.syms.json` sidecar, gzipped again.
fn symbolicated(profile: &Path, syms: &Path) -> Result<Vec<u8>, String> {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(profile).map_err(|e| e.to_string())?)
        .read_to_end(&mut json)
        .map_err(|e| format!("samply's profile is not gzip: {e}"))?;
    let mut value: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("samply's profile is not JSON: {e}"))?;
    if let Ok(text) = std::fs::read(syms) {
        let syms: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| format!("samply's symbols are not JSON: {e}"))?;
        stacklens_core::import::firefox::symbolicate(&mut value, &syms).map_err(|e| e.to_string())?;
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&serde_json::to_vec(&value).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    gz.finish().map_err(|e| e.to_string())
}
