//! Capturing from a real Go service (backend/tests/goservice) over net/http/pprof: every
//! profile type, the stored sessions' contents, and the 400/404/409 and target-down paths.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, missing_prerequisite, temp_dir, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use stacklens_core::analysis::top::{top, TopOptions};

struct GoService(Child);

impl GoService {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for GoService {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Builds and starts the Go service; `None` (skip) without Go, except under CI=true.
fn go_service(port: u16) -> Option<GoService> {
    let go = ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let Some(go) = go else {
        missing_prerequisite("Go is not installed (scripts/ensure-tools.sh installs golang-go)");
        return None;
    };
    let dir = temp_dir("goservice");
    let binary = dir.join("goservice");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goservice/main.go");
    let built = Command::new(go)
        .args(["build", "-o", binary.to_str().unwrap(), source.to_str().unwrap()])
        .env("GOCACHE", dir.join("cache"))
        .env("GO111MODULE", "off")
        .output()
        .unwrap();
    assert!(built.status.success(), "go build: {}", String::from_utf8_lossy(&built.stderr));
    let child = Command::new(binary).arg(format!("127.0.0.1:{port}")).stdout(Stdio::null()).spawn().unwrap();
    let service = GoService(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::blocking::get(format!("http://127.0.0.1:{port}/debug/pprof/")).is_err() {
        assert!(Instant::now() < deadline, "the Go service did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let it run long enough to have something in every profile.
    std::thread::sleep(Duration::from_millis(500));
    Some(service)
}

fn post(http: &Client, server: &Server, body: Value) -> (u16, Value) {
    let r = http.post(format!("{}/api/v1/observability/profiling/start", server.base)).json(&body).send().unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

fn wait_done(http: &Client, server: &Server, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value =
            http.get(format!("{}/api/v1/observability/profiling/{id}", server.base)).send().unwrap().json().unwrap();
        if v["status"] != "running" {
            return v;
        }
        assert!(Instant::now() < deadline, "capture {id} did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cumulative value of `function` in the default sample type of a stored session.
fn cum_of(http: &Client, server: &Server, session: &str, function: &str) -> i64 {
    let raw = http.get(format!("{}/api/v1/profiles/{session}/raw", server.base)).send().unwrap().bytes().unwrap();
    let profile = stacklens_core::parse(&raw).unwrap();
    let report = top(&profile, &TopOptions::default()).unwrap();
    report.functions.iter().find(|f| f.name == function).map_or(0, |f| f.cum)
}

#[test]
fn captures_every_profile_type_from_a_go_service() {
    let port = free_port();
    let Some(_go) = go_service(port) else { return };
    let down = free_port();
    let targets = temp_dir("targets").join("targets.toml");
    std::fs::write(
        &targets,
        format!(
            "[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{port}/debug/pprof\"\nlabels = {{ env = \"test\" }}\n\n\
             [[target]]\nservice = \"gone\"\nurl = \"http://127.0.0.1:{down}/debug/pprof\"\n"
        ),
    )
    .unwrap();
    let store = format!("file://{}", temp_dir("captures").display());
    let server = Server::start(&store, &["--targets", targets.to_str().unwrap()], &[]);
    let http = Client::new();

    // Each type, with the function the service is busy in.
    let mut captured = std::collections::HashMap::new();
    for (kind, busy) in [
        ("cpu", "main.burnCPU"),
        ("memory", "main.allocate"),
        ("alloc", "main.allocate"),
        ("block", "main.contend"),
        ("mutex", "main.contend"),
        ("goroutine", "main.waitForever"),
    ] {
        let (status, started) = post(
            &http,
            &server,
            json!({"service": "shop", "profileType": kind, "durationSeconds": 1, "sampleRate": 100}),
        );
        assert_eq!(status, 202, "{kind}: {started}");
        assert_eq!((&started["status"], &started["profileType"]), (&json!("running"), &json!(kind)));
        let done = wait_done(&http, &server, started["id"].as_str().unwrap());
        assert_eq!(done["status"], "completed", "{kind}: {done}");
        let session = done["sessionId"].as_str().unwrap();
        captured.insert(kind, done["id"].as_str().unwrap().to_owned());
        assert!(done["sampleCount"].as_i64().unwrap() > 0, "{kind}: {done}");
        assert!(!done["topFunctions"].as_array().unwrap().is_empty(), "{kind}");
        assert_eq!(done["flameGraphUrl"], format!("{}/#/s/{session}", server.base));
        assert!(done["completedAt"].is_string());
        let record: Value =
            http.get(format!("{}/api/v1/profiles/{session}", server.base)).send().unwrap().json().unwrap();
        assert_eq!(
            (&record["service"], &record["profileType"], &record["labels"]["env"]),
            (&json!("shop"), &json!(kind), &json!("test"))
        );
        assert!(cum_of(&http, &server, session, busy) > 0, "{kind}: {busy} not in the captured profile");
        if kind == "goroutine" {
            let analysis: Value = http
                .get(format!("{}/api/v1/profiling/sessions/{session}/analysis", server.base))
                .send()
                .unwrap()
                .json()
                .unwrap();
            let leak = analysis["topStacks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["frames"][0] == "main.waitForever")
                .cloned();
            assert_eq!(
                leak.map(|s| (s["count"].clone(), s["state"].clone())),
                Some((json!(25), json!("chan receive")))
            );
            // The pprof form (debug=0) is stored too, with the same goroutines.
            let pprof = done["goroutinePprofSessionId"].as_str().unwrap();
            let record: Value =
                http.get(format!("{}/api/v1/profiles/{pprof}", server.base)).send().unwrap().json().unwrap();
            assert_eq!(record["sampleTypes"], json!(["goroutine"]));
            assert!(cum_of(&http, &server, pprof, busy) >= 25, "25 goroutines wait in {busy}");
        }
    }

    // One capture per service and type at a time.
    let (status, first) = post(&http, &server, json!({"service": "shop", "profileType": "cpu", "durationSeconds": 3}));
    assert_eq!(status, 202);
    let (status, second) = post(&http, &server, json!({"service": "shop", "profileType": "cpu", "durationSeconds": 1}));
    assert_eq!((status, second["error_code"].as_str()), (409, Some("CaptureInProgress")));
    assert_eq!(
        post(&http, &server, json!({"service": "shop", "profileType": "goroutine"})).0,
        202,
        "another type may run"
    );
    let compare = |base: &str, later: &str| {
        let url = format!(
            "{}/api/v1/observability/profiling/compare?baseProfileId={base}&comparisonProfileId={later}",
            server.base
        );
        let r = http.get(url).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let (status, e) = compare(&captured["cpu"], first["id"].as_str().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (409, Some("CaptureNotCompleted")));
    assert_eq!(wait_done(&http, &server, first["id"].as_str().unwrap())["status"], "completed");

    // Two cpu captures: history in time order with totals, and their comparison.
    let history = |query: &str| -> Value {
        let url = format!("{}/api/v1/observability/profiling/history?service=shop&profileType=cpu{query}", server.base);
        http.get(url).send().unwrap().json().unwrap()
    };
    let all = history("");
    let points = all["captures"].as_array().unwrap();
    assert_eq!(
        points.iter().map(|p| p["id"].as_str().unwrap()).collect::<Vec<_>>(),
        [captured["cpu"].as_str(), first["id"].as_str().unwrap()]
    );
    for p in points {
        assert_eq!((&p["status"], &p["unit"]), (&json!("completed"), &json!("nanoseconds")));
        assert!(p["total"].as_i64().unwrap() > 0 && !p["topFunctions"].as_array().unwrap().is_empty(), "{p}");
    }
    let second_start = points[1]["startedAt"].as_str().unwrap();
    assert_eq!(history(&format!("&from={second_start}"))["captures"].as_array().unwrap().len(), 1);
    assert_eq!(history("&to=2000-01-01T00:00:00Z")["captures"], json!([]));
    let (status, c) = compare(&captured["cpu"], first["id"].as_str().unwrap());
    assert_eq!(status, 200, "{c}");
    assert_eq!((&c["baseProfile"]["id"], &c["comparisonProfile"]["id"]), (&json!(captured["cpu"]), &first["id"]));
    assert!(
        c["regressions"].is_array()
            && c["improvements"].is_array()
            && c["unchanged"].is_u64()
            && c["overallDelta"].is_f64(),
        "{c}"
    );
    assert_eq!(c["noiseThresholdPct"], 1.0);
    let (status, e) = compare(&captured["cpu"], &captured["memory"]);
    assert_eq!((status, e["error_code"].as_str()), (422, Some("ProfileTypeMismatch")));

    // A target that does not answer: the capture fails and says why.
    let (status, started) = post(&http, &server, json!({"service": "gone", "profileType": "memory"}));
    assert_eq!(status, 202);
    let failed = wait_done(&http, &server, started["id"].as_str().unwrap());
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"].as_str().unwrap().contains(&format!("127.0.0.1:{down}")), "{failed}");
    let (status, e) = compare(failed["id"].as_str().unwrap(), &captured["memory"]);
    assert_eq!((status, e["error_code"].as_str()), (422, Some("CaptureFailed")));
    let r = http.get(format!("{}/api/v1/observability/profiling/history?profileType=cpu", server.base)).send().unwrap();
    assert_eq!(r.status(), 400, "service is required");

    // Bad requests.
    let (status, e) = post(&http, &server, json!({"service": "nope", "profileType": "cpu"}));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownService")));
    let (status, e) = post(&http, &server, json!({"service": "shop", "profileType": "bogus"}));
    assert_eq!((status, e["error_code"].as_str()), (400, Some("InvalidProfileType")));
    assert_eq!(post(&http, &server, json!({"service": "shop", "profileType": "cpu", "durationSeconds": 0})).0, 400);
    let missing = http
        .get(format!("{}/api/v1/observability/profiling/cap-0123456789abcdef0123456789abcdef", server.base))
        .send()
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// Two replicas run one stored schedule: each slot is captured once, old captures are
/// deleted after the retention, the schedule outlives the replica it was posted to,
/// and disabling it stops captures.
#[test]
fn continuous_capture_across_replicas_with_retention() {
    let port = free_port();
    let Some(_go) = go_service(port) else { return };
    let targets = temp_dir("targets").join("targets.toml");
    std::fs::write(
        &targets,
        format!("[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{port}/debug/pprof\"\n"),
    )
    .unwrap();
    let store = format!("file://{}", temp_dir("continuous").display());
    let args = ["--targets", targets.to_str().unwrap()];
    let (one, two) = (Server::start(&store, &args, &[]), Server::start(&store, &args, &[]));
    let http = Client::new();
    let schedule = |server: &Server, body: Value| {
        let r =
            http.post(format!("{}/api/v1/observability/profiling/continuous", server.base)).json(&body).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let history = |server: &Server| -> Vec<Value> {
        let url = format!("{}/api/v1/observability/profiling/history?service=shop&profileType=goroutine", server.base);
        http.get(url).send().unwrap().json::<Value>().unwrap()["captures"].as_array().unwrap().clone()
    };
    let retention_secs = 4.0;
    let (status, stored) = schedule(
        &one,
        json!({"service": "shop", "profileTypes": ["goroutine", "memory"], "sampleRate": 1, "retentionDays": retention_secs / 86400.0, "enabled": true, "intervalSeconds": 1}),
    );
    assert_eq!(status, 201, "{stored}");
    assert_eq!((&stored["profileTypes"], &stored["intervalSeconds"]), (&json!(["goroutine", "memory"]), &json!(1)));

    std::thread::sleep(Duration::from_millis(3500));
    let early = history(&two);
    assert!(early.len() >= 2, "captures are being taken: {early:?}");
    let first_id = early[0]["id"].as_str().unwrap().to_owned();
    // The replica the schedule was posted to goes away; the other keeps capturing.
    one.kill_9();
    std::thread::sleep(Duration::from_millis(4500));
    let later = history(&two);
    let slots: Vec<u64> = later.iter().map(|c| c["slot"].as_u64().unwrap()).collect();
    let unique: std::collections::BTreeSet<u64> = slots.iter().copied().collect();
    assert_eq!(unique.len(), slots.len(), "each slot captured once: {slots:?}");
    assert!(later.len() >= 3, "{later:?}");
    assert!(later.iter().all(|c| c["status"] != "failed"), "{later:?}");
    assert!(
        *slots.iter().max().unwrap() > early.iter().map(|c| c["slot"].as_u64().unwrap()).max().unwrap(),
        "captures continue"
    );
    // Retention: the first capture (over 4 s old now) and its record are gone.
    assert!(later.iter().all(|c| c["id"] != first_id.as_str()), "expired capture still listed");
    let gone = http.get(format!("{}/api/v1/observability/profiling/{first_id}", two.base)).send().unwrap();
    assert_eq!(gone.status(), 404);
    let now = std::time::SystemTime::now();
    for c in &later {
        let at = humantime::parse_rfc3339(c["startedAt"].as_str().unwrap()).unwrap();
        assert!(now.duration_since(at).unwrap().as_secs_f64() < retention_secs + 2.5, "{c}");
    }

    // Disabled: no new slots.
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": ["goroutine"], "retentionDays": 1, "enabled": false}));
    assert_eq!(status, 201);
    std::thread::sleep(Duration::from_millis(1500));
    let before = history(&two).iter().map(|c| c["slot"].as_u64().unwrap()).max().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let after = history(&two).iter().map(|c| c["slot"].as_u64().unwrap()).max().unwrap();
    assert_eq!(before, after, "a disabled schedule captures nothing");

    let (status, e) =
        schedule(&two, json!({"service": "nope", "profileTypes": ["cpu"], "retentionDays": 1, "enabled": true}));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownService")));
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": [], "retentionDays": 1, "enabled": true}));
    assert_eq!(status, 400);
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": 0, "enabled": true}));
    assert_eq!(status, 400);
}

/// samply from the same places the server looks.
fn samply() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let found = std::env::var_os("STACKLENS_SAMPLY")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).map(|d| d.join("samply")).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .chain([home.join(".cargo/bin/samply")])
        .find(|p| p.is_file());
    if found.is_none() {
        missing_prerequisite("samply is not installed (scripts/ensure-tools.sh installs it)");
    }
    found
}

/// samply refuses to run above perf_event_paranoid 1: as root the test lowers it for its
/// run, and the guard puts the host's level back when dropped. `None` when the kernel
/// forbids perf events (a missing prerequisite).
fn perf_events_allowed() -> Option<PerfParanoid> {
    let level = std::fs::read_to_string(PerfParanoid::PATH).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(2);
    if level <= 1 {
        return Some(PerfParanoid { restore: None });
    }
    if std::fs::write(PerfParanoid::PATH, "1").is_ok() {
        eprintln!("note: kernel.perf_event_paranoid lowered from {level} to 1 for this test; restored after it");
        return Some(PerfParanoid { restore: Some(level) });
    }
    missing_prerequisite(&format!(
        "kernel.perf_event_paranoid is {level} and cannot be lowered here: the kernel forbids the perf events samply needs"
    ));
    None
}

/// Restores `kernel.perf_event_paranoid` to the level found before the test.
struct PerfParanoid {
    restore: Option<i32>,
}

impl PerfParanoid {
    const PATH: &str = "/proc/sys/kernel/perf_event_paranoid";
}

impl Drop for PerfParanoid {
    fn drop(&mut self) {
        if let Some(level) = self.restore {
            if let Err(e) = std::fs::write(Self::PATH, level.to_string()) {
                eprintln!("could not restore kernel.perf_event_paranoid to {level}: {e}");
            }
        }
    }
}

#[test]
fn samply_profiles_a_busy_process() {
    let Some(_samply) = samply() else { return };
    let Some(_paranoid) = perf_events_allowed() else { return };
    let port = free_port();
    let Some(go) = go_service(port) else { return };
    let dir = temp_dir("pipeline");
    let pid_file = dir.join("engine.pid");
    std::fs::write(&pid_file, format!("{}\n", go.pid())).unwrap();
    let targets = dir.join("targets.toml");
    std::fs::write(&targets, format!("[[pipeline]]\nname = \"engine\"\npidFile = \"{}\"\n", pid_file.display()))
        .unwrap();
    let store = format!("file://{}", temp_dir("samply-store").display());
    let server = Server::start(&store, &["--targets", targets.to_str().unwrap()], &[]);
    let http = Client::new();
    let url = |name: &str, query: &str| format!("{}/v0/pipelines/{name}/samply_profile{query}", server.base);
    let answer = |r: reqwest::blocking::Response| (r.status().as_u16(), r.json::<Value>().unwrap());

    let (status, body) = answer(http.post(url("nope", "")).send().unwrap());
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"message": "Unknown pipeline name 'nope'", "error_code": "UnknownPipelineName", "details": {"pipeline_name": "nope"}})
    );
    let (status, body) = answer(http.get(url("engine", "")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (404, Some("NoSamplyProfile")));

    let (status, started) = answer(http.post(url("engine", "?duration_secs=2&ordinal=0")).send().unwrap());
    assert_eq!(status, 202, "{started}");
    assert_eq!((&started["status"], &started["pid"]), (&json!("running"), &json!(go.pid())));
    let (status, body) = answer(http.post(url("engine", "?duration_secs=2")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (409, Some("SamplyProfileInProgress")));

    let deadline = Instant::now() + Duration::from_secs(90);
    let done = loop {
        let (_, latest) = answer(http.get(url("engine", "")).send().unwrap());
        if latest["status"] != "running" {
            break latest;
        }
        assert!(Instant::now() < deadline, "samply did not finish");
        std::thread::sleep(Duration::from_millis(200));
    };
    if done["status"] == "failed" && done["error"].as_str().is_some_and(|e| e.contains("perf_event_open")) {
        missing_prerequisite(&format!("the kernel refused perf_event_open: {}", done["error"]));
        return;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["id"], started["id"]);
    let session = done["session_id"].as_str().unwrap();
    assert_eq!(done["flame_graph_url"], format!("{}/#/s/{session}", server.base));
    // The busy process's hot function, by name (symbolicated from samply's sidecar).
    assert!(cum_of(&http, &server, session, "main.burnCPU") > 0, "main.burnCPU is not in the recorded profile");
    let record: Value = http.get(format!("{}/api/v1/profiles/{session}", server.base)).send().unwrap().json().unwrap();
    assert_eq!((&record["profileType"], &record["labels"]["pipeline"]), (&json!("cpu"), &json!("engine")));

    let (status, body) = answer(http.post(url("engine", "?ordinal=3")).send().unwrap());
    assert_eq!((status, body["details"]["field"].as_str()), (400, Some("ordinal")));
    drop(go);
    let (status, body) = answer(http.post(url("engine", "?duration_secs=1")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (503, Some("ProcessNotFound")));
}
