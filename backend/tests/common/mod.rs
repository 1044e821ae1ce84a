//! Shared by the backend's integration tests: fixtures, and real `stacklens serve`
//! processes on 127.0.0.1 (and a real S3-compatible server when one is installed).
#![allow(dead_code)] // each test binary uses its own subset

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod goservice;

// The same fixture lookup as core's tests (CI=true fails loudly when it is missing).
#[path = "../../../core/tests/common/mod.rs"]
mod corpus;
#[allow(unused_imports)] // serve.rs reads no fixtures; only memory.rs makes hostile inputs
pub use corpus::{
    fixtures, go, hostile, missing_prerequisite, pprof, pprof_top, pprof_top_merged, read_pprof_top, symbol_fixtures,
    PprofTopRow,
};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Every file under `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stacklens-{name}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Polls `check` every 50 ms until it gives a value; fails naming `what` once `deadline`
/// has passed. Deadlines only bound a wait: they never decide what a test proves.
pub fn until<T>(what: &str, deadline: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < end, "timed out after {deadline:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    until(&format!("{what} to start"), Duration::from_secs(30), || ready().then_some(()));
}

/// A stand-in HTTP server on 127.0.0.1 (a net/http/pprof target): each request's path
/// and query go to `respond`, whose body is answered 200 (`None`: 404). One thread per
/// connection, so a slow answer holds up no other. Returns the port.
pub fn stand_in(respond: impl Fn(&str) -> Option<Vec<u8>> + Send + Sync + 'static) -> u16 {
    use std::io::Write;
    raw_stand_in(move |path, out| {
        let (status, body) = match respond(path) {
            Some(body) => ("200 OK", body),
            None => ("404 Not Found", Vec::new()),
        };
        let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        let _ = out.write_all(head.as_bytes()).and_then(|()| out.write_all(&body));
    })
}

/// [`stand_in`] that writes the whole answer itself (status line, headers, body) to the
/// connection: for redirects, chunked streams and the like. Returns the port.
pub fn raw_stand_in(answer: impl Fn(&str, &mut std::net::TcpStream) + Send + Sync + 'static) -> u16 {
    use std::io::{BufRead, BufReader};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = answer.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
                // The headers; the body is empty.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
                let mut out = stream;
                answer(&path, &mut out);
            });
        }
    });
    port
}

/// A `stacklens serve` process; killed when dropped.
pub struct Server {
    child: Child,
    pub base: String,
    pub port: u16,
    dist: PathBuf,
}

impl Server {
    /// A server on a free port. The port is free when chosen but may be taken before the
    /// server binds it (tests run in parallel): then another port is tried.
    pub fn start(store: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Self::on_a_free_port(|port| Self::spawn(port, store, extra, env, None, "warn"))
    }

    /// A server on `port`, which must stay free.
    pub fn start_on(port: u16, store: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Self::spawn(port, store, extra, env, None, "warn")
            .unwrap_or_else(|status| panic!("stacklens serve on port {port} exited ({status}) before answering"))
    }

    /// [`Server::start`] with the server's log (`RUST_LOG=info`, and every request)
    /// written to `log`, for a test to show when it fails.
    pub fn start_logged(store: &str, extra: &[&str], env: &[(&str, &str)], log: &Path) -> Server {
        let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        Self::on_a_free_port(|port| Self::spawn(port, store, extra, env, Some(&file), "info,tower_http=debug"))
    }

    fn on_a_free_port(mut spawn: impl FnMut(u16) -> Result<Server, ExitStatus>) -> Server {
        let mut failures = Vec::new();
        for _ in 0..5 {
            match spawn(free_port()) {
                Ok(server) => return server,
                Err(status) => failures.push(status.to_string()),
            }
        }
        panic!("stacklens serve exited before answering, on five free ports: {failures:?}")
    }

    /// Starts a server and waits until it answers; its exit status if it ends first. Its
    /// output goes to `log_file` if given (else its log is dropped and its errors shown),
    /// filtered by `log`.
    fn spawn(
        port: u16,
        store: &str,
        extra: &[&str],
        env: &[(&str, &str)],
        log_file: Option<&std::fs::File>,
        log: &str,
    ) -> Result<Server, ExitStatus> {
        let dist = temp_dir("dist");
        std::fs::write(dist.join("index.html"), "<!doctype html><title>stacklens test page</title>").unwrap();
        let listen = format!("127.0.0.1:{port}");
        let dist_arg = dist.display().to_string();
        let mut args = vec!["serve", "--listen", &listen, "--dist", &dist_arg, "--store", store];
        args.extend_from_slice(extra);
        // Blocks change what a query reads: a test gets them only when it asks for them.
        if !extra.contains(&"--compact-tick-ms") {
            args.extend_from_slice(&["--compact-tick-ms", "0"]);
        }
        let output = |f: &std::fs::File| Stdio::from(f.try_clone().unwrap());
        let mut child = Command::new(env!("CARGO_BIN_EXE_stacklens"))
            .args(&args)
            .envs(env.iter().copied())
            .env("RUST_LOG", log)
            // A log file gets plain text.
            .envs(log_file.map(|_| ("NO_COLOR", "1")))
            .stdout(log_file.map_or_else(Stdio::null, output))
            .stderr(log_file.map_or_else(Stdio::inherit, output))
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let health = format!("{base}/healthz");
        let answering = until("stacklens serve to start", Duration::from_secs(30), || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Err(status));
            }
            reqwest::blocking::get(&health).is_ok_and(|r| r.status() == 200).then_some(Ok(()))
        });
        answering.map(|()| Server { child, base, port, dist })
    }

    /// The folder it serves the page from.
    pub fn dist(&self) -> PathBuf {
        self.dist.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the process without letting it clean up.
    pub fn kill_9(mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SeaweedFS (`weed mini`) from the venv `scripts/ensure-tools.sh` makes, with bucket
/// `test` on 127.0.0.1:8333; killed when dropped. `None` (the test skips) when it is
/// not installed, except under CI=true.
pub struct Seaweed {
    child: Child,
    weed: PathBuf,
    dir: PathBuf,
    /// Held until the server is gone (fields drop after `drop` has killed it).
    _lock: std::fs::File,
}

pub const S3_KEY: &str = "stacklens-test";
pub const S3_SECRET: &str = "stacklens-test-secret";

impl Seaweed {
    pub fn start() -> Option<Seaweed> {
        let weed = std::env::var_os("STACKLENS_WEED")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/seaweedfs/bin/weed"));
        if !weed.is_file() {
            missing_prerequisite(&format!(
                "SeaweedFS is not installed at {} (scripts/ensure-tools.sh)",
                weed.display()
            ));
            return None;
        }
        // One SeaweedFS at a time on this machine (its ports are fixed): tests in other
        // threads and processes wait here until the running one is dropped.
        let lock = std::fs::File::create(std::env::temp_dir().join("stacklens-seaweedfs.lock")).unwrap();
        lock.lock().unwrap();
        let dir = temp_dir("seaweed");
        let config = serde_json::json!({"identities": [{"name": "ci",
            "credentials": [{"accessKey": S3_KEY, "secretKey": S3_SECRET}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]});
        std::fs::write(dir.join("s3.json"), config.to_string()).unwrap();
        let child = Self::spawn(&weed, &dir);
        Some(Seaweed { child, weed, dir, _lock: lock })
    }

    /// Starts `weed mini` over `dir` and waits until it serves the bucket.
    fn spawn(weed: &Path, dir: &Path) -> Child {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("weed.log")).unwrap();
        let child = Command::new(weed)
            .args([
                "mini",
                &format!("-dir={}", dir.display()),
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-s3.port=8333",
                &format!("-s3.config={}", dir.join("s3.json").display()),
                "-bucket=test",
                "-webdav=false",
                "-admin.ui=false",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-master.telemetry=false",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_until("SeaweedFS", || {
            let ok = |url: &str| reqwest::blocking::get(url).is_ok_and(|r| r.status().is_success());
            ok("http://127.0.0.1:8333/healthz") && ok("http://127.0.0.1:8888/buckets/test/") && Self::writes()
        });
        child
    }

    /// Whether a write goes through: after a restart, S3 and the filer answer before a
    /// volume server has registered, and a write then waits (a CI run saw a 2 s timeout).
    /// The probe file is outside the bucket, so no test sees it.
    fn writes() -> bool {
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let probe = "http://127.0.0.1:8888/stacklens-probe/ready";
        let written = http.put(probe).body("ready").send().is_ok_and(|r| r.status().is_success());
        written && http.delete(probe).send().is_ok_and(|r| r.status().is_success())
    }

    /// Stops the server as an operator would (SIGTERM) and waits until it is gone.
    pub fn stop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts it again over the same data.
    pub fn restart(&mut self) {
        self.child = Self::spawn(&self.weed, &self.dir);
    }

    /// The environment a server needs for `s3://test`.
    pub fn env() -> [(&'static str, &'static str); 5] {
        [
            ("AWS_ACCESS_KEY_ID", S3_KEY),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT", "http://127.0.0.1:8333"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a server keeps its objects, looked at directly (not through the server).
pub enum Backing {
    Folder(PathBuf),
    /// A prefix in SeaweedFS's bucket `test`, read through its filer.
    Seaweed(String),
}

impl Backing {
    /// The `--store` URL.
    pub fn url(&self) -> String {
        match self {
            Backing::Folder(dir) => format!("file://{}", dir.display()),
            Backing::Seaweed(prefix) => format!("s3://test/{prefix}"),
        }
    }

    /// The object at `key`, if there is one.
    pub fn read(&self, key: &str) -> Option<Vec<u8>> {
        match self {
            Backing::Folder(dir) => std::fs::read(dir.join(key)).ok(),
            Backing::Seaweed(prefix) => {
                let url = format!("http://127.0.0.1:8888/buckets/test/{prefix}/{key}");
                let response = reqwest::blocking::get(url).unwrap();
                let status = response.status().as_u16();
                assert!(status == 200 || status == 404, "the filer answered {status} for {key}");
                (status == 200).then(|| response.bytes().unwrap().to_vec())
            }
        }
    }

    pub fn has(&self, key: &str) -> bool {
        match self {
            Backing::Folder(dir) => dir.join(key).is_file(),
            Backing::Seaweed(prefix) => {
                let url = format!("http://127.0.0.1:8888/buckets/test/{prefix}/{key}");
                let status = reqwest::blocking::Client::new().head(url).send().unwrap().status().as_u16();
                assert!(status == 200 || status == 404, "the filer answered {status} for {key}");
                status == 200
            }
        }
    }

    /// Puts `bytes` at `key` behind the server's back (to damage what it stored).
    pub fn write(&self, key: &str, bytes: Vec<u8>) {
        match self {
            Backing::Folder(dir) => std::fs::write(dir.join(key), bytes).unwrap(),
            Backing::Seaweed(prefix) => {
                let url = format!("http://127.0.0.1:8888/buckets/test/{prefix}/{key}");
                let status = reqwest::blocking::Client::new().put(url).body(bytes).send().unwrap().status();
                assert!(status.is_success(), "the filer answered {status} for {key}");
            }
        }
    }

    /// Whether a session's raw bytes and its record are in the store.
    pub fn session_stored(&self, session: &str) -> (bool, bool) {
        let key = |ext: &str| format!("tenants/default/sessions/{session}.{ext}");
        (self.has(&key("raw")), self.has(&key("json")))
    }
}

/// A protobuf field of `tag` holding `bytes` (length-delimited).
pub fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![tag << 3 | 2];
    let mut n = bytes.len();
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(bytes);
    out
}

/// A `push.v1.PushRequest` of one series with `labels` and one profile.
pub fn push_request(labels: &[(&str, &str)], profile: &[u8]) -> Vec<u8> {
    let mut series: Vec<u8> =
        labels.iter().flat_map(|(k, v)| field(1, &[field(1, k.as_bytes()), field(2, v.as_bytes())].concat())).collect();
    series.extend(field(2, &[field(1, profile), field(2, b"id-1")].concat()));
    field(1, &series)
}

/// `data` gzipped (fast).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Status and JSON body; error bodies must have the API's error shape.
pub fn json_of(r: reqwest::blocking::Response) -> (u16, serde_json::Value) {
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    let body: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status} without a JSON body ({e}): {text}"));
    if status >= 400 {
        for field in ["message", "error_code", "details"] {
            assert!(body.get(field).is_some(), "error without {field}: {body}");
        }
    }
    (status, body)
}
