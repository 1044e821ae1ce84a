//! samply pipelines (the seed's `POST /v0/pipelines/{pipeline_name}/samply_profile`):
//! `samply record` on a local process named in `--targets`, for N seconds; the profile
//! (symbolicated from samply's sidecar by core) is stored as a session. Records are
//! create-only, like captures: `started`, then `done`.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::capture::{now_millis, status_of, Done};
use super::profiles::{store_profile, NewSession};
use super::{authorize, blocking, load, now_rfc3339, share_url, ApiError, AppState, ErrorBody, State, Tenant};
use crate::targets::Pipeline;

const MAX_SECONDS: u64 = 300;

#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Run {
    id: String,
    pid: u32,
    ordinal: usize,
    duration_secs: u64,
    started_at: String,
}

/// A samply run and, once done, its session (snake_case, like the seed's v0 API).
#[derive(Serialize, ToSchema)]
pub struct SamplyProfile {
    pipeline_name: String,
    id: String,
    /// running, completed or failed.
    status: String,
    pid: u32,
    ordinal: usize,
    duration_secs: u64,
    started_at: String,
    completed_at: Option<String>,
    session_id: Option<String>,
    /// The page's share link for the recorded profile.
    flame_graph_url: Option<String>,
    error: Option<String>,
}

fn unknown_pipeline(name: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "UnknownPipelineName", format!("Unknown pipeline name '{name}'"))
        .details(json!({ "pipeline_name": name }))
}

fn unavailable(code: &'static str, message: String, name: &str) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, code, message).details(json!({ "pipeline_name": name }))
}

fn runs_prefix(tenant: &Tenant, name: &str) -> String {
    tenant.key(&format!("samply/p{}", hex::encode(name)))
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

/// Records a profile of the pipeline's process for `duration_secs`; 202 while it runs.
#[utoipa::path(post, path = "/v0/pipelines/{pipeline_name}/samply_profile", tag = "samply",
    params(("pipeline_name" = String, Path), ("duration_secs" = Option<u64>, Query, description = "1..300, default 10"),
        ("ordinal" = Option<usize>, Query, description = "which of the pipeline's processes (default 0)"),
        ("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 202, body = SamplyProfile), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "unknown pipeline", body = ErrorBody),
        (status = 409, description = "a samply profile of this pipeline is being recorded", body = ErrorBody),
        (status = 503, description = "samply is not installed, perf events are not allowed, or the process is gone", body = ErrorBody),
        (status = 500, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn start(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<SamplyProfile>), ApiError> {
    authorize(&state, &headers)?;
    let pipeline = state.targets.pipeline(&name).cloned().ok_or_else(|| unknown_pipeline(&name))?;
    let number = |key: &str, default: u64| -> Result<u64, ApiError> {
        query.get(key).map_or(Ok(default), |v| v.parse()).map_err(|_| {
            ApiError::bad_request("InvalidParameter", format!("{key} must be a whole number"))
                .details(json!({ "field": key }))
        })
    };
    let duration = number("duration_secs", 10)?;
    if !(1..=MAX_SECONDS).contains(&duration) {
        return Err(ApiError::bad_request("InvalidParameter", format!("duration_secs must be 1..{MAX_SECONDS}"))
            .details(json!({ "field": "duration_secs" })));
    }
    let ordinal = number("ordinal", 0)? as usize;
    let pids = pipeline.pids().map_err(|e| unavailable("ProcessNotFound", e, &name))?;
    let pid = *pids.get(ordinal).ok_or_else(|| {
        ApiError::bad_request(
            "InvalidParameter",
            format!("ordinal {ordinal} is out of range: the pipeline has {} processes", pids.len()),
        )
        .details(json!({ "field": "ordinal", "pipeline_name": name }))
    })?;
    let samply = samply_binary().ok_or_else(|| {
        unavailable("SamplyNotInstalled", "samply is not installed (cargo install samply)".into(), &name)
    })?;
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(unavailable(
            "ProcessNotFound",
            format!("process {pid} of pipeline '{name}' is not running"),
            &name,
        ));
    }
    let paranoid =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok().and_then(|s| s.trim().parse::<i32>().ok());
    if paranoid.is_some_and(|p| p > 1) {
        return Err(unavailable(
            "PerfEventsNotAllowed",
            format!("kernel.perf_event_paranoid is {}; samply needs 1 or lower", paranoid.unwrap_or_default()),
            &name,
        ));
    }
    let running_key = (tenant.0.clone(), name.clone());
    if !state.samply_running.lock().expect("not poisoned").insert(running_key.clone()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "SamplyProfileInProgress",
            format!("a samply profile of pipeline '{name}' is already being recorded"),
        )
        .details(json!({ "pipeline_name": name })));
    }
    let run = Run {
        id: format!("samply-{}", uuid::Uuid::now_v7().simple()),
        pid,
        ordinal,
        duration_secs: duration,
        started_at: now_rfc3339(),
    };
    let base = format!("{}/{:016x}-{}", runs_prefix(&tenant, &name), now_millis(), run.id);
    if let Err(e) = state.store.create(&format!("{base}/started.json"), Bytes::from(serde_json::to_vec(&run)?)).await {
        state.samply_running.lock().expect("not poisoned").remove(&running_key);
        return Err(e.into());
    }
    let response = respond(&state, &headers, &tenant, &name, &run, None);
    let (state2, tenant2, run2) = (state.clone(), Tenant(tenant.0.clone()), run.clone());
    tokio::spawn(async move {
        let outcome = record(&state2, &tenant2, &pipeline, &run2, &samply).await;
        if let Ok(bytes) = serde_json::to_vec(&outcome) {
            if let Err(e) = state2.store.create(&format!("{base}/done.json"), Bytes::from(bytes)).await {
                tracing::error!("samply run {}: cannot store its outcome: {e}", run2.id);
            }
        }
        state2.samply_running.lock().expect("not poisoned").remove(&running_key);
    });
    Ok((StatusCode::ACCEPTED, Json(response)))
}

/// Runs samply, stops it after the duration (samply stops and saves on SIGINT), and
/// stores the symbolicated profile.
async fn record(state: &AppState, tenant: &Tenant, pipeline: &Pipeline, run: &Run, samply: &std::path::Path) -> Done {
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
    let converted = blocking(move || symbolicated(&output, &syms)).await;
    let _ = std::fs::remove_dir_all(&dir);
    let bytes = match converted {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return failed(e),
        Err(e) => return failed(e.message().to_owned()),
    };
    let mut labels: BTreeMap<String, String> = pipeline.labels.clone();
    labels.insert("pipeline".to_owned(), pipeline.name.clone());
    labels.insert("ordinal".to_owned(), run.ordinal.to_string());
    let meta = NewSession {
        service: pipeline.name.clone(),
        name: format!("samply-{}-{}.json.gz", pipeline.name, run.ordinal),
        labels,
        claimed: None,
    };
    match store_profile(&state.store, tenant, Bytes::from(bytes), meta).await {
        Ok((_, session)) => Done::stored(session.id),
        Err(e) => failed(format!("the recorded profile was not stored: {}", e.message())),
    }
}

/// samply's gzipped profile with the names from its `.syms.json` sidecar, gzipped again.
fn symbolicated(profile: &std::path::Path, syms: &std::path::Path) -> Result<Vec<u8>, String> {
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

fn respond(
    state: &AppState,
    headers: &HeaderMap,
    tenant: &Tenant,
    name: &str,
    run: &Run,
    outcome: Option<Done>,
) -> SamplyProfile {
    let status = status_of(outcome.as_ref());
    let outcome = outcome.unwrap_or_default();
    SamplyProfile {
        pipeline_name: name.to_owned(),
        id: run.id.clone(),
        status: status.to_owned(),
        pid: run.pid,
        ordinal: run.ordinal,
        duration_secs: run.duration_secs,
        started_at: run.started_at.clone(),
        completed_at: (!outcome.completed_at.is_empty()).then_some(outcome.completed_at),
        flame_graph_url: outcome.session_id.as_ref().map(|id| share_url(state, headers, tenant, &format!("s/{id}"))),
        session_id: outcome.session_id,
        error: outcome.error,
    }
}

/// The latest samply run of the pipeline.
#[utoipa::path(get, path = "/v0/pipelines/{pipeline_name}/samply_profile", tag = "samply",
    params(("pipeline_name" = String, Path), ("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    responses((status = 200, body = SamplyProfile), (status = 404, description = "unknown pipeline, or no profile yet", body = ErrorBody)))]
pub async fn latest(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Json<SamplyProfile>, ApiError> {
    if state.targets.pipeline(&name).is_none() {
        return Err(unknown_pipeline(&name));
    }
    let prefix = runs_prefix(&tenant, &name);
    let keys = state.store.list(&prefix, None).await?;
    let newest = keys.iter().filter_map(|k| k.strip_suffix("/started.json")).next_back().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "NoSamplyProfile", format!("pipeline '{name}' has no samply profile yet"))
            .details(json!({ "pipeline_name": name }))
    })?;
    let run: Run = load(&state.store, &format!("{prefix}/{newest}/started.json")).await?.unwrap_or_default();
    let outcome: Option<Done> = load(&state.store, &format!("{prefix}/{newest}/done.json")).await?;
    Ok(Json(respond(&state, &headers, &tenant, &name, &run, outcome)))
}
