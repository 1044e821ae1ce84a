//! Load for a running `stacklens serve` on 127.0.0.1 (see scripts/load.sh and
//! BENCHMARKS.md): uploads of distinct small and large CPU profiles, raw GETs, diffs of
//! two stored CPU sessions, and a storm of uploads all in flight at once that are then
//! read back and listed; and, with `history`, reads over a long history (see
//! [`history`]). Every phase stops by itself after a count or a time, whichever comes
//! first, and every request has a timeout.
//!
//! ```text
//! cargo run --release -p stacklens-backend --example load -- run --url http://127.0.0.1:PORT \
//!     --fixtures ../shared/fixtures --clients 64 --server-pid PID --label file:// --json out.json
//! cargo run --release -p stacklens-backend --example load -- history --url http://127.0.0.1:PORT \
//!     --sessions 100000 --server-pid PID --label file:// --json out.json
//! cargo run --release -p stacklens-backend --example load -- table out-file.json out-s3.json
//! ```
//!
//! Distinct bytes per upload (the server stores equal bytes once and answers 200): the
//! fixture's gzip stream followed by a second gzip member that holds one more
//! `string_table` entry (field 6 of the Profile message) naming the upload. Gzip readers
//! inflate every member (core, `gzip -d`, Go's pprof), so each upload is a distinct, valid
//! profile with the same samples, and making it costs the client a memcpy, not a deflate
//! of the whole profile.

mod history;

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(about = "Load for a stacklens server on 127.0.0.1")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the phases against a server and prints what it measured.
    Run(RunArgs),
    /// Pushes a long history, then measures listing pages and one-hour range queries.
    History(history::HistoryArgs),
    /// A Markdown table (one column per run) from the JSON files `run --json` wrote.
    Table { files: Vec<PathBuf> },
}

#[derive(clap::Args)]
struct RunArgs {
    /// The server, e.g. http://127.0.0.1:8080 (no other host is accepted).
    #[arg(long)]
    url: String,
    /// The shared fixtures folder (go/base/cpu.pb.gz, go/compare/cpu.pb.gz, large/cpu.large.pb.gz).
    #[arg(long, default_value = "../shared/fixtures")]
    fixtures: PathBuf,
    /// Concurrent clients for small uploads, raw GETs and diffs.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Small uploads (go/base/cpu.pb.gz, 19 KB), at most.
    #[arg(long, default_value_t = 5000)]
    small: usize,
    /// Large uploads (large/cpu.large.pb.gz, 14 MB), at most.
    #[arg(long, default_value_t = 24)]
    large: usize,
    /// Concurrent clients for large uploads (each one parses into ~190 MB of the budget).
    #[arg(long, default_value_t = 4)]
    large_clients: usize,
    /// Raw GETs of the small uploads, at most.
    #[arg(long, default_value_t = 5000)]
    raw: usize,
    /// Diffs of two stored CPU sessions, at most.
    #[arg(long, default_value_t = 400)]
    analysis: usize,
    /// Uploads all in flight at once, then read back and listed (0: none).
    #[arg(long, default_value_t = 1000)]
    storm: usize,
    /// Longest any one phase may run, in seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Longest any one request may take, in seconds.
    #[arg(long, default_value_t = 120)]
    request_timeout: u64,
    #[command(flatten)]
    reporting: Reporting,
}

/// The processes a run watches, and where its results go.
#[derive(clap::Args)]
struct Reporting {
    /// The server's pid, to read its peak RSS (VmHWM) from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The object store's pid (SeaweedFS on this machine), to count its CPU too.
    #[arg(long)]
    store_pid: Option<u32>,
    /// The column's name in the table.
    #[arg(long, default_value = "server")]
    label: String,
    /// Also write the results here (for `table`).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// One phase's numbers; latencies are of the successful requests, from sending the
/// request to having the whole response body.
#[derive(Serialize, Deserialize, Default)]
struct Phase {
    name: String,
    clients: usize,
    attempted: usize,
    ok: usize,
    wall_seconds: f64,
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Failures by status and error code (or transport error, or byte mismatch).
    errors: BTreeMap<String, usize>,
    /// CPU the server used during the phase, per successful request (with --server-pid).
    server_cpu_ms_per_ok: Option<f64>,
    /// CPU the object store's process used during the phase, per successful request.
    store_cpu_ms_per_ok: Option<f64>,
    /// CPU this load tool used during the phase, in cores (it shares the machine).
    client_cpu_cores: Option<f64>,
}

#[derive(Serialize, Deserialize, Default)]
struct Storm {
    count: usize,
    /// Answered 201 on the first and only try.
    acknowledged: usize,
    distinct_ids: usize,
    /// Raw GETs that returned exactly the uploaded bytes.
    identical: usize,
    /// Acknowledged ids found by paging through the listing.
    listed: usize,
    upload_wall_seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    readback_seconds: f64,
    errors: BTreeMap<String, usize>,
    /// CPU the server (and the store's process) used for the uploads, per acknowledged one.
    server_cpu_ms_per_upload: Option<f64>,
    store_cpu_ms_per_upload: Option<f64>,
}

#[derive(Serialize, Deserialize, Default)]
struct Report {
    label: String,
    url: String,
    clients: usize,
    large_clients: usize,
    /// `/proc/loadavg` before the run.
    load_before: String,
    phases: Vec<Phase>,
    storm: Option<Storm>,
    /// The server's VmHWM after the throughput phases, and after the storm.
    peak_rss_mib_phases: Option<f64>,
    peak_rss_mib_end: Option<f64>,
}

/// How one request ended.
enum Outcome {
    /// Success, with the id the server named (uploads).
    Ok(Option<String>),
    Failed(String),
}

/// Processes on this machine whose CPU time a phase reports.
#[derive(Clone, Copy, Default)]
struct Watch {
    server: Option<u32>,
    store: Option<u32>,
}

impl Watch {
    /// CPU seconds of the server, the store and this tool so far.
    fn cpu(&self) -> [Option<f64>; 3] {
        [self.server.and_then(cpu_seconds), self.store.and_then(cpu_seconds), cpu_seconds(std::process::id())]
    }
}

/// `after - before` per item, in milliseconds.
fn per_item_ms(before: Option<f64>, after: Option<f64>, items: usize) -> Option<f64> {
    Some((after? - before?) * 1000.0 / items.max(1) as f64)
}

type Prepare = Arc<dyn Fn(usize) -> reqwest::RequestBuilder + Send + Sync>;
type Check = Arc<dyn Fn(usize, u16, &[u8]) -> Outcome + Send + Sync>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Run(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(run(args))
        }
        Command::History(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(history::run(args))
        }
        Command::Table { files } => {
            let reports = files
                .iter()
                .map(|f| Ok(serde_json::from_slice::<Report>(&std::fs::read(f)?)?))
                .collect::<Result<Vec<_>, Box<dyn std::error::Error>>>()?;
            print!("{}", table(&reports));
            Ok(())
        }
    }
}

/// `url` if it names 127.0.0.1, without a trailing slash.
fn loopback(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("--url {url}: {e}"))?;
    if parsed.scheme() != "http" || parsed.host_str() != Some("127.0.0.1") {
        return Err(format!("--url {url}: only http://127.0.0.1:PORT is targeted"));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// `gz` followed by a gzip member holding one more string_table entry: `tag`.
fn distinct(gz: &[u8], tag: &str) -> Vec<u8> {
    let mut field = vec![0x32]; // field 6 (string_table), wire type 2
    let mut len = tag.len();
    while len >= 0x80 {
        field.push((len as u8 & 0x7f) | 0x80);
        len >>= 7;
    }
    field.push(len as u8);
    field.extend_from_slice(tag.as_bytes());
    let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    member.write_all(&field).expect("writing to memory");
    let member = member.finish().expect("writing to memory");
    let mut out = Vec::with_capacity(gz.len() + member.len());
    out.extend_from_slice(gz);
    out.extend_from_slice(&member);
    out
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// What a failed answer is called in the error counts: status and error code.
fn failure(status: u16, body: &[u8]) -> String {
    let code = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error_code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    format!("{status} {code}").trim_end().to_owned()
}

fn transport(e: &reqwest::Error) -> String {
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
async fn phase(
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
fn upload_check() -> Check {
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
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The server's peak resident set (VmHWM) in MiB.
fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 =
        status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

async fn run(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    let base = loopback(&args.url)?;
    let read = |path: &str| -> Result<Bytes, String> {
        let file = args.fixtures.join(path);
        std::fs::read(&file).map(Bytes::from).map_err(|e| format!("{}: {e}", file.display()))
    };
    let (small, compare, large) =
        (read("go/base/cpu.pb.gz")?, read("go/compare/cpu.pb.gz")?, read("large/cpu.large.pb.gz")?);
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(args.request_timeout))
        .pool_max_idle_per_host(args.clients.max(args.storm).max(1))
        .build()?;
    let run_tag = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    let tenant = format!("load-{run_tag}");
    let limit = Duration::from_secs(args.seconds);
    let watch = Watch { server: args.reporting.server_pid, store: args.reporting.store_pid };
    let mut report = Report {
        label: args.reporting.label.clone(),
        url: base.clone(),
        clients: args.clients,
        large_clients: args.large_clients,
        load_before: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_owned(),
        ..Report::default()
    };
    println!("{} ({}), tenant {tenant}; load average before: {}", args.reporting.label, base, report.load_before);

    // Two stored CPU sessions for the diffs.
    let mut sessions = Vec::new();
    for body in [small.clone(), compare] {
        let r = http
            .post(format!("{base}/api/v1/profiles?service=load"))
            .header("X-Tenant-ID", &tenant)
            .body(body)
            .send()
            .await?;
        let status = r.status().as_u16();
        let v: Value = r.json().await?;
        let id =
            v["id"].as_str().filter(|_| status == 201 || status == 200).ok_or(format!("setup upload: {status} {v}"))?;
        sessions.push(id.to_owned());
    }

    // Small uploads, distinct bytes each, made before the clock starts.
    let bodies: Arc<Vec<Bytes>> = Arc::new(
        (0..args.small).map(|i| Bytes::from(distinct(&small, &format!("load-{run_tag}-small-{i}")))).collect(),
    );
    let prepare: Prepare = {
        let (http, base, tenant, bodies) = (http.clone(), base.clone(), tenant.clone(), bodies.clone());
        Arc::new(move |i| {
            http.post(format!("{base}/api/v1/profiles?service=load-small"))
                .header("X-Tenant-ID", &tenant)
                .body(bodies[i].clone())
        })
    };
    let (small_phase, stored) =
        phase("small uploads", watch, args.clients, args.small, limit, prepare, upload_check()).await;
    report.phases.push(small_phase);

    // Large uploads: each body made (a 14 MB copy plus a tiny member) before its clock starts.
    let prepare: Prepare = {
        let (http, base, tenant, large, tag) =
            (http.clone(), base.clone(), tenant.clone(), large.clone(), run_tag.clone());
        Arc::new(move |i| {
            http.post(format!("{base}/api/v1/profiles?service=load-large"))
                .header("X-Tenant-ID", &tenant)
                .body(distinct(&large, &format!("load-{tag}-large-{i}")))
        })
    };
    let (large_phase, _) =
        phase("large uploads", watch, args.large_clients, args.large, limit, prepare, upload_check()).await;
    report.phases.push(large_phase);

    // Raw GETs of the small uploads, checked byte for byte.
    if !stored.is_empty() {
        let stored = Arc::new(stored);
        let prepare: Prepare = {
            let (http, base, tenant, stored) = (http.clone(), base.clone(), tenant.clone(), stored.clone());
            Arc::new(move |i| {
                let id = stored[i % stored.len()].1.as_deref().unwrap_or_default();
                http.get(format!("{base}/api/v1/profiles/{id}/raw")).header("X-Tenant-ID", &tenant)
            })
        };
        let check: Check = {
            let (stored, bodies) = (stored.clone(), bodies.clone());
            Arc::new(move |i, status, body| match status {
                200 if body == bodies[stored[i % stored.len()].0].as_ref() => Outcome::Ok(None),
                200 => Outcome::Failed("200 with other bytes".into()),
                _ => Outcome::Failed(failure(status, body)),
            })
        };
        let (raw_phase, _) = phase("raw GETs", watch, args.clients, args.raw, limit, prepare, check).await;
        report.phases.push(raw_phase);
    }

    // Diffs of the two stored CPU sessions.
    let prepare: Prepare = {
        let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
        let request = json!({"baseId": sessions[0], "compareId": sessions[1], "type": "cpu"});
        Arc::new(move |_| {
            http.post(format!("{base}/api/v1/profiling/diff")).header("X-Tenant-ID", &tenant).json(&request)
        })
    };
    let check: Check = Arc::new(|_, status, body| {
        let ok = status == 200
            && serde_json::from_slice::<Value>(body)
                .is_ok_and(|v| v["regressions"].is_array() && v["overallDelta"].is_number());
        if ok {
            Outcome::Ok(None)
        } else {
            Outcome::Failed(failure(status, body))
        }
    });
    let (analysis_phase, _) = phase("diffs", watch, args.clients, args.analysis, limit, prepare, check).await;
    report.phases.push(analysis_phase);
    report.peak_rss_mib_phases = args.reporting.server_pid.and_then(peak_rss_mib);

    if args.storm > 0 {
        let storm_tenant = format!("{tenant}-storm");
        let bodies: Vec<Bytes> =
            (0..args.storm).map(|i| Bytes::from(distinct(&small, &format!("load-{run_tag}-storm-{i}")))).collect();
        report.storm = Some(storm(&http, &base, &storm_tenant, bodies, args.clients, limit, watch).await);
    }
    report.peak_rss_mib_end = args.reporting.server_pid.and_then(peak_rss_mib);
    if let (Some(a), Some(b)) = (report.peak_rss_mib_phases, report.peak_rss_mib_end) {
        println!("server peak RSS: {a:.0} MiB after the phases, {b:.0} MiB at the end");
    }
    if let Some(path) = &args.reporting.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}

/// All `bodies` uploaded at once (each task waits until every task is ready, then
/// sends), then each acknowledged one read back and the listing paged through.
async fn storm(
    http: &reqwest::Client,
    base: &str,
    tenant: &str,
    bodies: Vec<Bytes>,
    clients: usize,
    limit: Duration,
    watch: Watch,
) -> Storm {
    let count = bodies.len();
    let bodies = Arc::new(bodies);
    let gate = Arc::new(tokio::sync::Barrier::new(count));
    let cpu_before = watch.cpu();
    let start = Instant::now();
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let (http, url, tenant, bodies, gate) = (
                http.clone(),
                format!("{base}/api/v1/profiles?service=storm"),
                tenant.to_owned(),
                bodies.clone(),
                gate.clone(),
            );
            tokio::spawn(async move {
                gate.wait().await;
                let sent = Instant::now();
                let outcome = match http.post(url).header("X-Tenant-ID", tenant).body(bodies[i].clone()).send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        match r.bytes().await {
                            Ok(body) => upload_check()(i, status, &body),
                            Err(e) => Outcome::Failed(transport(&e)),
                        }
                    }
                    Err(e) => Outcome::Failed(transport(&e)),
                };
                (sent.elapsed(), outcome)
            })
        })
        .collect();
    let mut result = Storm { count, ..Storm::default() };
    let mut latencies = Vec::new();
    let mut acknowledged = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let (latency, outcome) = task.await.expect("an upload task panicked");
        match outcome {
            Outcome::Ok(id) => {
                latencies.push(latency);
                acknowledged.push((i, id.unwrap_or_default()));
            }
            Outcome::Failed(what) => *result.errors.entry(what).or_insert(0) += 1,
        }
    }
    result.upload_wall_seconds = start.elapsed().as_secs_f64();
    let cpu_after = watch.cpu();
    result.server_cpu_ms_per_upload = per_item_ms(cpu_before[0], cpu_after[0], acknowledged.len());
    result.store_cpu_ms_per_upload = per_item_ms(cpu_before[1], cpu_after[1], acknowledged.len());
    latencies.sort_unstable();
    result.acknowledged = acknowledged.len();
    result.distinct_ids = acknowledged.iter().map(|(_, id)| id.as_str()).collect::<HashSet<_>>().len();
    result.p50_ms = percentile(&latencies, 50.0);
    result.p99_ms = percentile(&latencies, 99.0);
    result.max_ms = percentile(&latencies, 100.0);

    // Read back with `clients` tasks, each byte compared.
    let readback = Instant::now();
    let acknowledged = Arc::new(acknowledged);
    let prepare: Prepare = {
        let (http, base, tenant, acknowledged) =
            (http.clone(), base.to_owned(), tenant.to_owned(), acknowledged.clone());
        Arc::new(move |k| {
            http.get(format!("{base}/api/v1/profiles/{}/raw", acknowledged[k].1)).header("X-Tenant-ID", &tenant)
        })
    };
    let check: Check = {
        let (acknowledged, bodies) = (acknowledged.clone(), bodies.clone());
        Arc::new(move |k, status, body| match status {
            200 if body == bodies[acknowledged[k].0].as_ref() => Outcome::Ok(None),
            200 => Outcome::Failed("read back other bytes".into()),
            _ => Outcome::Failed(format!("read back: {}", failure(status, body))),
        })
    };
    let (read, _) = phase("storm readback", Watch::default(), clients, acknowledged.len(), limit, prepare, check).await;
    result.identical = read.ok;
    for (what, n) in read.errors {
        *result.errors.entry(what).or_insert(0) += n;
    }

    // The listing, page by page (bounded: at most count / 100 + 2 pages).
    let wanted: HashSet<&str> = acknowledged.iter().map(|(_, id)| id.as_str()).collect();
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..count / 100 + 2 {
        let mut url = format!("{base}/api/v1/profiles?limit=100");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let page = match http.get(url).header("X-Tenant-ID", tenant).send().await {
            Ok(r) if r.status() == 200 => r.json::<Value>().await.unwrap_or_default(),
            Ok(r) => {
                *result.errors.entry(format!("listing: {}", r.status().as_u16())).or_insert(0) += 1;
                break;
            }
            Err(e) => {
                *result.errors.entry(format!("listing: {}", transport(&e))).or_insert(0) += 1;
                break;
            }
        };
        for p in page["profiles"].as_array().into_iter().flatten() {
            if let Some(id) = p["id"].as_str().filter(|id| wanted.contains(id)) {
                seen.insert(id.to_owned());
            }
        }
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    result.listed = seen.len();
    result.readback_seconds = readback.elapsed().as_secs_f64();
    println!(
        "storm: {} uploads at once: {} acknowledged (201), {} distinct ids, {} read back identical, {} listed; \
         uploads done in {:.2} s (p50 {:.0} ms, p99 {:.0} ms; CPU per upload: server {:.2} ms, store {:.2} ms), \
         read back and listed in {:.2} s; errors {:?}",
        result.count,
        result.acknowledged,
        result.distinct_ids,
        result.identical,
        result.listed,
        result.upload_wall_seconds,
        result.p50_ms,
        result.p99_ms,
        result.server_cpu_ms_per_upload.unwrap_or(f64::NAN),
        result.store_cpu_ms_per_upload.unwrap_or(f64::NAN),
        result.readback_seconds,
        result.errors
    );
    result
}

fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v < 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}

fn cell(p: &Phase) -> String {
    let rate = if p.per_second >= 100.0 { format!("{:.0}", p.per_second) } else { format!("{:.1}", p.per_second) };
    let store = p.store_cpu_ms_per_ok.map(|c| format!(" + store {}", ms(c))).unwrap_or_default();
    let cpu =
        p.server_cpu_ms_per_ok.map(|c| format!(" · CPU per request: server {}{store}", ms(c))).unwrap_or_default();
    format!("{rate}/s · p50 {} · p99 {}{cpu} ({} ok)", ms(p.p50_ms), ms(p.p99_ms), p.ok)
}

fn table(reports: &[Report]) -> String {
    let mut out = String::new();
    let header: Vec<&str> = reports.iter().map(|r| r.label.as_str()).collect();
    out.push_str(&format!("| 127.0.0.1 | {} |\n", header.join(" | ")));
    out.push_str(&format!("| --- |{}\n", " --- |".repeat(reports.len())));
    let Some(first) = reports.first() else { return out };
    let phase_of = |r: &Report, name: &str| r.phases.iter().find(|p| p.name == name).map(cell).unwrap_or("—".into());
    let title = |p: &Phase| match p.name.as_str() {
        "small uploads" => format!("uploads/s, small (19 KB `cpu.pb.gz`, distinct), {} clients", p.clients),
        "large uploads" => format!("uploads/s, large (14 MB `cpu.large.pb.gz`, distinct), {} clients", p.clients),
        "raw GETs" => format!("raw GETs/s (small, bytes checked), {} clients", p.clients),
        "diffs" => format!("analysis calls/s (`POST /api/v1/profiling/diff`, two cpu sessions), {} clients", p.clients),
        other => format!("{other}, {} clients", p.clients),
    };
    for p in &first.phases {
        let (name, title) = (&p.name, title(p));
        let cells: Vec<String> = reports.iter().map(|r| phase_of(r, name)).collect();
        out.push_str(&format!("| {title} | {} |\n", cells.join(" | ")));
    }
    let errors: Vec<String> = reports
        .iter()
        .map(|r| {
            let all: Vec<String> = r
                .phases
                .iter()
                .flat_map(|p| p.errors.iter().map(move |(k, n)| format!("{}: {k} ×{n}", p.name)))
                .collect();
            if all.is_empty() {
                "none".into()
            } else {
                all.join(", ")
            }
        })
        .collect();
    out.push_str(&format!("| errors | {} |\n", errors.join(" | ")));
    let rss: Vec<String> = reports
        .iter()
        .map(|r| match (r.peak_rss_mib_phases, r.peak_rss_mib_end) {
            (Some(a), Some(b)) => format!("{a:.0} MiB after the phases, {b:.0} MiB at the end"),
            _ => "—".into(),
        })
        .collect();
    out.push_str(&format!("| server peak RSS (VmHWM) | {} |\n", rss.join(" | ")));
    if reports.iter().all(|r| r.storm.is_none()) {
        return out;
    }
    let storms: Vec<String> = reports
        .iter()
        .map(|r| match &r.storm {
            Some(s) => {
                let errors = if s.errors.is_empty() { String::new() } else { format!("; errors {:?}", s.errors) };
                let store = s.store_cpu_ms_per_upload.map(|c| format!(" + store {}", ms(c))).unwrap_or_default();
                let cpu = s
                    .server_cpu_ms_per_upload
                    .map(|c| format!("; CPU per upload: server {}{store}", ms(c)))
                    .unwrap_or_default();
                format!(
                    "**{} acknowledged / {} read back identical** ({} distinct ids, {} listed); all answered in {:.1} s \
                     (p50 {}, p99 {}){cpu}{errors}",
                    s.acknowledged,
                    s.identical,
                    s.distinct_ids,
                    s.listed,
                    s.upload_wall_seconds,
                    ms(s.p50_ms),
                    ms(s.p99_ms)
                )
            }
            None => "—".into(),
        })
        .collect();
    let count = reports.iter().find_map(|r| r.storm.as_ref().map(|s| s.count)).unwrap_or(0);
    let count = if count >= 1000 { format!("{},{:03}", count / 1000, count % 1000) } else { count.to_string() };
    out.push_str(&format!("| {count} concurrent uploads of distinct profiles | {} |\n", storms.join(" | ")));
    out
}
