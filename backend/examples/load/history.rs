//! A long history, then what reading it costs (`load history`). Pushes N profiles of one
//! service through Pyroscope's ingest API, one per 10 s of profiled time back from now
//! (100,000 is 11.6 days), alternating two regions; then measures, each over `--reads`
//! requests: the sessions listing's first page, pages deep in it (by cursors taken while
//! walking it all, which also checks that it lists every push once), a service's page,
//! and one-hour range queries over closed hours (a merge the first time, the same merge
//! again, which the hour cache answers, a label-filtered merge and a series), and before
//! them Pyroscope's `SelectMergeStacktraces` over an hour and over a day, cold and cached.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{self, failure, loopback, peak_rss_mib, phase, Check, Outcome, Prepare, Watch};
use crate::report::{Report, Reporting};

#[derive(clap::Args)]
pub struct HistoryArgs {
    /// The server, e.g. http://127.0.0.1:8080 (no other host is accepted).
    #[arg(long)]
    url: String,
    /// Profiles to push (0: read the history of `--tenant` only).
    #[arg(long, default_value_t = 100_000)]
    sessions: usize,
    /// A tenant an earlier run seeded; by default a new one.
    #[arg(long)]
    tenant: Option<String>,
    /// The newest pushed profile's time (UNIX seconds) in `--tenant`'s history.
    #[arg(long)]
    newest: Option<u64>,
    /// Concurrent clients pushing.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Concurrent clients reading (a few people at once: latency, not throughput).
    #[arg(long, default_value_t = 4)]
    read_clients: usize,
    /// Requests per read measurement.
    #[arg(long, default_value_t = 200)]
    reads: usize,
    /// Longest the pushes may take, in seconds.
    #[arg(long, default_value_t = 1800)]
    seconds: u64,
    #[command(flatten)]
    reporting: Reporting,
}

/// Seconds of profiled time per push.
pub const STEP: u64 = 10;

/// The `i`-th push's folded profile (distinct bytes per push: equal ones are stored once).
pub fn folded(i: usize) -> String {
    format!("main;serve;handler{} {}\nmain;gc {}\n", i % 64, 100 + i % 7, 1 + i)
}

/// Reads of the pushed history through Pyroscope's query API (Connect JSON), each
/// answer's total checked against the pushes in its range.
#[derive(Clone)]
struct Pyroscope {
    http: reqwest::Client,
    base: String,
    tenant: String,
    /// The newest push's time and how many were pushed, one per STEP back from it.
    newest: u64,
    count: u64,
}

impl Pyroscope {
    fn call(&self, method: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/querier.v1.QuerierService/{method}", self.base))
            .header("X-Scope-OrgID", &self.tenant)
            .json(&body)
    }

    /// The CPU type id the pushes answer to.
    async fn cpu_type(&self) -> Result<String, Box<dyn std::error::Error>> {
        let types: Value =
            self.call("ProfileTypes", serde_json::json!({})).send().await?.error_for_status()?.json().await?;
        let ids = types["profileTypes"].as_array().ok_or("no profileTypes")?;
        let id = ids.iter().filter_map(|t| t["ID"].as_str()).find(|id| id.starts_with("process_cpu:"));
        Ok(id.ok_or_else(|| format!("no process_cpu type in {types}"))?.to_owned())
    }

    /// The sum of the pushes' values taken in `[from, to)`.
    fn total(&self, (from, to): (u64, u64)) -> i64 {
        let first = self.newest - (self.count - 1) * STEP;
        (0..self.count as usize)
            .filter(|&i| (from..to).contains(&(first + i as u64 * STEP)))
            .map(|i| (100 + i % 7 + 1 + i) as i64)
            .sum()
    }

    /// SelectMergeStacktraces over `ranges` in turn, each answer's total checked.
    fn flame_graphs(&self, id: &str, ranges: Vec<(u64, u64)>) -> (Prepare, Check) {
        let expected: Vec<i64> = ranges.iter().map(|&r| self.total(r)).collect();
        let me = Arc::new(self.clone());
        let (id, ranges) = (id.to_owned(), Arc::new(ranges));
        let prepare: Prepare = {
            let ranges = ranges.clone();
            Arc::new(move |i| {
                let (from, to) = ranges[i % ranges.len()];
                let body = serde_json::json!({ "profileTypeID": id, "labelSelector": "{service_name=\"bench\"}",
                    "start": (from * 1000).to_string(), "end": (to * 1000).to_string() });
                me.call("SelectMergeStacktraces", body)
            })
        };
        let check: Check = Arc::new(move |i, status, body| {
            if status != 200 {
                return Outcome::Failed(failure(status, body));
            }
            let total = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v["flamegraph"]["total"].as_str().and_then(|t| t.parse::<i64>().ok()));
            match total {
                Some(t) if t == expected[i % expected.len()] => Outcome::Ok(None),
                other => Outcome::Failed(format!("total {other:?}, pushed {}", expected[i % expected.len()])),
            }
        });
        (prepare, check)
    }
}
const PAGE: usize = 50;

pub async fn run(args: HistoryArgs) -> Result<(), Box<dyn std::error::Error>> {
    let base = loopback(&args.url)?;
    let http = client::http(args.clients, Duration::from_secs(120))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let tenant = args.tenant.clone().unwrap_or_else(|| format!("history-{now:x}"));
    let newest = args.newest.unwrap_or(now / STEP * STEP);
    let watch = Watch { server: args.reporting.server_pid, store: args.reporting.store_pid };
    let mut report = Report::new(&args.reporting, &base, args.clients);
    println!("tenant {tenant}, newest push at {newest}");

    if args.sessions > 0 {
        let count = args.sessions as u64;
        let prepare: Prepare = {
            let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
            Arc::new(move |i| {
                let at = newest - (count - 1 - i as u64) * STEP;
                let region = ["eu", "us"][i % 2];
                let body = folded(i);
                http.post(format!(
                    "{base}/ingest?name=bench.cpu%7Bregion%3D{region}%7D&from={at}&until={}&format=folded",
                    at + STEP
                ))
                .header("X-Tenant-ID", &tenant)
                .body(body)
            })
        };
        let check: Check = Arc::new(|_, status, body| match status {
            200 => Outcome::Ok(None),
            _ => Outcome::Failed(failure(status, body)),
        });
        let limit = Duration::from_secs(args.seconds);
        let (pushes, _) = phase("pushes", watch, args.clients, args.sessions, limit, prepare, check).await;
        report.phases.push(pushes);
    }
    report.peak_rss_mib_phases = args.reporting.server_pid.and_then(peak_rss_mib);

    // Walk the whole listing, 1,000 a page: every push listed once; a cursor per page.
    let list = {
        let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
        move |query: String| http.get(format!("{base}/api/v1/profiles?{query}")).header("X-Tenant-ID", tenant.clone())
    };
    let (mut cursors, mut ids, mut cursor) = (Vec::new(), HashSet::new(), None::<String>);
    let walked = Instant::now();
    loop {
        let after = cursor.as_ref().map(|c| format!("&cursor={c}")).unwrap_or_default();
        let page: Value = list(format!("limit=1000{after}")).send().await?.error_for_status()?.json().await?;
        for profile in page["profiles"].as_array().ok_or("a listing without profiles")? {
            ids.insert(profile["id"].as_str().unwrap_or_default().to_owned());
        }
        match page["nextCursor"].as_str() {
            Some(next) => {
                cursors.push(next.to_owned());
                cursor = Some(next.to_owned());
            }
            None => break,
        }
    }
    println!(
        "listed {} sessions in {} pages of 1,000 in {:.1} s",
        ids.len(),
        cursors.len() + 1,
        walked.elapsed().as_secs_f64()
    );
    if args.sessions > 0 && ids.len() != args.sessions {
        return Err(format!("pushed {} profiles, the listing shows {}", args.sessions, ids.len()).into());
    }

    let listed = |expected: usize| -> Check {
        Arc::new(move |_, status, body| {
            if status != 200 {
                return Outcome::Failed(failure(status, body));
            }
            let count = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["profiles"].as_array().map(Vec::len));
            match count {
                Some(n) if n == expected => Outcome::Ok(None),
                other => Outcome::Failed(format!("{other:?} profiles")),
            }
        })
    };
    let reads = args.reads;
    let measure = |name: &'static str, prepare: Prepare, check: Check| {
        phase(name, watch, args.read_clients, reads, Duration::from_secs(300), prepare, check)
    };
    let first: Prepare = {
        let list = list.clone();
        Arc::new(move |_| list(format!("limit={PAGE}")))
    };
    report.phases.push(measure("listing: first page of 50", first, listed(PAGE)).await.0);
    // The cursors with a whole page after them (the k-th follows (k + 1) × 1,000 sessions).
    cursors.truncate(ids.len().saturating_sub(PAGE) / 1000);
    if !cursors.is_empty() {
        let deep: Prepare = {
            let (list, cursors) = (list.clone(), cursors.clone());
            Arc::new(move |i| list(format!("limit={PAGE}&cursor={}", cursors[i % cursors.len()])))
        };
        report.phases.push(measure("listing: a page of 50 deep in it", deep, listed(PAGE)).await.0);
    }
    let service: Prepare = {
        let list = list.clone();
        Arc::new(move |_| list(format!("service=bench&limit={PAGE}")))
    };
    report.phases.push(measure("listing: a service's first page of 50", service, listed(PAGE)).await.0);

    // Closed hours of the history, newest first, each one a different hour.
    let span = if args.sessions > 0 { args.sessions as u64 * STEP } else { ids.len() as u64 * STEP };
    let oldest = newest + STEP - span;
    let hours: Vec<u64> = (1..).map(|h| (newest / 3600 - h) * 3600).take_while(|&h| h >= oldest).collect();
    if hours.is_empty() {
        return Err("the history holds no whole hour".into());
    }
    println!("{} whole hours", hours.len());
    let ranged = |path: &'static str, extra: &'static str| -> Prepare {
        let (http, base, tenant, hours) = (http.clone(), base.clone(), tenant.clone(), hours.clone());
        Arc::new(move |i| {
            let from = hours[i % hours.len()];
            http.get(format!(
                "{base}/api/v1/profiling/{path}?service=bench&profileType=cpu&from={from}&to={}{extra}",
                from + 3600
            ))
            .header("X-Tenant-ID", &tenant)
        })
    };
    let merged = |expected: u64| -> Check {
        Arc::new(move |_, status, body| {
            if status != 200 {
                return Outcome::Failed(failure(status, body));
            }
            match serde_json::from_slice::<Value>(body).ok().and_then(|v| v["profileCount"].as_u64()) {
                Some(n) if n == expected => Outcome::Ok(None),
                other => Outcome::Failed(format!("profileCount {other:?}")),
            }
        })
    };
    let series: Check = Arc::new(|_, status, body| match status {
        200 => Outcome::Ok(None),
        _ => Outcome::Failed(failure(status, body)),
    });
    let per_hour = 3600 / STEP;
    // Pyroscope's query API first, while no hour is cached: what Grafana asks.
    let count = if args.sessions > 0 { args.sessions as u64 } else { ids.len() as u64 };
    let pyroscope = Pyroscope { http: http.clone(), base: base.clone(), tenant: tenant.clone(), newest, count };
    let id = pyroscope.cpu_type().await?;
    let days: Vec<u64> = (1..).map(|d| (newest / 86_400 - d) * 86_400).take_while(|&d| d >= oldest).collect();
    let one_hour = |i: usize| (hours[i % hours.len()], hours[i % hours.len()] + 3600);
    let flame = |name: &'static str, ranges: Vec<(u64, u64)>, times: usize| {
        let (prepare, check) = pyroscope.flame_graphs(&id, ranges);
        phase(name, watch, args.read_clients, times, Duration::from_secs(900), prepare, check)
    };
    // Cold first: each day once (which caches its hours), then each hour outside them
    // once; then the same ranges again, answered from the hours' caches.
    let hourly: Vec<(u64, u64)> = (0..hours.len()).map(one_hour).collect();
    let daily: Vec<(u64, u64)> = days.iter().map(|&d| (d, d + 86_400)).collect();
    let outside: Vec<(u64, u64)> =
        hourly.iter().copied().filter(|&(h, _)| !daily.iter().any(|&(d, e)| (d..e).contains(&h))).collect();
    if !daily.is_empty() {
        report.phases.push(flame("SelectMergeStacktraces, one day, first time", daily.clone(), daily.len()).await.0);
    }
    if !outside.is_empty() {
        let once = outside.len();
        report.phases.push(flame("SelectMergeStacktraces, one hour, first time", outside, once).await.0);
    }
    report.phases.push(flame("SelectMergeStacktraces, one hour, again", hourly, reads).await.0);
    if !daily.is_empty() {
        report.phases.push(flame("SelectMergeStacktraces, one day, again", daily, reads).await.0);
    }
    report
        .phases
        .push(measure("merge of one hour (360 profiles), first time", ranged("merge", ""), merged(per_hour)).await.0);
    report.phases.push(measure("merge of one hour, again (cached)", ranged("merge", ""), merged(per_hour)).await.0);
    let eu = ranged("merge", "&labels=region%3Deu");
    report.phases.push(measure("merge of one hour, region=eu (180 profiles)", eu, merged(per_hour / 2)).await.0);
    report.phases.push(measure("series of one hour, step 1 min", ranged("series", "&step=60"), series).await.0);
    report.peak_rss_mib_end = args.reporting.server_pid.and_then(peak_rss_mib);
    if let (Some(a), Some(b)) = (report.peak_rss_mib_phases, report.peak_rss_mib_end) {
        println!("server peak RSS: {a:.0} MiB after the pushes, {b:.0} MiB at the end");
    }
    if let Some(path) = &args.reporting.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}
