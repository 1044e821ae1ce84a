//! Nothing acknowledged is lost: a baseline pins its profile's bytes through retention
//! and through the session's own deletion; uploaded bytes that a capture also stored
//! outlive the capture; a session nobody holds any more is removed. On a local folder
//! and on SeaweedFS, with captures from a stand-in pprof target serving real profiles.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{fixtures, free_port, temp_dir, Seaweed, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// A pprof endpoint serving whatever bytes the test puts in it, on 127.0.0.1.
struct StandIn {
    port: u16,
    serving: Arc<Mutex<Vec<u8>>>,
}

impl StandIn {
    fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let serving = Arc::new(Mutex::new(Vec::new()));
        let bytes = serving.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                // The request line and headers; the body is empty.
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = bytes.lock().unwrap().clone();
                let mut out = stream;
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = out.write_all(head.as_bytes()).and_then(|()| out.write_all(&body));
            }
        });
        StandIn { port, serving }
    }

    fn serve(&self, bytes: &[u8]) {
        *self.serving.lock().unwrap() = bytes.to_vec();
    }
}

fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn scenario(store: &str, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let read = |f: &str| std::fs::read(fx.join(f)).unwrap();
    let (a, b, c) = (read("go/base/heap.pb.gz"), read("go/compare/heap.pb.gz"), read("go/base/heap.debug1.txt"));
    let target = StandIn::start();
    let targets = temp_dir("retention-targets").join("targets.toml");
    let url = format!("http://127.0.0.1:{}/debug/pprof", target.port);
    std::fs::write(&targets, format!("[[target]]\nservice = \"shop\"\nurl = \"{url}\"\n")).unwrap();
    let server = Server::start(store, &["--targets", targets.to_str().unwrap(), "--schedule-tick-ms", "100"], env);
    let http = Client::new();
    let api = |path: &str| format!("{}{path}", server.base);
    let post = |path: &str, body: Value| {
        let r = http.post(api(path)).json(&body).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let get = |path: &str| {
        let r = http.get(api(path)).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap_or(Value::Null))
    };
    let raw = |session: &str| http.get(api(&format!("/api/v1/profiles/{session}/raw"))).send().unwrap();
    let capture = || {
        let (status, started) =
            post("/api/v1/observability/profiling/start", json!({"service": "shop", "profileType": "memory"}));
        assert_eq!(status, 202, "{started}");
        let id = started["id"].as_str().unwrap().to_owned();
        until("the capture", || {
            let (_, c) = get(&format!("/api/v1/observability/profiling/{id}"));
            (c["status"] != "running").then_some(c)
        })
    };

    // A: uploaded by a user, and captured too (one session, two holders).
    target.serve(&a);
    let uploaded = http.post(api("/api/v1/profiles?service=shop")).body(a.clone()).send().unwrap();
    assert_eq!(uploaded.status(), 201);
    let session_a = uploaded.json::<Value>().unwrap()["id"].as_str().unwrap().to_owned();
    let first = capture();
    assert_eq!((&first["status"], first["sessionId"].as_str()), (&json!("completed"), Some(session_a.as_str())));
    // B: captured, then saved as a baseline.
    target.serve(&b);
    let second = capture();
    let session_b = second["sessionId"].as_str().unwrap().to_owned();
    let (status, baseline) = post(
        "/api/v1/profiling/baselines",
        json!({"label": "before", "sessionId": session_b, "profileType": "memory"}),
    );
    assert_eq!(status, 201, "{baseline}");
    let baseline_id = baseline["baselineId"].as_str().unwrap().to_owned();
    // The user deletes B's session by its link: 404 at once, the baseline keeps its bytes.
    assert_eq!(http.delete(api(&format!("/api/v1/profiles/{session_b}"))).send().unwrap().status(), 204);
    assert_eq!(get(&format!("/api/v1/profiles/{session_b}")).0, 404);

    // C from now on, captured every second and kept for 2 s: A's and B's captures expire.
    target.serve(&c);
    let (status, schedule) = post(
        "/api/v1/observability/profiling/continuous",
        json!({"service": "shop", "profileTypes": ["memory"], "retentionDays": 2.0 / 86400.0, "enabled": true, "intervalSeconds": 1}),
    );
    assert_eq!(status, 201, "{schedule}");
    let history =
        || get("/api/v1/observability/profiling/history?service=shop&profileType=memory").1["captures"].clone();
    let ids =
        |h: &Value| h.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    let session_c = until("a scheduled capture of C", || {
        history()
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["status"] == "completed" && c["slot"].is_u64())
            .map(|c| c["sessionId"].as_str().unwrap().to_owned())
    });
    until("A's and B's captures to expire", || {
        let h = ids(&history());
        (!h.contains(&first["id"].as_str().unwrap().to_owned())
            && !h.contains(&second["id"].as_str().unwrap().to_owned()))
        .then_some(())
    });
    for gone in [&first["id"], &second["id"]] {
        assert_eq!(get(&format!("/api/v1/observability/profiling/{}", gone.as_str().unwrap())).0, 404);
    }

    // A: still there for its uploader, bytes intact.
    let kept = raw(&session_a);
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.bytes().unwrap().as_ref(), a.as_slice());
    // B: hidden from its deleted link, but the baseline still diffs against it.
    assert_eq!(get(&format!("/api/v1/profiles/{session_b}/raw")).0, 404);
    let (status, diff) =
        post("/api/v1/profiling/diff", json!({"baseId": baseline_id, "compareId": session_a, "type": "memory"}));
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["baseSessionId"], json!(session_b));
    let (status, compared) = get(&format!(
        "/api/v1/observability/profiling/compare?baseProfileId={baseline_id}&comparisonProfileId={session_a}"
    ));
    assert_eq!(status, 200, "{compared}");

    // Deleting the baseline releases B's bytes: its session is gone for good.
    assert_eq!(http.delete(api(&format!("/api/v1/profiling/baselines/{baseline_id}"))).send().unwrap().status(), 204);
    assert_eq!(get(&format!("/api/v1/profiling/baselines/{baseline_id}")).0, 404);
    let (status, diff) =
        post("/api/v1/profiling/diff", json!({"baseId": baseline_id, "compareId": session_a, "type": "memory"}));
    assert_eq!((status, diff["error_code"].as_str()), (404, Some("BaselineNotFound")));

    // C: held only by scheduled captures; once they all expire, it is removed.
    let (status, _) = post(
        "/api/v1/observability/profiling/continuous",
        json!({"service": "shop", "profileTypes": ["memory"], "retentionDays": 2.0 / 86400.0, "enabled": false}),
    );
    assert_eq!(status, 201);
    until("C's captures to expire", || history().as_array().unwrap().is_empty().then_some(()));
    until("C's session to be removed", || (get(&format!("/api/v1/profiles/{session_c}")).0 == 404).then_some(()));
    assert_eq!(raw(&session_a).status(), 200, "A's uploader still holds it");
}

#[test]
fn baselines_and_uploads_survive_retention_on_a_local_folder() {
    scenario(&format!("file://{}", temp_dir("retention").display()), &[]);
}

#[test]
fn baselines_and_uploads_survive_retention_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    scenario(&format!("s3://test/retention-{}", free_port()), &Seaweed::env());
}
