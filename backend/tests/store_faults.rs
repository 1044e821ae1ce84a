//! Faults of the object store under a real server: SeaweedFS stopped mid-run (every
//! request answers 503 StorageUnavailable within the request timeout, the server stays
//! up, serves again when the store is back, and nothing acknowledged is lost), and a
//! slow store behind a delaying proxy (504 StorageTimeout, never a hang).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fixtures, Seaweed, Server};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};

/// Longer than any storage failure may take to be answered.
const REQUEST_TIMEOUT_SECS: u64 = 20;
const STORE_TIMEOUT_SECS: u64 = 2;

fn server_flags() -> Vec<String> {
    [
        "--store-timeout-secs",
        &STORE_TIMEOUT_SECS.to_string(),
        "--request-timeout-secs",
        &REQUEST_TIMEOUT_SECS.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// Status, JSON body and how long the answer took.
fn timed(request: RequestBuilder) -> (u16, Value, Duration) {
    let started = Instant::now();
    let response = request.timeout(Duration::from_secs(REQUEST_TIMEOUT_SECS + 10)).send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null), started.elapsed())
}

/// The requests a user makes, each touching the store.
fn requests<'a>(
    http: &'a Client,
    base: &'a str,
    session: &'a str,
    baseline: &'a str,
    body: &'a [u8],
) -> Vec<(&'static str, RequestBuilder)> {
    vec![
        ("upload", http.post(format!("{base}/api/v1/profiles?service=faults")).body(body.to_vec())),
        ("record", http.get(format!("{base}/api/v1/profiles/{session}"))),
        ("raw", http.get(format!("{base}/api/v1/profiles/{session}/raw"))),
        ("listing", http.get(format!("{base}/api/v1/profiles"))),
        ("baseline", http.get(format!("{base}/api/v1/profiling/baselines/{baseline}"))),
        ("baselines", http.get(format!("{base}/api/v1/profiling/baselines"))),
        (
            "create baseline",
            http.post(format!("{base}/api/v1/profiling/baselines"))
                .json(&json!({"label": "during the outage", "sessionId": session, "profileType": "cpu"})),
        ),
        (
            "diff",
            http.post(format!("{base}/api/v1/profiling/diff"))
                .json(&json!({"baseId": baseline, "compareId": session, "type": "cpu"})),
        ),
        ("delete", http.delete(format!("{base}/api/v1/profiles/{session}"))),
    ]
}

fn upload(http: &Client, base: &str, body: &[u8]) -> String {
    let (status, record, _) = timed(http.post(format!("{base}/api/v1/profiles?service=faults")).body(body.to_vec()));
    assert_eq!(status, 201, "{record}");
    record["id"].as_str().unwrap().to_owned()
}

fn create_baseline(http: &Client, base: &str, session: &str) -> String {
    let body = json!({"label": "before", "sessionId": session, "profileType": "cpu"});
    let (status, record, _) = timed(http.post(format!("{base}/api/v1/profiling/baselines")).json(&body));
    assert_eq!(status, 201, "{record}");
    record["baselineId"].as_str().unwrap().to_owned()
}

#[test]
fn a_stopped_store_answers_503_then_serves_again_with_nothing_lost() {
    let Some(fx) = fixtures() else { return };
    let Some(mut weed) = Seaweed::start() else { return };
    let server =
        Server::start("s3://test", &server_flags().iter().map(String::as_str).collect::<Vec<_>>(), &Seaweed::env());
    let (http, base) = (Client::new(), server.base.as_str());
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let newer = std::fs::read(fx.join("go/compare/cpu.pb.gz")).unwrap();
    let session = upload(&http, base, &cpu);
    let baseline = create_baseline(&http, base, &session);

    weed.stop();
    for (what, request) in requests(&http, base, &session, &baseline, &newer) {
        let (status, body, took) = timed(request);
        assert_eq!((status, body["error_code"].as_str()), (503, Some("StorageUnavailable")), "{what}: {body}");
        assert!(!body["message"].as_str().unwrap().is_empty(), "{what}: the message says what failed");
        assert!(
            took < Duration::from_secs(REQUEST_TIMEOUT_SECS),
            "{what} answered within the request timeout ({took:?})"
        );
    }
    let health = http.get(format!("{base}/healthz")).send().unwrap();
    assert_eq!(health.status(), 200, "the server stays up while its store is down");

    weed.restart();
    let raw = http.get(format!("{base}/api/v1/profiles/{session}/raw")).send().unwrap();
    assert_eq!(raw.status(), 200, "the acknowledged upload is readable again");
    assert_eq!(raw.bytes().unwrap().as_ref(), cpu.as_slice());
    let (status, record, _) = timed(http.get(format!("{base}/api/v1/profiling/baselines/{baseline}")));
    assert_eq!((status, record["sessionId"].as_str()), (200, Some(session.as_str())), "{record}");
    // Writes work again, and what failed during the outage left nothing behind.
    let later = upload(&http, base, &newer);
    let (status, diff, _) = timed(
        http.post(format!("{base}/api/v1/profiling/diff"))
            .json(&json!({"baseId": baseline, "compareId": later, "type": "cpu"})),
    );
    assert_eq!(status, 200, "{diff}");
    assert!(diff["regressions"].as_array().unwrap().iter().any(|r| r["name"] == "main.matrixMultiply"), "{diff}");
    let (_, listing, _) = timed(http.get(format!("{base}/api/v1/profiles")));
    let ids: Vec<&str> = listing["profiles"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [later.as_str(), session.as_str()], "exactly the acknowledged uploads are listed");
    let (_, baselines, _) = timed(http.get(format!("{base}/api/v1/profiling/baselines")));
    assert_eq!(baselines["baselines"].as_array().unwrap().len(), 1, "{baselines}");
}

/// A TCP proxy that holds every answer from upstream for `delay` before passing it on.
struct DelayingProxy {
    port: u16,
    delay_ms: Arc<AtomicU64>,
}

impl DelayingProxy {
    fn start(upstream: u16) -> DelayingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let (client_in, server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pipe(client_in, server_out, None));
                let delay = delay.clone();
                std::thread::spawn(move || pipe(server, client, Some(delay)));
            }
        });
        DelayingProxy { port, delay_ms }
    }

    fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either closes, waiting `delay` before each chunk.
fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Option<Arc<AtomicU64>>) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(delay) = &delay {
            std::thread::sleep(Duration::from_millis(delay.load(Ordering::SeqCst)));
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

#[test]
fn a_slow_store_gives_a_timeout_error_never_a_hang() {
    let Some(fx) = fixtures() else { return };
    let Some(_weed) = Seaweed::start() else { return };
    let proxy = DelayingProxy::start(8333);
    let endpoint = format!("http://127.0.0.1:{}", proxy.port);
    let mut env = Seaweed::env().to_vec();
    env.retain(|(k, _)| *k != "AWS_ENDPOINT");
    env.push(("AWS_ENDPOINT", &endpoint));
    let server = Server::start("s3://test", &server_flags().iter().map(String::as_str).collect::<Vec<_>>(), &env);
    let (http, base) = (Client::new(), server.base.as_str());
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let newer = std::fs::read(fx.join("go/compare/cpu.pb.gz")).unwrap();
    let session = upload(&http, base, &cpu);
    let baseline = create_baseline(&http, base, &session);

    // Far slower than the store timeout: every request fails once it has passed.
    proxy.set_delay(Duration::from_secs(8));
    for (what, request) in requests(&http, base, &session, &baseline, &newer) {
        let (status, body, took) = timed(request);
        assert_eq!((status, body["error_code"].as_str()), (504, Some("StorageTimeout")), "{what}: {body}");
        assert_eq!(body["details"]["timeoutSeconds"], json!(STORE_TIMEOUT_SECS as f64), "{what}: {body}");
        assert!(took < Duration::from_secs(REQUEST_TIMEOUT_SECS), "{what} did not hang ({took:?})");
    }
    assert_eq!(http.get(format!("{base}/healthz")).send().unwrap().status(), 200);

    proxy.set_delay(Duration::ZERO);
    let raw = http.get(format!("{base}/api/v1/profiles/{session}/raw")).send().unwrap();
    assert_eq!(raw.status(), 200, "served again once the store is quick");
    assert_eq!(raw.bytes().unwrap().as_ref(), cpu.as_slice());
    let (status, record, _) = timed(http.get(format!("{base}/api/v1/profiling/baselines/{baseline}")));
    assert_eq!(status, 200, "{record}");
}
