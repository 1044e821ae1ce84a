//! Captures from running Go services (pull, like a Parca or Pyroscope scrape): fetch
//! the matching `net/http/pprof` endpoint, let core validate it, store it as a session.

use std::collections::BTreeMap;
use std::time::Duration;

use stacklens_core::analysis::summary::top_functions;
use stacklens_core::analysis::Query as ProfileQuery;
use stacklens_core::ids::{CaptureId, RecordIdKind};
use stacklens_core::ProfileKind;

use super::{launch, StartError};
use crate::intake::{file_profile, Intake};
use crate::open::FETCH_SLACK_SECS;
use crate::records::captures::{self, Done, Started};
use crate::records::refs::Holder;
use crate::records::series::FiledBy;
use crate::records::sessions::{self, SessionRecord};
use crate::records::{leases, now, ordered_id, Tenant};
use crate::state::{AppState, State};
use crate::targets::Target;

/// Longest capture accepted.
pub const MAX_SECONDS: u64 = 300;

#[derive(Debug, thiserror::Error)]
pub enum BeginError {
    #[error("no capture target named '{0}'")]
    UnknownService(String),
    #[error("{0} profiles cannot be captured")]
    NotCapturable(ProfileKind),
    #[error("a {kind} capture of '{service}' is already running")]
    Running { service: String, kind: ProfileKind },
    #[error(transparent)]
    Start(StartError),
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

/// How long a capture may take before it counts as interrupted (its server stopped):
/// then its lease is void and its status reads failed.
pub fn deadline_seconds(state: &AppState, duration_seconds: u64) -> u64 {
    duration_seconds + state.capture_grace.as_secs()
}

/// Starts a capture in the background. One capture of a service and type runs at a
/// time across replicas (a lease in the store).
pub async fn begin(
    state: &State,
    tenant: &Tenant,
    service: &str,
    kind: ProfileKind,
    seconds: u64,
    sample_rate: Option<u64>,
    slot: Option<u64>,
) -> Result<Started, BeginError> {
    let target =
        state.targets.find(service, tenant).cloned().ok_or_else(|| BeginError::UnknownService(service.to_owned()))?;
    let url = endpoint(&target, kind, seconds).ok_or(BeginError::NotCapturable(kind))?;
    let duration_seconds = if kind == ProfileKind::Cpu { seconds } else { 0 };
    // One capture of a target and type at a time, whichever tenant asks: the target is one machine.
    let folder = format!("system/running/capture/s{}/{kind}", hex::encode(&target.service));
    let lease = leases::acquire(&state.store, &folder, deadline_seconds(state, duration_seconds))
        .await
        .map_err(|e| BeginError::Start(e.into()))?
        .ok_or_else(|| BeginError::Running { service: target.service.clone(), kind })?;
    let started = Started {
        id: CaptureId::try_from(ordered_id(CaptureId::PREFIX)).expect("a time-ordered id is a capture id"),
        service: target.service.clone(),
        profile_type: kind,
        started_at: now(),
        duration_seconds,
        sample_rate,
        slot,
    };
    if let Err(e) = captures::start(&state.store, tenant, &started).await {
        let _ = lease.release(&state.store).await;
        return Err(BeginError::Start(e.into()));
    }
    let (run_state, run_tenant, capture) = (state.clone(), tenant.clone(), started.clone());
    let what = format!("capture {}", started.id);
    launch(state.clone(), lease, captures::done_key(tenant, &started.id), what, async move {
        run(&run_state, &run_tenant, &target, &capture, &url).await
    });
    Ok(started)
}

/// Redirects a target that allows them may take.
const MAX_REDIRECTS: usize = 5;

/// The target's answer to `url`, within `timeout` and `--max-upload` bytes: read as it
/// comes and stopped past the limit, whatever the answer says of its length. A redirect
/// is followed only for a target whose `follow_redirects` says so.
async fn fetch(state: &AppState, target: &Target, url: &str, timeout: Duration) -> Result<bytes::Bytes, String> {
    let following;
    let client = if target.follow_redirects {
        following = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .build()
            .map_err(|e| format!("cannot start the HTTP client: {e}"))?;
        &following
    } else {
        &state.http
    };
    let mut response =
        client.get(url).timeout(timeout).send().await.map_err(|e| format!("{url} did not answer: {e}"))?;
    if response.status().is_redirection() {
        let to = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
        return Err(format!(
            "{url} answered {} to {}: redirects are not followed unless the target has follow_redirects = true",
            response.status(),
            to.as_deref().unwrap_or("?")
        ));
    }
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    let limit = state.max_upload;
    let too_large = || format!("{url} sent more than {limit} bytes (--max-upload)");
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(response.content_length().map_or(0, |n| n as usize));
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading {url}: {e}"))? {
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}

/// Fetches one profile from the target and stores it as a session held by the capture.
async fn fetch_and_store(
    state: &AppState,
    tenant: &Tenant,
    target: &Target,
    started: &Started,
    url: &str,
    index: bool,
) -> Result<SessionRecord, String> {
    let bytes = fetch(state, target, url, Duration::from_secs(started.duration_seconds + FETCH_SLACK_SECS)).await?;
    let mut labels: BTreeMap<String, String> = target.labels.clone();
    labels.insert("capture".to_owned(), started.id.to_string());
    let intake = Intake {
        service: started.service.clone(),
        name: format!("{}-{}.pprof", started.service, started.profile_type),
        labels,
        claimed: Some(started.profile_type),
        filed_by: index.then_some(FiledBy::Capture),
        at: Some(started.started_at.millis()),
        expires: None,
    };
    file_profile(state, tenant, bytes, intake, &Holder::Record(started.id.to_string()))
        .await
        .map(|s| s.record)
        .map_err(|e| format!("{url}: {e}"))
}

/// Fetches, validates and stores one capture.
async fn run(state: &AppState, tenant: &Tenant, target: &Target, started: &Started, url: &str) -> Done {
    let record = match fetch_and_store(state, tenant, target, started, url, true).await {
        Ok(record) => record,
        Err(e) => return Done::failed(e),
    };
    // Goroutines: the pprof form too (debug=0), which pprof itself reads; the time
    // index has the dump, which says more.
    let mut pprof_session_id = None;
    if started.profile_type == ProfileKind::Goroutine {
        let pprof = url.replace("debug=2", "debug=0");
        match fetch_and_store(state, tenant, target, started, &pprof, false).await {
            Ok(r) => pprof_session_id = Some(r.id),
            Err(e) => tracing::warn!("capture {}: {e}", started.id),
        }
    }
    let kind = started.profile_type;
    let summary = async {
        let bytes = sessions::raw(&state.store, tenant, &record).await.ok()?;
        let parsed = state.budget.parse(vec![bytes]).await.ok()?;
        tokio::task::spawn_blocking(move || {
            let p = &parsed.profiles[0];
            let prepared = ProfileQuery::of_sample(kind.sample_type(p)).prepare(p).ok()?;
            let top = top_functions(&prepared, 20).ok()?;
            Some((prepared.total(), prepared.unit().to_owned(), top))
        })
        .await
        .ok()?
    };
    let (total, unit, top) = match summary.await {
        Some((total, unit, top)) => (Some(total), Some(unit), top),
        None => (None, None, Vec::new()),
    };
    Done {
        completed_at: Some(now()),
        pprof_session_id,
        session_id: Some(record.id),
        sample_count: Some(record.sample_count),
        total,
        unit,
        top_functions: top,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_captured_kind_has_an_endpoint_and_no_other_kind_does() {
        let target = Target {
            service: "s".into(),
            url: "http://127.0.0.1:1/debug/pprof/".into(),
            labels: Default::default(),
            tenant: "*".into(),
            follow_redirects: false,
        };
        let served: Vec<ProfileKind> =
            ProfileKind::ALL.into_iter().filter(|&k| endpoint(&target, k, 5).is_some()).collect();
        assert_eq!(served, ProfileKind::CAPTURED);
        assert_eq!(endpoint(&target, ProfileKind::Cpu, 5).unwrap(), "http://127.0.0.1:1/debug/pprof/profile?seconds=5");
    }
}
