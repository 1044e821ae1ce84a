//! kill -9 of the server in the middle of a baseline creation, a capture, a
//! continuous-capture tick and a compaction pass leaves no half-visible record:
//! everything listed can be read, everything acknowledged is there, no capture stays
//! "running" forever (its lease expires and its status turns failed once its deadline
//! passes), and blocks made by a replica killed mid-pass, then by the next, answer
//! exactly what the raw pushes do.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fixtures, free_port, stand_in, temp_dir, until, Seaweed, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

fn answer(response: reqwest::blocking::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

fn get(http: &Client, base: &str, path: &str) -> (u16, Value) {
    answer(http.get(format!("{base}{path}")).send().unwrap())
}

fn post(http: &Client, base: &str, path: &str, body: Value) -> (u16, Value) {
    answer(http.post(format!("{base}{path}")).json(&body).send().unwrap())
}

/// How long a wait in these tests may take at most.
const PATIENCE: Duration = Duration::from_secs(60);

fn baselines_scenario(store: &str, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let port = free_port();
    let http = Client::new();
    let mut server = Server::start_on(port, store, &[], env);
    let (status, session) =
        answer(http.post(format!("{}/api/v1/profiles", server.base)).body(cpu.clone()).send().unwrap());
    assert_eq!(status, 201, "{session}");
    let session = session["id"].as_str().unwrap().to_owned();

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    // Three crashes at different moments of the burst: after 2, 5 and 10 more
    // acknowledged baselines (writes are in flight on four connections then).
    for burst in [2, 5, 10] {
        let before = acknowledged.lock().unwrap().len();
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (acknowledged, stop, base, session) =
                    (acknowledged.clone(), stop.clone(), server.base.clone(), session.clone());
                std::thread::spawn(move || {
                    let http = Client::new();
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let body = json!({"label": format!("w{w}-{i}"), "sessionId": session, "profileType": "cpu"});
                        match http.post(format!("{base}/api/v1/profiling/baselines")).json(&body).send() {
                            Ok(r) if r.status() == 201 => match r.json::<Value>() {
                                Ok(v) => {
                                    acknowledged.lock().unwrap().push(v["baselineId"].as_str().unwrap().to_owned())
                                }
                                Err(_) => break,
                            },
                            _ => break, // the server is gone
                        }
                    }
                })
            })
            .collect();
        until(&format!("{burst} more acknowledged baselines"), PATIENCE, || {
            (acknowledged.lock().unwrap().len() >= before + burst).then_some(())
        });
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().for_each(|w| w.join().unwrap());
        server = Server::start_on(port, store, &[], env);
    }
    let acknowledged = acknowledged.lock().unwrap().clone();

    let base = &server.base;
    let (status, listed) = get(&http, base, "/api/v1/profiling/baselines");
    assert_eq!(status, 200, "{listed}");
    let listed: Vec<String> =
        listed["baselines"].as_array().unwrap().iter().map(|b| b["baselineId"].as_str().unwrap().to_owned()).collect();
    for id in &listed {
        let (status, record) = get(&http, base, &format!("/api/v1/profiling/baselines/{id}"));
        assert_eq!(status, 200, "listed baseline {id} cannot be read: {record}");
        let raw =
            http.get(format!("{base}/api/v1/profiles/{}/raw", record["sessionId"].as_str().unwrap())).send().unwrap();
        assert_eq!(raw.status(), 200, "baseline {id}'s profile is gone");
        assert_eq!(raw.bytes().unwrap().as_ref(), cpu.as_slice());
    }
    for id in &acknowledged {
        assert!(listed.contains(id), "acknowledged baseline {id} is not listed");
    }
    // "Latest" names a readable baseline, and a diff against it works.
    let (status, latest) = get(&http, base, "/api/v1/profiling/baselines?latest=true&profileType=cpu");
    assert_eq!(status, 200, "{latest}");
    let latest = latest["baselines"][0]["baselineId"].as_str().unwrap().to_owned();
    let (status, diff) =
        post(&http, base, "/api/v1/profiling/diff", json!({"baseId": latest, "compareId": session, "type": "cpu"}));
    assert_eq!((status, &diff["overallDelta"]), (200, &json!(0.0)), "{diff}");
}

#[test]
fn kill_9_during_baseline_creation_on_a_local_folder() {
    let store = format!("file://{}", temp_dir("crash-baselines").display());
    baselines_scenario(&store, &[]);
}

#[test]
fn kill_9_during_baseline_creation_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    baselines_scenario("s3://test", &Seaweed::env());
}

/// Eight closed hours of pushes, merged raw; then replicas that compact are killed at
/// three moments of their passes, and a last one finishes: every hour reads from its
/// block, and every answer is the raw one (no profile lost, none counted twice).
fn compaction_scenario(store: &str, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let files =
        [std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap(), std::fs::read(fx.join("go/compare/cpu.pb.gz")).unwrap()];
    let http = Client::new();
    const HOUR: u64 = 3600;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let t0 = ((now - 600) / HOUR - 8) * HOUR;
    let merge = |base: &str, from: u64, to: u64, labels: &str| {
        let path = format!("/api/v1/profiling/merge?service=shop&profileType=cpu&from={from}&to={to}&limit=50{labels}");
        let (status, merged) = get(&http, base, &path);
        assert_eq!(status, 200, "{merged}");
        merged
    };
    let numbers =
        |merged: &Value| (merged["profileCount"].clone(), merged["total"].clone(), merged["functions"].clone());
    let queries: Vec<(u64, u64, &str)> = (0..8)
        .map(|h| (t0 + h * HOUR, t0 + (h + 1) * HOUR, ""))
        .chain([(t0, t0 + 8 * HOUR, ""), (t0, t0 + 8 * HOUR, "&labels=region=us"), (t0 + 1800, t0 + 5 * HOUR + 60, "")])
        .collect();

    let pusher = Server::start(store, &[], env);
    for i in 0..96u64 {
        let at = t0 + (i / 12) * HOUR + (i % 12) * 300 + 7;
        let region = ["eu", "us"][i as usize % 2];
        let url = format!("{}/ingest?name=shop.cpu%7Bregion={region}%7D&from={at}&format=pprof", pusher.base);
        let r = http.post(url).body(files[i as usize % 2].clone()).send().unwrap();
        assert_eq!(r.status(), 200);
    }
    let raw: Vec<_> =
        queries.iter().map(|&(from, to, labels)| numbers(&merge(&pusher.base, from, to, labels))).collect();
    assert_eq!(raw[8].0, json!(96));
    drop(pusher);

    let compacting = ["--compact-tick-ms", "10", "--compact-lease-secs", "1"];
    for after in [Duration::from_millis(1500), Duration::from_millis(2500), Duration::from_millis(3500)] {
        let replica = Server::start(store, &compacting, env);
        std::thread::sleep(after);
        replica.kill_9();
    }
    let last = Server::start(store, &compacting, env);
    for h in 0..8 {
        until(&format!("hour {h}'s block"), PATIENCE, || {
            (merge(&last.base, t0 + h * HOUR, t0 + (h + 1) * HOUR, "")["listings"] == json!(0)).then_some(())
        });
    }
    for (query, raw) in queries.iter().zip(&raw) {
        let merged = merge(&last.base, query.0, query.1, query.2);
        assert_eq!(&numbers(&merged), raw, "{query:?}");
    }
}

#[test]
fn kill_9_during_compaction_on_a_local_folder() {
    compaction_scenario(&format!("file://{}", temp_dir("crash-compaction").display()), &[]);
}

#[test]
fn kill_9_during_compaction_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    compaction_scenario(&format!("s3://test/crash-compaction-{}", free_port()), &Seaweed::env());
}

/// A stand-in for Go's net/http/pprof: `profile?seconds=N` answers a real CPU profile
/// after N seconds, `heap` a real heap profile at once. While `hold` is set, CPU
/// profiles are not answered (a capture stays mid-fetch for as long as the test needs).
struct PprofTarget {
    port: u16,
    /// The paths asked for, in order.
    asked: Arc<Mutex<Vec<String>>>,
    hold: Arc<AtomicBool>,
}

impl PprofTarget {
    fn start(fx: &Path) -> PprofTarget {
        let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
        let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
        let (asked, hold) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (log, held) = (asked.clone(), hold.clone());
        let port = stand_in(move |path| {
            log.lock().unwrap().push(path.to_owned());
            if let Some(seconds) = path.split("seconds=").nth(1) {
                // The length of the profile being "recorded", as Go's endpoint takes it.
                std::thread::sleep(Duration::from_secs(seconds.parse().unwrap_or(1)));
                while held.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Some(cpu.clone())
            } else {
                path.ends_with("/heap").then(|| heap.clone())
            }
        });
        PprofTarget { port, asked, hold }
    }

    fn hold_cpu(&self, hold: bool) {
        self.hold.store(hold, Ordering::SeqCst);
    }

    /// A targets file naming it as service "shop".
    fn targets_file(&self) -> PathBuf {
        let file = temp_dir("crash-targets").join("targets.toml");
        let url = format!("http://127.0.0.1:{}/debug/pprof", self.port);
        std::fs::write(&file, format!("[[target]]\nservice = \"shop\"\nurl = \"{url}\"\n")).unwrap();
        file
    }
}

/// Capture deadline = duration + grace; short here so the test sees it pass. The
/// restarted server must come up within it (it takes well under a second).
const GRACE_SECS: &str = "6";

fn capture_status(http: &Client, base: &str, id: &str) -> Value {
    get(http, base, &format!("/api/v1/observability/profiling/{id}")).1
}

fn history(http: &Client, base: &str, kind: &str) -> Vec<Value> {
    let (_, h) = get(http, base, &format!("/api/v1/observability/profiling/history?service=shop&profileType={kind}"));
    h["captures"].as_array().unwrap().clone()
}

#[test]
fn kill_9_during_a_capture_leaves_no_capture_running_forever() {
    let Some(fx) = fixtures() else { return };
    let target = PprofTarget::start(&fx);
    let targets = target.targets_file();
    let store = format!("file://{}", temp_dir("crash-capture").display());
    let args = ["--targets", targets.to_str().unwrap(), "--capture-grace-secs", GRACE_SECS];
    let port = free_port();
    let http = Client::new();
    let server = Server::start_on(port, &store, &args, &[]);
    let capture = json!({"service": "shop", "profileType": "cpu", "durationSeconds": 2});
    target.hold_cpu(true);
    let (status, started) = post(&http, &server.base, "/api/v1/observability/profiling/start", capture.clone());
    assert_eq!(status, 202, "{started}");
    let id = started["id"].as_str().unwrap().to_owned();
    // Killed while the target is answering its fetch.
    until("the capture's fetch to reach the target", PATIENCE, || {
        target.asked.lock().unwrap().contains(&"/debug/pprof/profile?seconds=2".to_owned()).then_some(())
    });
    server.kill_9();
    target.hold_cpu(false);

    let server = Server::start_on(port, &store, &args, &[]);
    let base = &server.base;
    let now = capture_status(&http, base, &id);
    assert_eq!(now["status"], "running", "before its deadline it may still finish: {now}");
    let (status, refused) = post(&http, base, "/api/v1/observability/profiling/start", capture.clone());
    assert_eq!((status, &refused["error_code"]), (409, &json!("CaptureInProgress")), "{refused}");

    // Past the deadline: failed, and its lease no longer blocks a new capture.
    let failed = until("the interrupted capture to read failed", PATIENCE, || {
        let c = capture_status(&http, base, &id);
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("interrupted"), "{failed}");
    let again = until("a new capture to be accepted", PATIENCE, || {
        let (status, c) = post(&http, base, "/api/v1/observability/profiling/start", capture.clone());
        (status == 202).then_some(c)
    });
    let done = until("the new capture to finish", PATIENCE, || {
        let c = capture_status(&http, base, again["id"].as_str().unwrap());
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(done["status"], "completed", "{done}");
    let statuses: Vec<String> =
        history(&http, base, "cpu").iter().map(|c| c["status"].as_str().unwrap().to_owned()).collect();
    assert_eq!(statuses, ["failed", "completed"]);
}

#[test]
fn kill_9_during_continuous_capture_ticks_settles_every_capture() {
    let Some(fx) = fixtures() else { return };
    let target = PprofTarget::start(&fx);
    let targets = target.targets_file();
    let store = format!("file://{}", temp_dir("crash-schedule").display());
    let args =
        ["--targets", targets.to_str().unwrap(), "--capture-grace-secs", GRACE_SECS, "--schedule-tick-ms", "200"];
    let port = free_port();
    let http = Client::new();
    let server = Server::start_on(port, &store, &args, &[]);
    let schedule = |enabled: bool| {
        json!({"service": "shop", "profileTypes": ["cpu", "memory"], "retentionDays": 1, "enabled": enabled,
               "intervalSeconds": 1, "durationSeconds": 1})
    };
    let (status, body) = post(&http, &server.base, "/api/v1/observability/profiling/continuous", schedule(true));
    assert_eq!(status, 201, "{body}");
    let completed_ids = |captures: &[Value]| -> Vec<String> {
        captures.iter().filter(|c| c["status"] == "completed").map(|c| c["id"].as_str().unwrap().to_owned()).collect()
    };
    // Completed captures of both types before the crash...
    let before: Vec<String> = until("a completed capture of each type", PATIENCE, || {
        let (cpu, memory) = (
            completed_ids(&history(&http, &server.base, "cpu")),
            completed_ids(&history(&http, &server.base, "memory")),
        );
        (!cpu.is_empty() && !memory.is_empty()).then(|| [cpu, memory].concat())
    });
    // ...and one cpu capture mid-fetch when it comes: one that started after the target
    // began holding CPU profiles cannot finish.
    target.hold_cpu(true);
    let held_since = std::time::SystemTime::now();
    let started = |c: &Value| humantime::parse_rfc3339(c["startedAt"].as_str().unwrap()).unwrap();
    let interrupted = until("a cpu capture held mid-fetch", PATIENCE, || {
        history(&http, &server.base, "cpu")
            .into_iter()
            .find(|c| c["status"] == "running" && started(c) > held_since)
            .map(|c| c["id"].as_str().unwrap().to_owned())
    });
    server.kill_9();
    let crashed_at = std::time::SystemTime::now();
    target.hold_cpu(false);

    let server = Server::start_on(port, &store, &args, &[]);
    let base = &server.base;
    // The crashed capture's lease expires 1 s + grace after it started: it reads
    // failed, and captures go on.
    let failed = until("the interrupted capture to read failed", PATIENCE, || {
        let c = capture_status(&http, base, &interrupted);
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("interrupted"), "{failed}");
    for kind in ["cpu", "memory"] {
        until(&format!("a {kind} capture completed after the restart"), PATIENCE, || {
            history(&http, base, kind)
                .iter()
                .any(|c| c["status"] == "completed" && started(c) > crashed_at)
                .then_some(())
        });
    }
    let (status, body) = post(&http, base, "/api/v1/observability/profiling/continuous", schedule(false));
    assert_eq!(status, 201, "{body}");
    for kind in ["cpu", "memory"] {
        let captures = until(&format!("every {kind} capture to settle"), PATIENCE, || {
            let h = history(&http, base, kind);
            h.iter().all(|c| c["status"] != "running").then_some(h)
        });
        for capture in captures.iter().filter(|c| c["status"] == "completed") {
            let session = capture["sessionId"].as_str().unwrap();
            let raw = http.get(format!("{base}/api/v1/profiles/{session}/raw")).send().unwrap();
            assert_eq!(raw.status(), 200, "{kind}: completed capture {} lost its profile", capture["id"]);
        }
        let slots: Vec<u64> = captures.iter().map(|c| c["slot"].as_u64().unwrap()).collect();
        let mut unique = slots.clone();
        unique.dedup();
        assert_eq!(slots, unique, "{kind}: no slot captured twice across the crash");
    }
    // Every capture completed before the crash is still listed, completed.
    let all: Vec<Value> = ["cpu", "memory"].iter().flat_map(|kind| history(&http, base, kind)).collect();
    for id in &before {
        let status = all.iter().find(|c| c["id"] == id.as_str()).map(|c| c["status"].clone());
        assert_eq!(status, Some(json!("completed")), "{id} was completed before the crash");
    }
}
