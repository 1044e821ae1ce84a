//! `stacklens serve` as a real process on 127.0.0.1: page, SPA fallback, health, shutdown.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    s.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    Some((status, response))
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

#[test]
fn serves_the_page_and_stops_on_sigterm() {
    let dist = std::env::temp_dir().join(format!("stacklens-dist-{}", std::process::id()));
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(dist.join("index.html"), "<!doctype html><title>stacklens test page</title>").unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_stacklens"))
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--dist",
                dist.to_str().unwrap(),
                "--store",
                "memory://",
            ])
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        if let Some(r) = get(port, "/healthz") {
            break r;
        }
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(health.0, 200);
    assert!(health.1.contains(r#""status":"ok""#));
    let (status, body) = get(port, "/").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("stacklens test page"));
    // Client-side routes (share links) get the page too.
    let (status, body) = get(port, "/s/sess-123").unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("stacklens test page"));

    // A missing file is a 404 with a JSON body, not the page.
    let (status, body) = get(port, "/missing/profile.pb.gz").unwrap();
    assert_eq!(status, 404);
    assert!(body.contains(r#""error_code":"NotFound""#), "{body}");

    // Deliver SIGTERM as a process manager would.
    let pid = server.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "graceful shutdown exits 0, got {status:?}");
}

#[test]
fn refuses_to_start_without_a_built_page() {
    let out = Command::new(env!("CARGO_BIN_EXE_stacklens"))
        .args(["serve", "--listen", "127.0.0.1:0", "--dist", "/nonexistent/dist"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("trunk build"));
}

/// Built assets named by hash are immutable; the page itself is revalidated by ETag.
#[test]
fn caching_headers_and_etags() {
    let server = common::Server::start("memory://", &[], &[]);
    let dist = server.dist();
    std::fs::write(dist.join("app-0123456789abcdef_bg.wasm"), b"\0asm").unwrap();
    let http = reqwest::blocking::Client::new();
    let asset = http.get(format!("{}/app-0123456789abcdef_bg.wasm", server.base)).send().unwrap();
    assert_eq!(asset.headers()["cache-control"], "public, max-age=31536000, immutable");
    let page = http.get(format!("{}/", server.base)).send().unwrap();
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let tag = page.headers()["etag"].clone();
    // Ours (from size and modification time), not ServeDir's.
    assert!(tag.to_str().unwrap().starts_with("W/\""), "{tag:?}");
    let again = http.get(format!("{}/", server.base)).header("if-none-match", tag.clone()).send().unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"], tag);
    assert_eq!(again.headers()["cache-control"], "no-cache");
}

/// `--cors-origin` lets another page call the API; other origins get no CORS grant.
#[test]
fn cors_is_granted_only_to_configured_origins() {
    let server = common::Server::start("memory://", &["--cors-origin", "https://ci.example"], &[]);
    let http = reqwest::blocking::Client::new();
    let preflight = |origin: &str| {
        http.request(reqwest::Method::OPTIONS, format!("{}/api/v1/profiles", server.base))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization,x-tenant-id")
            .send()
            .unwrap()
    };
    let granted = preflight("https://ci.example");
    assert_eq!(granted.headers()["access-control-allow-origin"], "https://ci.example");
    assert!(granted.headers()["access-control-allow-headers"].to_str().unwrap().contains("x-tenant-id"));
    assert!(preflight("https://evil.example").headers().get("access-control-allow-origin").is_none());
}

/// `serve` with no `--dist`, run from a folder with no dist/: a binary built after
/// `trunk build` serves the page built into it, with the headers of a page served
/// from a folder; one built before says how to get the page. `--version` tells which
/// binary this is, and the test says which case it checked.
#[test]
fn serves_the_built_in_page_from_any_folder() {
    let bin = env!("CARGO_BIN_EXE_stacklens");
    let version = Command::new(bin).arg("--version").output().unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    let cwd = common::temp_dir("no-dist");
    if !version.contains("with the page built in") {
        assert!(version.contains("without the page"), "{version}");
        eprintln!("checked: no page built in ({}), so serve asks for one", version.trim());
        let out = Command::new(bin).args(["serve", "--listen", "127.0.0.1:0"]).current_dir(&cwd).output().unwrap();
        assert_eq!(out.status.code(), Some(6));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("dist/index.html not found: build the page first (trunk build --release)"), "{stderr}");
        return;
    }
    eprintln!("checked: the page built in ({}) is served", version.trim());
    // What was built in: build.rs rebuilds the binary whenever dist/ changes.
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dist");
    let port = common::free_port();
    let _server = Server(
        Command::new(bin)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--store", "memory://"])
            .current_dir(&cwd)
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::new();
    common::until("stacklens serve to start", Duration::from_secs(30), || {
        http.get(format!("{base}/healthz")).send().ok()
    });

    let index = std::fs::read(dist.join("index.html")).unwrap();
    let page = http.get(format!("{base}/")).send().unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let tag = page.headers()["etag"].clone();
    assert_eq!(page.bytes().unwrap(), index);
    let again = http.get(format!("{base}/")).header("if-none-match", tag.clone()).send().unwrap();
    assert_eq!((again.status().as_u16(), &again.headers()["etag"]), (304, &tag));
    assert_eq!(again.headers()["cache-control"], "no-cache");
    // A page route (a share link) gets index.html; a missing file a JSON 404.
    assert_eq!(http.get(format!("{base}/s/sess-123")).send().unwrap().bytes().unwrap(), index);
    let (status, body) = common::json_of(http.get(format!("{base}/missing/app.js")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (404, Some("NotFound")));
    assert_eq!(http.post(format!("{base}/")).send().unwrap().status(), 405);

    let wasm = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|name| name.ends_with("_bg.wasm"))
        .expect("the built page has its WASM module");
    let asset = http.get(format!("{base}/{wasm}")).send().unwrap();
    assert_eq!(asset.status(), 200);
    assert_eq!(asset.headers()["content-type"], "application/wasm");
    assert_eq!(asset.headers()["cache-control"], "public, max-age=31536000, immutable");
    assert_eq!(asset.bytes().unwrap(), std::fs::read(dist.join(&wasm)).unwrap());
    assert!(std::fs::read_dir(&cwd).unwrap().next().is_none(), "the memory store writes nothing");
}
