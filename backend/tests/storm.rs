//! 1,000 concurrent uploads of distinct profiles to a real `stacklens serve`, all in
//! flight at once: 1,000 acknowledged (201 on the first and only try), 1,000 distinct
//! ids, 1,000 read back byte-identical and 1,000 listed — on a local folder and on a
//! real S3-compatible server (SeaweedFS). scripts/load.sh runs the same storm against a
//! release build and BENCHMARKS.md records it.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fixtures, temp_dir, Seaweed, Server};
use futures::StreamExt;
use serde_json::Value;
use sha2::{Digest, Sha256};

const STORM: usize = 1000;
/// Raw GETs in flight at once while reading back.
const READERS: usize = 64;
/// Listing page size (so the listing takes several pages and their cursors).
const PAGE: usize = 300;

/// One storm at a time in this binary, so each has the machine to itself.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `gz` followed by a gzip member with one more `string_table` entry (field 6 of the
/// Profile message, wire type 2) naming `tag`: gzip readers inflate every member, so
/// this is a distinct, valid profile with the same samples.
fn distinct(gz: &[u8], tag: &str) -> Vec<u8> {
    assert!(tag.len() < 0x80, "a one-byte length");
    let mut field = vec![0x32, tag.len() as u8];
    field.extend_from_slice(tag.as_bytes());
    let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    member.write_all(&field).unwrap();
    [gz, &member.finish().unwrap()].concat()
}

fn storm(store: &str, env: &[(&str, &str)], fx: &Path) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(store, &[], env);
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new((0..STORM).map(|i| distinct(&cpu, &format!("storm-{i}"))).collect());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let started = Instant::now();
    runtime.block_on(run(&server.base, bodies));
    eprintln!("{store}: the storm, read back and listing took {:.1} s", started.elapsed().as_secs_f64());
}

async fn run(base: &str, bodies: Arc<Vec<Vec<u8>>>) {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(STORM)
        .build()
        .unwrap();
    let tenant = "storm";

    // Every upload waits at the gate until all 1,000 tasks are there, then all send.
    let gate = Arc::new(tokio::sync::Barrier::new(STORM));
    let started = Instant::now();
    let uploads: Vec<_> = (0..STORM)
        .map(|i| {
            let (http, gate, bodies) = (http.clone(), gate.clone(), bodies.clone());
            let url = format!("{base}/api/v1/profiles?service=storm");
            tokio::spawn(async move {
                gate.wait().await;
                match http.post(url).header("X-Tenant-ID", tenant).body(bodies[i].clone()).send().await {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        (status, r.text().await.unwrap_or_else(|e| format!("body cut off: {e}")))
                    }
                    Err(e) => (0, format!("no answer: {e}")),
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for upload in uploads {
        answers.push(upload.await.unwrap());
    }
    let upload_secs = started.elapsed().as_secs_f64();

    // 1,000 acknowledged: 201 each, on the first try.
    let mut refused = BTreeMap::<String, usize>::new();
    for (status, text) in answers.iter().filter(|(status, _)| *status != 201) {
        let code = serde_json::from_str::<Value>(text).ok().and_then(|v| v["error_code"].as_str().map(str::to_owned));
        *refused
            .entry(format!("{status} {}", code.unwrap_or_else(|| text.chars().take(120).collect())))
            .or_default() += 1;
    }
    assert!(refused.is_empty(), "{} of {STORM} uploads not acknowledged: {refused:?}", refused.values().sum::<usize>());
    let records: Vec<Value> = answers.iter().map(|(_, text)| serde_json::from_str(text).unwrap()).collect();
    let ids: Vec<String> = records.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), STORM, "every upload got its own id");
    for (record, body) in records.iter().zip(bodies.iter()) {
        assert_eq!(record["sha256"], hex::encode(Sha256::digest(body)), "the record names the bytes sent");
        assert_eq!(record["size"], body.len());
        assert_eq!(record["profileType"], "cpu");
        assert_eq!(record["sampleCount"], records[0]["sampleCount"], "the same samples in every copy");
    }

    // 1,000 read back byte-identical.
    let started = Instant::now();
    let reads = futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let request = http.get(format!("{base}/api/v1/profiles/{id}/raw")).header("X-Tenant-ID", tenant);
            async move {
                let r = request.send().await.unwrap_or_else(|e| panic!("raw GET {id}: {e}"));
                (i, r.status().as_u16(), r.bytes().await.unwrap_or_else(|e| panic!("raw GET {id}: {e}")))
            }
        })
        .buffer_unordered(READERS)
        .collect::<Vec<_>>()
        .await;
    let identical = reads.iter().filter(|(i, status, bytes)| *status == 200 && bytes.as_ref() == bodies[*i]).count();
    assert_eq!(identical, STORM, "read back identical");
    let read_secs = started.elapsed().as_secs_f64();

    // The listing holds all 1,000, page by page, each once.
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..STORM / PAGE + 2 {
        let mut url = format!("{base}/api/v1/profiles?limit={PAGE}");
        if let Some(c) = &cursor {
            url += &format!("&cursor={c}");
        }
        let r = http.get(url).header("X-Tenant-ID", tenant).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let page: Value = r.json().await.unwrap();
        let profiles = page["profiles"].as_array().unwrap();
        assert!(profiles.len() <= PAGE);
        listed.extend(profiles.iter().map(|p| p["id"].as_str().unwrap().to_owned()));
        cursor = page["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert!(cursor.is_none(), "the listing ended");
    assert_eq!(listed.len(), STORM, "each listed once");
    assert_eq!(listed.iter().collect::<HashSet<_>>(), ids.iter().collect::<HashSet<_>>(), "all 1,000 listed");
    eprintln!(
        "{STORM} uploads at once: {STORM} acknowledged in {upload_secs:.1} s, {identical} read back identical in \
         {read_secs:.1} s, {} listed",
        listed.len()
    );
}

#[test]
fn a_thousand_concurrent_uploads_on_a_folder() {
    let Some(fx) = fixtures() else { return };
    storm(&format!("file://{}", temp_dir("storm").display()), &[], &fx);
}

#[test]
fn a_thousand_concurrent_uploads_on_seaweedfs() {
    let Some(fx) = fixtures() else { return };
    let Some(_seaweed) = Seaweed::start() else { return };
    storm("s3://test", &Seaweed::env(), &fx);
}
