//! The load's client side: requests and how each ended, phases of concurrent requests
//! with their latencies and errors, and the CPU and peak memory of the processes watched.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One phase's numbers; latencies are of the successful requests, from sending the
/// request to having the whole response body.
#[derive(Serialize, Deserialize, Default)]
pub struct Phase {
    pub name: String,
    pub clients: usize,
    pub attempted: usize,
    pub ok: usize,
    pub wall_seconds: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Failures by status and error code (or transport error, or byte mismatch).
    pub errors: BTreeMap<String, usize>,
    /// CPU the server used during the phase, per successful request (with --server-pid).
    pub server_cpu_ms_per_ok: Option<f64>,
    /// CPU the object store's process used during the phase, per successful request.
    pub store_cpu_ms_per_ok: Option<f64>,
    /// CPU this load tool used during the phase, in cores (it shares the machine).
    pub client_cpu_cores: Option<f64>,
}

/// How one request ended.
pub enum Outcome {
    /// Success, with the id the server named (uploads).
    Ok(Option<String>),
    Failed(String),
}

/// Processes on this machine whose CPU time a phase reports.
#[derive(Clone, Copy, Default)]
pub struct Watch {
    pub server: Option<u32>,
    pub store: Option<u32>,
}

impl Watch {
    /// CPU seconds of the server, the store and this tool so far.
    pub fn cpu(&self) -> [Option<f64>; 3] {
        [self.server.and_then(cpu_seconds), self.store.and_then(cpu_seconds), cpu_seconds(std::process::id())]
    }
}

/// `after - before` per item, in milliseconds.
pub fn per_item_ms(before: Option<f64>, after: Option<f64>, items: usize) -> Option<f64> {
    Some((after? - before?) * 1000.0 / items.max(1) as f64)
}

pub type Prepare = Arc<dyn Fn(usize) -> reqwest::RequestBuilder + Send + Sync>;
pub type Check = Arc<dyn Fn(usize, u16, &[u8]) -> Outcome + Send + Sync>;

/// The HTTP client of a run: loopback only (no proxy), with `clients` connections kept.
pub fn http(clients: usize, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().no_proxy().timeout(timeout).pool_max_idle_per_host(clients.max(1)).build()
}

/// `url` if it names 127.0.0.1, without a trailing slash.
pub fn loopback(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("--url {url}: {e}"))?;
    if parsed.scheme() != "http" || parsed.host_str() != Some("127.0.0.1") {
        return Err(format!("--url {url}: only http://127.0.0.1:PORT is targeted"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// What a failed answer is called in the error counts: status and error code.
pub fn failure(status: u16, body: &[u8]) -> String {
    let code = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error_code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    format!("{status} {code}").trim_end().to_owned()
}

pub fn transport(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timeout".into()
    } else if e.is_connect() {
        "connect error".into()
    } else if e.is_body() || e.is_decode() {
        "body cut off".into()
    } else {
        "transport error".into()
    }
}

/// Runs up to `count` requests from `clients` tasks, for at most `limit`.
pub async fn phase(
    name: &str,
    watch: Watch,
    clients: usize,
    count: usize,
    limit: Duration,
    prepare: Prepare,
    check: Check,
) -> (Phase, Vec<(usize, Option<String>)>) {
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = watch.cpu();
    let start = Instant::now();
    let deadline = start + limit;
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let (next, prepare, check) = (next.clone(), prepare.clone(), check.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let request = prepare(i);
                    let sent = Instant::now();
                    let outcome = match request.send().await {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            match r.bytes().await {
                                Ok(body) => check(i, status, &body),
                                Err(e) => Outcome::Failed(transport(&e)),
                            }
                        }
                        Err(e) => Outcome::Failed(transport(&e)),
                    };
                    done.push((i, sent.elapsed(), Instant::now(), outcome));
                }
                done
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.extend(task.await.expect("a client task panicked"));
    }
    let last = results.iter().map(|r| r.2).max().unwrap_or(start);
    let wall = last.duration_since(start).as_secs_f64().max(1e-9);
    let elapsed = start.elapsed().as_secs_f64().max(1e-9);
    let cpu_after = watch.cpu();
    let mut latencies = Vec::new();
    let mut errors = BTreeMap::new();
    let mut ok = Vec::new();
    for (i, latency, _, outcome) in results.iter() {
        match outcome {
            Outcome::Ok(id) => {
                latencies.push(*latency);
                ok.push((*i, id.clone()));
            }
            Outcome::Failed(what) => *errors.entry(what.clone()).or_insert(0) += 1,
        }
    }
    latencies.sort_unstable();
    let phase = Phase {
        name: name.to_owned(),
        clients,
        attempted: results.len(),
        ok: ok.len(),
        wall_seconds: wall,
        per_second: ok.len() as f64 / wall,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        max_ms: percentile(&latencies, 100.0),
        errors,
        server_cpu_ms_per_ok: per_item_ms(cpu_before[0], cpu_after[0], ok.len()),
        store_cpu_ms_per_ok: per_item_ms(cpu_before[1], cpu_after[1], ok.len()),
        client_cpu_cores: per_item_ms(cpu_before[2], cpu_after[2], 1).map(|ms| ms / 1000.0 / elapsed),
    };
    println!(
        "{:<14} {:>6} ok of {:>6} in {:>6.2} s: {:>8.1}/s  p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms  \
         server CPU {:.2} ms/request, store {:.2} ms/request, client {:.2} cores; errors {:?}",
        phase.name,
        phase.ok,
        phase.attempted,
        phase.wall_seconds,
        phase.per_second,
        phase.p50_ms,
        phase.p99_ms,
        phase.max_ms,
        phase.server_cpu_ms_per_ok.unwrap_or(f64::NAN),
        phase.store_cpu_ms_per_ok.unwrap_or(f64::NAN),
        phase.client_cpu_cores.unwrap_or(f64::NAN),
        phase.errors
    );
    ok.sort_unstable();
    (phase, ok)
}

/// A check for uploads: 201 with an id (a 200 would mean the bytes were not distinct).
pub fn upload_check() -> Check {
    Arc::new(|_, status, body| {
        if status != 201 {
            return Outcome::Failed(failure(status, body));
        }
        match serde_json::from_slice::<Value>(body).ok().and_then(|v| v["id"].as_str().map(str::to_owned)) {
            Some(id) => Outcome::Ok(Some(id)),
            None => Outcome::Failed("201 without an id".into()),
        }
    })
}

/// User and system CPU seconds a process used so far (/proc/PID/stat, USER_HZ = 100).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The server's peak resident set (VmHWM) in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 =
        status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}
