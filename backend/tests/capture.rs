//! Capturing from a real Go service (backend/tests/goservice) over net/http/pprof: every
//! profile type, the stored sessions' contents, and the 400/404/409 and target-down paths.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, temp_dir, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use stacklens_core::analysis::top::{top, TopOptions};

struct GoService(Child);

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
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "Go is not installed (scripts/ensure-tools.sh installs golang-go)"
        );
        eprintln!("SKIPPED: Go is not installed (scripts/ensure-tools.sh installs golang-go)");
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
