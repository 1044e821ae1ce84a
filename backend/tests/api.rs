//! The REST API of a real `stacklens serve` over HTTP, against a local folder and
//! against a real S3-compatible server (SeaweedFS): the same suite on both stores,
//! plus replicas sharing one store and kill -9 during a burst of uploads.

mod common;

use std::path::Path;

use common::{fixtures, json_of, missing_prerequisite, read_pprof_top, temp_dir, Seaweed, Server};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use sha2::Digest;

const TOKEN: &str = "s3cr3t-token";

/// A client acting for one tenant, with the write token.
struct Api {
    http: Client,
    base: String,
    tenant: String,
}

impl Api {
    fn new(server: &Server, tenant: &str) -> Api {
        Api { http: Client::new(), base: server.base.clone(), tenant: tenant.to_owned() }
    }

    fn with(&self, r: RequestBuilder) -> RequestBuilder {
        r.header("X-Tenant-ID", &self.tenant).bearer_auth(TOKEN)
    }

    fn get(&self, path: &str) -> Response {
        self.with(self.http.get(format!("{}{path}", self.base))).send().unwrap()
    }

    /// A read without a credential, as a share link does it.
    fn get_open(&self, path: &str) -> Response {
        self.http.get(format!("{}{path}", self.base)).header("X-Tenant-ID", &self.tenant).send().unwrap()
    }

    fn upload(&self, query: &str, body: Vec<u8>) -> Response {
        self.with(self.http.post(format!("{}/api/v1/profiles?{query}", self.base))).body(body).send().unwrap()
    }

    fn post_json(&self, path: &str, body: &Value) -> Response {
        self.with(self.http.post(format!("{}{path}", self.base))).json(body).send().unwrap()
    }
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap()
}

/// The `field` of each object in a JSON array, in order.
fn ids_of<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    list.as_array().unwrap().iter().map(|p| p[field].as_str().unwrap()).collect()
}

fn server_args(token_file: &Path) -> Vec<String> {
    vec!["--token-file".into(), token_file.display().to_string(), "--max-upload".into(), "512KiB".into()]
}

fn token_file() -> std::path::PathBuf {
    let path = temp_dir("token").join("token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    path
}

fn start(store: &str, env: &[(&str, &str)]) -> Server {
    let args = server_args(&token_file());
    Server::start(store, &args.iter().map(String::as_str).collect::<Vec<_>>(), env)
}

/// Everything the API promises, on one server.
fn suite(server: &Server, fx: &Path) {
    let api = Api::new(server, "acme");
    let cpu = read(fx, "go/base/cpu.pb.gz");

    // Upload: parsed, typed, content-addressed.
    let (status, first) =
        json_of(api.upload("service=checkout&name=cpu.pb.gz&labels=env%3Dprod,region%3Deu", cpu.clone()));
    assert_eq!(status, 201, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("sess-") && id.len() == 37, "{id}");
    assert_eq!(first["profileType"], "cpu");
    assert_eq!(first["service"], "checkout");
    assert_eq!(first["sampleTypes"], json!(["samples", "cpu"]));
    assert_eq!(first["sampleCount"], 708);
    assert_eq!(first["labels"], json!({"env": "prod", "region": "eu"}));
    assert_eq!(first["size"], cpu.len());
    assert_eq!(first["sha256"], hex::encode(sha2::Sha256::digest(&cpu)), "the sha256 of the bytes sent");
    assert_eq!((&first["name"], &first["contentType"]), (&json!("cpu.pb.gz"), &json!("application/octet-stream")));
    assert!((first["durationSeconds"].as_f64().unwrap() - 8.17).abs() < 0.01);
    assert_eq!(first["shareUrl"], format!("{}/#/s/{id}?tenant=acme", server.base));
    // The same bytes again: the same session, nothing overwritten.
    let (status, again) = json_of(api.upload("service=other", cpu.clone()));
    assert_eq!((status, &again["id"], &again["service"]), (200, &first["id"], &json!("checkout")));

    // Record and raw bytes (what `go tool pprof URL` fetches).
    let (status, record) = json_of(api.get(&format!("/api/v1/profiles/{id}")));
    assert_eq!((status, &record["sha256"]), (200, &first["sha256"]));
    let raw = api.get(&format!("/api/v1/profiles/{id}/raw"));
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert_eq!(raw.bytes().unwrap().as_ref(), cpu.as_slice(), "the exact bytes");

    // Bad input.
    let (status, body) = json_of(api.upload("", b"definitely not a profile".to_vec()));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidProfile")), "{body}");
    let (status, body) = json_of(api.upload("profileType=memory", cpu.clone()));
    assert_eq!((status, body["error_code"].as_str()), (422, Some("ProfileTypeMismatch")), "{body}");
    let (status, body) = json_of(api.upload("profileType=bogus", cpu.clone()));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidProfileType")), "{body}");
    let (status, body) = json_of(api.upload("", vec![7u8; 600 * 1024]));
    assert_eq!((status, body["error_code"].as_str()), (413, Some("PayloadTooLarge")), "{body}");
    for missing in ["sess-0123456789abcdef0123456789abcdef", "sess-..%2F..%2Fetc", "nope"] {
        let (status, body) = json_of(api.get(&format!("/api/v1/profiles/{missing}/raw")));
        assert_eq!((status, body["error_code"].as_str()), (404, Some("ProfileNotFound")), "{missing}: {body}");
    }

    // Auth: writes need the token; reads of a known id stay open.
    let anonymous =
        api.http.post(format!("{}/api/v1/profiles", server.base)).header("X-Tenant-ID", "acme").body(cpu.clone());
    let (status, body) = json_of(anonymous.send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (401, Some("Unauthorized")));
    let wrong = api.http.post(format!("{}/api/v1/profiles", server.base)).bearer_auth("s3cr3t-tokem").body(cpu.clone());
    assert_eq!(wrong.send().unwrap().status(), 401);
    assert_eq!(api.get_open(&format!("/api/v1/profiles/{id}")).status(), 200);
    // Listings are not open: they need a credential for the tenant.
    let (status, body) = json_of(api.get_open("/api/v1/profiles"));
    assert_eq!((status, body["error_code"].as_str()), (401, Some("Unauthorized")));

    // Tenants: another tenant sees nothing of acme's.
    let other = Api::new(server, "globex");
    assert_eq!(json_of(other.get(&format!("/api/v1/profiles/{id}"))).0, 404);
    assert_eq!(json_of(other.get(&format!("/api/v1/profiles/{id}/raw"))).0, 404);
    // A plain link names its tenant in the query.
    let link = api.http.get(format!("{}/api/v1/profiles/{id}/raw?tenant=acme", server.base)).send().unwrap();
    assert_eq!(link.bytes().unwrap().as_ref(), cpu.as_slice());
    let (_, listed) = json_of(other.get("/api/v1/profiles"));
    assert_eq!(listed["profiles"], json!([]));
    let (status, body) = json_of(Api::new(server, "../acme").get("/api/v1/profiles"));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidTenant")));
    // The same bytes in another tenant are another session.
    let (status, theirs) = json_of(other.upload("", cpu.clone()));
    assert_eq!(status, 201);
    assert_ne!(theirs["id"], first["id"]);

    // Listing: newest first, filtered, paginated.
    let heap = json_of(api.upload("service=checkout", read(fx, "go/base/heap.pb.gz"))).1;
    assert_eq!(heap["profileType"], "memory");
    let dump = json_of(api.upload("service=search", read(fx, "go/base/goroutine.debug2.txt"))).1;
    assert_eq!((&dump["profileType"], &dump["sampleCount"]), (&json!("goroutine"), &json!(453)));
    let (_, all) = json_of(api.get("/api/v1/profiles"));
    let ids: Vec<&str> = all["profiles"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [dump["id"].as_str().unwrap(), heap["id"].as_str().unwrap(), &id]);
    let (_, checkout) = json_of(api.get("/api/v1/profiles?service=checkout&profileType=cpu"));
    assert_eq!(ids_of(&checkout["profiles"], "id"), [id.as_str()]);
    let (_, checkout) = json_of(api.get("/api/v1/profiles?service=checkout"));
    assert_eq!(ids_of(&checkout["profiles"], "id"), [heap["id"].as_str().unwrap(), &id]);
    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = json_of(api.get(&format!("/api/v1/profiles?limit=1&cursor={cursor}")));
        assert_eq!(status, 200, "{page}");
        paged.extend(page["profiles"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(paged, ids);
    assert_eq!(json_of(api.get("/api/v1/profiles?limit=0")).0, 400);
    assert_eq!(json_of(api.get("/api/v1/profiles?cursor=..%2Fx")).0, 400);

    // Baselines, as the seed's CreateBaseline.
    let (status, b1) = json_of(api.post_json(
        "/api/v1/profiling/baselines",
        &json!({"label": "v1.0", "sessionId": id, "profileType": "cpu", "description": "release", "tags": ["release"]}),
    ));
    assert_eq!(status, 201, "{b1}");
    assert_eq!(
        (&b1["baselineLabel"], &b1["isLatest"], &b1["tags"], &b1["description"]),
        (&json!("v1.0"), &json!(true), &json!(["release"]), &json!("release"))
    );
    assert_eq!((&b1["profileType"], &b1["sessionId"], &b1["service"]), (&json!("cpu"), &json!(id), &json!("checkout")));
    let b1_id = b1["baselineId"].as_str().unwrap();
    assert!(b1_id.starts_with("base-") && b1_id.len() == 37, "{b1_id}");
    assert_eq!(b1["shareUrl"], format!("{}/#/b/{b1_id}?tenant=acme", server.base));
    assert!(b1["createdAt"].as_str().unwrap() >= first["createdAt"].as_str().unwrap(), "created after the upload");
    // Computed by core: cpu.pprof-top.txt has findMatch at 1.34s flat, 18.93%.
    let top = b1["topFunctions"].as_array().unwrap();
    assert_eq!(top.len(), 20);
    assert_eq!(
        top[0],
        json!({"funcName": "compress/flate.(*compressor).findMatch", "package": "compress/flate", "selfPct": 18.93, "cumulativePct": 29.8, "sampleCount": 134})
    );
    let given =
        json!([{"funcName": "main.f", "package": "main", "selfPct": 50.0, "cumulativePct": 60.0, "sampleCount": 5}]);
    let (status, b2) = json_of(api.post_json(
        "/api/v1/profiling/baselines",
        &json!({"label": "v1.1", "sessionId": id, "profileType": "cpu", "topFunctions": given}),
    ));
    assert_eq!((status, &b2["topFunctions"], &b2["isLatest"]), (201, &given, &json!(true)));
    let (_, b1_now) = json_of(api.get(&format!("/api/v1/profiling/baselines/{b1_id}")));
    assert_eq!(b1_now["isLatest"], false, "the newer baseline of the type took over");
    let (_, latest) = json_of(api.get("/api/v1/profiling/baselines?profileType=cpu&latest=true"));
    assert_eq!(
        latest["baselines"].as_array().unwrap().iter().map(|b| &b["baselineId"]).collect::<Vec<_>>(),
        [&b2["baselineId"]]
    );
    let (_, tagged) = json_of(api.get("/api/v1/profiling/baselines?tag=release"));
    assert_eq!(ids_of(&tagged["baselines"], "baselineId"), [b1_id]);
    let (_, all) = json_of(api.get("/api/v1/profiling/baselines"));
    assert_eq!(all["baselines"][0]["baselineId"], b2["baselineId"], "newest first");
    // A heap session can be a memory baseline; its latest is separate from cpu's.
    let (status, mem) = json_of(api.post_json(
        "/api/v1/profiling/baselines",
        &json!({"label": "heap", "sessionId": heap["id"], "profileType": "memory"}),
    ));
    assert_eq!((status, &mem["isLatest"]), (201, &json!(true)), "{mem}");
    // heap.inuse_space.pprof-top.txt: main.(*responseCache).put 5.51MB flat and cum, 75.84%.
    let put = &mem["topFunctions"][0];
    assert_eq!(
        (&put["funcName"], &put["package"], &put["selfPct"], &put["cumulativePct"]),
        (&json!("main.(*responseCache).put"), &json!("main"), &json!(75.84), &json!(75.84)),
        "{mem}"
    );
    assert_eq!(
        json_of(api.get(&format!("/api/v1/profiling/baselines/{}", b2["baselineId"].as_str().unwrap()))).1["isLatest"],
        true
    );
    // Errors.
    let create = |body: Value| json_of(api.post_json("/api/v1/profiling/baselines", &body));
    let (status, body) =
        create(json!({"label": "x", "sessionId": "sess-0123456789abcdef0123456789abcdef", "profileType": "cpu"}));
    assert_eq!((status, body["error_code"].as_str()), (404, Some("ProfileNotFound")));
    let (status, body) = create(json!({"label": "x", "sessionId": id, "profileType": "goroutine"}));
    assert_eq!((status, body["error_code"].as_str()), (422, Some("ProfileTypeMismatch")));
    let (status, body) = create(json!({"label": "", "sessionId": id, "profileType": "cpu"}));
    assert_eq!((status, body["details"]["field"].as_str()), (400, Some("label")));
    let (status, _) = create(json!({"sessionId": id}));
    assert_eq!(status, 400);
    assert_eq!(json_of(api.get("/api/v1/profiling/baselines/base-0123456789abcdef0123456789abcdef")).0, 404);
    assert_eq!(json_of(other.get(&format!("/api/v1/profiling/baselines/{b1_id}"))).0, 404, "tenants");
    let anonymous = api.http.post(format!("{}/api/v1/profiling/baselines", server.base)).json(&json!({}));
    assert_eq!(anonymous.send().unwrap().status(), 401);

    // Delete: token holder only; afterwards the id is unknown.
    let delete = |auth: bool| {
        let r = api
            .http
            .delete(format!("{}/api/v1/profiles/{}", server.base, dump["id"].as_str().unwrap()))
            .header("X-Tenant-ID", "acme");
        if auth { r.bearer_auth(TOKEN) } else { r }.send().unwrap().status().as_u16()
    };
    assert_eq!(delete(false), 401);
    assert_eq!(delete(true), 204);
    assert_eq!(json_of(api.get(&format!("/api/v1/profiles/{}", dump["id"].as_str().unwrap()))).0, 404);
    assert_eq!(delete(true), 404);
    assert_eq!(json_of(api.get("/api/v1/nothing-here")).0, 404);
}

#[test]
fn api_on_a_local_folder() {
    let Some(fx) = fixtures() else { return };
    let dir = temp_dir("store");
    let server = start(&format!("file://{}", dir.display()), &[]);
    suite(&server, &fx);
}

#[test]
fn api_on_s3_with_replicas() {
    let Some(fx) = fixtures() else { return };
    let Some(_seaweed) = Seaweed::start() else { return };
    let env = Seaweed::env();
    let server = start("s3://test", &env);
    suite(&server, &fx);

    // A second replica over the same bucket sees the first one's writes, and the other way round.
    let replica = start("s3://test", &env);
    let (a, b) = (Api::new(&server, "replicas"), Api::new(&replica, "replicas"));
    let (status, up) = json_of(a.upload("service=x", read(&fx, "go/base/cpu.pb.gz")));
    assert_eq!(status, 201);
    let id = up["id"].as_str().unwrap();
    assert_eq!(json_of(b.get(&format!("/api/v1/profiles/{id}"))).1["sha256"], up["sha256"]);
    let (status, again) = json_of(b.upload("", read(&fx, "go/base/cpu.pb.gz")));
    assert_eq!((status, &again["id"]), (200, &up["id"]), "the same bytes through the other replica");
    let (_, base) = json_of(
        b.post_json("/api/v1/profiling/baselines", &json!({"label": "b", "sessionId": id, "profileType": "cpu"})),
    );
    let (_, seen) = json_of(a.get(&format!("/api/v1/profiling/baselines/{}", base["baselineId"].as_str().unwrap())));
    assert_eq!(seen["isLatest"], true);
}

#[test]
fn replicas_share_a_local_folder() {
    let Some(fx) = fixtures() else { return };
    let dir = temp_dir("shared");
    let url = format!("file://{}", dir.display());
    let (one, two) = (start(&url, &[]), start(&url, &[]));
    let (a, b) = (Api::new(&one, "default"), Api::new(&two, "default"));
    let up = json_of(a.upload("", read(&fx, "go/base/heap.pb.gz"))).1;
    let listed = json_of(b.get("/api/v1/profiles")).1;
    assert_eq!(listed["profiles"][0]["id"], up["id"]);
    assert_eq!(
        up["shareUrl"],
        format!("{}/#/s/{}", one.base, up["id"].as_str().unwrap()),
        "default tenant: a plain link"
    );
}

/// Uploads distinct profiles from several threads, kills the server with SIGKILL once
/// 16 were acknowledged (with the workers still sending), restarts it on the same
/// folder: every acknowledged upload is there, and nothing listed is unreadable.
#[test]
fn kill_9_during_uploads_loses_nothing_acknowledged() {
    let Some(fx) = fixtures() else { return };
    let dir = temp_dir("durable");
    let url = format!("file://{}", dir.display());
    let server = start(&url, &[]);
    let port = server.port;
    // Distinct bytes per upload: a goroutine dump with a changing trailing goroutine.
    let dump = String::from_utf8(read(&fx, "go/base/goroutine.debug2.txt")).unwrap();
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Vec<u8>)>::new()));
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Vec<u8>>::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    const WORKERS: usize = 4;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (acknowledged, sent, stop, dump, base) =
                (acknowledged.clone(), sent.clone(), stop.clone(), dump.clone(), server.base.clone());
            std::thread::spawn(move || {
                let http = Client::new();
                for i in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let body = format!(
                        "{dump}\ngoroutine {} [running]:\nmain.worker{w}()\n\t/src/w.go:{i} +0x1\n",
                        1_000_000 + i
                    )
                    .into_bytes();
                    sent.lock().unwrap().push(body.clone());
                    let answer =
                        http.post(format!("{base}/api/v1/profiles")).bearer_auth(TOKEN).body(body.clone()).send();
                    match answer {
                        // Acknowledged: a 201 whose body arrived whole.
                        Ok(r) if r.status() == 201 => match r.json::<Value>() {
                            Ok(v) => acknowledged.lock().unwrap().push((v["id"].as_str().unwrap().to_owned(), body)),
                            Err(_) => break,
                        },
                        _ => break, // the server is gone
                    }
                }
            })
        })
        .collect();
    // Killed after a count of acknowledged uploads, however long they take; the deadline
    // only ends a run whose uploads stopped (a worker that gets no 201 stops).
    const BEFORE_KILL: usize = 16;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while acknowledged.lock().unwrap().len() < BEFORE_KILL {
        let working = workers.iter().any(|w| !w.is_finished());
        assert!(
            working && std::time::Instant::now() < deadline,
            "the uploads stopped before {BEFORE_KILL} were acknowledged"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    server.kill_9();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    assert!(acknowledged.len() >= BEFORE_KILL, "{} acknowledged", acknowledged.len());

    let args = server_args(&token_file());
    let restarted = Server::start_on(port, &url, &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let api = Api::new(&restarted, "default");
    for (id, body) in &acknowledged {
        let raw = api.get(&format!("/api/v1/profiles/{id}/raw"));
        assert_eq!(raw.status(), 200, "{id} was acknowledged but is gone");
        assert_eq!(raw.bytes().unwrap().as_ref(), body.as_slice());
    }
    let listed = json_of(api.get("/api/v1/profiles?limit=1000")).1;
    let listed = ids_of(&listed["profiles"], "id");
    for (id, _) in &acknowledged {
        assert!(listed.contains(&id.as_str()), "{id} was acknowledged but is not listed");
    }
    // Beyond those, at most the one upload each worker had in flight when the server died,
    // and each listed one is readable with the bytes one of them sent.
    assert!(
        listed.len() <= acknowledged.len() + WORKERS,
        "{} listed, {} acknowledged",
        listed.len(),
        acknowledged.len()
    );
    for id in &listed {
        let raw = api.get(&format!("/api/v1/profiles/{id}/raw"));
        assert_eq!(raw.status(), 200, "{id} is listed but cannot be read");
        let bytes = raw.bytes().unwrap();
        assert!(sent.iter().any(|b| b.as_slice() == bytes.as_ref()), "{id}: bytes nobody sent");
    }
}

/// One row of a `go tool pprof -top` output of a cpu profile, values in nanoseconds.
struct PprofRow {
    name: String,
    flat: i64,
    cum: i64,
    flat_pct: f64,
}

/// pprof's `0.65s`, `-318.70ms` or `0` in nanoseconds.
fn nanos(text: &str) -> i64 {
    let (number, scale) = [("ms", 1e6), ("us", 1e3), ("ns", 1.0), ("s", 1e9)]
        .into_iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale)))
        .unwrap_or((text, 1.0));
    (number.parse::<f64>().unwrap_or_else(|e| panic!("{text}: {e}")) * scale).round() as i64
}

/// The total and the rows of a `go tool pprof -top` output (an
/// independent reference: made by Go's pprof, see the fixtures' SOURCES.md).
fn pprof_top(path: &Path) -> (i64, Vec<PprofRow>) {
    let top = read_pprof_top(&std::fs::read_to_string(path).unwrap());
    let rows = top
        .rows
        .into_iter()
        .map(|r| PprofRow { flat: nanos(&r.flat), cum: nanos(&r.cum), flat_pct: r.flat_pct, name: r.name })
        .collect();
    (nanos(&top.total), rows)
}

fn pprof_row<'a>(rows: &'a [PprofRow], name: &str) -> &'a PprofRow {
    rows.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no {name} in the pprof output"))
}

/// The function named `name` in a diff's `list` (regressions or improvements).
fn delta_of<'a>(diff: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    diff[list].as_array().unwrap_or_else(|| panic!("no {list} in {diff}")).iter().find(|f| f["name"] == name)
}

/// Names in a diff's `list`, in order.
fn names(diff: &Value, list: &str) -> Vec<String> {
    diff[list].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_owned()).collect()
}

/// Goroutines per state in a debug=2 dump, counted from its `goroutine N [state, …]:`
/// header lines.
fn states_in_dump(dump: &[u8]) -> std::collections::BTreeMap<String, u64> {
    let mut states = std::collections::BTreeMap::new();
    for line in String::from_utf8_lossy(dump).lines().filter(|l| l.starts_with("goroutine ")) {
        let state = line.split_once('[').unwrap().1.split([',', ']']).next().unwrap();
        *states.entry(state.to_owned()).or_insert(0) += 1;
    }
    states
}

/// `stacklens … --format json` on fixture files.
fn cli_json(args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stacklens")).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn diff_and_goroutine_analysis_equal_the_cli() {
    let Some(fx) = fixtures() else { return };
    let server = start(&format!("file://{}", temp_dir("analysis").display()), &[]);
    let api = Api::new(&server, "default");
    let path = |f: &str| fx.join(f).display().to_string();
    let upload = |f: &str| json_of(api.upload("service=shop", read(&fx, f))).1["id"].as_str().unwrap().to_owned();
    let (cpu_base, cpu_new) = (upload("go/base/cpu.pb.gz"), upload("go/compare/cpu.pb.gz"));
    let (dump_base, dump_new) = (upload("go/base/goroutine.debug2.txt"), upload("go/compare/goroutine.debug2.txt"));

    // cpu: the same regressions, improvements, unchanged count and overall delta as `stacklens diff`.
    let (status, d) = json_of(
        api.post_json("/api/v1/profiling/diff", &json!({"baseId": cpu_base, "compareId": cpu_new, "type": "cpu"})),
    );
    assert_eq!(status, 200, "{d}");
    let cli = cli_json(&["diff", &path("go/base/cpu.pb.gz"), &path("go/compare/cpu.pb.gz"), "--format", "json"]);
    assert_eq!((&d["baseSessionId"], &d["compareSessionId"]), (&json!(cpu_base), &json!(cpu_new)));
    assert_eq!(d["regressions"], cli["regressions"]);
    assert_eq!(d["improvements"], cli["improvements"]);
    assert_eq!(d["unchanged"], cli["unchanged"]);
    assert_eq!(d["overallDelta"], cli["overallDeltaPct"]);

    // …and the numbers of `go tool pprof -top -diff_base` (cpu.diff-vs-base.pprof-top.txt):
    // every row beyond the default noise threshold (1% of the base total) is a regression
    // when its flat or cum grew past it, else an improvement, with pprof's exact deltas.
    let (base_total, reference) = pprof_top(&fx.join("go/compare/cpu.diff-vs-base.pprof-top.txt"));
    let (compare_total, _) = pprof_top(&fx.join("go/compare/cpu.pprof-top.txt"));
    assert_eq!((base_total, compare_total), (7_080_000_000, 6_900_000_000), "SOURCES.md: sums 7080000000, 6900000000");
    assert_eq!((&d["sampleType"], &d["unit"]), (&json!("cpu"), &json!("nanoseconds")));
    let overall = (compare_total - base_total) as f64 * 100.0 / base_total as f64; // -2.54%
    assert!((d["overallDelta"].as_f64().unwrap() - overall).abs() < 1e-9, "{} vs {overall}", d["overallDelta"]);
    let noise = base_total / 100;
    let mut listed = std::collections::BTreeMap::<&str, usize>::new();
    for row in &reference {
        let expected = if row.flat > noise || row.cum > noise {
            "regressions"
        } else if row.flat < -noise || row.cum < -noise {
            "improvements"
        } else {
            "unchanged"
        };
        *listed.entry(expected).or_default() += 1;
        for list in ["regressions", "improvements"] {
            let found = delta_of(&d, list, &row.name);
            if list != expected {
                assert!(found.is_none(), "{} is not one of the {list}", row.name);
                continue;
            }
            let f = found.unwrap_or_else(|| panic!("{} is one of the {list}: {}", row.name, d[list]));
            assert_eq!((f["flatDelta"].as_i64(), f["cumDelta"].as_i64()), (Some(row.flat), Some(row.cum)), "{f}");
            let pct = f["flatDeltaPct"].as_f64().unwrap();
            assert_eq!(((pct.abs() * 100.0).round() / 100.0, pct < 0.0), (row.flat_pct, row.flat < 0), "{f}");
        }
    }
    // pprof's first row, and how its 20 rows split (stateInString and heapBits.isPointer
    // changed by 0.04s, within the threshold).
    let first = &reference[0];
    assert_eq!(
        (first.name.as_str(), first.flat, first.cum),
        ("compress/flate.(*compressor).findMatch", 650_000_000, 750_000_000)
    );
    assert_eq!(listed, [("improvements", 11), ("regressions", 7), ("unchanged", 2)].into());

    // goroutine: new stacks and growth as `stacklens goroutines --compare`.
    let (status, g) = json_of(api.post_json(
        "/api/v1/profiling/diff",
        &json!({"baseId": dump_base, "compareId": dump_new, "type": "goroutine"}),
    ));
    assert_eq!(status, 200, "{g}");
    let growth = cli_json(&[
        "goroutines",
        &path("go/base/goroutine.debug2.txt"),
        "--compare",
        &path("go/compare/goroutine.debug2.txt"),
        "--format",
        "json",
    ]);
    let cli = &growth;
    assert_eq!(g["growthCount"], cli["growthCount"]);
    // SOURCES.md: 453 goroutines in the base dump, 1617 in the later one.
    assert_eq!(g["growthCount"], 1617 - 453);
    assert_eq!(g["goroutineGrowthRate"], json!(1617.0 / 453.0));
    let fields = |s: &Value| json!({"count": s["count"], "state": s["state"], "waitReason": s["waitReason"], "frames": s["frames"], "createdBy": s["createdBy"]});
    assert_eq!(g["newStacks"], Value::Array(cli["newStacks"].as_array().unwrap().iter().map(fields).collect()));

    // Analysis of one dump: as `stacklens goroutines`, growth 1.0 without a baseline…
    let asked = std::time::SystemTime::now();
    let (status, a) = json_of(api.get(&format!("/api/v1/profiling/sessions/{dump_new}/analysis")));
    let answered = std::time::SystemTime::now();
    assert_eq!(status, 200, "{a}");
    let analyzed = humantime::parse_rfc3339(a["analyzedAt"].as_str().unwrap()).unwrap();
    // Written in milliseconds: at most 1 ms before the request was sent, never after its answer.
    let after_asking = asked <= analyzed + std::time::Duration::from_millis(1) && analyzed <= answered;
    assert!(after_asking, "analyzedAt {} is the time of the analysis", a["analyzedAt"]);
    let cli =
        cli_json(&["goroutines", &path("go/compare/goroutine.debug2.txt"), "--max-stacks", "20", "--format", "json"]);
    for key in ["goroutineCount", "topStacks", "blockedGoroutines"] {
        assert_eq!(a[key], cli[key], "{key}");
    }
    // SOURCES.md: 1617 goroutines; chan send 1552, sleep 27, IO wait 17, select 7,
    // sync.Cond.Wait 6, semacquire 4, chan receive 2 (and, counted from the dump's
    // headers, 1 running and 1 runnable: the only ones not blocked).
    let by_state = states_in_dump(&read(&fx, "go/compare/goroutine.debug2.txt"));
    for (state, count) in [
        ("chan send", 1552),
        ("sleep", 27),
        ("IO wait", 17),
        ("select", 7),
        ("sync.Cond.Wait", 6),
        ("semacquire", 4),
        ("chan receive", 2),
        ("running", 1),
        ("runnable", 1),
    ] {
        assert_eq!(by_state.get(state), Some(&count), "{state} in the dump");
    }
    assert_eq!(a["byState"], json!(by_state));
    assert_eq!((&a["goroutineCount"], &a["blockedCount"]), (&json!(1617), &json!(1617 - 2)));
    let top = &a["topStacks"][0];
    assert_eq!((&top["count"], &top["state"]), (&json!(1552), &json!("chan send")), "the largest group: {top}");
    assert_eq!((&a["sessionId"], &a["goroutineGrowthRate"]), (&json!(dump_new), &json!(1.0)));
    assert_eq!(a["growthBaselineId"], Value::Null);
    // …and against the service's latest goroutine baseline once there is one.
    let (status, before) = json_of(api.post_json(
        "/api/v1/profiling/baselines",
        &json!({"label": "before", "sessionId": dump_base, "profileType": "goroutine"}),
    ));
    assert_eq!(status, 201);
    let a = json_of(api.get(&format!("/api/v1/profiling/sessions/{dump_new}/analysis"))).1;
    assert_eq!(a["goroutineGrowthRate"], growth["goroutineGrowthRate"]);
    assert_eq!((&a["goroutineGrowthRate"], &a["growthBaselineId"]), (&json!(1617.0 / 453.0), &before["baselineId"]));
    // A debug=1 text and a goroutine pprof are analysed too (SOURCES.md: "goroutine
    // profile: total 453" and "sums [453]"; 1617 for the later ones).
    for (f, total) in [
        ("go/base/goroutine.debug1.txt", 453),
        ("go/base/goroutine.pb.gz", 453),
        ("go/compare/goroutine.debug1.txt", 1617),
        ("go/compare/goroutine.pb.gz", 1617),
    ] {
        let a = json_of(api.get(&format!("/api/v1/profiling/sessions/{}/analysis", upload(f)))).1;
        assert_eq!(a["goroutineCount"], total, "{f}");
        assert_eq!(a["goroutineCount"], cli_json(&["goroutines", &path(f), "--format", "json"])["goroutineCount"]);
    }

    // Errors: unknown ids 404, types that do not match 422, bad requests 400.
    let post = |body: Value| json_of(api.post_json("/api/v1/profiling/diff", &body));
    let (status, e) =
        post(json!({"baseId": "sess-0123456789abcdef0123456789abcdef", "compareId": cpu_new, "type": "cpu"}));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("ProfileNotFound")));
    let (status, e) = post(json!({"baseId": cpu_base, "compareId": cpu_new, "type": "goroutine"}));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("ProfileTypeMismatch")));
    let (status, e) = post(json!({"baseId": cpu_base, "compareId": dump_new, "type": "cpu"}));
    assert_eq!((status, e["details"]["sessionId"].as_str()), (422, Some(dump_new.as_str())));
    assert_eq!(post(json!({"baseId": cpu_base})).0, 400);
    assert_eq!(post(json!({"baseId": cpu_base, "compareId": cpu_new, "type": "nope"})).0, 400);
    let (status, e) = json_of(api.get(&format!("/api/v1/profiling/sessions/{cpu_base}/analysis")));
    assert_eq!((status, e["error_code"].as_str()), (422, Some("ProfileTypeMismatch")));
    assert_eq!(json_of(api.get("/api/v1/profiling/sessions/sess-0123456789abcdef0123456789abcdef/analysis")).0, 404);
}

/// `service`, `profileType`, `labels` and `name` as `X-Stacklens-…` headers instead of
/// query parameters; `--public-url` in the links instead of the request's Host.
#[test]
fn upload_headers_and_public_url_are_recorded() {
    let Some(fx) = fixtures() else { return };
    let token = token_file();
    // The requests name a host the servers are told they answer to (others get 421).
    let mut args = server_args(&token);
    args.extend(["--allowed-host".into(), "elsewhere.example".into()]);
    let plain = Server::start("memory://", &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    args.extend(["--public-url".into(), "https://profiles.example.test/stacklens/".into()]);
    let public = Server::start("memory://", &args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let heap = read(&fx, "go/base/heap.pb.gz");
    let send = |server: &Server, profile_type: &str| {
        let api = Api::new(server, "acme");
        let request = api
            .with(api.http.post(format!("{}/api/v1/profiles", server.base)))
            .header("Host", "elsewhere.example:9999")
            .header("X-Stacklens-Service", "payments")
            .header("X-Stacklens-ProfileType", profile_type)
            .header("X-Stacklens-Labels", "env=staging,zone=b")
            .header("X-Stacklens-Name", "heap-0412.pb.gz");
        json_of(request.body(heap.clone()).send().unwrap())
    };
    // The type header is read: a heap profile claimed to be cpu is refused.
    let (status, e) = send(&public, "cpu");
    assert_eq!((status, e["error_code"].as_str()), (422, Some("ProfileTypeMismatch")), "{e}");
    let (status, up) = send(&public, "heap");
    assert_eq!(status, 201, "{up}");
    let id = up["id"].as_str().unwrap();
    let api = Api::new(&public, "acme");
    let (_, record) = json_of(api.get(&format!("/api/v1/profiles/{id}")));
    for r in [&up, &record] {
        assert_eq!(
            (&r["service"], &r["profileType"], &r["labels"], &r["name"]),
            (&json!("payments"), &json!("memory"), &json!({"env": "staging", "zone": "b"}), &json!("heap-0412.pb.gz")),
            "{r}"
        );
        assert_eq!(r["shareUrl"], format!("https://profiles.example.test/stacklens/#/s/{id}?tenant=acme"));
    }
    let (_, listed) = json_of(api.get("/api/v1/profiles?service=payments&profileType=memory"));
    assert_eq!(ids_of(&listed["profiles"], "id"), [id]);
    let (status, b) =
        json_of(api.post_json(
            "/api/v1/profiling/baselines",
            &json!({"label": "heap", "sessionId": id, "profileType": "memory"}),
        ));
    assert_eq!(status, 201, "{b}");
    let baseline = b["baselineId"].as_str().unwrap();
    assert_eq!(b["shareUrl"], format!("https://profiles.example.test/stacklens/#/b/{baseline}?tenant=acme"));
    assert_eq!(b["service"], "payments");
    // Without --public-url the same request's link names its Host.
    let (status, up) = send(&plain, "memory");
    assert_eq!(status, 201, "{up}");
    assert_eq!(up["shareUrl"], format!("http://elsewhere.example:9999/#/s/{}?tenant=acme", up["id"].as_str().unwrap()));
}

/// `normalize` and `noiseThresholdPct` of `POST /api/v1/profiling/diff`, and
/// `noiseThresholdPct` of `GET /api/v1/observability/profiling/compare`, with values
/// computed from `go tool pprof -top` outputs of the two cpu fixtures.
#[test]
fn diff_and_compare_options_change_the_numbers_as_documented() {
    let Some(fx) = fixtures() else { return };
    let server = start("memory://", &[]);
    let api = Api::new(&server, "default");
    let upload = |f: &str| json_of(api.upload("", read(&fx, f))).1["id"].as_str().unwrap().to_owned();
    let (base, later) = (upload("go/base/cpu.pb.gz"), upload("go/compare/cpu.pb.gz"));
    let diff = |options: Value| {
        let mut body = json!({"baseId": base, "compareId": later, "type": "cpu"});
        body.as_object_mut().unwrap().extend(options.as_object().unwrap().clone());
        let (status, d) = json_of(api.post_json("/api/v1/profiling/diff", &body));
        assert_eq!(status, 200, "{body}: {d}");
        d
    };
    let (_, base_rows) = pprof_top(&fx.join("go/base/cpu.pprof-top.txt"));
    let (_, compare_rows) = pprof_top(&fx.join("go/compare/cpu.pprof-top.txt"));

    // normalize scales each sample of the compared profile by base total / compare total
    // (7.08 s / 6.90 s) before subtracting, as pprof's -normalize: the base side stays, and
    // the overall delta stays that of the raw totals. The deltas, from
    // `go tool pprof -top -normalize -diff_base=go/base/cpu.pb.gz go/compare/cpu.pb.gz`
    // (ms with two decimals): findMatch 701.91ms flat, 824.61ms cum; sort.partition_func
    // -247.91ms flat, -1104.26ms cum.
    let (plain, normalized) = (diff(json!({})), diff(json!({"normalize": true})));
    assert_eq!(plain["overallDelta"], normalized["overallDelta"]);
    let values = |f: &Value| {
        ["baseFlat", "compareFlat", "flatDelta", "baseCum", "compareCum", "cumDelta"].map(|k| f[k].as_i64().unwrap())
    };
    let to_10us = |ns: i64| (ns as f64 / 1e4).round() as i64;
    for (name, list, pprof_normalized) in [
        ("compress/flate.(*compressor).findMatch", "regressions", (70191, 82461)),
        ("sort.partition_func", "improvements", (-24791, -110426)),
    ] {
        let (b, c) = (pprof_row(&base_rows, name), pprof_row(&compare_rows, name));
        let as_is = values(delta_of(&plain, list, name).unwrap());
        assert_eq!(as_is, [b.flat, c.flat, c.flat - b.flat, b.cum, c.cum, c.cum - b.cum], "{name}");
        let [base_flat, compare_flat, flat_delta, base_cum, compare_cum, cum_delta] =
            values(delta_of(&normalized, list, name).unwrap());
        assert_eq!((base_flat, base_cum), (b.flat, b.cum), "{name}: the base is not scaled");
        assert_eq!((compare_flat - base_flat, compare_cum - base_cum), (flat_delta, cum_delta), "{name}");
        assert_eq!((to_10us(flat_delta), to_10us(cum_delta)), pprof_normalized, "{name} normalized, as pprof");
    }
    let find_match = delta_of(&normalized, "regressions", "compress/flate.(*compressor).findMatch").unwrap();
    assert_eq!((&find_match["compareFlat"], &find_match["flatDelta"]), (&json!(2_041_913_130), &json!(701_913_130)));

    // noiseThresholdPct: main.dotRowCol grew by 0.23 s flat and 0.24 s cum
    // (cpu.diff-vs-base.pprof-top.txt), main.matrixMultiply by 0.24 s cum (0.05 s → 0.29 s,
    // cpu.cum.pprof-top.txt). 3.3% of 7.08 s is 233.64 ms: both are regressions; 3.4% is
    // 240.72 ms: both are unchanged, and nothing else moves.
    let (_, reference) = pprof_top(&fx.join("go/compare/cpu.diff-vs-base.pprof-top.txt"));
    let dot = pprof_row(&reference, "main.dotRowCol");
    assert_eq!((dot.flat, dot.cum), (230_000_000, 240_000_000));
    let compare = |pct: &str| {
        let query = format!("baseProfileId={base}&comparisonProfileId={later}&noiseThresholdPct={pct}");
        let (status, c) = json_of(api.get(&format!("/api/v1/observability/profiling/compare?{query}")));
        assert_eq!(status, 200, "{c}");
        c
    };
    let moved = ["main.dotRowCol", "main.matrixMultiply"];
    let mut unchanged = Vec::new();
    for (pct, regressed) in [(3.3, true), (3.4, false)] {
        let d = diff(json!({"noiseThresholdPct": pct}));
        let c = compare(&pct.to_string());
        for name in moved {
            assert_eq!(
                delta_of(&d, "regressions", name).is_some(),
                regressed,
                "{name} at {pct}%: {}",
                d["regressions"]
            );
            assert_eq!(delta_of(&d, "improvements", name), None);
        }
        if regressed {
            let f = delta_of(&d, "regressions", "main.dotRowCol").unwrap();
            assert_eq!((&f["flatDelta"], &f["cumDelta"]), (&json!(dot.flat), &json!(dot.cum)));
            let f = delta_of(&d, "regressions", "main.matrixMultiply").unwrap();
            assert_eq!((&f["flatDelta"], &f["cumDelta"]), (&json!(0), &json!(240_000_000)));
        }
        // The compare endpoint applies the same threshold to the same numbers.
        for key in ["regressions", "improvements", "unchanged", "overallDelta"] {
            assert_eq!(c[key], d[key], "{key} at {pct}%");
        }
        assert_eq!(c["noiseThresholdPct"], json!(pct));
        assert_eq!(
            (&c["baseProfile"]["sessionId"], &c["comparisonProfile"]["sessionId"]),
            (&json!(base), &json!(later))
        );
        assert_eq!(
            (&c["baseProfile"]["sampleCount"], &c["comparisonProfile"]["sampleCount"]),
            (&json!(708), &json!(690))
        );
        unchanged.push((names(&d, "regressions"), names(&d, "improvements"), d["unchanged"].as_u64().unwrap()));
    }
    let ((r33, i33, u33), (r34, i34, u34)) = (&unchanged[0], &unchanged[1]);
    let gone: Vec<&str> = r33.iter().filter(|n| !r34.contains(n)).map(String::as_str).collect();
    assert_eq!((gone, r34.len(), i33 == i34, *u34), (moved.to_vec(), r33.len() - 2, true, u33 + 2));
    // Out of range is refused, not clamped.
    let (status, e) = json_of(api.get(&format!(
        "/api/v1/observability/profiling/compare?baseProfileId={base}&comparisonProfileId={later}&noiseThresholdPct=101"
    )));
    assert_eq!((status, e["details"]["field"].as_str()), (400, Some("noiseThresholdPct")));
}

/// The OpenAPI document lists exactly the API's routes, and each one it lists is served.
#[test]
fn openapi_documents_every_route() {
    let server = start("memory://", &[]);
    let http = Client::new();
    let doc: Value = http.get(format!("{}/api/openapi.json", server.base)).send().unwrap().json().unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{}", doc["openapi"]);
    let mut documented = std::collections::BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys().filter(|k| *k != "parameters") {
            documented.insert((method.clone(), path.clone()));
        }
    }
    let expected: std::collections::BTreeSet<(String, String)> = [
        ("get", "/healthz"),
        ("get", "/metrics"),
        ("get", "/api/v1/profiles"),
        ("post", "/api/v1/profiles"),
        ("get", "/api/v1/profiles/{id}"),
        ("delete", "/api/v1/profiles/{id}"),
        ("get", "/api/v1/profiles/{id}/raw"),
        ("post", "/api/v1/blobs"),
        ("get", "/api/v1/blobs/{id}"),
        ("delete", "/api/v1/blobs/{id}"),
        ("get", "/api/v1/opened/{index}/{name}"),
        ("get", "/api/v1/profiling/baselines"),
        ("post", "/api/v1/profiling/baselines"),
        ("get", "/api/v1/profiling/baselines/{id}"),
        ("delete", "/api/v1/profiling/baselines/{id}"),
        ("post", "/api/v1/profiling/diff"),
        ("get", "/api/v1/profiling/sessions/{id}/analysis"),
        ("post", "/api/v1/observability/profiling/start"),
        ("get", "/api/v1/observability/profiling/{id}"),
        ("get", "/api/v1/observability/profiling/history"),
        ("get", "/api/v1/observability/profiling/compare"),
        ("post", "/api/v1/observability/profiling/continuous"),
        ("get", "/api/v1/observability/profiling/continuous"),
        ("delete", "/api/v1/observability/profiling/continuous/{service}"),
        ("post", "/v0/pipelines/{pipeline_name}/samply_profile"),
        ("get", "/v0/pipelines/{pipeline_name}/samply_profile"),
        ("get", "/api/v1/profiling/merge"),
        ("get", "/api/v1/profiling/series"),
        ("get", "/api/v1/profiling/labels"),
        ("get", "/api/v1/profiling/labels/{key}/values"),
        ("get", "/api/v1/profiling/services"),
        ("get", "/api/v1/profiling/functions/{name}/history"),
        ("post", "/ingest"),
        ("post", "/push.v1.PusherService/Push"),
        ("post", "/v1development/profiles"),
        ("post", "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"),
        ("post", "/querier.v1.QuerierService/ProfileTypes"),
        ("post", "/querier.v1.QuerierService/LabelNames"),
        ("post", "/querier.v1.QuerierService/LabelValues"),
        ("post", "/querier.v1.QuerierService/Series"),
        ("post", "/querier.v1.QuerierService/SelectMergeStacktraces"),
        ("post", "/querier.v1.QuerierService/SelectMergeProfile"),
        ("post", "/querier.v1.QuerierService/SelectMergeSpanProfile"),
        ("post", "/querier.v1.QuerierService/SelectSeries"),
        ("post", "/querier.v1.QuerierService/Diff"),
        ("get", "/pyroscope/render"),
        ("get", "/pyroscope/render-diff"),
        ("get", "/pyroscope/label-values"),
        ("put", "/api/v1/debuginfo/{buildId}"),
        ("get", "/buildid/{buildId}/{artifact}"),
        ("post", "/symbolicate/v5"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_owned(), p.to_owned()))
    .collect();
    assert_eq!(documented, expected);
    // Operation ids are unique (client generators need that); the seed's keep their names.
    let mut ids = std::collections::BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(ids.insert(id.to_owned(), format!("{method} {path}")).is_none(), "operationId {id} repeats");
        }
    }
    assert_eq!(ids["CreateBaseline"], "post /api/v1/profiling/baselines");
    assert_eq!(ids["DiffSessions"], "post /api/v1/profiling/diff");
    assert_eq!(ids["GetGoroutineAnalysis"], "get /api/v1/profiling/sessions/{id}/analysis");
    // Every error response names its error codes.
    const CODES: &[&str] = &[
        "InvalidProfile",
        "InvalidParameter",
        "InvalidProfileType",
        "InvalidRequest",
        "BadBody",
        "Unauthorized",
        "Forbidden",
        "InsufficientScope",
        "PayloadTooLarge",
        "InflatesTooLarge",
        "OverMemoryBudget",
        "MergeTooLarge",
        "TooManyPoints",
        "TooManySeries",
        "BodyTooSlow",
        "ProfileTypeMismatch",
        "Busy",
        "StorageUnavailable",
        "ProfileNotFound",
        "BaselineNotFound",
        "CaptureNotFound",
        "CaptureNotCompleted",
        "CaptureFailed",
        "AnalysisFailed",
        "UnknownService",
        "CaptureInProgress",
        "UnknownPipelineName",
        "NoSamplyProfile",
        "SamplyProfileInProgress",
        "SamplyNotInstalled",
        "PerfEventsNotAllowed",
        "ProcessNotFound",
        "OpenedProfileNotFound",
        "IncompatibleProfiles",
        "InvalidSampleIndex",
        "NoProfiles",
        "UnsupportedMediaType",
        "BlobNotFound",
        "EncryptedBlob",
        "Expired",
        "InvalidDeleteToken",
        "UnknownSchedule",
        "BuildIdMismatch",
        "NotAnObjectFile",
        "DebuginfoNotFound",
        "InvalidQuery",
        "NotImplemented",
    ];
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let says = response["description"].as_str().unwrap_or("");
                    let named = says.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| CODES.contains(&w));
                    assert!(named, "{method} {path} {status} names no error_code: {says:?}");
                }
            }
        }
    }
    validate_with_openapi_spec_validator(&doc);
    for (method, path) in &documented {
        let path = path.replace("{id}", "sess-0123456789abcdef0123456789abcdef").replace("{index}", "0");
        let url = format!("{}{path}", server.base);
        let response =
            http.request(method.to_uppercase().parse().unwrap(), url).bearer_auth(TOKEN).body("{}").send().unwrap();
        assert_ne!(response.status(), 405, "{method} {path}");
        let status = response.status();
        let body: Value = response.json().unwrap_or(Value::Null);
        assert_ne!(body["error_code"], "NotFound", "{method} {path} is documented but not routed ({status})");
        assert!(status != 500, "{method} {path}: {body}");
    }
    // Referenced schemas exist; the growth rate's default is documented.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "ErrorBody",
        "SessionResponse",
        "BaselineResponse",
        "CreateBaseline",
        "DiffRequest",
        "DiffResponse",
        "AnalysisResponse",
        "FunctionShare",
        "FunctionDelta",
        "GoroutineGroup",
        "StartCapture",
        "CaptureResponse",
        "BlobResponse",
    ] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    let rate = &schemas["AnalysisResponse"]["properties"]["goroutineGrowthRate"]["description"];
    assert!(rate.as_str().unwrap().contains("1.0 when the service has no goroutine baseline"), "{rate}");
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert_eq!(
        json_of(http.get(format!("{}/api/v2/nothing", server.base)).send().unwrap()).1["error_code"],
        "NotFound"
    );
    // A wrong method is JSON like every other error.
    let (status, body) = json_of(http.put(format!("{}/api/v1/profiles", server.base)).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (405, Some("MethodNotAllowed")));
    let (status, body) = json_of(http.patch(format!("{}/healthz", server.base)).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (405, Some("MethodNotAllowed")));
    // The reference page renders the document with assets served from this server.
    let page = http.get(format!("{}/api/docs", server.base)).send().unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().unwrap();
    for needle in ["/api/openapi.json", "/api-docs/swagger-ui-bundle.js", "/api-docs/swagger-ui.css"] {
        assert!(html.contains(needle), "/api/docs lacks {needle}");
    }
    assert!(!html.contains("://"), "/api/docs loads nothing from other origins");
}

/// openapi-spec-validator (PyPI), installed by scripts/ensure-tools.sh, accepts the document.
fn validate_with_openapi_spec_validator(doc: &Value) {
    let validator =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/openapi/bin/openapi-spec-validator");
    if !validator.is_file() {
        missing_prerequisite(&format!("{} is not installed (scripts/ensure-tools.sh)", validator.display()));
        return;
    }
    let file = temp_dir("openapi").join("openapi.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = std::process::Command::new(&validator).arg(&file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openapi-spec-validator refused the document: {said}");
    assert!(said.contains("OK"), "{said}");
}
