//! kill -9 of the server in the middle of a baseline creation, a capture and a
//! continuous-capture tick leaves no half-visible record: everything listed can be
//! read, everything acknowledged is there, and no capture stays "running" forever (its
//! lease expires and its status turns failed once its deadline passes).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fixtures, free_port, temp_dir, Seaweed, Server};
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

/// Polls `check` until it gives a value (30 s at most).
fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

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
    // Three crashes at different moments of the burst.
    for crash_after in [250, 600, 1100] {
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
        std::thread::sleep(Duration::from_millis(crash_after));
        server.kill_9();
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().for_each(|w| w.join().unwrap());
        server = Server::start_on(port, store, &[], env);
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 6, "the bursts got going ({} baselines)", acknowledged.len());

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

/// A stand-in for Go's net/http/pprof: `profile?seconds=N` answers a real CPU profile
/// after N seconds, `heap` a real heap profile at once.
fn pprof_target(fx: &Path) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (cpu, heap) = (cpu.clone(), heap.clone());
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                let body = if let Some(seconds) = path.split("seconds=").nth(1) {
                    std::thread::sleep(Duration::from_secs(seconds.parse().unwrap_or(1)));
                    cpu
                } else if path.ends_with("/heap") {
                    heap
                } else {
                    Vec::new()
                };
                let status = if body.is_empty() { "404 Not Found" } else { "200 OK" };
                let mut stream = stream;
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
            });
        }
    });
    port
}

/// A targets file naming the stand-in as service "shop".
fn targets_file(target_port: u16) -> PathBuf {
    let file = temp_dir("crash-targets").join("targets.toml");
    std::fs::write(
        &file,
        format!("[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{target_port}/debug/pprof\"\n"),
    )
    .unwrap();
    file
}

/// Capture deadline = duration + grace; short here so the test sees it pass.
const GRACE_SECS: &str = "3";

#[test]
fn kill_9_during_a_capture_leaves_no_capture_running_forever() {
    let Some(fx) = fixtures() else { return };
    let targets = targets_file(pprof_target(&fx));
    let store = format!("file://{}", temp_dir("crash-capture").display());
    let args = ["--targets", targets.to_str().unwrap(), "--capture-grace-secs", GRACE_SECS];
    let port = free_port();
    let http = Client::new();
    let server = Server::start_on(port, &store, &args, &[]);
    let capture = json!({"service": "shop", "profileType": "cpu", "durationSeconds": 2});
    let (status, started) = post(&http, &server.base, "/api/v1/observability/profiling/start", capture.clone());
    assert_eq!(status, 202, "{started}");
    let id = started["id"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(700));
    server.kill_9();

    let server = Server::start_on(port, &store, &args, &[]);
    let base = &server.base;
    let (status, now) = get(&http, base, &format!("/api/v1/observability/profiling/{id}"));
    assert_eq!((status, &now["status"]), (200, &json!("running")), "before its deadline it may still finish: {now}");
    let (status, refused) = post(&http, base, "/api/v1/observability/profiling/start", capture.clone());
    assert_eq!((status, &refused["error_code"]), (409, &json!("CaptureInProgress")), "{refused}");

    // Past the deadline: failed, and its lease no longer blocks a new capture.
    let failed = until("the interrupted capture to read failed", || {
        let (_, c) = get(&http, base, &format!("/api/v1/observability/profiling/{id}"));
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(failed["error"].as_str().unwrap().contains("interrupted"), "{failed}");
    let again = until("a new capture to be accepted", || {
        let (status, c) = post(&http, base, "/api/v1/observability/profiling/start", capture.clone());
        (status == 202).then_some(c)
    });
    let done = until("the new capture to finish", || {
        let (_, c) = get(&http, base, &format!("/api/v1/observability/profiling/{}", again["id"].as_str().unwrap()));
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(done["status"], "completed", "{done}");
    let (_, history) = get(&http, base, "/api/v1/observability/profiling/history?service=shop&profileType=cpu");
    let statuses: Vec<&str> =
        history["captures"].as_array().unwrap().iter().map(|c| c["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "completed"], "{history}");
}

#[test]
fn kill_9_during_continuous_capture_ticks_settles_every_capture() {
    let Some(fx) = fixtures() else { return };
    let targets = targets_file(pprof_target(&fx));
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
    std::thread::sleep(Duration::from_millis(2600));
    server.kill_9();

    let server = Server::start_on(port, &store, &args, &[]);
    let restarted_at = std::time::SystemTime::now();
    let base = &server.base;
    // The crashed captures' leases expire 1 s + grace after they started; then
    // captures go on.
    std::thread::sleep(Duration::from_secs(7));
    let (status, body) = post(&http, base, "/api/v1/observability/profiling/continuous", schedule(false));
    assert_eq!(status, 201, "{body}");
    for kind in ["cpu", "memory"] {
        let history = until(&format!("every {kind} capture to settle"), || {
            let (_, h) =
                get(&http, base, &format!("/api/v1/observability/profiling/history?service=shop&profileType={kind}"));
            h["captures"].as_array().unwrap().iter().all(|c| c["status"] != "running").then_some(h)
        });
        let captures = history["captures"].as_array().unwrap();
        let completed: Vec<&Value> = captures.iter().filter(|c| c["status"] == "completed").collect();
        let started = |c: &Value| humantime::parse_rfc3339(c["startedAt"].as_str().unwrap()).unwrap();
        assert!(completed.iter().any(|c| started(c) < restarted_at), "{kind}: captured before the crash: {history}");
        assert!(completed.iter().any(|c| started(c) > restarted_at), "{kind}: captures went on after it: {history}");
        for capture in &completed {
            let session = capture["sessionId"].as_str().unwrap();
            let raw = http.get(format!("{base}/api/v1/profiles/{session}/raw")).send().unwrap();
            assert_eq!(raw.status(), 200, "{kind}: completed capture {} lost its profile", capture["id"]);
        }
        let slots: Vec<u64> = captures.iter().map(|c| c["slot"].as_u64().unwrap()).collect();
        let mut unique = slots.clone();
        unique.dedup();
        assert_eq!(slots, unique, "{kind}: no slot captured twice across the crash");
    }
}
