//! Capture targets are the operator's machines, not anybody's: a target belongs to the
//! tenant the targets file names (or to all, `tenant = "*"`), one capture of a target
//! and type runs at a time whichever tenant asks, a redirect from a target is not
//! followed unless the file allows it, and a target that streams more than
//! `--max-upload` is cut off as it sends, not read whole.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{fixtures, json_of, raw_stand_in, stand_in, temp_dir, until, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

const ACME: &str = "acme-key";
const GLOBEX: &str = "globex-key";
const PATIENCE: Duration = Duration::from_secs(60);

/// A server with the tenants acme and globex and the targets file `targets`.
fn start(targets: &str, extra: &[&str]) -> Server {
    let dir = temp_dir("targets");
    let (file, tokens) = (dir.join("targets.toml"), dir.join("tokens"));
    std::fs::write(&file, targets).unwrap();
    std::fs::write(&tokens, format!("acme:{ACME}\nglobex:{GLOBEX}\n")).unwrap();
    let store = format!("file://{}", dir.join("store").display());
    let mut args = vec!["--targets", file.to_str().unwrap(), "--token-file", tokens.to_str().unwrap()];
    args.extend_from_slice(extra);
    Server::start(&store, &args, &[])
}

fn start_capture(http: &Client, server: &Server, key: &str, kind: &str) -> (u16, Value) {
    json_of(
        http.post(format!("{}/api/v1/observability/profiling/start", server.base))
            .bearer_auth(key)
            .json(&json!({"service": "shop", "profileType": kind, "durationSeconds": 1}))
            .send()
            .unwrap(),
    )
}

fn finished(http: &Client, server: &Server, key: &str, id: &str) -> Value {
    until("the capture to finish", PATIENCE, || {
        let url = format!("{}/api/v1/observability/profiling/{id}", server.base);
        let (_, c) = json_of(http.get(url).bearer_auth(key).send().unwrap());
        (c["status"] != "running").then_some(c)
    })
}

fn target(service: &str, url: &str, more: &str) -> String {
    format!("[[target]]\nservice = \"{service}\"\nurl = \"{url}\"\n{more}\n")
}

/// [`raw_stand_in`] that also counts the requests it answered.
fn raw_server(answer: impl Fn(&str, &mut std::net::TcpStream) + Send + Sync + 'static) -> (u16, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let port = raw_stand_in(move |path, out| {
        counted.fetch_add(1, Ordering::SeqCst);
        answer(path, out);
    });
    (port, hits)
}

#[test]
fn a_target_belongs_to_its_tenant() {
    let Some(fx) = fixtures() else { return };
    let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
    let port = stand_in(move |_| Some(heap.clone()));
    let url = format!("http://127.0.0.1:{port}/debug/pprof");
    let server = start(&target("shop", &url, "tenant = \"acme\""), &[]);
    let http = Client::new();
    let (status, e) = start_capture(&http, &server, GLOBEX, "memory");
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownService")), "{e}");
    let schedule = json!({"service": "shop", "profileTypes": ["memory"], "retentionDays": 1, "enabled": true});
    let url_schedules = format!("{}/api/v1/observability/profiling/continuous", server.base);
    let (status, e) = json_of(http.post(&url_schedules).bearer_auth(GLOBEX).json(&schedule).send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownService")), "{e}");
    let (status, started) = start_capture(&http, &server, ACME, "memory");
    assert_eq!(status, 202, "{started}");
    let done = finished(&http, &server, ACME, started["id"].as_str().unwrap());
    assert_eq!(done["status"], "completed", "{done}");
}

#[test]
fn one_capture_of_a_target_at_a_time_across_tenants() {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    // The target takes its time, as a CPU profile does.
    let port = stand_in(move |_| {
        std::thread::sleep(Duration::from_secs(2));
        Some(cpu.clone())
    });
    let url = format!("http://127.0.0.1:{port}/debug/pprof");
    let server = start(&target("shop", &url, "tenant = \"*\""), &[]);
    let http = Client::new();
    let (status, first) = start_capture(&http, &server, ACME, "cpu");
    assert_eq!(status, 202, "{first}");
    let (status, e) = start_capture(&http, &server, GLOBEX, "cpu");
    assert_eq!((status, e["error_code"].as_str()), (409, Some("CaptureInProgress")), "another tenant waits: {e}");
    let done = finished(&http, &server, ACME, first["id"].as_str().unwrap());
    assert_eq!(done["status"], "completed", "{done}");
    let (status, second) = start_capture(&http, &server, GLOBEX, "cpu");
    assert_eq!(status, 202, "then it may: {second}");
}

#[test]
fn a_redirect_is_followed_only_where_the_file_allows_it() {
    let Some(fx) = fixtures() else { return };
    let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
    // The internal address the target sends the server to.
    let (internal, internal_hits) = raw_server(move |_, stream| {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", heap.len());
        let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&heap));
    });
    let (redirecting, _) = raw_server(move |_, stream| {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{internal}/internal/heap\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(head.as_bytes());
    });
    let url = format!("http://127.0.0.1:{redirecting}/debug/pprof");
    let strict = start(&target("shop", &url, "tenant = \"acme\""), &[]);
    let http = Client::new();
    let (status, started) = start_capture(&http, &strict, ACME, "memory");
    assert_eq!(status, 202, "{started}");
    let done = finished(&http, &strict, ACME, started["id"].as_str().unwrap());
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"].as_str().unwrap().contains("redirects are not followed"), "{done}");
    assert_eq!(internal_hits.load(Ordering::SeqCst), 0, "the internal address was not fetched");

    let allowing = start(&target("shop", &url, "tenant = \"acme\"\nfollow_redirects = true"), &[]);
    let (status, started) = start_capture(&http, &allowing, ACME, "memory");
    assert_eq!(status, 202, "{started}");
    let done = finished(&http, &allowing, ACME, started["id"].as_str().unwrap());
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(internal_hits.load(Ordering::SeqCst), 1);
}

#[test]
fn a_target_streaming_past_the_upload_limit_is_cut_off() {
    const CHUNK: usize = 1 << 20;
    const CHUNKS: usize = 300;
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    // 300 MB, chunked, with no length: only reading it tells how long it is.
    let (port, _) = raw_server(move |_, stream| {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        let chunk = vec![b'x'; CHUNK];
        for _ in 0..CHUNKS {
            let framed = [format!("{CHUNK:x}\r\n").as_bytes(), &chunk, b"\r\n"].concat();
            if stream.write_all(&framed).is_err() {
                return;
            }
            counted.fetch_add(CHUNK, Ordering::SeqCst);
        }
        let _ = stream.write_all(b"0\r\n\r\n");
    });
    let url = format!("http://127.0.0.1:{port}/debug/pprof");
    let server = start(&target("shop", &url, "tenant = \"acme\""), &["--max-upload", "1MiB"]);
    let http = Client::new();
    let (status, started) = start_capture(&http, &server, ACME, "memory");
    assert_eq!(status, 202, "{started}");
    let done = finished(&http, &server, ACME, started["id"].as_str().unwrap());
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"].as_str().unwrap().contains("sent more than 1048576 bytes"), "{done}");
    // What the target got out before the server stopped reading: the limit and what the
    // sockets buffer, far from the 300 MB it offered.
    std::thread::sleep(Duration::from_millis(500));
    let out = sent.load(Ordering::SeqCst);
    assert!(out < 64 * CHUNK, "the target sent {out} bytes before it was cut off");
}
