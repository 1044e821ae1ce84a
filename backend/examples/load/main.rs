//! Load for a running `stacklens serve` on 127.0.0.1 (see scripts/load.sh and
//! BENCHMARKS.md): uploads of distinct small and large CPU profiles, raw GETs, diffs of
//! two stored CPU sessions, OTLP pushes over HTTP and gRPC (see [`otlp`]), and a storm
//! of uploads all in flight at once that are then read back and listed; and, with
//! `history`, reads over a long history (see [`history`]), and with `fleet`, a fleet's
//! history on compacted blocks (see [`fleet`]). Every phase stops by itself
//! after a count or a time, whichever comes first, and every request has a timeout.
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

mod client;
mod fleet;
mod history;
mod otlp;
mod report;
mod storm;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use client::{failure, loopback, peak_rss_mib, phase, upload_check, Check, Outcome, Prepare, Watch};
use report::{table, Report, Reporting};
use storm::storm;

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
    /// Pushes a fleet's history, waits for its compaction, then measures day to month ranges.
    Fleet(fleet::FleetArgs),
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
    /// OTLP pushes over HTTP and again over gRPC, at most (0: none).
    #[arg(long, default_value_t = 2000)]
    otlp: usize,
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = || tokio::runtime::Builder::new_multi_thread().enable_all().build();
    match Cli::parse().command {
        Command::Run(args) => runtime()?.block_on(run(args)),
        Command::History(args) => runtime()?.block_on(history::run(args)),
        Command::Fleet(args) => runtime()?.block_on(fleet::run(args)),
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

async fn run(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    let base = loopback(&args.url)?;
    let read = |path: &str| -> Result<Bytes, String> {
        let file = args.fixtures.join(path);
        std::fs::read(&file).map(Bytes::from).map_err(|e| format!("{}: {e}", file.display()))
    };
    let (small, compare, large) =
        (read("go/base/cpu.pb.gz")?, read("go/compare/cpu.pb.gz")?, read("large/cpu.large.pb.gz")?);
    let http = client::http(args.clients.max(args.storm), Duration::from_secs(args.request_timeout))?;
    let run_tag = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    let tenant = format!("load-{run_tag}");
    let limit = Duration::from_secs(args.seconds);
    let watch = Watch { server: args.reporting.server_pid, store: args.reporting.store_pid };
    let mut report = Report { large_clients: args.large_clients, ..Report::new(&args.reporting, &base, args.clients) };
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
    if args.otlp > 0 {
        let load = otlp::OtlpLoad { pushes: args.otlp, clients: args.clients, limit };
        let timeout = Duration::from_secs(args.request_timeout);
        report.phases.extend(otlp::push_phases(&base, &tenant, &small, &load, watch, timeout).await?);
    }
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
