//! Nothing acknowledged is lost: a baseline pins its profile's bytes through retention
//! and through the session's own deletion; uploaded bytes that a capture also stored
//! outlive the capture; a session nobody holds any more is removed. On a local folder
//! and on SeaweedFS, with captures from a stand-in pprof target serving real profiles.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fixtures, free_port, stand_in, temp_dir, until, Backing, Seaweed, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

/// A pprof endpoint serving whatever bytes the test puts in it, on 127.0.0.1.
struct StandIn {
    port: u16,
    serving: Arc<Mutex<Vec<u8>>>,
}

impl StandIn {
    fn start() -> StandIn {
        let serving = Arc::new(Mutex::new(Vec::new()));
        let bytes = serving.clone();
        let port = stand_in(move |_| Some(bytes.lock().unwrap().clone()));
        StandIn { port, serving }
    }

    fn serve(&self, bytes: &[u8]) {
        *self.serving.lock().unwrap() = bytes.to_vec();
    }
}

/// How long a wait in these tests may take at most.
const PATIENCE: Duration = Duration::from_secs(60);

fn scenario(backing: Backing, env: &[(&str, &str)]) {
    let store = &backing.url();
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
        until("the capture", PATIENCE, || {
            let (_, c) = get(&format!("/api/v1/observability/profiling/{id}"));
            (c["status"] != "running").then_some(c)
        })
    };

    // A: uploaded by a user, and captured too (one session, two holders).
    target.serve(&a);
    let uploaded = http.post(api("/api/v1/profiles?service=shop")).body(a.clone()).send().unwrap();
    assert_eq!(uploaded.status(), 201);
    let session_a = uploaded.json::<Value>().unwrap()["id"].as_str().unwrap().to_owned();
    assert!(!backing.has(&format!("tenants/default/refs/{session_a}/upload")), "the upload holds it without an object");
    let first = capture();
    assert_eq!((&first["status"], first["sessionId"].as_str()), (&json!("completed"), Some(session_a.as_str())));
    assert_eq!(backing.session_stored(&session_a), (true, true), "A's bytes and record are stored");
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
    assert_eq!(backing.session_stored(&session_b), (true, true), "the baseline holds B's bytes");

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
    let session_c = until("a scheduled capture of C", PATIENCE, || {
        history()
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["status"] == "completed" && c["slot"].is_u64())
            .map(|c| c["sessionId"].as_str().unwrap().to_owned())
    });
    // The sweep drops a capture from the listing, then its record: wait for both.
    let expired = [first["id"].as_str().unwrap().to_owned(), second["id"].as_str().unwrap().to_owned()];
    until("A's and B's captures to expire", PATIENCE, || {
        let h = ids(&history());
        expired
            .iter()
            .all(|id| !h.contains(id) && get(&format!("/api/v1/observability/profiling/{id}")).0 == 404)
            .then_some(())
    });
    assert_eq!(backing.session_stored(&session_c), (true, true), "C's captures hold it");
    // The sessions the expired captures held are still held by the upload and the baseline.
    assert_eq!(backing.session_stored(&session_a), (true, true));
    assert_eq!(backing.session_stored(&session_b), (true, true));

    // A: still there for its uploader, bytes intact.
    let kept = raw(&session_a);
    assert_eq!(kept.status(), 200);
    assert_eq!(kept.bytes().unwrap().as_ref(), a.as_slice());
    // B: hidden from its deleted link, but the baseline still diffs against it.
    assert_eq!(get(&format!("/api/v1/profiles/{session_b}/raw")).0, 404);
    let (status, diff) =
        post("/api/v1/profiling/diff", json!({"baseId": baseline_id, "compareId": session_a, "type": "memory"}));
    assert_eq!(status, 200, "{diff}");
    // B is go/compare/heap.pb.gz, A go/base/heap.pb.gz: inuse_space sums 14530408 and
    // 7617933 bytes (SOURCES.md).
    let delta = (7_617_933.0 - 14_530_408.0) * 100.0 / 14_530_408.0;
    assert_eq!(diff["baseSessionId"], json!(session_b));
    assert!((diff["overallDelta"].as_f64().unwrap() - delta).abs() < 1e-9, "{}", diff["overallDelta"]);
    let (status, compared) = get(&format!(
        "/api/v1/observability/profiling/compare?baseProfileId={baseline_id}&comparisonProfileId={session_a}"
    ));
    assert_eq!(status, 200, "{compared}");
    assert_eq!(compared["baseProfile"]["sessionId"], json!(session_b));
    assert!((compared["overallDelta"].as_f64().unwrap() - delta).abs() < 1e-9, "{}", compared["overallDelta"]);

    // Deleting the baseline releases B's bytes: its session is gone for good.
    assert_eq!(http.delete(api(&format!("/api/v1/profiling/baselines/{baseline_id}"))).send().unwrap().status(), 204);
    assert_eq!(get(&format!("/api/v1/profiling/baselines/{baseline_id}")).0, 404);
    let (status, diff) =
        post("/api/v1/profiling/diff", json!({"baseId": baseline_id, "compareId": session_a, "type": "memory"}));
    assert_eq!((status, diff["error_code"].as_str()), (404, Some("BaselineNotFound")));
    assert_eq!(backing.session_stored(&session_b), (false, false), "B's bytes and record are removed");

    // C: held only by scheduled captures; once they all expire, it is removed.
    let (status, _) = post(
        "/api/v1/observability/profiling/continuous",
        json!({"service": "shop", "profileTypes": ["memory"], "retentionDays": 2.0 / 86400.0, "enabled": false}),
    );
    assert_eq!(status, 201);
    until("C's captures to expire", PATIENCE, || history().as_array().unwrap().is_empty().then_some(()));
    // The sweep removes the record, then the bytes: wait for both, not for the 404 alone.
    until("C's bytes and record to be removed", PATIENCE, || {
        (backing.session_stored(&session_c) == (false, false)).then_some(())
    });
    assert_eq!(get(&format!("/api/v1/profiles/{session_c}")).0, 404);
    assert_eq!(raw(&session_c).status(), 404);
    assert_eq!(raw(&session_a).status(), 200, "A's uploader still holds it");
    assert_eq!(backing.session_stored(&session_a), (true, true));

    // D: uploaded, saved as a baseline, then deleted by its link: the baseline holds it
    // until the baseline is deleted too.
    let d = read("go/compare/heap.debug1.txt");
    let uploaded = http.post(api("/api/v1/profiles?service=shop")).body(d).send().unwrap();
    assert_eq!(uploaded.status(), 201);
    let session_d = uploaded.json::<Value>().unwrap()["id"].as_str().unwrap().to_owned();
    let (status, baseline) = post(
        "/api/v1/profiling/baselines",
        json!({"label": "uploaded", "sessionId": session_d, "profileType": "memory"}),
    );
    assert_eq!(status, 201, "{baseline}");
    assert_eq!(http.delete(api(&format!("/api/v1/profiles/{session_d}"))).send().unwrap().status(), 204);
    assert_eq!(raw(&session_d).status(), 404);
    assert_eq!(backing.session_stored(&session_d), (true, true), "the baseline holds D's bytes");
    let baseline_d = baseline["baselineId"].as_str().unwrap();
    assert_eq!(http.delete(api(&format!("/api/v1/profiling/baselines/{baseline_d}"))).send().unwrap().status(), 204);
    assert_eq!(backing.session_stored(&session_d), (false, false), "D's bytes and record are removed");
    // A: deleted by its uploader, no capture or baseline left: removed at once.
    assert_eq!(http.delete(api(&format!("/api/v1/profiles/{session_a}"))).send().unwrap().status(), 204);
    assert_eq!(raw(&session_a).status(), 404);
    assert_eq!(backing.session_stored(&session_a), (false, false), "A's bytes and record are removed");
}

#[test]
fn baselines_and_uploads_survive_retention_on_a_local_folder() {
    scenario(Backing::Folder(temp_dir("retention")), &[]);
}

#[test]
fn baselines_and_uploads_survive_retention_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    scenario(Backing::Seaweed(format!("retention-{}", free_port())), &Seaweed::env());
}
