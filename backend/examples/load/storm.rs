//! The storm: every upload in flight at once, then each read back and the listing paged
//! through.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{failure, per_item_ms, percentile, phase, transport, upload_check, Check, Outcome, Prepare, Watch};

#[derive(Serialize, Deserialize, Default)]
pub struct Storm {
    pub count: usize,
    /// Answered 201 on the first and only try.
    pub acknowledged: usize,
    pub distinct_ids: usize,
    /// Raw GETs that returned exactly the uploaded bytes.
    pub identical: usize,
    /// Acknowledged ids found by paging through the listing.
    pub listed: usize,
    pub upload_wall_seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub readback_seconds: f64,
    pub errors: BTreeMap<String, usize>,
    /// CPU the server (and the store's process) used for the uploads, per acknowledged one.
    pub server_cpu_ms_per_upload: Option<f64>,
    pub store_cpu_ms_per_upload: Option<f64>,
}

/// All `bodies` uploaded at once (each task waits until every task is ready, then
/// sends), then each acknowledged one read back and the listing paged through.
pub async fn storm(
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
