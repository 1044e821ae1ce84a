//! Real Pyroscope agents push to a real `stacklens serve` unchanged but for the server
//! address, authenticated with a tenant's token the way each agent takes one:
//! `@pyroscope/nodejs` (npm, a devDependency: raw pprof to `/ingest`, `authToken` as a
//! bearer token), `pyroscope-io` (PyPI, in `.tools/pyroscope` from
//! scripts/ensure-tools.sh) and the `pyroscope` crate (backend/tests/pyroscope-agent,
//! built by the test) — both `push.v1.PusherService/Push`, basic auth with the token as
//! the password. Each profiles a small busy program with a uniquely named hot function;
//! the function, the agent's tags and the profile type are then found through the
//! range API, for that tenant only. What the Node and Python agents pushed, sent again
//! as OTLP, lands in the same series.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fixtures, gzip, json_of, missing_prerequisite, push_request, temp_dir, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};

const TOKEN: &str = "acme-push-token-0123456789";
const OTHER_TOKEN: &str = "other-tenant-token-0123456789";
/// How long each program keeps its hot function busy: several of the agents' pushes
/// (every second, as configured below) and the last one when it stops.
const BUSY_SECONDS: &str = "3";
/// Bounds the program's run (it takes BUSY_SECONDS and its agent's start and stop).
const RUN_DEADLINE: Duration = Duration::from_secs(90);
/// Bounds the wait for what the program pushed to be listed (it pushed before exiting).
const LIST_DEADLINE: Duration = Duration::from_secs(20);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A server on a local folder whose writes need a tenant's token: `acme` pushes, `other`
/// must not see what it pushed.
struct Setup {
    server: Server,
    dir: PathBuf,
    log: PathBuf,
}

fn setup(name: &str) -> Setup {
    let dir = temp_dir(name);
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("acme:{TOKEN}\nother:{OTHER_TOKEN}\n")).unwrap();
    let log = dir.join("server.log");
    let store = format!("file://{}", dir.join("store").display());
    let server = Server::start_logged(&store, &["--token-file", tokens.to_str().unwrap()], &[], &log);
    Setup { server, dir, log }
}

/// What a program printed, and the server's log, for a failure to show.
fn report(out: &Path, log: Option<&Path>) -> String {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| format!("({}: {e})", p.display()));
    let log = log.map_or_else(String::new, |log| format!("\n--- server log:\n{}", read(log)));
    format!("\n--- output of the program ({}):\n{}{log}", out.display(), read(out))
}

/// Runs `command` (its output to `out`) until it exits, within `deadline`; it must
/// succeed. A failure shows its output and `log`.
fn run(mut command: Command, out: &Path, deadline: Duration, log: Option<&Path>) {
    let file = std::fs::File::create(out).unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
    let end = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not exit within {deadline:?}{}", report(out, log));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{command:?} failed ({status}){}", report(out, log));
}

fn get(setup: &Setup, token: &str, path: &str) -> Value {
    let response = Client::new().get(format!("{}{path}", setup.server.base)).bearer_auth(token).send().unwrap();
    let (status, body) = json_of(response);
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Checks what an agent pushed for `service`: merged over the last hour, at least one
/// profile whose functions include `hot` (by name, as the agent spells it), its tags as
/// labels, and nothing of it for another tenant.
fn check_pushed(setup: &Setup, out: &Path, service: &str, hot: &str, sample_type: &str, client: &str) {
    let merge = format!("/api/v1/profiling/merge?service={service}&profileType=cpu&from=now-1h&to=now&limit=200");
    let end = Instant::now() + LIST_DEADLINE;
    let merged = loop {
        let merged = get(setup, TOKEN, &merge);
        if merged["profileCount"].as_u64().unwrap_or(0) >= 1 {
            break merged;
        }
        assert!(
            Instant::now() < end,
            "nothing of {service} listed within {LIST_DEADLINE:?} after the agent stopped: {merged}{}",
            report(out, Some(&setup.log))
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let hot_rows: Vec<&Value> = merged["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"].as_str().unwrap().contains(hot))
        .filter(|f| f["flat"].as_i64().unwrap() > 0 || f["cum"].as_i64().unwrap() > 0)
        .collect();
    assert!(
        !hot_rows.is_empty(),
        "{hot} is not among {service}'s functions: {merged}{}",
        report(out, Some(&setup.log))
    );
    // The profile type the agent sends, filed as cpu.
    assert_eq!(merged["sampleType"], sample_type, "{merged}");
    let services = get(setup, TOKEN, "/api/v1/profiling/services");
    let series = services["series"].as_array().unwrap();
    assert!(series.contains(&json!({"service": service, "profileType": "cpu"})), "{services}");

    // The tags given to the agent are labels of the range, and filter it.
    let range = format!("service={service}&profileType=cpu&from=now-1h&to=now");
    let labels = get(setup, TOKEN, &format!("/api/v1/profiling/labels?{range}"));
    let names: Vec<&str> = labels["labels"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    for tag in ["team", "client"] {
        assert!(names.contains(&tag), "{tag} is not among {service}'s labels: {labels}");
    }
    let values = get(setup, TOKEN, &format!("/api/v1/profiling/labels/client/values?{range}"));
    assert_eq!(values["labels"][0]["name"], client, "{values}");
    let filtered = get(setup, TOKEN, &format!("/api/v1/profiling/merge?{range}&labels=team=lens,client={client}"));
    assert_eq!(filtered["profileCount"], merged["profileCount"], "{filtered}");

    // The token's tenant only.
    let other = get(setup, OTHER_TOKEN, &merge);
    assert_eq!(other["profileCount"], 0, "another tenant sees the pushes: {other}");
    let other_services = get(setup, OTHER_TOKEN, "/api/v1/profiling/services");
    assert_eq!(other_services["series"], json!([]), "{other_services}");
}

/// An OTLP push lands in the series an agent pushed to: what the agent pushed, merged,
/// converted to OTLP by OpenTelemetry's Python classes (`tests/programs/otlp.py`) under
/// the agent's service name and pushed over OTLP/HTTP, is one more profile of the same
/// series, and the series' total doubles.
fn otlp_joins_the_series(setup: &Setup, service: &str, sample_type: &str) {
    let python = repo().join(".tools/otlp/bin/python");
    if !python.is_file() {
        missing_prerequisite(&format!("{} (opentelemetry-proto, from scripts/ensure-tools.sh)", python.display()));
        return;
    }
    let merge = format!(
        "/api/v1/profiling/merge?service={service}&profileType=cpu&from=now-1h&to=now&sampleIndex={sample_type}"
    );
    let before = get(setup, TOKEN, &merge);
    let http = Client::new();
    let pprof = http.get(format!("{}{merge}&format=pprof", setup.server.base)).bearer_auth(TOKEN).send().unwrap();
    assert_eq!(pprof.status(), 200);
    let merged = setup.dir.join("agent.pb.gz");
    std::fs::write(&merged, pprof.bytes().unwrap()).unwrap();
    let base = setup.dir.join("agent-otlp");
    let made = Command::new(&python)
        .arg(repo().join("tests/programs/otlp.py"))
        .args(["from-pprof", merged.to_str().unwrap(), base.to_str().unwrap(), service])
        .output()
        .unwrap();
    assert!(made.status.success(), "otlp.py: {}", String::from_utf8_lossy(&made.stderr));
    let pushed = http
        .post(format!("{}/v1development/profiles", setup.server.base))
        .bearer_auth(TOKEN)
        .header("content-type", "application/x-protobuf")
        .body(std::fs::read(base.with_extension("pb")).unwrap())
        .send()
        .unwrap();
    assert_eq!(pushed.status(), 200, "{}", pushed.text().unwrap());
    let after = get(setup, TOKEN, &merge);
    let count = |m: &Value| m["profileCount"].as_u64().unwrap();
    assert_eq!(count(&after), count(&before) + 1, "{after}");
    assert_eq!(after["total"].as_i64().unwrap(), 2 * before["total"].as_i64().unwrap(), "{before} then {after}");
}

const NODE_PROGRAM: &str = r#"
// Profiled by @pyroscope/nodejs, configured as its README says; only the address, the
// token and a short flush interval are the test's.
const Pyroscope = require('@pyroscope/nodejs');
const [serverAddress, authToken, seconds] = process.argv.slice(2);
Pyroscope.init({
  appName: 'stacklens-nodejs-test',
  serverAddress,
  authToken,
  tags: { team: 'lens', client: 'nodejs' },
  flushIntervalMs: 1000,
});
Pyroscope.start();

function stacklensHotLoop(until) {
  let x = 0;
  while (Date.now() < until) x += Math.sqrt(x + 1);
  return x;
}

// Busy in slices, so the agent's flush timer runs in between.
const end = Date.now() + Number(seconds) * 1000;
function slice() {
  stacklensHotLoop(Math.min(end, Date.now() + 50));
  if (Date.now() < end) {
    setImmediate(slice);
  } else {
    Pyroscope.stop().then(() => console.log('stopped'));
  }
}
slice();
"#;

#[test]
fn nodejs_agent_pushes_to_the_time_index() {
    let sdk = repo().join("node_modules/@pyroscope/nodejs/package.json");
    if !sdk.is_file() {
        missing_prerequisite(&format!("@pyroscope/nodejs is not installed at {} (npm ci)", sdk.display()));
        return;
    }
    if Command::new("node").arg("--version").output().is_err() {
        missing_prerequisite("node is not on PATH (@pyroscope/nodejs runs in it)");
        return;
    }
    let setup = setup("pyroscope-node");
    let program = setup.dir.join("busy.js");
    std::fs::write(&program, NODE_PROGRAM).unwrap();
    let out = setup.dir.join("node.out");
    let mut node = Command::new("node");
    node.arg(&program)
        .args([&setup.server.base, TOKEN, BUSY_SECONDS])
        .current_dir(&setup.dir)
        .env("NODE_PATH", repo().join("node_modules"))
        // The agent says why a push failed only through debug.
        .env("DEBUG", "pyroscope*");
    run(node, &out, RUN_DEADLINE, Some(&setup.log));
    // V8's wall-time profile: its default sample type is wall time.
    check_pushed(&setup, &out, "stacklens-nodejs-test", "stacklensHotLoop", "wall", "nodejs");
    otlp_joins_the_series(&setup, "stacklens-nodejs-test", "wall");
}

const PYTHON_PROGRAM: &str = r#"
# Profiled by pyroscope-io, configured as its README says; only the address, the token
# (basic auth is the agent's only credential) and a short upload interval are the test's.
import logging
import sys
import time

import pyroscope

server_address, token, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
logging.basicConfig(level=logging.INFO)
pyroscope.configure(
    application_name="stacklens-python-test",
    server_address=server_address,
    basic_auth_username="stacklens",
    basic_auth_password=token,
    tags={"team": "lens", "client": "python"},
    upload_interval=1,
    enable_logging=True,
)


def stacklens_hot_loop(until):
    x = 0
    while time.time() < until:
        x += 1
    return x


stacklens_hot_loop(time.time() + seconds)
pyroscope.shutdown()
print("stopped")
"#;

#[test]
fn python_agent_pushes_to_the_time_index() {
    let python = repo().join(".tools/pyroscope/bin/python");
    let installed = Command::new(&python).args(["-c", "import pyroscope"]).output().is_ok_and(|o| o.status.success());
    if !installed {
        missing_prerequisite(&format!(
            "pyroscope-io is not installed in {} (scripts/ensure-tools.sh)",
            python.display()
        ));
        return;
    }
    let setup = setup("pyroscope-python");
    let program = setup.dir.join("busy.py");
    std::fs::write(&program, PYTHON_PROGRAM).unwrap();
    let out = setup.dir.join("python.out");
    let mut command = Command::new(&python);
    command.arg(&program).args([&setup.server.base, TOKEN, BUSY_SECONDS]).current_dir(&setup.dir);
    run(command, &out, RUN_DEADLINE, Some(&setup.log));
    // process_cpu, py-spy's samples as CPU time.
    check_pushed(&setup, &out, "stacklens-python-test", "stacklens_hot_loop", "cpu", "python");
    otlp_joins_the_series(&setup, "stacklens-python-test", "cpu");
}

/// Bounds building the Rust agent's program (minutes the first time: the crate and
/// its dependencies; then incremental).
const BUILD_DEADLINE: Duration = Duration::from_secs(30 * 60);

#[test]
fn rust_agent_pushes_to_the_time_index() {
    // backend/tests/pyroscope-agent, built with the cargo running the tests into the
    // target folder, from its Cargo.lock (scripts/ensure-tools.sh fetches its crates).
    let manifest = repo().join("backend/tests/pyroscope-agent/Cargo.toml");
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pyroscope-agent");
    std::fs::create_dir_all(&target).unwrap();
    let mut build = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    build.args(["build", "--locked", "--manifest-path"]).arg(&manifest).arg("--target-dir").arg(&target);
    run(build, &target.join("build.out"), BUILD_DEADLINE, None);
    let program = target.join("debug/stacklens-pyroscope-agent-test");

    let setup = setup("pyroscope-rust");
    let out = setup.dir.join("rust.out");
    let mut command = Command::new(&program);
    command.args([&setup.server.base, TOKEN, BUSY_SECONDS]).current_dir(&setup.dir);
    run(command, &out, RUN_DEADLINE, Some(&setup.log));
    // process_cpu, pprof-rs's samples as CPU time; functions by their Rust paths.
    check_pushed(&setup, &out, "stacklens-rust-test", "::stacklens_hot_loop", "cpu", "rust");
}

/// Both push routes need a tenant's write credential, as every other write does.
#[test]
fn pushes_without_a_valid_credential_are_refused() {
    let setup = setup("pyroscope-auth");
    let http = Client::new();
    let push = format!("{}/push.v1.PusherService/Push", setup.server.base);
    let ingest = format!("{}/ingest?name=shop.cpu&format=folded", setup.server.base);
    let basic = |password: &str| {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("agent:{password}")))
    };
    let refused = [None, Some(format!("Bearer {}", "x".repeat(20))), Some(basic("wrong")), Some("Basic %%%".into())];
    for auth in refused {
        for (url, content_type) in [(&push, "application/proto"), (&ingest, "text/plain")] {
            let mut request = http.post(url.as_str()).header("content-type", content_type).body(b"a;b 1\n".to_vec());
            if let Some(auth) = &auth {
                request = request.header("authorization", auth);
            }
            let (status, body) = json_of(request.send().unwrap());
            assert_eq!((status, body["error_code"].as_str()), (401, Some("Unauthorized")), "{url} {auth:?}: {body}");
        }
    }
    // With the token (bearer, or basic as the password) the same folded push is stored.
    for auth in [format!("Bearer {TOKEN}"), basic(TOKEN)] {
        let r = http.post(ingest.as_str()).header("authorization", &auth).body(b"a;b 1\n".to_vec()).send().unwrap();
        assert_eq!(r.status(), 200, "{auth}: {}", r.text().unwrap());
    }
    let merged = get(&setup, TOKEN, "/api/v1/profiling/merge?service=shop&profileType=cpu&from=now-1h");
    assert_eq!(merged["profileCount"], 2, "{merged}");
}

/// The push API as the agents send it, and what it refuses.
#[test]
fn push_api_files_profiles_and_refuses_bad_input() {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
    let setup = setup("pyroscope-push");
    let http = Client::new();
    let push = |content_type: &str, encoding: Option<&str>, body: Vec<u8>| {
        let mut r = http
            .post(format!("{}/push.v1.PusherService/Push", setup.server.base))
            .bearer_auth(TOKEN)
            .header("content-type", content_type)
            .body(body);
        if let Some(encoding) = encoding {
            r = r.header("content-encoding", encoding);
        }
        r.send().unwrap()
    };
    let labels = [("__name__", "process_cpu"), ("service_name", "shop"), ("region", "eu"), ("__delta__", "false")];
    // gzipped, as pyroscope-rs sends it; and plain.
    let r = push("application/proto", Some("gzip"), gzip(&push_request(&labels, &cpu)));
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    assert_eq!(r.headers()["content-type"], "application/proto");
    let r = push("application/proto", None, push_request(&labels, &cpu));
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    // The profile's own time files it (the fixture's, not now).
    let taken = (stacklens_core::parse(&cpu).unwrap().time_nanos / 1_000_000_000) as u64;
    let range = format!("service=shop&profileType=cpu&from={}&to={}", taken - 60, taken + 60);
    let merged = get(&setup, TOKEN, &format!("/api/v1/profiling/merge?{range}&labels=region=eu"));
    // The same bytes twice: one session, two entries.
    assert_eq!(merged["profileCount"], 2, "{merged}");
    let listed = get(&setup, TOKEN, &format!("/api/v1/profiling/labels?{range}"));
    // Pyroscope's own labels (__name__, __delta__) are not kept; service_name is the service.
    assert_eq!(listed["labels"], json!([{"name": "region", "profiles": 2}]), "{listed}");

    let gzipped = gzip(&push_request(&labels, &cpu));
    let mut understated = gzipped.clone();
    let at = understated.len() - 4;
    understated[at..].copy_from_slice(&10u32.to_le_bytes());
    for (content_type, encoding, body, status, code) in [
        ("application/json", None, b"{}".to_vec(), 415, "UnsupportedMediaType"),
        ("application/grpc", None, b"".to_vec(), 415, "UnsupportedMediaType"),
        ("application/proto", Some("br"), gzipped.clone(), 415, "UnsupportedMediaType"),
        ("application/proto", Some("gzip"), b"not gzip".to_vec(), 400, "BadBody"),
        ("application/proto", Some("gzip"), understated, 400, "BadBody"),
        ("application/proto", None, b"\xff\xff not protobuf".to_vec(), 400, "BadBody"),
        ("application/proto", None, push_request(&[("__name__", "process_cpu")], &cpu), 400, "InvalidParameter"),
        ("application/proto", None, push_request(&[("service_name", "a/b")], &cpu), 400, "InvalidParameter"),
        ("application/proto", None, push_request(&[("service_name", "shop")], b"not a profile"), 400, "InvalidProfile"),
        ("application/proto", None, push_request(&labels, &heap), 422, "ProfileTypeMismatch"),
    ] {
        let (status_got, body) = json_of(push(content_type, encoding, body));
        assert_eq!(
            (status_got, body["error_code"].as_str()),
            (status, Some(code)),
            "{content_type} {encoding:?}: {body}"
        );
    }
}
