//! A fleet's history on compacted blocks (`load fleet`, issue 36): one service pushed
//! every 10 s of simulated time for `--days` days and, beside it, `--services` services
//! pushed every 10 s for the last day, all through Pyroscope's `/ingest`; then it waits
//! until the server's compactor has made every closed hour's block (timed), and measures
//! range queries over the long service from `--read-clients` clients: one hour, one
//! day, 7 and 30 days merged, a day filtered by label, and a series over the whole
//! history, each answer's profile count checked. Every query reads blocks from the store
//! (the server caches none of them), so each is a cold read as far as the server goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::client::{self, failure, loopback, peak_rss_mib, phase, Check, Outcome, Prepare, Watch};
use crate::history::{folded, STEP};
use crate::report::{Report, Reporting};

#[derive(clap::Args)]
pub struct FleetArgs {
    /// The server, e.g. http://127.0.0.1:8080 (no other host is accepted).
    #[arg(long)]
    url: String,
    /// Days of history of the long service.
    #[arg(long, default_value_t = 30)]
    days: u64,
    /// Services pushed for the last day beside it.
    #[arg(long, default_value_t = 50)]
    services: usize,
    /// Concurrent clients pushing.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Concurrent clients reading.
    #[arg(long, default_value_t = 4)]
    read_clients: usize,
    /// Requests per read measurement.
    #[arg(long, default_value_t = 50)]
    reads: usize,
    /// Longest the pushes, and then the compaction, may take, in seconds.
    #[arg(long, default_value_t = 3600)]
    seconds: u64,
    #[command(flatten)]
    reporting: Reporting,
}

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

pub async fn run(args: FleetArgs) -> Result<(), Box<dyn std::error::Error>> {
    let base = loopback(&args.url)?;
    let http = client::http(args.clients, Duration::from_secs(300))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let tenant = format!("fleet-{now:x}");
    let newest = now / STEP * STEP;
    let watch = Watch { server: args.reporting.server_pid, store: args.reporting.store_pid };
    let mut report = Report::new(&args.reporting, &base, args.clients);
    let long = (args.days * DAY / STEP) as usize;
    let short = (DAY / STEP) as usize;
    let pushes = long + args.services * short;
    println!(
        "tenant {tenant}: {long} pushes of one service over {} days, {} of {} services over the last day",
        args.days,
        args.services * short,
        args.services
    );

    // The i-th push: the long service's first, then each short service's in turn.
    let prepare: Prepare = {
        let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
        let services = args.services.max(1);
        Arc::new(move |i| {
            let (service, at) = if i < long {
                ("bench".to_owned(), newest - (long - 1 - i) as u64 * STEP)
            } else {
                let j = i - long;
                (format!("svc{}", j % services), newest - (short - 1 - j / services) as u64 * STEP)
            };
            let region = ["eu", "us"][i % 2];
            http.post(format!(
                "{base}/ingest?name={service}.cpu%7Bregion%3D{region}%7D&from={at}&until={}&format=folded",
                at + STEP
            ))
            .header("X-Tenant-ID", &tenant)
            .body(folded(i))
        })
    };
    let check: Check = Arc::new(|_, status, body| match status {
        200 => Outcome::Ok(None),
        _ => Outcome::Failed(failure(status, body)),
    });
    let limit = Duration::from_secs(args.seconds);
    let (pushed, _) = phase("pushes", watch, args.clients, pushes, limit, prepare, check).await;
    let lost = pushes - pushed.ok;
    report.phases.push(pushed);
    if lost > 0 {
        return Err(format!("{lost} of {pushes} pushes failed").into());
    }
    report.peak_rss_mib_phases = args.reporting.server_pid.and_then(peak_rss_mib);

    // Compaction: done once the newest closed hour of every service reads its block (a
    // one-second range inside it lists nothing).
    let get = |path: String| {
        let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
        async move {
            let response = http.get(format!("{base}{path}")).header("X-Tenant-ID", &tenant).send().await?;
            let status = response.status();
            let body: Value = response.json().await?;
            if !status.is_success() {
                return Err(format!("{path}: {status} {body}").into());
            }
            Ok::<Value, Box<dyn std::error::Error>>(body)
        }
    };
    // Hours close 5 minutes after their end.
    let last_closed = (now - 300) / HOUR - 1;
    let services: Vec<String> =
        std::iter::once("bench".to_owned()).chain((0..args.services).map(|k| format!("svc{k}"))).collect();
    let waited = Instant::now();
    let mut pending = services.clone();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for service in pending {
            let at = last_closed * HOUR + HOUR - 1;
            let answer =
                get(format!("/api/v1/profiling/merge?service={service}&profileType=cpu&from={at}&to={}", at + 1))
                    .await?;
            if answer["listings"].as_u64() != Some(0) {
                still.push(service);
            }
        }
        pending = still;
        if waited.elapsed() > limit {
            return Err(format!("the compactor had not made {} services' blocks after {limit:?}", pending.len()).into());
        }
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    // Then the newest closed day's block of the long service: its whole day reads one
    // object.
    let newest_day = ((last_closed + 1) * HOUR / DAY).saturating_sub(1) * DAY;
    let whole_day =
        format!("/api/v1/profiling/merge?service=bench&profileType=cpu&from={newest_day}&to={}", newest_day + DAY);
    while args.days >= 2 && get(whole_day.clone()).await?["objectsRead"].as_u64() != Some(1) {
        if waited.elapsed() > limit {
            return Err(format!("the compactor had not made the day block of {newest_day} after {limit:?}").into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let compaction = waited.elapsed().as_secs_f64();
    println!("every closed hour and day compacted {compaction:.1} s after the pushes");

    // Range queries over the long service, each over whole closed hours ending at a
    // different hour, newest first.
    let first = newest - (long as u64 - 1) * STEP;
    let count_in = |(from, to): (u64, u64), region: Option<usize>| -> u64 {
        (0..long)
            .filter(|&i| (from..to).contains(&(first + i as u64 * STEP)) && region.is_none_or(|r| i % 2 == r))
            .count() as u64
    };
    let ranges = |span: u64| -> Vec<(u64, u64)> {
        (0..)
            .map(|k| ((last_closed + 1 - k) * HOUR - span, (last_closed + 1 - k) * HOUR))
            .take_while(|&(from, _)| from >= first)
            .take(args.reads)
            .collect()
    };
    let measure = |name: String, path: &'static str, span: u64, extra: &'static str, region: Option<usize>| {
        let ranges = ranges(span);
        let expected: Vec<u64> = ranges.iter().map(|&r| count_in(r, region)).collect();
        let (http, base, tenant) = (http.clone(), base.clone(), tenant.clone());
        let ranges = Arc::new(ranges);
        let prepare: Prepare = {
            let ranges = ranges.clone();
            Arc::new(move |i| {
                let (from, to) = ranges[i % ranges.len()];
                http.get(format!(
                    "{base}/api/v1/profiling/{path}?service=bench&profileType=cpu&from={from}&to={to}{extra}"
                ))
                .header("X-Tenant-ID", &tenant)
            })
        };
        let check: Check = Arc::new(move |i, status, body| {
            if status != 200 {
                return Outcome::Failed(failure(status, body));
            }
            let answer: Value = serde_json::from_slice(body).unwrap_or_default();
            let want = expected[i % expected.len()];
            let count = match path {
                "merge" => answer["profileCount"].as_u64(),
                _ => answer["series"].as_array().map(|lines| {
                    lines
                        .iter()
                        .flat_map(|l| l["points"].as_array().into_iter().flatten())
                        .filter_map(|p| p["profiles"].as_u64())
                        .sum()
                }),
            };
            match count {
                Some(n) if n == want => Outcome::Ok(None),
                other => Outcome::Failed(format!("{other:?} profiles, pushed {want}")),
            }
        });
        let empty = ranges.is_empty();
        async move {
            if empty {
                return None;
            }
            Some(phase(&name, watch, args.read_clients, args.reads, Duration::from_secs(1800), prepare, check).await.0)
        }
    };
    let span_days = args.days * DAY;
    for (name, path, span, extra, region) in [
        ("one hour, merged".to_owned(), "merge", HOUR, "", None),
        ("one day, merged".to_owned(), "merge", DAY, "", None),
        ("7 days, merged".to_owned(), "merge", 7 * DAY, "", None),
        ("30 days, merged".to_owned(), "merge", 30 * DAY, "", None),
        ("one day, labels=region=eu".to_owned(), "merge", DAY, "&labels=region%3Deu", Some(0)),
        (
            format!("series over {} days, step 1 h", args.days.min(30)),
            "series",
            args.days.min(30) * DAY - 2 * HOUR,
            "&step=3600",
            None,
        ),
    ] {
        if span > span_days {
            continue;
        }
        if let Some(measured) = measure(name, path, span, extra, region).await {
            report.phases.push(measured);
        }
    }
    // What queries read: the last 24 hours, and the last 7 and 30 days (whole closed
    // days from their day blocks, the rest from hour blocks).
    let end = (last_closed + 1) * HOUR;
    for span in [DAY, 7 * DAY, 30 * DAY].into_iter().filter(|&span| span <= span_days) {
        let path = format!("/api/v1/profiling/merge?service=bench&profileType=cpu&from={}&to={end}", end - span);
        let answer = get(path).await?;
        println!(
            "{} days to {end}: {} profiles from {} objects read and {} listings",
            span / DAY,
            answer["profileCount"],
            answer["objectsRead"],
            answer["listings"]
        );
    }
    report.peak_rss_mib_end = args.reporting.server_pid.and_then(peak_rss_mib);
    println!("compaction took {compaction:.1} s after the pushes");
    if let Some(path) = &args.reporting.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
    }
    Ok(())
}
