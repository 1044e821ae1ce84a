//! Capturing from a real Go service (backend/tests/goservice) over net/http/pprof: every
//! profile type, the stored sessions' contents, and the 400/404/409 and target-down
//! paths; the comparison of two captures against `go tool pprof -diff_base`; continuous
//! capture on two replicas; samply pipelines.

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use common::goservice::GoService;
use common::{
    fixtures, free_port, missing_prerequisite, read_pprof_top, stand_in, temp_dir, until, PprofTopRow, Server,
};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use stacklens_core::analysis::top::{top, TopOptions, TopReport};
use stacklens_core::analysis::Query;

/// How long a wait in these tests may take at most.
const PATIENCE: Duration = Duration::from_secs(60);

/// The Go service burns a core: one runs at a time in this test binary.
static CPU_TURN: Mutex<()> = Mutex::new(());

/// The Go service, with this binary's turn to run one.
struct TurnedGoService {
    service: GoService,
    /// Held until the service is gone (fields drop in order).
    _turn: MutexGuard<'static, ()>,
}

impl TurnedGoService {
    fn pid(&self) -> u32 {
        self.service.pid()
    }
}

/// Starts the Go service once no other runs, and waits until every busy function shows
/// in its profiles; `None` (skip) without Go, except under CI=true.
fn go_service(port: u16) -> Option<TurnedGoService> {
    let turn = CPU_TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    Some(TurnedGoService { service: GoService::start(port, &[])?, _turn: turn })
}

fn post(http: &Client, server: &Server, body: Value) -> (u16, Value) {
    let r = http.post(format!("{}/api/v1/observability/profiling/start", server.base)).json(&body).send().unwrap();
    (r.status().as_u16(), r.json().unwrap())
}

fn wait_done(http: &Client, server: &Server, id: &str) -> Value {
    until(&format!("capture {id} to finish"), PATIENCE, || {
        let url = format!("{}/api/v1/observability/profiling/{id}", server.base);
        let v: Value = http.get(url).send().unwrap().json().unwrap();
        (v["status"] != "running").then_some(v)
    })
}

/// The `top` report of a stored session in a sample type ("": the profile's default).
fn report_of(http: &Client, server: &Server, session: &str, sample_index: &str) -> TopReport {
    let raw = http.get(format!("{}/api/v1/profiles/{session}/raw", server.base)).send().unwrap().bytes().unwrap();
    let profile = stacklens_core::parse(&raw).unwrap();
    top(&Query::of_sample(sample_index).prepare(&profile).unwrap(), &TopOptions::default()).unwrap()
}

/// Cumulative value of `function` in the default sample type of a stored session.
fn cum_of(http: &Client, server: &Server, session: &str, function: &str) -> i64 {
    report_of(http, server, session, "").functions.iter().find(|f| f.name == function).map_or(0, |f| f.cum)
}

fn time_of(value: &Value) -> std::time::SystemTime {
    humantime::parse_rfc3339(value.as_str().unwrap_or_else(|| panic!("not a time: {value}"))).unwrap()
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
        assert_eq!(done["flameGraphUrl"], format!("{}/#/s/{session}", server.base));
        assert!(time_of(&done["completedAt"]) >= time_of(&done["startedAt"]), "{kind}: {done}");
        let record: Value =
            http.get(format!("{}/api/v1/profiles/{session}", server.base)).send().unwrap().json().unwrap();
        assert_eq!(
            (&record["service"], &record["profileType"], &record["labels"]["env"], &record["labels"]["capture"]),
            (&json!("shop"), &json!(kind), &json!("test"), &done["id"])
        );
        // The capture's summary is the stored profile's: its sample count and its top
        // function by self value, with that value's share of the total.
        assert_eq!(done["sampleCount"], record["sampleCount"], "{kind}");
        assert!(done["sampleCount"].as_i64().unwrap() > 0, "{kind}: {done}");
        // Captures are summarised in the sample type their kind is read by.
        let report = report_of(&http, &server, session, if kind == "alloc" { "alloc_space" } else { "" });
        let hottest = &report.functions[0];
        let first = &done["topFunctions"][0];
        assert_eq!(first["funcName"], json!(hottest.name), "{kind}: {done}");
        let self_pct = hottest.flat as f64 * 100.0 / report.total as f64;
        // (rounded to two decimals)
        assert!((first["selfPct"].as_f64().unwrap() - self_pct).abs() <= 0.005 + 1e-9, "{kind}: {first} vs {self_pct}");
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
            // The pprof form (debug=0) is stored too, with the same goroutines.
            let pprof = done["goroutinePprofSessionId"].as_str().unwrap();
            let record: Value =
                http.get(format!("{}/api/v1/profiles/{pprof}", server.base)).send().unwrap().json().unwrap();
            assert_eq!(record["sampleTypes"], json!(["goroutine"]));
            assert_eq!(cum_of(&http, &server, pprof, busy), 25, "25 goroutines wait in {busy}");
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
    // Each point's total is its stored profile's cpu time.
    let totals: Vec<i64> = points
        .iter()
        .map(|p| {
            assert_eq!((&p["status"], &p["unit"]), (&json!("completed"), &json!("nanoseconds")));
            let report = report_of(&http, &server, p["sessionId"].as_str().unwrap(), "");
            assert_eq!(report.sample_type, "cpu");
            assert_eq!(p["total"], json!(report.total), "{p}");
            report.total
        })
        .collect();
    assert!(totals[0] > 0 && totals[1] > 0, "{totals:?}");
    let second_start = points[1]["startedAt"].as_str().unwrap();
    assert_eq!(history(&format!("&from={second_start}"))["captures"].as_array().unwrap().len(), 1);
    assert_eq!(history("&to=2000-01-01T00:00:00Z")["captures"], json!([]));
    let (status, c) = compare(&captured["cpu"], first["id"].as_str().unwrap());
    assert_eq!(status, 200, "{c}");
    assert_eq!((&c["baseProfile"]["id"], &c["comparisonProfile"]["id"]), (&json!(captured["cpu"]), &first["id"]));
    // (after − before) / before of the two totals listed above; the functions are
    // checked against pprof in compare_of_two_heap_captures_matches_pprof_diff_base.
    let delta = (totals[1] - totals[0]) as f64 * 100.0 / totals[0] as f64;
    assert!((c["overallDelta"].as_f64().unwrap() - delta).abs() < 1e-9, "{c} vs {delta}");
    assert_eq!(
        (&c["sampleType"], &c["unit"], &c["noiseThresholdPct"]),
        (&json!("cpu"), &json!("nanoseconds"), &json!(1.0))
    );
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

/// Two replicas run one stored schedule: each slot is captured once, old captures are
/// deleted after the retention, the schedule outlives the replica it was posted to,
/// and disabling it stops captures.
#[test]
fn continuous_capture_across_replicas_with_retention() {
    let port = free_port();
    let Some(_go) = go_service(port) else { return };
    let targets = temp_dir("targets").join("targets.toml");
    let url = format!("http://127.0.0.1:{port}/debug/pprof");
    // "probe" is the same service under another name: its schedule shows that ticks ran.
    std::fs::write(
        &targets,
        format!(
            "[[target]]\nservice = \"shop\"\nurl = \"{url}\"\n\n[[target]]\nservice = \"probe\"\nurl = \"{url}\"\n"
        ),
    )
    .unwrap();
    let store = format!("file://{}", temp_dir("continuous").display());
    let args = ["--targets", targets.to_str().unwrap(), "--schedule-tick-ms", "100"];
    let (one, two) = (Server::start(&store, &args, &[]), Server::start(&store, &args, &[]));
    let http = Client::new();
    let schedule = |server: &Server, body: Value| {
        let r =
            http.post(format!("{}/api/v1/observability/profiling/continuous", server.base)).json(&body).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let history = |service: &str, kind: &str| -> Vec<Value> {
        let url = format!("{}/api/v1/observability/profiling/history?service={service}&profileType={kind}", two.base);
        http.get(url).send().unwrap().json::<Value>().unwrap()["captures"].as_array().unwrap().clone()
    };
    let slots = |captures: &[Value]| -> Vec<u64> { captures.iter().map(|c| c["slot"].as_u64().unwrap()).collect() };
    let (status, stored) = schedule(
        &one,
        json!({"service": "shop", "profileTypes": ["goroutine", "memory"], "sampleRate": 1, "retentionDays": 4.0 / 86400.0, "enabled": true, "intervalSeconds": 1}),
    );
    assert_eq!(status, 201, "{stored}");
    assert_eq!((&stored["profileTypes"], &stored["intervalSeconds"]), (&json!(["goroutine", "memory"]), &json!(1)));

    let early = until("two completed goroutine captures", PATIENCE, || {
        let h = history("shop", "goroutine");
        (h.iter().filter(|c| c["status"] == "completed").count() >= 2).then_some(h)
    });
    let early_last = *slots(&early).iter().max().unwrap();
    // The replica the schedule was posted to goes away; the other keeps capturing, and
    // every early capture expires 4 s after it started.
    one.kill_9();
    let gone = |capture: &Value| {
        let url = format!("{}/api/v1/observability/profiling/{}", two.base, capture["id"].as_str().unwrap());
        http.get(url).send().unwrap().status() == 404
    };
    // Expired: unlisted, then (the index goes first) its record answers 404.
    let later = until("later captures, and the early ones to expire", PATIENCE, || {
        let h = history("shop", "goroutine");
        let expired = early.iter().all(|e| h.iter().all(|c| c["id"] != e["id"]) && gone(e));
        let went_on = h.iter().any(|c| c["status"] == "completed" && c["slot"].as_u64().unwrap() > early_last);
        (expired && went_on).then_some(h)
    });
    for kind in ["goroutine", "memory"] {
        let captured = if kind == "goroutine" { later.clone() } else { history("shop", kind) };
        let unique: std::collections::BTreeSet<u64> = slots(&captured).into_iter().collect();
        assert_eq!(unique.len(), captured.len(), "{kind}: each slot captured once: {captured:?}");
        let failed: Vec<&Value> = captured.iter().filter(|c| c["status"] == "failed").collect();
        assert_eq!(failed, Vec::<&Value>::new(), "{kind}");
    }

    // Disabled: no new slots. A tick that starts a probe capture read the schedules
    // after shop's was disabled, and the ticks before it have recorded what they began.
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": ["goroutine"], "retentionDays": 1, "enabled": false}));
    assert_eq!(status, 201);
    let (status, _) = schedule(
        &two,
        json!({"service": "probe", "profileTypes": ["goroutine"], "retentionDays": 1, "enabled": true, "intervalSeconds": 1}),
    );
    assert_eq!(status, 201);
    let probe_first = until("a probe capture", PATIENCE, || slots(&history("probe", "goroutine")).into_iter().min());
    let disabled_at = (slots(&history("shop", "goroutine")), slots(&history("shop", "memory")));
    until("two more probe slots", PATIENCE, || {
        slots(&history("probe", "goroutine")).iter().any(|&s| s >= probe_first + 2).then_some(())
    });
    let now = (slots(&history("shop", "goroutine")), slots(&history("shop", "memory")));
    assert_eq!(now, disabled_at, "a disabled schedule captures nothing");

    let (status, e) =
        schedule(&two, json!({"service": "nope", "profileTypes": ["cpu"], "retentionDays": 1, "enabled": true}));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownService")));
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": [], "retentionDays": 1, "enabled": true}));
    assert_eq!(status, 400);
    let (status, _) =
        schedule(&two, json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": 0, "enabled": true}));
    assert_eq!(status, 400);
}

/// The rows of a `go tool pprof -top` output and the node count of its "Showing top N
/// nodes out of M" line.
fn pprof_top(path: &Path) -> (Vec<PprofTopRow>, usize) {
    let top = read_pprof_top(&std::fs::read_to_string(path).unwrap());
    let nodes = top.shown_of.unwrap_or_else(|| panic!("no node count in {}", path.display()));
    (top.rows, nodes)
}

/// Whether `bytes` is what pprof printed as `shown` (`5.03MB`, `-0.29MB`, `1MB`, `0`):
/// pprof rounds to two decimals of its unit (1024-based), so within half of 0.01.
fn shows(bytes: i64, shown: &str) -> bool {
    if shown == "0" {
        return bytes == 0;
    }
    let split = shown.find(|c: char| c.is_ascii_alphabetic()).unwrap_or_else(|| panic!("no unit in {shown}"));
    let (number, unit) = shown.split_at(split);
    let factor = match unit {
        "B" => 1.0,
        "kB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        _ => panic!("unit {unit} in {shown}"),
    };
    let printed: f64 = number.parse().unwrap();
    (bytes as f64 / factor - printed).abs() <= 0.005 + 1e-9
}

/// The compare endpoint over two captures of a stand-in target that serves
/// go/base/heap.pb.gz, then go/compare/heap.pb.gz: each function's before, after and
/// delta are pprof's (`-top` of each, and `-top -diff_base`), the overall delta is the
/// totals' from SOURCES.md.
#[test]
fn compare_of_two_heap_captures_matches_pprof_diff_base() {
    let Some(fx) = fixtures() else { return };
    let read = |f: &str| std::fs::read(fx.join(f)).unwrap();
    let heaps = Arc::new(Mutex::new(VecDeque::from([read("go/base/heap.pb.gz"), read("go/compare/heap.pb.gz")])));
    let serving = heaps.clone();
    let port =
        stand_in(move |path| if path == "/debug/pprof/heap" { serving.lock().unwrap().pop_front() } else { None });
    let targets = temp_dir("compare-targets").join("targets.toml");
    std::fs::write(
        &targets,
        format!("[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{port}/debug/pprof\"\n"),
    )
    .unwrap();
    let store = format!("file://{}", temp_dir("compare").display());
    let server = Server::start(&store, &["--targets", targets.to_str().unwrap()], &[]);
    let http = Client::new();
    let mut captured = Vec::new();
    for _ in 0..2 {
        let (status, started) = post(&http, &server, json!({"service": "shop", "profileType": "memory"}));
        assert_eq!(status, 202, "{started}");
        let done = wait_done(&http, &server, started["id"].as_str().unwrap());
        assert_eq!(done["status"], "completed", "{done}");
        captured.push(done);
    }
    assert!(heaps.lock().unwrap().is_empty(), "both heaps were fetched");
    let id = |c: &Value| c["id"].as_str().unwrap().to_owned();
    let url = format!(
        "{}/api/v1/observability/profiling/compare?baseProfileId={}&comparisonProfileId={}&noiseThresholdPct=0",
        server.base,
        id(&captured[0]),
        id(&captured[1])
    );
    let r = http.get(url).send().unwrap();
    assert_eq!(r.status(), 200);
    let c: Value = r.json().unwrap();
    // sampleCount is the first sample type's sum (alloc_objects): SOURCES.md's 3330820
    // and 5048941.
    for (side, capture, samples) in
        [("baseProfile", &captured[0], 3_330_820), ("comparisonProfile", &captured[1], 5_048_941)]
    {
        assert_eq!(
            (&c[side]["id"], &c[side]["sessionId"], &c[side]["sampleCount"]),
            (&capture["id"], &capture["sessionId"], &json!(samples)),
            "{side}"
        );
    }
    assert_eq!((&c["sampleType"], &c["unit"]), (&json!("inuse_space"), &json!("bytes")));
    // inuse_space sums (SOURCES.md): base 7617933, compare 14530408 bytes.
    let overall = (14_530_408.0 - 7_617_933.0) * 100.0 / 7_617_933.0;
    assert!((c["overallDelta"].as_f64().unwrap() - overall).abs() < 1e-9, "{}", c["overallDelta"]);

    // With no noise threshold every changed function is a regression (it grew) or an
    // improvement (it shrank): pprof's 40 nodes of the diff.
    let listed = |list: &str| -> Vec<Value> { c[list].as_array().unwrap().clone() };
    let (regressions, improvements) = (listed("regressions"), listed("improvements"));
    let (diff_rows, diff_nodes) = pprof_top(&fx.join("go/compare/heap.inuse_space.diff-vs-base.pprof-top.txt"));
    assert_eq!((diff_nodes, regressions.len() + improvements.len()), (40, 40));
    let (base_rows, _) = pprof_top(&fx.join("go/base/heap.inuse_space.pprof-top.txt"));
    let (compare_rows, _) = pprof_top(&fx.join("go/compare/heap.inuse_space.pprof-top.txt"));
    let value = |f: &Value, key: &str| f[key].as_i64().unwrap_or_else(|| panic!("{key} in {f}"));
    let (mut befores, mut afters) = (0, 0);
    for row in &diff_rows {
        let grew = !row.flat.starts_with('-') && row.flat != "0" || !row.cum.starts_with('-') && row.cum != "0";
        let list = if grew { &regressions } else { &improvements };
        let f = list.iter().find(|f| f["name"] == row.name.as_str());
        let f = f.unwrap_or_else(|| {
            panic!("{} is not among the {}", row.name, if grew { "regressions" } else { "improvements" })
        });
        assert!(
            shows(value(f, "flatDelta"), &row.flat) && shows(value(f, "cumDelta"), &row.cum),
            "{f} vs pprof {} {}",
            row.flat,
            row.cum
        );
        // Before and after, where the function is among that profile's own rows.
        let check = |rows: &[PprofTopRow], keys: [&str; 2], side: &str, count: &mut usize| {
            if let Some(r) = rows.iter().find(|r| r.name == row.name) {
                let ok = shows(value(f, keys[0]), &r.flat) && shows(value(f, keys[1]), &r.cum);
                assert!(ok, "{f} vs pprof's {side} {} {}", r.flat, r.cum);
                *count += 1;
            }
        };
        check(&base_rows, ["baseFlat", "baseCum"], "base", &mut befores);
        check(&compare_rows, ["compareFlat", "compareCum"], "compare", &mut afters);
    }
    // The diff's 20 rows; 13 of them are among the base's own top 20 rows, 8 among the
    // compare's (counted with grep over the three files).
    assert_eq!((diff_rows.len(), befores, afters), (20, 13, 8));
}

/// samply from the same places the server looks.
fn samply() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let found = std::env::var_os("STACKLENS_SAMPLY")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).map(|d| d.join("samply")).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .chain([home.join(".cargo/bin/samply")])
        .find(|p| p.is_file());
    if found.is_none() {
        missing_prerequisite("samply is not installed (scripts/ensure-tools.sh installs it)");
    }
    found
}

/// samply refuses to run above perf_event_paranoid 1: as root the test lowers it for its
/// run, and the guard puts the host's level back when dropped. `None` when the kernel
/// forbids perf events (a missing prerequisite).
fn perf_events_allowed() -> Option<PerfParanoid> {
    let level = std::fs::read_to_string(PerfParanoid::PATH).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(2);
    if level <= 1 {
        return Some(PerfParanoid { restore: None });
    }
    if std::fs::write(PerfParanoid::PATH, "1").is_ok() {
        eprintln!("note: kernel.perf_event_paranoid lowered from {level} to 1 for this test; restored after it");
        return Some(PerfParanoid { restore: Some(level) });
    }
    missing_prerequisite(&format!(
        "kernel.perf_event_paranoid is {level} and cannot be lowered here: the kernel forbids the perf events samply needs"
    ));
    None
}

/// Restores `kernel.perf_event_paranoid` to the level found before the test.
struct PerfParanoid {
    restore: Option<i32>,
}

impl PerfParanoid {
    const PATH: &str = "/proc/sys/kernel/perf_event_paranoid";
}

impl Drop for PerfParanoid {
    fn drop(&mut self) {
        if let Some(level) = self.restore {
            if let Err(e) = std::fs::write(Self::PATH, level.to_string()) {
                eprintln!("could not restore kernel.perf_event_paranoid to {level}: {e}");
            }
        }
    }
}

#[test]
fn samply_profiles_a_busy_process() {
    let Some(_samply) = samply() else { return };
    let Some(_paranoid) = perf_events_allowed() else { return };
    let port = free_port();
    let Some(go) = go_service(port) else { return };
    let dir = temp_dir("pipeline");
    // The busy process is the second of the pipeline's processes: ordinal 1.
    let pid_file = dir.join("engine.pid");
    std::fs::write(&pid_file, format!("{}\n{}\n", exited_pid(), go.pid())).unwrap();
    let targets = dir.join("targets.toml");
    std::fs::write(&targets, format!("[[pipeline]]\nname = \"engine\"\npidFile = \"{}\"\n", pid_file.display()))
        .unwrap();
    let store = format!("file://{}", temp_dir("samply-store").display());
    let server = Server::start(&store, &["--targets", targets.to_str().unwrap()], &[]);
    let http = Client::new();
    let url = |name: &str, query: &str| format!("{}/v0/pipelines/{name}/samply_profile{query}", server.base);
    let answer = |r: reqwest::blocking::Response| (r.status().as_u16(), r.json::<Value>().unwrap());

    let (status, body) = answer(http.post(url("nope", "")).send().unwrap());
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"message": "Unknown pipeline name 'nope'", "error_code": "UnknownPipelineName", "details": {"pipeline_name": "nope"}})
    );
    let (status, body) = answer(http.get(url("engine", "")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (404, Some("NoSamplyProfile")));

    let (status, started) = answer(http.post(url("engine", "?duration_secs=2&ordinal=1")).send().unwrap());
    assert_eq!(status, 202, "{started}");
    assert_eq!(
        (&started["status"], &started["pid"], &started["ordinal"]),
        (&json!("running"), &json!(go.pid()), &json!(1))
    );
    let (status, body) = answer(http.post(url("engine", "?duration_secs=2&ordinal=1")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (409, Some("SamplyProfileInProgress")));

    let done = until("samply to finish", Duration::from_secs(90), || {
        let (_, latest) = answer(http.get(url("engine", "")).send().unwrap());
        (latest["status"] != "running").then_some(latest)
    });
    if done["status"] == "failed" && done["error"].as_str().is_some_and(|e| e.contains("perf_event_open")) {
        missing_prerequisite(&format!("the kernel refused perf_event_open: {}", done["error"]));
        return;
    }
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["id"], started["id"]);
    let session = done["session_id"].as_str().unwrap();
    assert_eq!(done["flame_graph_url"], format!("{}/#/s/{session}", server.base));
    // The busy process's hot function, by name (symbolicated from samply's sidecar).
    assert!(cum_of(&http, &server, session, "main.burnCPU") > 0, "main.burnCPU is not in the recorded profile");
    let record: Value = http.get(format!("{}/api/v1/profiles/{session}", server.base)).send().unwrap().json().unwrap();
    assert_eq!(
        (&record["profileType"], &record["labels"]["pipeline"], &record["labels"]["ordinal"]),
        (&json!("cpu"), &json!("engine"), &json!("1"))
    );

    let (status, body) = answer(http.post(url("engine", "?ordinal=3")).send().unwrap());
    assert_eq!((status, body["details"]["field"].as_str()), (400, Some("ordinal")));
    let pid = go.pid();
    drop(go);
    let (status, body) = answer(http.post(url("engine", "?duration_secs=1&ordinal=1")).send().unwrap());
    assert_eq!((status, body["error_code"].as_str()), (503, Some("ProcessNotFound")));
    assert_eq!(body["message"], format!("process {pid} of pipeline 'engine' is not running"));
}

/// The id of a process that has exited.
fn exited_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Without samply, a samply profile is refused with SamplyNotInstalled. With a pid file
/// of several processes, `ordinal` picks the line: 0 the first, 1 the second (shown by
/// the process each names when neither runs), 2 is out of range. Neither server runs
/// samply.
#[test]
fn samply_not_installed_and_pid_file_ordinals() {
    let dir = temp_dir("pipelines");
    let (first, second) = (exited_pid(), exited_pid());
    let pid_file = dir.join("engine.pid");
    std::fs::write(&pid_file, format!("{first}\n{second}\n")).unwrap();
    let targets = dir.join("targets.toml");
    std::fs::write(
        &targets,
        format!(
            "[[pipeline]]\nname = \"engine\"\npidFile = \"{}\"\n\n[[pipeline]]\nname = \"live\"\npid = {}\n",
            pid_file.display(),
            std::process::id()
        ),
    )
    .unwrap();
    let http = Client::new();
    let start = |server: &Server, pipeline: &str, query: &str| {
        let r = http.post(format!("{}/v0/pipelines/{pipeline}/samply_profile{query}", server.base)).send().unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let args = ["--targets", targets.to_str().unwrap()];

    // samply nowhere (STACKLENS_SAMPLY names where it is, and nothing is there).
    let absent = dir.join("no-samply-here");
    let without = Server::start("memory://", &args, &[("STACKLENS_SAMPLY", absent.to_str().unwrap())]);
    let not_installed = |pipeline: &str| {
        json!({"message": "samply is not installed (cargo install samply)", "error_code": "SamplyNotInstalled",
               "details": {"pipeline_name": pipeline}})
    };
    assert_eq!(start(&without, "live", "?duration_secs=1"), (503, not_installed("live")));
    assert_eq!(start(&without, "engine", "?ordinal=1"), (503, not_installed("engine")));

    // samply "installed" (a file where it is looked for; never run: no process is alive).
    let stand_in_samply = dir.join("samply");
    std::fs::write(&stand_in_samply, "#!/bin/sh\nexit 1\n").unwrap();
    let with = Server::start("memory://", &args, &[("STACKLENS_SAMPLY", stand_in_samply.to_str().unwrap())]);
    let gone = |pid: u32| {
        json!({"message": format!("process {pid} of pipeline 'engine' is not running"), "error_code": "ProcessNotFound",
               "details": {"pipeline_name": "engine"}})
    };
    assert_eq!(start(&with, "engine", ""), (503, gone(first)));
    assert_eq!(start(&with, "engine", "?ordinal=0"), (503, gone(first)));
    assert_eq!(start(&with, "engine", "?ordinal=1"), (503, gone(second)));
    let (status, body) = start(&with, "engine", "?ordinal=2");
    assert_eq!(
        (status, &body["message"], &body["details"]["field"]),
        (400, &json!("ordinal 2 is out of range: the pipeline has 2 processes"), &json!("ordinal"))
    );
    let latest = http.get(format!("{}/v0/pipelines/engine/samply_profile", with.base)).send().unwrap();
    assert_eq!(
        (latest.status().as_u16(), latest.json::<Value>().unwrap()["error_code"].clone()),
        (404, json!("NoSamplyProfile"))
    );
}
