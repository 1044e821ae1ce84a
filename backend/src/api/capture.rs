//! Captures from running Go services (pull, like a Parca or Pyroscope scrape): fetch the
//! matching `net/http/pprof` endpoint, validate it with core and store it as a session.
//! Records are create-only: `started.json`, then `done.json` with the outcome.

use std::collections::BTreeMap;

use axum::body::Body;
use std::collections::HashMap;

use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use stacklens_core::analysis::summary::{top_functions, FunctionShare};
use stacklens_core::ProfileKind;
use utoipa::ToSchema;

use super::profiles::{parse_kind, raw_bytes, read_json, store_profile, NewSession};
use super::{
    authorize, blocking, load, now_rfc3339, required, share_url, valid_id, ApiError, AppState, ErrorBody, State, Tenant,
};
use crate::targets::Target;

/// Longest capture accepted.
const MAX_SECONDS: u64 = 300;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartCapture {
    /// A service from `--targets`.
    service: String,
    /// cpu, memory, alloc, block, mutex or goroutine.
    profile_type: String,
    /// How long a cpu profile runs (1..300, default 10); other types are snapshots.
    duration_seconds: Option<u64>,
    /// Recorded with the capture; Go's handlers sample at the rates the program set.
    sample_rate: Option<u64>,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Started {
    id: String,
    service: String,
    profile_type: ProfileKind,
    started_at: String,
    duration_seconds: u64,
    sample_rate: Option<u64>,
    /// For scheduled captures: the schedule's interval number this capture fills.
    #[serde(default)]
    slot: Option<u64>,
}

/// The outcome of a background run (a capture, or a samply recording).
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct Done {
    pub(super) completed_at: String,
    pub(super) session_id: Option<String>,
    sample_count: Option<i64>,
    /// For goroutine captures: the `debug=0` pprof form, stored beside the dump.
    pprof_session_id: Option<String>,
    /// The captured profile's total in its sample type (for trend charts).
    total: Option<i64>,
    unit: Option<String>,
    top_functions: Vec<FunctionShare>,
    pub(super) error: Option<String>,
}

impl Done {
    /// A run that failed, and why.
    pub(super) fn failed(error: String) -> Self {
        Done { completed_at: now_rfc3339(), error: Some(error), ..Done::default() }
    }

    /// A run that stored this session.
    pub(super) fn stored(session_id: String) -> Self {
        Done { completed_at: now_rfc3339(), session_id: Some(session_id), ..Done::default() }
    }
}

/// Captures by service and type in time order (for history).
fn history_prefix(tenant: &Tenant, service: &str, kind: ProfileKind) -> String {
    tenant.key(&format!("captures-by/s{}/{kind}", hex::encode(service)))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaptureResponse {
    id: String,
    service: String,
    #[schema(value_type = String)]
    profile_type: ProfileKind,
    /// running, completed or failed.
    status: String,
    started_at: String,
    completed_at: Option<String>,
    duration_seconds: u64,
    sample_rate: Option<u64>,
    /// For scheduled captures: the interval number it fills.
    slot: Option<u64>,
    sample_count: Option<i64>,
    top_functions: Vec<FunctionShare>,
    /// The page's share link for the captured session.
    flame_graph_url: Option<String>,
    session_id: Option<String>,
    /// For goroutine captures: the session of the `debug=0` pprof form.
    goroutine_pprof_session_id: Option<String>,
    /// Why a capture failed.
    error: Option<String>,
}

fn key(tenant: &Tenant, id: &str, part: &str) -> String {
    tenant.key(&format!("captures/{id}/{part}.json"))
}

/// The pprof endpoint for a profile type.
fn endpoint(target: &Target, kind: ProfileKind, seconds: u64) -> Option<String> {
    let path = match kind {
        ProfileKind::Cpu => format!("profile?seconds={seconds}"),
        ProfileKind::Memory => "heap".to_owned(),
        ProfileKind::Alloc => "allocs".to_owned(),
        ProfileKind::Block => "block".to_owned(),
        ProfileKind::Mutex => "mutex".to_owned(),
        // The debug=2 dump: states, wait times and creators, which debug=0 lacks.
        ProfileKind::Goroutine => "goroutine?debug=2".to_owned(),
        ProfileKind::Threadcreate | ProfileKind::Other => return None,
    };
    Some(format!("{}/{path}", target.url.trim_end_matches('/')))
}

/// Starts a capture; 202 with its id while it runs.
#[utoipa::path(post, path = "/api/v1/observability/profiling/start", tag = "capture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant")),
    request_body = StartCapture,
    responses((status = 202, body = CaptureResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "unknown service", body = ErrorBody),
        (status = 409, description = "a capture of this service and type is running", body = ErrorBody)),
    security((), ("bearer" = [])))]
pub async fn start(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<CaptureResponse>), ApiError> {
    authorize(&state, &headers)?;
    let request: StartCapture = read_json(body, 1 << 16, "a capture request").await?;
    let kind = parse_kind(&request.profile_type)?;
    let seconds = request.duration_seconds.unwrap_or(10);
    if !(1..=MAX_SECONDS).contains(&seconds) {
        return Err(ApiError::bad_request("InvalidRequest", format!("durationSeconds must be 1..{MAX_SECONDS}"))
            .details(json!({ "field": "durationSeconds" })));
    }
    let started = begin(&state, &tenant, &request.service, kind, seconds, request.sample_rate, None).await?;
    Ok((StatusCode::ACCEPTED, Json(respond(&state, &headers, &tenant, &started, None))))
}

/// Starts a capture in the background: 404 for an unknown service, 409 while the same
/// service and type is being captured on this replica.
pub async fn begin(
    state: &State,
    tenant: &Tenant,
    service: &str,
    kind: ProfileKind,
    seconds: u64,
    sample_rate: Option<u64>,
    slot: Option<u64>,
) -> Result<Started, ApiError> {
    let target = state.targets.find(service).cloned().ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "UnknownService", format!("no capture target named '{service}'"))
            .details(json!({ "service": service }))
    })?;
    let url = endpoint(&target, kind, seconds).ok_or_else(|| {
        ApiError::bad_request("InvalidProfileType", format!("{kind} profiles cannot be captured"))
            .details(json!({ "profileType": kind }))
    })?;
    let running = (tenant.0.clone(), target.service.clone(), kind);
    if !state.captures_running.lock().expect("not poisoned").insert(running.clone()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "CaptureInProgress",
            format!("a {kind} capture of '{}' is already running", target.service),
        )
        .details(json!({ "service": target.service, "profileType": kind })));
    }
    let started = Started {
        id: format!("cap-{}", uuid::Uuid::now_v7().simple()),
        service: target.service.clone(),
        profile_type: kind,
        started_at: now_rfc3339(),
        duration_seconds: if kind == ProfileKind::Cpu { seconds } else { 0 },
        sample_rate,
        slot,
    };
    let indexed = format!("{}/{:016x}-{}", history_prefix(tenant, &started.service, kind), now_millis(), started.id);
    let record = Bytes::from(serde_json::to_vec(&started)?);
    let stored = match state.store.create(&key(tenant, &started.id, "started"), record).await {
        Ok(_) => state.store.create(&indexed, Bytes::new()).await,
        Err(e) => Err(e),
    };
    if let Err(e) = stored {
        state.captures_running.lock().expect("not poisoned").remove(&running);
        return Err(e.into());
    }
    let (state, tenant, capture) = (state.clone(), Tenant(tenant.0.clone()), started.clone());
    tokio::spawn(async move {
        let done = run(&state, &tenant, &target, &capture, &url).await;
        if let Ok(bytes) = serde_json::to_vec(&done) {
            if let Err(e) = state.store.create(&key(&tenant, &capture.id, "done"), Bytes::from(bytes)).await {
                tracing::error!("capture {}: cannot store its outcome: {e}", capture.id);
            }
        }
        state.captures_running.lock().expect("not poisoned").remove(&running);
    });
    Ok(started)
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Fetches one profile from the target and stores it as a session of the capture.
async fn fetch_and_store(
    state: &AppState,
    tenant: &Tenant,
    target: &Target,
    started: &Started,
    url: &str,
) -> Result<super::profiles::SessionRecord, String> {
    let timeout = std::time::Duration::from_secs(started.duration_seconds + 30);
    let response =
        state.http.get(url).timeout(timeout).send().await.map_err(|e| format!("{url} did not answer: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    let bytes = response.bytes().await.map_err(|e| format!("reading {url}: {e}"))?;
    let mut labels: BTreeMap<String, String> = target.labels.clone();
    labels.insert("capture".to_owned(), started.id.clone());
    let name = format!("{}-{}.pprof", started.service, started.profile_type);
    let meta = NewSession { service: started.service.clone(), name, labels, claimed: Some(started.profile_type) };
    store_profile(&state.store, tenant, bytes, meta)
        .await
        .map(|(_, r)| r)
        .map_err(|e| format!("{url}: {}", e.message()))
}

/// Fetches, validates and stores one capture.
async fn run(state: &AppState, tenant: &Tenant, target: &Target, started: &Started, url: &str) -> Done {
    let failed = Done::failed;
    let record = match fetch_and_store(state, tenant, target, started, url).await {
        Ok(record) => record,
        Err(e) => return failed(e),
    };
    // Goroutines: the pprof form too (debug=0), which pprof itself reads.
    let mut pprof_session_id = None;
    if started.profile_type == ProfileKind::Goroutine {
        let pprof = url.replace("debug=2", "debug=0");
        match fetch_and_store(state, tenant, target, started, &pprof).await {
            Ok(r) => pprof_session_id = Some(r.id),
            Err(e) => tracing::warn!("capture {}: {e}", started.id),
        }
    }
    let kind = started.profile_type;
    let summary = match raw_bytes(&state.store, tenant, &record).await {
        Ok(bytes) => blocking(move || -> Result<_, stacklens_core::Error> {
            let p = stacklens_core::parse(&bytes)?;
            let index = p.sample_index(kind.sample_type(&p))?;
            let top = top_functions(&p, kind.sample_type(&p), 20)?;
            Ok((p.total(index), p.sample_type_unit(index).to_owned(), top))
        })
        .await
        .ok()
        .and_then(Result::ok),
        Err(_) => None,
    };
    let (total, unit, top) = match summary {
        Some((total, unit, top)) => (Some(total), Some(unit), top),
        None => (None, None, Vec::new()),
    };
    Done {
        completed_at: now_rfc3339(),
        pprof_session_id,
        session_id: Some(record.id),
        sample_count: Some(record.sample_count),
        total,
        unit,
        top_functions: top,
        error: None,
    }
}

fn respond(
    state: &AppState,
    headers: &HeaderMap,
    tenant: &Tenant,
    started: &Started,
    done: Option<Done>,
) -> CaptureResponse {
    let status = status_of(done.as_ref());
    let done = done.unwrap_or_default();
    CaptureResponse {
        id: started.id.clone(),
        service: started.service.clone(),
        profile_type: started.profile_type,
        status: status.to_owned(),
        started_at: started.started_at.clone(),
        completed_at: (!done.completed_at.is_empty()).then_some(done.completed_at),
        duration_seconds: started.duration_seconds,
        sample_rate: started.sample_rate,
        slot: started.slot,
        sample_count: done.sample_count,
        top_functions: done.top_functions,
        flame_graph_url: done.session_id.as_ref().map(|id| share_url(state, headers, tenant, &format!("s/{id}"))),
        session_id: done.session_id,
        goroutine_pprof_session_id: done.pprof_session_id,
        error: done.error,
    }
}

/// A capture and, once done, its outcome.
#[utoipa::path(get, path = "/api/v1/observability/profiling/{id}", tag = "capture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"), ("id" = String, Path, description = "capture id")),
    responses((status = 200, body = CaptureResponse), (status = 404, body = ErrorBody)))]
pub async fn status(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<CaptureResponse>, ApiError> {
    let unknown = || capture_not_found(&id);
    if !valid_id(&id, "cap") {
        return Err(unknown());
    }
    let started: Started = load(&state.store, &key(&tenant, &id, "started")).await?.ok_or_else(unknown)?;
    let mut done: Option<Done> = load(&state.store, &key(&tenant, &id, "done")).await?;
    // A capture whose server stopped before it finished never gets an outcome.
    let deadline = humantime::parse_rfc3339(&started.started_at)
        .ok()
        .map(|t| t + std::time::Duration::from_secs(started.duration_seconds + 120));
    if done.is_none() && deadline.is_some_and(|d| d < std::time::SystemTime::now()) {
        done = Some(Done::failed("the capture was interrupted (its server stopped)".to_owned()));
    }
    Ok(Json(respond(&state, &headers, &tenant, &started, done)))
}

/// The session a completed capture stored.
pub async fn captured_session(state: &AppState, tenant: &Tenant, id: &str) -> Result<String, ApiError> {
    let unknown = || capture_not_found(id);
    if !valid_id(id, "cap") {
        return Err(unknown());
    }
    load::<Started>(&state.store, &key(tenant, id, "started")).await?.ok_or_else(unknown)?;
    let done: Done = load(&state.store, &key(tenant, id, "done")).await?.ok_or_else(|| {
        ApiError::new(StatusCode::CONFLICT, "CaptureNotCompleted", format!("capture '{id}' is still running"))
            .details(json!({ "id": id }))
    })?;
    done.session_id.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "CaptureFailed",
            format!("capture '{id}' failed: {}", done.error.unwrap_or_default()),
        )
        .details(json!({ "id": id }))
    })
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPoint {
    id: String,
    service: String,
    #[schema(value_type = String)]
    profile_type: ProfileKind,
    started_at: String,
    /// For scheduled captures: the interval number it fills.
    slot: Option<u64>,
    status: String,
    session_id: Option<String>,
    sample_count: Option<i64>,
    /// The profile's total in `unit` (cpu: nanoseconds; memory: bytes; …).
    total: Option<i64>,
    unit: Option<String>,
    top_functions: Vec<FunctionShare>,
}

#[derive(Serialize, ToSchema)]
pub struct History {
    /// Oldest first.
    captures: Vec<HistoryPoint>,
}

/// Captures over time with their totals and top functions, for trend charts.
#[utoipa::path(get, path = "/api/v1/observability/profiling/history", tag = "capture",
    params(("X-Tenant-ID" = Option<String>, Header, description = "tenant"),
        ("service" = String, Query), ("profileType" = String, Query),
        ("from" = Option<String>, Query, description = "RFC 3339; inclusive"), ("to" = Option<String>, Query, description = "RFC 3339; inclusive")),
    responses((status = 200, body = History), (status = 400, body = ErrorBody)))]
pub async fn history(
    AxumState(state): AxumState<State>,
    tenant: Tenant,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<History>, ApiError> {
    let service = required(&query, "service")?;
    let kind = parse_kind(required(&query, "profileType")?)?;
    let bound = |name: &str| -> Result<Option<std::time::SystemTime>, ApiError> {
        query.get(name).filter(|v| !v.is_empty()).map(|v| humantime::parse_rfc3339_weak(v)).transpose().map_err(|e| {
            ApiError::bad_request("InvalidParameter", format!("{name} is not an RFC 3339 time: {e}"))
                .details(json!({ "field": name }))
        })
    };
    let (from, to) = (bound("from")?, bound("to")?);
    let mut captures = Vec::new();
    for entry in captured_history(&state, &tenant, service, kind).await? {
        let started = entry.started;
        let at = humantime::parse_rfc3339(&started.started_at).ok();
        if from.is_some_and(|f| at.is_some_and(|a| a < f)) || to.is_some_and(|t| at.is_some_and(|a| a > t)) {
            continue;
        }
        let status = status_of(entry.done.as_ref());
        let done = entry.done.unwrap_or_default();
        captures.push(HistoryPoint {
            id: started.id,
            service: started.service,
            profile_type: started.profile_type,
            started_at: started.started_at,
            slot: started.slot,
            status: status.to_owned(),
            session_id: done.session_id,
            sample_count: done.sample_count,
            total: done.total,
            unit: done.unit,
            top_functions: done.top_functions.into_iter().take(5).collect(),
        });
    }
    Ok(Json(History { captures }))
}

fn capture_not_found(id: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "CaptureNotFound", format!("unknown capture id '{id}'"))
        .details(json!({ "id": id }))
}

/// running until there is an outcome; then failed or completed.
pub(super) fn status_of(done: Option<&Done>) -> &'static str {
    match done {
        None => "running",
        Some(d) if d.error.is_some() => "failed",
        Some(_) => "completed",
    }
}

/// A capture in a service and type's history.
pub struct CaptureEntry {
    /// When it started (milliseconds since the epoch).
    pub millis: u64,
    index: String,
    started: Started,
    done: Option<Done>,
    /// The sessions it stored (the profile, and for goroutines its pprof form).
    pub sessions: Vec<String>,
}

/// When a service and type's captures started, with their index names, oldest first:
/// a listing only, without reading the records.
pub async fn capture_times(
    state: &AppState,
    tenant: &Tenant,
    service: &str,
    kind: ProfileKind,
) -> Result<Vec<(u64, String)>, ApiError> {
    let names = state.store.list(&history_prefix(tenant, service, kind), None).await?;
    Ok(names
        .into_iter()
        .filter_map(|name| Some((u64::from_str_radix(name.split_once('-')?.0, 16).ok()?, name)))
        .collect())
}

/// A service and type's captures, oldest first.
pub async fn captured_history(
    state: &AppState,
    tenant: &Tenant,
    service: &str,
    kind: ProfileKind,
) -> Result<Vec<CaptureEntry>, ApiError> {
    let prefix = history_prefix(tenant, service, kind);
    let mut entries = Vec::new();
    for (millis, name) in capture_times(state, tenant, service, kind).await? {
        let Some((_, id)) = name.split_once('-') else { continue };
        let Some(started) = load::<Started>(&state.store, &key(tenant, id, "started")).await? else { continue };
        let done: Option<Done> = load(&state.store, &key(tenant, id, "done")).await?;
        entries.push(CaptureEntry {
            millis,
            index: format!("{prefix}/{name}"),
            sessions: done.iter().flat_map(|d| d.session_id.iter().chain(&d.pprof_session_id).cloned()).collect(),
            started,
            done,
        });
    }
    Ok(entries)
}

/// Deletes a capture, and the session it created unless `in_use` still needs it.
pub async fn forget_capture(
    state: &AppState,
    tenant: &Tenant,
    entry: &CaptureEntry,
    in_use: &std::collections::HashSet<String>,
) -> Result<(), ApiError> {
    for session in entry.sessions.iter().filter(|s| !in_use.contains(*s)) {
        if let Ok(record) = super::profiles::find(&state.store, tenant, session).await {
            // Only a session this capture created: the same bytes may have been uploaded or baselined.
            if record.labels.get("capture") == Some(&entry.started.id) {
                super::profiles::delete_session(&state.store, tenant, &record).await?;
            }
        }
    }
    state.store.delete(&entry.index).await?;
    state.store.delete(&key(tenant, &entry.started.id, "done")).await?;
    state.store.delete(&key(tenant, &entry.started.id, "started")).await?;
    Ok(())
}
