//! The bad-input table, over HTTP against a real `stacklens serve` and through the
//! command line on the same bytes. Every row checks the exact status and error code
//! (or exit status and message), that the server still serves afterwards (`/healthz`
//! and a valid upload), and that nothing stored changed: every object's path and
//! sha256 before and after, in the store folder (and the folder around it, so nothing
//! is created beside the store either) or, on SeaweedFS, through its filer listing.
//! The rows that touch storage run on a folder here and on SeaweedFS in
//! `storage_rows_on_seaweedfs`.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{gzip, json_of, temp_dir, Seaweed, Server};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// `--max-upload` of the servers here; the inflate cap is 4 × this.
const MAX_UPLOAD: usize = 4 << 20;
const INFLATE_CAP: u64 = 4 * MAX_UPLOAD as u64;
/// Written beside the store: no answer may ever contain it.
const MARKER: &str = "stacklens-canary-outside-the-store";

// ---------------------------------------------------------------------------
// Profiles, written field by field (strings are bytes, so they can be non-UTF-8).

#[path = "../../core/tests/common/protobuf.rs"]
mod protobuf;
use protobuf::{field_bytes, field_varint, message, varint};

fn packed(values: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        varint(v, &mut out);
    }
    out
}

/// A CPU profile (sample types samples/count and cpu/nanoseconds, 10 ms period).
struct Pprof {
    strings: Vec<Vec<u8>>,
    body: Vec<u8>,
}

const PERIOD: i64 = 10_000_000;

impl Pprof {
    fn cpu() -> Pprof {
        let mut p = Pprof { strings: vec![Vec::new()], body: Vec::new() };
        let (samples, count, cpu, ns) =
            (p.string(b"samples"), p.string(b"count"), p.string(b"cpu"), p.string(b"nanoseconds"));
        for (kind, unit) in [(samples, count), (cpu, ns)] {
            field_bytes(
                1,
                &message(|m| {
                    field_varint(1, kind, m);
                    field_varint(2, unit, m);
                }),
                &mut p.body,
            );
        }
        field_bytes(
            11,
            &message(|m| {
                field_varint(1, cpu, m);
                field_varint(2, ns, m);
            }),
            &mut p.body,
        );
        field_varint(12, PERIOD as u64, &mut p.body);
        p
    }

    fn string(&mut self, s: &[u8]) -> u64 {
        self.strings.push(s.to_vec());
        self.strings.len() as u64 - 1
    }

    /// Function `id` and location `id`, which holds it.
    fn frame(&mut self, id: u64, name: &[u8], file: &[u8]) {
        let (name, file) = (self.string(name), self.string(file));
        field_bytes(
            5,
            &message(|f| {
                field_varint(1, id, f);
                field_varint(2, name, f);
                field_varint(3, name, f);
                field_varint(4, file, f);
            }),
            &mut self.body,
        );
        field_bytes(
            4,
            &message(|l| {
                field_varint(1, id, l);
                field_bytes(
                    4,
                    &message(|line| {
                        field_varint(1, id, line);
                        field_varint(2, id % 1000 + 1, line);
                    }),
                    l,
                );
            }),
            &mut self.body,
        );
    }

    /// A sample of `n` samples on `stack` (location ids, leaf first), with string labels.
    fn sample(&mut self, stack: &[u64], n: i64, labels: &[(&[u8], &[u8])]) {
        let labels: Vec<(u64, u64)> = labels.iter().map(|(k, v)| (self.string(k), self.string(v))).collect();
        let body = message(|s| {
            field_bytes(1, &packed(stack.iter().copied()), s);
            field_bytes(2, &packed([n as u64, (n * PERIOD) as u64]), s);
            for (k, v) in labels {
                field_bytes(
                    3,
                    &message(|l| {
                        field_varint(1, k, l);
                        field_varint(2, v, l);
                    }),
                    s,
                );
            }
        });
        field_bytes(2, &body, &mut self.body);
    }

    fn bytes(mut self) -> Vec<u8> {
        for s in std::mem::take(&mut self.strings) {
            field_bytes(6, &s, &mut self.body);
        }
        self.body
    }
}

/// A small valid CPU profile, different for each `tag`.
fn small_profile(tag: &str) -> Vec<u8> {
    let mut p = Pprof::cpu();
    p.frame(1, format!("main.work_{tag}").as_bytes(), b"main.go");
    p.frame(2, b"main.main", b"main.go");
    p.sample(&[1, 2], 3, &[]);
    gzip(&p.bytes())
}

/// One sample whose stack has `depth` distinct frames, counted `n` times.
fn deep_profile(depth: u64, n: i64) -> Vec<u8> {
    let mut p = Pprof::cpu();
    for id in 1..=depth {
        p.frame(id, format!("deep.f{id}").as_bytes(), b"deep.go");
    }
    let stack: Vec<u64> = (1..=depth).collect();
    p.sample(&stack, n, &[]);
    gzip(&p.bytes())
}

/// `samples` samples of 1 on 100 functions: leaf `f{i % modulo}`, then `g{i % 7}`, then main.
fn many_samples(samples: u64, modulo: u64) -> Vec<u8> {
    let mut p = Pprof::cpu();
    for id in 1..=50 {
        p.frame(id, format!("many.f{}", id - 1).as_bytes(), b"many.go");
    }
    for id in 51..=57 {
        p.frame(id, format!("many.g{}", id - 51).as_bytes(), b"many.go");
    }
    p.frame(100, b"many.main", b"many.go");
    let mut body = p.bytes();
    let value = packed([1, PERIOD as u64]);
    for i in 0..samples {
        let s = message(|s| {
            field_bytes(1, &packed([i % modulo + 1, 51 + i % 7, 100]), s);
            field_bytes(2, &value, s);
        });
        field_bytes(2, &s, &mut body);
    }
    gzip(&body)
}

/// Hand-made broken profiles: a header with one sample type and strings ["", "samples", "count"].
fn broken(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    message(|m| {
        field_bytes(
            1,
            &message(|v| {
                field_varint(1, 1, v);
                field_varint(2, 2, v);
            }),
            m,
        );
        for s in [b"".as_slice(), b"samples", b"count"] {
            field_bytes(6, s, m);
        }
        build(m);
    })
}

/// About 2 MB of gzip that inflates to about 2 GB of zeros: one member holding 1 MiB of
/// zeros, repeated (a gzip stream is any number of members; every reader here reads all).
fn bomb_bytes() -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; 1 << 20]).unwrap();
    let member = e.finish().unwrap();
    let mut bomb = Vec::with_capacity(2_000_000 + member.len());
    while bomb.len() < 2_000_000 {
        bomb.extend_from_slice(&member);
    }
    bomb
}

// ---------------------------------------------------------------------------
// Servers, stores and their snapshots.

enum Backing {
    /// The store is `around/store`; canaries live in `around`.
    Folder {
        around: PathBuf,
    },
    Seaweed,
}

struct Env {
    server: Server,
    backing: Backing,
    http: Client,
    /// Held until the server is gone.
    _seaweed: Option<Seaweed>,
}

/// A `--targets` file: one capture target (nothing listens there) and one samply pipeline.
fn targets_file(dir: &Path) -> PathBuf {
    let path = dir.join("targets.toml");
    let text = format!(
        "[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:9/debug/pprof\"\n\n[[pipeline]]\nname = \"engine\"\npid = {}\n",
        std::process::id()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn server_args(extra: &[&str], targets: &Path) -> Vec<String> {
    let mut args: Vec<String> =
        vec!["--max-upload".into(), format!("{MAX_UPLOAD}"), "--targets".into(), targets.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

impl Env {
    fn folder(extra: &[&str]) -> Env {
        let around = temp_dir("bad-input");
        for (name, text) in [("secret.json", MARKER), ("secret.raw", MARKER), ("passwd", MARKER)] {
            std::fs::write(around.join(name), text).unwrap();
        }
        let store = around.join("store");
        let args = server_args(extra, &targets_file(&temp_dir("targets")));
        let server = Server::start(store.to_str().unwrap(), &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
        Env { server, backing: Backing::Folder { around }, http: client(), _seaweed: None }
    }

    fn seaweed(extra: &[&str]) -> Option<Env> {
        let seaweed = Seaweed::start()?;
        let args = server_args(extra, &targets_file(&temp_dir("targets")));
        let server = Server::start("s3://test", &args.iter().map(String::as_str).collect::<Vec<_>>(), &Seaweed::env());
        Some(Env { server, backing: Backing::Seaweed, http: client(), _seaweed: Some(seaweed) })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base)
    }

    fn get(&self, path: &str) -> RequestBuilder {
        self.http.get(self.url(path))
    }

    fn post(&self, path: &str) -> RequestBuilder {
        self.http.post(self.url(path))
    }

    /// Every stored object (and, for a folder, every file around the store) and its sha256.
    fn snapshot(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        match &self.backing {
            Backing::Folder { around } => walk_folder(around, around, &mut files),
            Backing::Seaweed => walk_filer(&self.http, "/buckets/", &mut files),
        }
        files
    }

    /// `/healthz` answers and a valid upload is stored.
    fn still_serving(&self, tenant: &str) {
        let health = self.get("/healthz").send().expect("the server answers after the bad input");
        assert_eq!(health.status(), 200);
        let tag = format!("{}{}", tenant.replace('-', "_"), std::process::id());
        let before = self.snapshot();
        let answer = self.post("/api/v1/profiles").header("X-Tenant-ID", tenant).body(small_profile(&tag)).send();
        let (status, body) = json_of(answer.expect("upload after the bad input"));
        assert!(status == 201 || status == 200, "a valid upload after the bad input: {status} {body}");
        assert_eq!(body["sampleCount"], 3);
        // The snapshot sees what a write changes (so an unchanged one means something).
        if status == 201 {
            let id = body["id"].as_str().unwrap();
            let added: Vec<String> = self.snapshot().into_keys().filter(|k| !before.contains_key(k)).collect();
            assert!(added.iter().any(|k| k.contains(id)), "the new session is not in the snapshot: {added:?}");
        }
    }

    /// Runs `bad` and checks that the store is exactly as before, then that the server
    /// still serves.
    fn unchanged(&self, tenant: &str, bad: impl FnOnce()) {
        let before = self.snapshot();
        bad();
        assert_same(&before, &self.snapshot());
        self.still_serving(tenant);
    }
}

fn client() -> Client {
    // A generous bound: nothing here may hang.
    Client::builder().timeout(Duration::from_secs(120)).build().unwrap()
}

fn walk_folder(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.strip_prefix(root).unwrap().display().to_string();
        if path.is_dir() {
            files.insert(format!("{name}/"), String::new());
            walk_folder(root, &path, files);
        } else {
            files.insert(name, hex::encode(Sha256::digest(std::fs::read(&path).unwrap())));
        }
    }
}

/// SeaweedFS's filer lists a folder as JSON; folders have bit 31 of `Mode` set.
fn walk_filer(http: &Client, dir: &str, files: &mut BTreeMap<String, String>) {
    let mut last = String::new();
    loop {
        let url = format!("http://127.0.0.1:8888{dir}?limit=1000&lastFileName={last}");
        let listing: Value = http.get(&url).header("Accept", "application/json").send().unwrap().json().unwrap();
        for entry in listing["Entries"].as_array().into_iter().flatten() {
            let path = entry["FullPath"].as_str().unwrap().to_owned();
            if entry["Mode"].as_u64().unwrap() & (1 << 31) != 0 {
                files.insert(format!("{path}/"), String::new());
                walk_filer(http, &format!("{path}/"), files);
            } else {
                let bytes = http.get(format!("http://127.0.0.1:8888{path}")).send().unwrap().bytes().unwrap();
                files.insert(path, hex::encode(Sha256::digest(&bytes)));
            }
        }
        if listing["ShouldDisplayLoadMore"] != true {
            return;
        }
        last = listing["LastFileName"].as_str().unwrap().to_owned();
    }
}

fn assert_same(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) {
    let added: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<_> =
        before.iter().filter(|(k, v)| after.get(*k).is_some_and(|a| a != *v)).map(|(k, _)| k).collect();
    assert!(
        added.is_empty() && removed.is_empty() && changed.is_empty(),
        "the store changed: added {added:?}, removed {removed:?}, changed {changed:?}"
    );
}

/// The answer must be exactly `status` with `code`; returns the body.
fn expect_error(r: Result<Response, reqwest::Error>, status: u16, code: &str) -> Value {
    let (got, body) = json_of(r.expect("an answer"));
    assert_eq!((got, body["error_code"].as_str().unwrap_or("")), (status, code), "{body}");
    body
}

// ---------------------------------------------------------------------------
// Raw HTTP: exact bytes on the wire (no client normalises `..` in a path).

struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{} without a JSON body ({e}): {}", self.status, String::from_utf8_lossy(&self.body))
        })
    }

    /// A JSON error with the API's shape.
    fn error(&self) -> Value {
        let body = self.json();
        for field in ["message", "error_code", "details"] {
            assert!(body.get(field).is_some(), "error without {field}: {body}");
        }
        body
    }
}

fn parse_answer(data: &[u8]) -> RawAnswer {
    let end = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete answer: {:?}", String::from_utf8_lossy(data)));
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = data[end + 4..].to_vec();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked")) {
        let (mut plain, mut rest) = (Vec::new(), body.as_slice());
        while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            plain.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest = &rest[line_end + 2 + size + 2..];
        }
        body = plain;
    } else if let Some(len) = headers.iter().find(|(k, _)| k == "content-length") {
        body.truncate(len.1.parse().unwrap());
    }
    RawAnswer { status, headers, body }
}

/// Reads until the server closes the connection (or `limit` passes).
fn read_all(stream: &mut TcpStream, limit: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return data,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
}

/// `method target` with `headers` and `body`, on its own connection.
fn raw(port: u16, method: &str, target: &[u8], headers: &[(&str, &[u8])], body: &[u8]) -> RawAnswer {
    let mut request = Vec::new();
    request.extend_from_slice(method.as_bytes());
    request.push(b' ');
    request.extend_from_slice(target);
    request.extend_from_slice(b" HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.extend_from_slice(format!("Host: 127.0.0.1:{port}\r\n").as_bytes());
    }
    for (k, v) in headers {
        request.extend_from_slice(k.as_bytes());
        request.extend_from_slice(b": ");
        request.extend_from_slice(v);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    request.extend_from_slice(body);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(&request).unwrap();
    parse_answer(&read_all(&mut stream, Duration::from_secs(60)))
}

// ---------------------------------------------------------------------------
// The command line on the same bytes.

struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn stacklens(args: &[&str]) -> CliRun {
    let out = Command::new(env!("CARGO_BIN_EXE_stacklens")).args(args).output().expect("runs");
    let run = CliRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "the command line panicked: {}", run.stderr);
    run
}

fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let path = temp_dir("cli-input").join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `top` and `goroutines` on `bytes` both exit with `code` and say `what` about the file.
fn cli_refuses(name: &str, bytes: &[u8], code: i32, what: &str) {
    let path = write_temp(name, bytes);
    let file = path.to_str().unwrap();
    for args in [vec!["top", file, "--format", "json"], vec!["goroutines", file]] {
        let run = stacklens(&args);
        assert_eq!(run.code, Some(code), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?} printed a report: {}", run.stdout);
        assert!(run.stderr.contains(file) && run.stderr.contains(what), "{args:?}: {}", run.stderr);
    }
}

// ---------------------------------------------------------------------------
// Rows: compressed input.

fn upload(env: &Env, tenant: &str, query: &str, body: Vec<u8>) -> Result<Response, reqwest::Error> {
    env.post(&format!("/api/v1/profiles?{query}")).header("X-Tenant-ID", tenant).body(body).send()
}

fn truncated_gzip_bytes() -> Vec<u8> {
    let z = deep_profile(2000, 1);
    z[..z.len() / 2].to_vec()
}

fn truncated_gzip_scenario(env: &Env) {
    env.unchanged("truncated", || {
        let body = expect_error(upload(env, "truncated", "", truncated_gzip_bytes()), 400, "InvalidProfile");
        assert_eq!(body["details"]["coreError"], "CorruptGzip");
        assert!(body["message"].as_str().unwrap().contains("truncated"), "{body}");
    });
}

#[test]
fn truncated_gzip() {
    truncated_gzip_scenario(&Env::folder(&[]));
    cli_refuses("truncated.pb.gz", &truncated_gzip_bytes(), 4, "gzip data is corrupt or truncated");
}

fn gzip_bomb_scenario(env: &Env) {
    let bomb = bomb_bytes();
    env.unchanged("bomb", || {
        let body = expect_error(upload(env, "bomb", "", bomb), 413, "InflatesTooLarge");
        assert_eq!(body["details"]["inflateCap"], INFLATE_CAP);
    });
}

#[test]
fn gzip_bomb() {
    gzip_bomb_scenario(&Env::folder(&[]));
    // The command line's cap is 1 GiB.
    cli_refuses("bomb.pb.gz", &bomb_bytes(), 4, "decompressed data exceeds the limit of 1073741824 bytes");
}

fn gzip_inside_gzip_scenario(env: &Env) {
    env.unchanged("gzgz", || {
        let body = expect_error(upload(env, "gzgz", "", gzip(&small_profile("gzgz"))), 400, "InvalidProfile");
        assert_eq!(body["details"]["coreError"], "UnknownFormat");
        assert!(body["message"].as_str().unwrap().contains("gzip inside gzip"), "{body}");
    });
}

#[test]
fn gzip_inside_gzip() {
    gzip_inside_gzip_scenario(&Env::folder(&[]));
    cli_refuses("twice.pb.gz", &gzip(&small_profile("gzgz")), 4, "gzip inside gzip");
}

// Rows: sizes.

fn tiny_bodies_scenario(env: &Env) {
    env.unchanged("tiny", || {
        let body = expect_error(upload(env, "tiny", "", Vec::new()), 400, "InvalidProfile");
        assert_eq!(body["details"]["coreError"], "EmptyInput");
        for (one, says) in [(b"\x1f", "binary, magic 1f"), (b"x", "text starting with \"x\"")] {
            let body = expect_error(upload(env, "tiny", "", one.to_vec()), 400, "InvalidProfile");
            assert_eq!(body["details"]["coreError"], "UnknownFormat", "{body}");
            assert!(body["message"].as_str().unwrap().contains(says), "{body}");
        }
    });
}

#[test]
fn zero_and_one_byte_bodies() {
    tiny_bodies_scenario(&Env::folder(&[]));
    cli_refuses("empty.pb.gz", b"", 4, "the input is empty");
    cli_refuses("one-byte.pb.gz", b"\x1f", 4, "binary, magic 1f");
    cli_refuses("one-byte.txt", b"x", 4, "unrecognized profile format");
}

fn over_max_upload_scenario(env: &Env) {
    let big = vec![b'x'; MAX_UPLOAD + 1];
    env.unchanged("oversize", || {
        // With Content-Length.
        let body = expect_error(upload(env, "oversize", "", big.clone()), 413, "PayloadTooLarge");
        assert_eq!(body["details"]["limit"], MAX_UPLOAD);
        // Without: chunked transfer of a body whose length the server cannot know.
        let chunked = reqwest::blocking::Body::new(std::io::Cursor::new(big.clone()));
        let answer = env.post("/api/v1/profiles").header("X-Tenant-ID", "oversize").body(chunked).send();
        let body = expect_error(answer, 413, "PayloadTooLarge");
        assert_eq!(body["details"]["limit"], MAX_UPLOAD);
        // Exactly the limit is read (and refused as no profile).
        let body = expect_error(upload(env, "oversize", "", big[..MAX_UPLOAD].to_vec()), 400, "InvalidProfile");
        assert_eq!(body["details"]["coreError"], "UnknownFormat");
    });
}

#[test]
fn body_over_max_upload() {
    over_max_upload_scenario(&Env::folder(&[]));
}

// Rows: broken profiles.

fn invalid_varint() -> Vec<u8> {
    // sample { value: packed [0xff 0xff 0xff] }: a varint that never ends.
    broken(|m| field_bytes(2, &message(|s| field_bytes(2, &[0xff; 3], s)), m))
}

fn dangling_location() -> Vec<u8> {
    broken(|m| {
        field_bytes(
            2,
            &message(|s| {
                field_bytes(1, &[7], s);
                field_bytes(2, &[1], s);
            }),
            m,
        )
    })
}

fn dangling_string() -> Vec<u8> {
    broken(|m| {
        field_bytes(
            5,
            &message(|f| {
                field_varint(1, 1, f);
                field_varint(2, 99, f);
            }),
            m,
        )
    })
}

fn broken_profiles_scenario(env: &Env) {
    env.unchanged("broken", || {
        let body = expect_error(upload(env, "broken", "", invalid_varint()), 400, "InvalidProfile");
        assert_eq!(body["details"]["coreError"], "MalformedProtobuf");
        assert!(body["message"].as_str().unwrap().contains("varint"), "{body}");
        for (bytes, what) in [
            (dangling_location(), "sample #0 refers to location id 7, which does not exist"),
            (dangling_string(), "function 1 name refers to string id 99, which does not exist"),
        ] {
            let body = expect_error(upload(env, "broken", "", gzip(&bytes)), 400, "InvalidProfile");
            assert_eq!(body["details"]["coreError"], "InvalidProfile");
            assert!(body["message"].as_str().unwrap().contains(what), "{body}");
        }
    });
}

#[test]
fn invalid_varints_and_out_of_range_ids() {
    broken_profiles_scenario(&Env::folder(&[]));
    cli_refuses("varint.pb", &invalid_varint(), 4, "varint");
    cli_refuses("location.pb", &dangling_location(), 4, "refers to location id 7, which does not exist");
    cli_refuses("string.pb.gz", &gzip(&dangling_string()), 4, "refers to string id 99, which does not exist");
}

// Rows: extreme profiles.

fn upload_ok(env: &Env, tenant: &str, query: &str, body: Vec<u8>) -> Value {
    let (status, record) = json_of(upload(env, tenant, query, body).expect("an answer"));
    assert_eq!(status, 201, "{record}");
    record
}

fn deep_stacks_scenario(env: &Env) {
    let a = upload_ok(env, "deep", "service=deep", deep_profile(10_000, 5));
    let b = upload_ok(env, "deep", "service=deep", deep_profile(10_000, 9));
    assert_eq!((a["sampleCount"].as_i64(), a["profileType"].as_str()), (Some(5), Some("cpu")));
    assert_eq!(b["sampleCount"], 9);
    let request = json!({"baseId": a["id"], "compareId": b["id"], "type": "cpu"});
    let (status, diff) =
        json_of(env.post("/api/v1/profiling/diff").header("X-Tenant-ID", "deep").json(&request).send().unwrap());
    assert_eq!(status, 200, "{diff}");
    assert!((diff["overallDelta"].as_f64().unwrap() - 80.0).abs() < 1e-9, "{diff}");
    // Only the leaf has self samples: it grew by 80% of the base total.
    let regressions = diff["regressions"].as_array().unwrap();
    assert!(regressions.iter().any(|r| r["name"] == "deep.f1"), "the leaf regressed");
    let baseline = json!({"label": "deep", "sessionId": a["id"], "profileType": "cpu"});
    let (status, created) =
        json_of(env.post("/api/v1/profiling/baselines").header("X-Tenant-ID", "deep").json(&baseline).send().unwrap());
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["topFunctions"][0]["funcName"], "deep.f1");
    env.still_serving("deep");
}

#[test]
fn ten_thousand_deep_stacks() {
    deep_stacks_scenario(&Env::folder(&[]));
    let (a, b) =
        (write_temp("deep-a.pb.gz", &deep_profile(10_000, 5)), write_temp("deep-b.pb.gz", &deep_profile(10_000, 9)));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let run = stacklens(&["top", a, "--format", "json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let top: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(top["total"], 5 * PERIOD);
    let functions = top["functions"].as_array().unwrap();
    assert_eq!(functions.len(), 10_000);
    assert!(functions.iter().all(|f| f["cum"] == 5 * PERIOD));
    let run = stacklens(&["diff", a, b, "--format", "json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let diff: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!((diff["overallDeltaPct"].as_f64().unwrap() - 80.0).abs() < 1e-9);
    let run = stacklens(&["goroutines", a]);
    assert_eq!(run.code, Some(5), "a CPU profile has no goroutines: {}", run.stderr);
    assert!(run.stderr.contains("no goroutine information"), "{}", run.stderr);
}

const MILLION: u64 = 1_000_000;

fn million_samples_scenario(env: &Env, profile: Vec<u8>) {
    let started = Instant::now();
    let record = upload_ok(env, "million", "service=million", profile);
    assert_eq!(record["sampleCount"], MILLION);
    eprintln!("1,000,000 samples ({} bytes of gzip) stored in {:?}", record["size"], started.elapsed());
    let baseline = json!({"label": "million", "sessionId": record["id"], "profileType": "cpu"});
    let (status, created) = json_of(
        env.post("/api/v1/profiling/baselines").header("X-Tenant-ID", "million").json(&baseline).send().unwrap(),
    );
    assert_eq!(status, 201, "{created}");
    // Each of the 50 leaves has 20,000 samples: 2% self.
    let top = created["topFunctions"].as_array().unwrap();
    assert_eq!(top.len(), 20);
    assert!(
        top.iter().all(|f| f["sampleCount"] == 20_000 && (f["selfPct"].as_f64().unwrap() - 2.0).abs() < 1e-9),
        "{top:?}"
    );
    env.still_serving("million");
}

#[test]
fn a_million_samples() {
    let profile = many_samples(MILLION, 50);
    million_samples_scenario(&Env::folder(&[]), profile.clone());
    let a = write_temp("million.pb.gz", &profile);
    let b = write_temp("million-49.pb.gz", &many_samples(MILLION, 49));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let run = stacklens(&["top", a, "--format", "json", "--sample-index", "samples"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let top: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(top["total"], MILLION);
    let row = |name: &str| top["functions"].as_array().unwrap().iter().find(|f| f["name"] == name).cloned().unwrap();
    assert_eq!(row("many.f0")["flat"], 20_000);
    assert_eq!(row("many.main")["cum"], MILLION);
    let run = stacklens(&["diff", a, b, "--format", "json", "--sample-index", "samples"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let diff: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!((diff["baseTotal"].as_u64(), diff["compareTotal"].as_u64()), (Some(MILLION), Some(MILLION)));
    // f49 is a leaf only in the base: it shrank to nothing.
    assert!(
        diff["improvements"].as_array().unwrap().iter().any(|f| f["name"] == "many.f49"),
        "{}",
        diff["improvements"]
    );
}

// Rows: hostile names.

const SCRIPT: &str = "<script>window.__pwned=1</script>";
const IMG: &str = "<img src=x onerror=window.__pwned=1>";
const QUOTES: &str = "\"quotes\" 'single' \\back";
/// A terminal control sequence (clear screen) inside a name.
const ESCAPE: &str = "main.\u{1b}[2Jcleared";
const NOT_UTF8: &[u8] = b"main.\xff\xfebad";
const NOT_UTF8_READ: &str = "main.\u{fffd}\u{fffd}bad";

/// Functions named with markup, quotes, a control sequence and invalid UTF-8, with
/// such file names and label values; each leaf `i` has `i × n` samples.
fn hostile_profile(n: i64) -> Vec<u8> {
    let mut p = Pprof::cpu();
    let names: [&[u8]; 5] = [SCRIPT.as_bytes(), IMG.as_bytes(), QUOTES.as_bytes(), NOT_UTF8, ESCAPE.as_bytes()];
    for (i, name) in names.iter().enumerate() {
        let file = [b"src/".as_slice(), name, b".go"].concat();
        p.frame(i as u64 + 1, name, &file);
    }
    p.frame(6, b"main.main", b"main.go");
    for i in 1..=5u64 {
        let labels: [(&[u8], &[u8]); 3] =
            [(b"html", SCRIPT.as_bytes()), (b"quote", QUOTES.as_bytes()), (b"\xffkey", b"\xfevalue")];
        p.sample(&[i, 6], i as i64 * n, &labels);
    }
    gzip(&p.bytes())
}

/// The hostile leaf names, sorted.
fn hostile_names() -> Vec<String> {
    let mut names = [SCRIPT, IMG, QUOTES, NOT_UTF8_READ, ESCAPE].map(str::to_owned).to_vec();
    names.sort();
    names
}

/// The `key` of each entry of a JSON list of functions, sorted, without their caller
/// main.main: what [`hostile_names`] should equal.
fn leaf_names(list: &Value, key: &str) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[key].as_str().unwrap().to_owned())
        .filter(|n| n != "main.main")
        .collect();
    names.sort();
    names
}

fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A share link must be a valid URL to exactly the page route.
fn assert_share_url(url: &str, expected: &str) {
    assert_eq!(url, expected);
    let parsed = url::Url::parse(url).unwrap_or_else(|e| panic!("shareUrl {url} is no URL: {e}"));
    assert_eq!(parsed.as_str(), url, "shareUrl is not in its normal form");
    assert!(parsed.username().is_empty() && parsed.path() == "/", "{url}");
}

fn hostile_names_scenario(env: &Env) {
    let tenant = "hostile";
    // Services may hold markup and quotes, but no '/' or '\\' (see the traversal row).
    let service = format!("{IMG} \"quotes\" 'single'");
    let labels = format!("html={SCRIPT},quote={QUOTES}");
    let query = format!("service={}&name={}&labels={}", encode(&service), encode(SCRIPT), encode(&labels));
    let first = upload_ok(env, tenant, &query, hostile_profile(1));
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["service"], service);
    assert_eq!(first["name"], SCRIPT);
    assert_eq!(first["labels"], json!({"html": SCRIPT, "quote": QUOTES}));
    assert_share_url(first["shareUrl"].as_str().unwrap(), &format!("{}/#/s/{id}?tenant={tenant}", env.server.base));
    let (status, again) =
        json_of(env.get(&format!("/api/v1/profiles/{id}")).header("X-Tenant-ID", tenant).send().unwrap());
    assert_eq!((status, &again["service"], &again["labels"]), (200, &first["service"], &first["labels"]));
    let (_, listed) = json_of(
        env.get(&format!("/api/v1/profiles?service={}", encode(&service)))
            .header("X-Tenant-ID", tenant)
            .send()
            .unwrap(),
    );
    assert_eq!(listed["profiles"][0]["id"], id.as_str());
    // The download's file name: the last path component, printable ASCII without quotes.
    let download = env.get(&format!("/api/v1/profiles/{id}/raw")).header("X-Tenant-ID", tenant).send().unwrap();
    assert_eq!(download.headers()["content-disposition"], "attachment; filename=\"script>\"");
    // Invalid UTF-8 in a parameter reads as U+FFFD; a service with '/' is refused.
    let odd = upload_ok(env, tenant, "service=%FF%FEsvc&name=a%FF", hostile_profile(7));
    assert_eq!((odd["service"].as_str(), odd["name"].as_str()), (Some("\u{fffd}\u{fffd}svc"), Some("a\u{fffd}")));
    let refused = upload(env, tenant, &format!("service={}", encode(SCRIPT)), hostile_profile(8));
    assert_eq!(expect_error(refused, 400, "InvalidParameter")["details"]["field"], "service");

    // The names come back exactly in analyses (U+FFFD for the invalid UTF-8).
    let second = upload_ok(env, tenant, "", hostile_profile(2));
    let request = json!({"baseId": id, "compareId": second["id"], "type": "cpu"});
    let (status, diff) =
        json_of(env.post("/api/v1/profiling/diff").header("X-Tenant-ID", tenant).json(&request).send().unwrap());
    assert_eq!(status, 200, "{diff}");
    assert_eq!(leaf_names(&diff["regressions"], "name"), hostile_names());
    let baseline =
        json!({"label": SCRIPT, "sessionId": id, "profileType": "cpu", "description": QUOTES, "tags": [IMG]});
    let (status, created) =
        json_of(env.post("/api/v1/profiling/baselines").header("X-Tenant-ID", tenant).json(&baseline).send().unwrap());
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (&created["baselineLabel"], &created["description"], &created["tags"]),
        (&json!(SCRIPT), &json!(QUOTES), &json!([IMG]))
    );
    assert_eq!(leaf_names(&created["topFunctions"], "funcName"), hostile_names());
    let baseline_id = created["baselineId"].as_str().unwrap();
    assert_share_url(
        created["shareUrl"].as_str().unwrap(),
        &format!("{}/#/b/{baseline_id}?tenant={tenant}", env.server.base),
    );

    // A Host that is not a plain host[:port] never reaches a share link.
    let port = env.server.port;
    for host in [
        "evil.example\"><script>window.__pwned=1</script>",
        "user@evil.example",
        "evil.example/#/s/forged",
        "evil.example:80:80",
        "evil example",
    ] {
        let answer = raw(
            port,
            "GET",
            format!("/api/v1/profiles/{id}").as_bytes(),
            &[("Host", host.as_bytes()), ("X-Tenant-ID", tenant.as_bytes())],
            b"",
        );
        assert_eq!(answer.status, 200, "Host {host}");
        assert_share_url(
            answer.json()["shareUrl"].as_str().unwrap(),
            &format!("http://127.0.0.1:8080/#/s/{id}?tenant={tenant}"),
        );
    }
    // A plain one does, in lower case.
    for (host, base) in [
        ("Stacklens.example:8443", "stacklens.example:8443"),
        ("example.com:80", "example.com"),
        ("localhost", "localhost"),
        ("[::1]:9000", "[::1]:9000"),
    ] {
        let answer = raw(
            port,
            "GET",
            format!("/api/v1/profiles/{id}").as_bytes(),
            &[("Host", host.as_bytes()), ("X-Tenant-ID", tenant.as_bytes())],
            b"",
        );
        assert_share_url(
            answer.json()["shareUrl"].as_str().unwrap(),
            &format!("http://{base}/#/s/{id}?tenant={tenant}"),
        );
    }
    env.still_serving(tenant);
}

#[test]
fn hostile_names_are_escaped() {
    // Any Host is answered here, so that what reaches a share link is what is tested
    // (by default a name the server was not told of gets 421: `hosts_and_origins`).
    hostile_names_scenario(&Env::folder(&["--allowed-host", "*"]));
    let path = write_temp("hostile.pb.gz", &hostile_profile(1));
    let file = path.to_str().unwrap();
    let run = stacklens(&["top", file, "--format", "json"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let top: Value = serde_json::from_str(&run.stdout).expect("valid JSON");
    assert_eq!(leaf_names(&top["functions"], "name"), hostile_names());
    // Text: names as they are, but no control character reaches the terminal.
    let run = stacklens(&["top", file]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for name in [SCRIPT, IMG, QUOTES, NOT_UTF8_READ, "main.\\u{1b}[2Jcleared"] {
        assert!(run.stdout.contains(name), "{name} in {}", run.stdout);
    }
    assert!(!run.stdout.contains('\u{1b}'), "a raw escape reached the terminal");
    let later = write_temp("hostile-later.pb.gz", &hostile_profile(3));
    let run = stacklens(&["diff", file, later.to_str().unwrap(), "--fail-on-regression", "1"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(!run.stdout.contains('\u{1b}') && !run.stderr.contains('\u{1b}'), "a raw escape reached the terminal");
    assert!(run.stdout.contains(SCRIPT) && run.stdout.contains(NOT_UTF8_READ));
}

// Rows: path traversal in every id and name parameter.

/// As they appear in a URL (percent-encoded where they are); each reads as a path, or
/// as part of one, once decoded.
const TRAVERSALS: &[&str] = &[
    "..",
    ".",
    "../../../../etc/passwd",
    "..%2F..%2F..%2Fsecret.json",
    "%2e%2e",
    "%2E%2E%2F%2E%2E%2Fsecret.json",
    "..%5C..%5Csecret.json",
    "%2e%2e%5c%2e%2e%5csecret.raw",
    "sess-..%2F..%2Fsecret",
    "base-..%2F..%2Fsecret",
    "cap-..%2F..%2Fsecret",
    "..%00",
    "sess-0123456789abcdef0123456789abcdef%00.json",
    "%00",
    "%E2%80%A4%E2%80%A4",
    "%E2%80%A4%E2%80%A4%2Fsecret.json",
    "%E2%80%A5",
    "%EF%BC%8E%EF%BC%8E",
    "%EF%BC%8E%EF%BC%8E%EF%BC%8Fsecret.json",
    "%EF%B9%92%EF%B9%92",
];

/// Not UTF-8 once decoded (an overlong '.' and a lone byte): path parameters refuse them.
const NOT_UTF8_IDS: &[&str] = &["%C0%AE%C0%AE", "%FF", "..%C0%AF..%C0%AFsecret.json"];

fn decoded(payload: &str) -> String {
    url::form_urlencoded::parse(format!("v={}", payload.replace('+', "%2B")).as_bytes()).next().unwrap().1.into_owned()
}

/// Every answer: 400 or 404, the API's JSON error, and nothing from outside the store.
fn assert_refused(what: &str, answer: &RawAnswer) {
    assert!(matches!(answer.status, 400 | 404), "{what}: {} {}", answer.status, String::from_utf8_lossy(&answer.body));
    answer.error();
    assert!(!String::from_utf8_lossy(&answer.body).contains(MARKER), "{what} read a file outside the store");
}

fn path_traversal_scenario(env: &Env) {
    let tenant = "traversal";
    let port = env.server.port;
    // Something to find, so an id that escaped would have a neighbour to land on.
    let session = upload_ok(env, tenant, "service=shop", small_profile("traversal"))["id"].as_str().unwrap().to_owned();
    let json_header: (&str, &[u8]) = ("Content-Type", b"application/json");
    let tenant_header: (&str, &[u8]) = ("X-Tenant-ID", tenant.as_bytes());
    env.unchanged(tenant, || {
        let mut asked = 0;
        for payload in TRAVERSALS.iter().chain(NOT_UTF8_IDS) {
            // In the path: every route with an id or a name.
            for (method, template) in [
                ("GET", "/api/v1/profiles/{}"),
                ("DELETE", "/api/v1/profiles/{}"),
                ("GET", "/api/v1/profiles/{}/raw"),
                ("GET", "/api/v1/profiling/baselines/{}"),
                ("DELETE", "/api/v1/profiling/baselines/{}"),
                ("GET", "/api/v1/profiling/sessions/{}/analysis"),
                ("GET", "/api/v1/observability/profiling/{}"),
                ("GET", "/v0/pipelines/{}/samply_profile"),
                ("POST", "/v0/pipelines/{}/samply_profile"),
            ] {
                let target = template.replace("{}", payload);
                let answer = raw(port, method, target.as_bytes(), &[tenant_header], b"");
                assert_refused(&format!("{method} {target}"), &answer);
                asked += 1;
            }
        }
        for payload in TRAVERSALS {
            let text = decoded(payload);
            // In query parameters.
            for target in [
                format!(
                    "/api/v1/observability/profiling/compare?baseProfileId={payload}&comparisonProfileId={session}"
                ),
                format!(
                    "/api/v1/observability/profiling/compare?baseProfileId={session}&comparisonProfileId={payload}"
                ),
                format!("/api/v1/observability/profiling/history?service={payload}&profileType=cpu"),
                format!("/api/v1/profiles?service={payload}"),
                format!("/api/v1/profiling/baselines?service={payload}"),
                format!("/api/v1/profiles?cursor={payload}"),
            ] {
                assert_refused(&format!("GET {target}"), &raw(port, "GET", target.as_bytes(), &[tenant_header], b""));
                asked += 1;
            }
            let target = format!("/api/v1/profiles?service={payload}");
            let answer = raw(port, "POST", target.as_bytes(), &[tenant_header], &small_profile("traversal-upload"));
            assert_refused(&format!("POST {target}"), &answer);
            // In JSON bodies.
            for (path, body) in [
                ("/api/v1/profiling/diff", json!({"baseId": text, "compareId": session, "type": "cpu"})),
                ("/api/v1/profiling/diff", json!({"baseId": session, "compareId": text, "type": "cpu"})),
                ("/api/v1/profiling/baselines", json!({"label": "x", "sessionId": text, "profileType": "cpu"})),
                ("/api/v1/observability/profiling/start", json!({"service": text, "profileType": "cpu"})),
                (
                    "/api/v1/observability/profiling/continuous",
                    json!({"service": text, "profileTypes": ["cpu"], "retentionDays": 1, "enabled": true}),
                ),
            ] {
                let answer =
                    raw(port, "POST", path.as_bytes(), &[tenant_header, json_header], body.to_string().as_bytes());
                assert_refused(&format!("POST {path} {body}"), &answer);
                asked += 1;
            }
            // In the tenant.
            let header = raw(port, "GET", b"/api/v1/profiles", &[("X-Tenant-ID", text.as_bytes())], b"");
            if text.bytes().all(|b| b >= 0x20 && b != 0x7f) {
                assert_refused(&format!("X-Tenant-ID {text:?}"), &header);
                assert_eq!(header.error()["error_code"], "InvalidTenant");
            } else {
                // hyper refuses a header value with a NUL byte before any handler sees it;
                // its answer is rewritten into the API's error shape.
                assert_eq!((header.status, &header.error()["error_code"]), (400, &json!("BadRequest")), "{text:?}");
            }
            let query = raw(port, "GET", format!("/api/v1/profiles?tenant={payload}").as_bytes(), &[], b"");
            assert_refused(&format!("?tenant={payload}"), &query);
            assert_eq!(query.error()["error_code"], "InvalidTenant");
        }
        // Page paths: never a file from outside the page's folder.
        for payload in
            ["..%2F..%2Fsecret.json", "%2e%2e/%2e%2e/secret.json", "../../secret.json", "..%5C..%5Csecret.json"]
        {
            let answer = raw(port, "GET", format!("/{payload}").as_bytes(), &[], b"");
            assert!(
                !String::from_utf8_lossy(&answer.body).contains(MARKER),
                "GET /{payload} read a file outside the page"
            );
            assert!(answer.status == 404 || answer.status == 400, "GET /{payload}: {}", answer.status);
        }
        eprintln!("{asked} traversal requests refused");
    });
    // The session is still there and readable.
    let (status, _) =
        json_of(env.get(&format!("/api/v1/profiles/{session}")).header("X-Tenant-ID", tenant).send().unwrap());
    assert_eq!(status, 200);
}

#[test]
fn path_traversal_in_every_id_and_name() {
    path_traversal_scenario(&Env::folder(&[]));
}

// Rows: bad JSON.

const JSON_ROUTES: [&str; 4] = [
    "/api/v1/profiling/baselines",
    "/api/v1/profiling/diff",
    "/api/v1/observability/profiling/start",
    "/api/v1/observability/profiling/continuous",
];

/// Bodies of the right shape but wrong types, per JSON route (`{s}` is a real session).
fn wrong_types(route: &str, s: &str) -> Vec<String> {
    let shapes = match route {
        "/api/v1/profiling/baselines" => vec![
            json!({"label": 5, "sessionId": s, "profileType": "cpu"}),
            json!({"label": "a", "sessionId": [s], "profileType": "cpu"}),
            json!({"label": "a", "sessionId": s, "profileType": "cpu", "tags": "x"}),
            json!({"label": "a", "sessionId": s, "profileType": "cpu", "topFunctions": [{"funcName": 1}]}),
            json!({"label": "a", "sessionId": s, "profileType": "cpu", "unknownField": 1}),
        ],
        "/api/v1/profiling/diff" => vec![
            json!({"baseId": 1, "compareId": s, "type": "cpu"}),
            json!({"baseId": s, "compareId": s, "type": "cpu", "normalize": "yes"}),
            json!({"baseId": s, "compareId": s, "type": "cpu", "noiseThresholdPct": "1"}),
            json!({"baseId": s, "compareId": s}),
        ],
        "/api/v1/observability/profiling/start" => vec![
            json!({"service": "shop", "profileType": "cpu", "durationSeconds": -1}),
            json!({"service": "shop", "profileType": "cpu", "durationSeconds": 1.5}),
            json!({"service": ["shop"], "profileType": "cpu"}),
            json!({"service": "shop", "profileType": "cpu", "sampleRate": "100"}),
        ],
        _ => vec![
            json!({"service": "shop", "profileTypes": "cpu", "retentionDays": 1, "enabled": true}),
            json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": "1", "enabled": true}),
            json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": 1, "enabled": "true"}),
            json!({"service": "shop", "profileTypes": [1], "retentionDays": 1, "enabled": true}),
        ],
    };
    let mut bodies: Vec<String> = shapes.iter().map(Value::to_string).collect();
    bodies.extend(["[]", "\"text\"", "42", "null", "true"].map(str::to_owned));
    bodies
}

/// The same field twice (serde refuses duplicates rather than keeping one).
fn duplicate_keys(route: &str, s: &str) -> String {
    match route {
        "/api/v1/profiling/baselines" => {
            format!(r#"{{"label": "a", "label": "b", "sessionId": "{s}", "profileType": "cpu"}}"#)
        }
        "/api/v1/profiling/diff" => {
            format!(r#"{{"baseId": "{s}", "baseId": "{s}", "compareId": "{s}", "type": "cpu"}}"#)
        }
        "/api/v1/observability/profiling/start" => {
            r#"{"service": "shop", "service": "shop", "profileType": "goroutine"}"#.to_owned()
        }
        _ => r#"{"service": "shop", "profileTypes": ["cpu"], "retentionDays": 1, "enabled": true, "enabled": false}"#
            .to_owned(),
    }
}

const MALFORMED: &[&str] = &[
    "",
    "{",
    "not json",
    "{\"label\": \"x\",}",
    "{'label': 'x'}",
    "\u{feff}{}",
    "[1, 2",
    "{\"label\": \"x\"} trailing",
    "{\"label\": \"\\ud800\"}",
    "{\"label\": \"x\u{0}\"}",
];

fn bad_json_scenario(env: &Env) {
    let tenant = "json";
    let session = upload_ok(env, tenant, "", small_profile("json"))["id"].as_str().unwrap().to_owned();
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let deep_field = format!("{{\"label\": {deep_array}, \"sessionId\": \"{session}\", \"profileType\": \"cpu\"}}");
    let huge = format!("{{\"label\": \"{}\"}}", "a".repeat(10 << 20));
    env.unchanged(tenant, || {
        for route in JSON_ROUTES {
            let post = |body: &str| {
                env.post(route)
                    .header("X-Tenant-ID", tenant)
                    .header("Content-Type", "application/json")
                    .body(body.to_owned())
                    .send()
            };
            let mut bodies: Vec<String> = MALFORMED.iter().map(|b| b.to_string()).collect();
            bodies.extend(wrong_types(route, &session));
            bodies.push(duplicate_keys(route, &session));
            bodies.extend([deep_array.clone(), deep_object.clone(), deep_field.clone()]);
            for body in &bodies {
                let answer = expect_error(post(body), 400, "InvalidRequest");
                let shown: String = body.chars().take(80).collect();
                assert!(answer["message"].as_str().unwrap().starts_with("not a"), "{route} {shown}: {answer}");
            }
            let answer = expect_error(post(&huge), 413, "PayloadTooLarge");
            assert_eq!(answer["details"]["limit"], 1 << 20);
        }
    });
}

#[test]
fn bad_json_bodies() {
    bad_json_scenario(&Env::folder(&[]));
}

// Rows: huge query strings, labels, tenants.

#[test]
fn huge_query_strings() {
    let env = Env::folder(&[]);
    let port = env.server.port;
    env.unchanged("query", || {
        // Up to hyper's own limit on a request line (64 KiB), the API's JSON 414.
        for size in [8 * 1024 + 1, 9 * 1024, 60 * 1024] {
            let query = "a".repeat(size);
            for (method, path) in [("GET", "/api/v1/profiles"), ("POST", "/api/v1/profiles"), ("GET", "/healthz")] {
                let answer = raw(port, method, format!("{path}?x={query}").as_bytes(), &[], b"");
                assert_eq!(answer.status, 414, "{method} {path} with {size} bytes of query");
                assert_eq!(answer.error()["error_code"], "UriTooLong");
            }
        }
        // Past it hyper answers before any handler (414, and 431 once the request line
        // outgrows its read buffer); its answers are rewritten into the API's error shape.
        for (size, status, code) in [(70 * 1024, 414, "UriTooLong"), (1 << 20, 431, "RequestHeaderFieldsTooLarge")] {
            let answer = raw(port, "GET", format!("/api/v1/profiles?x={}", "a".repeat(size)).as_bytes(), &[], b"");
            assert_eq!((answer.status, &answer.error()["error_code"]), (status, &json!(code)), "{size} bytes of query");
            assert_eq!(answer.header("content-type"), Some("application/json"));
        }
        // A header section over hyper's buffer, and bytes that are not HTTP at all.
        let big = "b".repeat(1 << 20);
        let answer = raw(port, "GET", b"/healthz", &[("X-Big", big.as_bytes())], b"");
        assert_eq!((answer.status, &answer.error()["error_code"]), (431, &json!("RequestHeaderFieldsTooLarge")));
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
        let answer = parse_answer(&read_all(&mut stream, Duration::from_secs(60)));
        assert_eq!((answer.status, &answer.error()["error_code"]), (400, &json!("BadRequest")));
        // Just under the limit is served.
        let path = "/api/v1/profiles?service=x&pad=";
        let query = format!("{path}{}", "a".repeat(8 * 1024 - path.len() - 100));
        assert_eq!(raw(port, "GET", query.as_bytes(), &[], b"").status, 200);
    });
}

fn labels_scenario(env: &Env) {
    let tenant = "labels";
    let many = |n: usize| (0..n).map(|i| format!("k{i}=v{i}")).collect::<Vec<_>>().join(",");
    env.unchanged(tenant, || {
        for (labels, what) in [
            (many(65), "at most 64 labels"),
            (format!("{}=v", "k".repeat(129)), "labels must be at most 128"),
            (format!("k={}", "v".repeat(513)), "labels must be at most 512"),
            ("k=a\u{7}b".to_owned(), "labels must be at most 512 printable"),
            ("novalue".to_owned(), "is not key=value"),
        ] {
            let answer = upload(env, tenant, &format!("labels={}", encode(&labels)), small_profile("labels"));
            let body = expect_error(answer, 400, "InvalidParameter");
            assert!(body["message"].as_str().unwrap().contains(what), "{body}");
            assert_eq!(body["details"]["field"], "labels");
        }
    });
    let record = upload_ok(env, tenant, &format!("labels={}", encode(&many(64))), small_profile("labels-64"));
    assert_eq!(record["labels"].as_object().unwrap().len(), 64);
}

#[test]
fn too_many_and_too_long_labels() {
    labels_scenario(&Env::folder(&[]));
}

/// Every documented route that acts for a tenant, with a body where it takes one.
fn tenant_routes(session: &str) -> Vec<(&'static str, String, Vec<u8>)> {
    let json = |v: Value| v.to_string().into_bytes();
    vec![
        ("GET", "/api/v1/profiles".into(), vec![]),
        ("POST", "/api/v1/profiles".into(), small_profile("tenant")),
        ("GET", format!("/api/v1/profiles/{session}"), vec![]),
        ("DELETE", format!("/api/v1/profiles/{session}"), vec![]),
        ("GET", format!("/api/v1/profiles/{session}/raw"), vec![]),
        ("POST", "/api/v1/blobs".into(), b"ciphertext".to_vec()),
        ("GET", "/api/v1/blobs/blob-0123456789abcdef0123456789abcdef".into(), vec![]),
        ("DELETE", "/api/v1/blobs/blob-0123456789abcdef0123456789abcdef".into(), vec![]),
        ("GET", "/api/v1/opened/0/x".into(), vec![]),
        ("GET", "/api/v1/profiling/baselines".into(), vec![]),
        (
            "POST",
            "/api/v1/profiling/baselines".into(),
            json(json!({"label": "t", "sessionId": session, "profileType": "cpu"})),
        ),
        ("GET", "/api/v1/profiling/baselines/base-0123456789abcdef0123456789abcdef".into(), vec![]),
        ("DELETE", "/api/v1/profiling/baselines/base-0123456789abcdef0123456789abcdef".into(), vec![]),
        (
            "POST",
            "/api/v1/profiling/diff".into(),
            json(json!({"baseId": session, "compareId": session, "type": "cpu"})),
        ),
        ("GET", format!("/api/v1/profiling/sessions/{session}/analysis"), vec![]),
        (
            "POST",
            "/api/v1/observability/profiling/start".into(),
            json(json!({"service": "shop", "profileType": "goroutine"})),
        ),
        ("GET", "/api/v1/observability/profiling/cap-0123456789abcdef0123456789abcdef".into(), vec![]),
        ("GET", "/api/v1/observability/profiling/history?service=shop&profileType=cpu".into(), vec![]),
        (
            "POST",
            "/api/v1/observability/profiling/continuous".into(),
            json(json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": 1, "enabled": false})),
        ),
        (
            "GET",
            format!("/api/v1/observability/profiling/compare?baseProfileId={session}&comparisonProfileId={session}"),
            vec![],
        ),
        ("POST", "/v0/pipelines/engine/samply_profile?duration_secs=1".into(), vec![]),
        ("GET", "/v0/pipelines/engine/samply_profile".into(), vec![]),
    ]
}

fn invalid_tenants_scenario(env: &Env) {
    let port = env.server.port;
    let session = upload_ok(env, "default", "", small_profile("tenants"))["id"].as_str().unwrap().to_owned();
    let long = "a".repeat(1000);
    let headers: [&[u8]; 7] = [b"../x", b"", long.as_bytes(), "tenänt".as_bytes(), b"..", b"a b", b"default\\x"];
    let queries = ["..%2Fx", "../x", "", &long, "ten%C3%A4nt", "%FF", "%2e%2e", "a%00"];
    env.unchanged("default", || {
        for (method, path, body) in tenant_routes(&session) {
            for header in headers {
                let answer = raw(
                    port,
                    method,
                    path.as_bytes(),
                    &[("X-Tenant-ID", header), ("Content-Type", b"application/json")],
                    &body,
                );
                assert_eq!(answer.status, 400, "{method} {path} X-Tenant-ID {:?}", String::from_utf8_lossy(header));
                assert_eq!(answer.error()["error_code"], "InvalidTenant");
            }
            for tenant in queries {
                let separator = if path.contains('?') { '&' } else { '?' };
                let target = format!("{path}{separator}tenant={tenant}");
                let answer = raw(port, method, target.as_bytes(), &[("Content-Type", b"application/json")], &body);
                assert_eq!(answer.status, 400, "{method} {target}");
                assert_eq!(answer.error()["error_code"], "InvalidTenant");
            }
        }
    });
}

#[test]
fn invalid_tenant_names() {
    invalid_tenants_scenario(&Env::folder(&[]));
}

// Rows: link lifetimes that are not one.

fn bad_expires_in_scenario(env: &Env) {
    // Not a lifetime, no time at all, not a whole number, no unit, an unknown unit, too
    // long, shorter than --min-expires-in (1h by default), overflowing.
    let bad = ["", "0h", "0d", "-1h", "+1h", "1.5h", "12", "1w", "12H", "12 h", "abc", "366d", "30m", "1e3s"];
    let overflow = "99999999999999999999d";
    env.unchanged("default", || {
        for (path, body) in [("/api/v1/profiles", small_profile("expiry")), ("/api/v1/blobs", b"ciphertext".to_vec())] {
            for value in bad.iter().chain([&overflow]) {
                let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
                let by_query = env.post(&format!("{path}?expiresIn={encoded}")).body(body.clone()).send().unwrap();
                let by_header =
                    env.post(path).header("X-Stacklens-Expires-In", *value).body(body.clone()).send().unwrap();
                for (how, answer) in [("query", by_query), ("header", by_header)] {
                    let (status, e) = json_of(answer);
                    assert_eq!(
                        (status, e["error_code"].as_str()),
                        (400, Some("InvalidParameter")),
                        "{path} {how} {value:?}: {e}"
                    );
                    assert_eq!(e["details"]["field"], "expiresIn", "{e}");
                    assert_eq!((&e["details"]["min"], &e["details"]["max"]), (&json!("1h"), &json!("365d")));
                    assert!(e["message"].as_str().unwrap().starts_with("expiresIn: "), "{e}");
                }
            }
            // A header that is not UTF-8 is refused too, not taken as no expiry.
            let answer = raw(
                env.server.port,
                "POST",
                path.as_bytes(),
                &[("X-Stacklens-Expires-In", b"1\xffh".as_slice())],
                &body,
            );
            assert_eq!(answer.status, 400, "{path}");
            assert_eq!(answer.error()["details"]["field"], "expiresIn");
        }
    });
}

#[test]
fn bad_expires_in_values() {
    bad_expires_in_scenario(&Env::folder(&[]));
}

// Rows: unknown routes and wrong methods.

/// Every documented route: method and path (`{id}` stands for any id).
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/profiles"),
    ("POST", "/api/v1/profiles"),
    ("GET", "/api/v1/profiles/{id}"),
    ("DELETE", "/api/v1/profiles/{id}"),
    ("GET", "/api/v1/profiles/{id}/raw"),
    ("POST", "/api/v1/blobs"),
    ("GET", "/api/v1/blobs/{id}"),
    ("DELETE", "/api/v1/blobs/{id}"),
    ("GET", "/api/v1/opened/{index}/{name}"),
    ("GET", "/api/v1/profiling/baselines"),
    ("POST", "/api/v1/profiling/baselines"),
    ("GET", "/api/v1/profiling/baselines/{id}"),
    ("DELETE", "/api/v1/profiling/baselines/{id}"),
    ("POST", "/api/v1/profiling/diff"),
    ("GET", "/api/v1/profiling/sessions/{id}/analysis"),
    ("POST", "/api/v1/observability/profiling/start"),
    ("GET", "/api/v1/observability/profiling/{id}"),
    ("GET", "/api/v1/observability/profiling/history"),
    ("POST", "/api/v1/observability/profiling/continuous"),
    ("GET", "/api/v1/observability/profiling/continuous"),
    ("DELETE", "/api/v1/observability/profiling/continuous/{service}"),
    ("GET", "/api/v1/observability/profiling/compare"),
    ("POST", "/v0/pipelines/{id}/samply_profile"),
    ("GET", "/v0/pipelines/{id}/samply_profile"),
    ("GET", "/api/v1/profiling/merge"),
    ("GET", "/api/v1/profiling/series"),
    ("GET", "/api/v1/profiling/labels"),
    ("GET", "/api/v1/profiling/labels/{key}/values"),
    ("GET", "/api/v1/profiling/services"),
    ("GET", "/api/v1/profiling/functions/{name}/history"),
    ("POST", "/ingest"),
    ("POST", "/push.v1.PusherService/Push"),
    ("POST", "/v1development/profiles"),
    ("POST", "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"),
    ("POST", "/querier.v1.QuerierService/ProfileTypes"),
    ("POST", "/querier.v1.QuerierService/LabelNames"),
    ("POST", "/querier.v1.QuerierService/LabelValues"),
    ("POST", "/querier.v1.QuerierService/Series"),
    ("POST", "/querier.v1.QuerierService/SelectMergeStacktraces"),
    ("POST", "/querier.v1.QuerierService/SelectMergeProfile"),
    ("POST", "/querier.v1.QuerierService/SelectMergeSpanProfile"),
    ("POST", "/querier.v1.QuerierService/SelectSeries"),
    ("POST", "/querier.v1.QuerierService/Diff"),
    ("GET", "/pyroscope/render"),
    ("GET", "/pyroscope/render-diff"),
    ("GET", "/pyroscope/label-values"),
    ("PUT", "/api/v1/debuginfo/{buildId}"),
    ("GET", "/buildid/{buildId}/{artifact}"),
    ("POST", "/symbolicate/v5"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/docs"),
];

#[test]
fn wrong_methods_and_unknown_routes() {
    let env = Env::folder(&[]);
    let port = env.server.port;
    // The table is the API's own list (the OpenAPI document) plus the document and its page.
    let (_, doc) = json_of(env.get("/api/openapi.json").send().unwrap());
    let mut documented: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            let path = path.replace("{pipeline_name}", "{id}");
            item.as_object().unwrap().keys().map(move |m| (m.to_ascii_uppercase(), path.clone()))
        })
        .collect();
    documented.extend([("GET".into(), "/api/openapi.json".into()), ("GET".into(), "/api/docs".into())]);
    documented.sort();
    let mut table: Vec<(String, String)> = ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    table.sort();
    assert_eq!(table, documented, "the route table is every documented route");

    env.unchanged("default", || {
        let mut paths: Vec<&str> = ROUTES.iter().map(|(_, p)| *p).collect();
        paths.dedup();
        for path in paths {
            let taken: Vec<&str> = ROUTES.iter().filter(|(_, p)| *p == path).map(|(m, _)| *m).collect();
            let target = path
                .replace("{id}", "x")
                .replace("{index}", "0")
                .replace("{name}", "x")
                .replace("{buildId}", "ab")
                .replace("{artifact}", "debuginfo");
            for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
                if taken.contains(&method) {
                    continue;
                }
                let answer = raw(port, method, target.as_bytes(), &[], b"{}");
                assert_eq!(answer.status, 405, "{method} {target}");
                assert_eq!(answer.error()["error_code"], "MethodNotAllowed", "{method} {target}");
            }
        }
        for target in [
            "/api",
            "/api/",
            "/api/v1",
            "/api/v1/nope",
            "/api/v2/profiles",
            "/api/v1/profiles/x/y/z",
            "/api/v1/opened/0",
            "/api/v1/opened/0/x/y",
            "/api/v1/profiling",
            "/api/v1/observability/profiling/x/y",
            "/v0",
            "/v0/",
            "/v0/pipelines",
            "/v0/pipelines/engine",
            "/v0/pipelines/engine/other",
            "/v0/pipelines/a/b/samply_profile",
        ] {
            for method in ["GET", "POST", "DELETE"] {
                let answer = raw(port, method, target.as_bytes(), &[], b"");
                assert_eq!(answer.status, 404, "{method} {target}: {}", String::from_utf8_lossy(&answer.body));
                assert_eq!(answer.error()["error_code"], "NotFound", "{method} {target}");
            }
        }
        // A page path that names a file that is not there.
        let answer = raw(port, "GET", b"/nope.js", &[], b"");
        assert_eq!((answer.status, &answer.error()["error_code"]), (404, &json!("NotFound")));
        // The page is read-only: other methods get the same JSON 405, with Allow.
        for target in ["/", "/index.html", "/nope.js", "/s/abc"] {
            for method in ["POST", "PUT", "DELETE", "PATCH"] {
                let answer = raw(port, method, target.as_bytes(), &[], b"{}");
                assert_eq!(answer.status, 405, "{method} {target}");
                assert_eq!(answer.error()["error_code"], "MethodNotAllowed", "{method} {target}");
                assert_eq!(answer.header("allow"), Some("GET, HEAD"), "{method} {target}");
            }
        }
    });
}

// Rows: slow clients.

/// Sends `head`, then `drip` once a second; returns what the server sent and when
/// the connection ended (or `None` if it never did within `limit`).
fn trickle(port: u16, head: &[u8], drip: &[u8], limit: Duration) -> (Vec<u8>, Option<Duration>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let started = Instant::now();
    stream.write_all(head).unwrap();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (received, Some(started.elapsed())),
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if !drip.is_empty() && stream.write_all(drip).is_err() {
                    return (received, Some(started.elapsed()));
                }
            }
            Err(_) => return (received, Some(started.elapsed())),
        }
    }
    (received, None)
}

#[test]
fn a_slow_body_is_cut_off_with_408() {
    let env = Env::folder(&["--request-timeout-secs", "2"]);
    let port = env.server.port;
    env.unchanged("default", || {
        for (path, framing, drip) in [
            ("/api/v1/profiles", "Content-Length: 100", b"x".as_slice()),
            ("/api/v1/profiles", "Transfer-Encoding: chunked", b"1\r\nx\r\n".as_slice()),
            ("/api/v1/profiling/diff", "Content-Type: application/json\r\nContent-Length: 100", b" ".as_slice()),
        ] {
            let head = format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{framing}\r\n\r\n");
            // A bound for "no hang": the 2 s timeout plus a generous margin.
            let (received, ended) = trickle(port, head.as_bytes(), drip, Duration::from_secs(30));
            assert!(ended.is_some(), "{path} ({framing}): the connection stayed open");
            let answer = parse_answer(&received);
            assert_eq!(answer.status, 408, "{path} ({framing})");
            assert_eq!(answer.error()["error_code"], "RequestTimeout");
            assert_eq!(answer.header("content-type"), Some("application/json"));
        }
    });
}

#[test]
fn slow_and_silent_clients_are_cut_off_by_the_header_timeout() {
    let env = Env::folder(&["--header-timeout-secs", "2"]);
    let port = env.server.port;
    for (what, head, drip) in [
        ("headers sent a byte a second", b"GET /healthz HTTP/1.1\r\n".as_slice(), b"X".as_slice()),
        ("a request line a byte a second", b"G".as_slice(), b"E".as_slice()),
        ("nothing at all", b"".as_slice(), b"".as_slice()),
        ("part of the HTTP/2 preface", b"PRI * HTTP/2.0\r\n".as_slice(), b"".as_slice()),
    ] {
        let (received, ended) = trickle(port, head, drip, Duration::from_secs(30));
        assert!(ended.is_some(), "{what}: the connection stayed open");
        assert!(received.is_empty(), "{what}: {}", String::from_utf8_lossy(&received));
    }
    // A keep-alive connection that goes quiet after an answer is closed too.
    let (received, ended) =
        trickle(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"", Duration::from_secs(30));
    assert!(ended.is_some(), "an idle keep-alive connection stayed open");
    assert_eq!(parse_answer(&received).status, 200);
    env.still_serving("default");
}

// The rows that touch storage, on SeaweedFS.

#[test]
fn storage_rows_on_seaweedfs() {
    let Some(env) = Env::seaweed(&["--allowed-host", "*"]) else { return };
    truncated_gzip_scenario(&env);
    gzip_bomb_scenario(&env);
    gzip_inside_gzip_scenario(&env);
    tiny_bodies_scenario(&env);
    over_max_upload_scenario(&env);
    broken_profiles_scenario(&env);
    deep_stacks_scenario(&env);
    million_samples_scenario(&env, many_samples(MILLION, 50));
    hostile_names_scenario(&env);
    path_traversal_scenario(&env);
    bad_json_scenario(&env);
    labels_scenario(&env);
    invalid_tenants_scenario(&env);
}
