//! Pyroscope's query API read by real clients: the Perses Pyroscope plugin's client
//! (npm `@perses-dev/pyroscope-plugin`) and a Connect client (`@connectrpc/connect-node`,
//! JSON and binary) over the `querier.v1` protos, compiled by `grpc_tools.protoc`
//! (PyPI `grpcio-tools`, in `.tools/otlp`), both run by backend/tests/querier/client.mjs
//! against a real `stacklens serve`. Three Go CPU profiles of one service and one of
//! another are pushed, with a heap profile; every answer is checked against
//! `go tool pprof -top` of the same files merged: the flame graph's total, each name's
//! self and total, and the series' sums per step. Span and trace selectors are checked
//! on an OTLP profile with links, against `go tool pprof -tagfocus`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use common::{fixtures, go, missing_prerequisite, pprof_top_merged, read_pprof_top, temp_dir, Server};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use stacklens_core::layout::flamebearer::Flamebearer;

const TENANT: &str = "acme";
const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
const INUSE: &str = "memory:inuse_space:bytes:space:bytes";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pushed profiles: service, labels, fixture file (under the fixtures' `go/`),
/// seconds after the start of the data.
const PUSHED: [(&str, &str, &str, u64); 5] = [
    ("checkout.cpu", "region=eu", "base/cpu.pb.gz", 10),
    ("checkout.cpu", "region=us", "compare/cpu.pb.gz", 20),
    ("search.cpu", "region=eu", "compare/cpu.pb.gz", 30),
    ("checkout.cpu", "region=eu", "base/cpu.pb.gz", 40),
    ("checkout.inuse_space", "region=eu", "base/heap.pb.gz", 10),
];

struct Setup {
    server: Server,
    dir: PathBuf,
    go_dir: PathBuf,
    go: PathBuf,
    /// When the data starts, in seconds since the epoch (half an hour ago).
    t0: u64,
}

fn setup() -> Option<Setup> {
    let fixtures = fixtures()?;
    let go = go()?.to_owned();
    let dir = temp_dir("querier");
    let server = Server::start(&format!("file://{}", dir.join("store").display()), &[], &[]);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let t0 = now - 1800;
    let client = Client::new();
    for (name, labels, file, offset) in PUSHED {
        let bytes = std::fs::read(fixtures.join("go").join(file)).unwrap();
        let params = [
            ("name", format!("{name}{{{labels}}}")),
            ("from", (t0 + offset).to_string()),
            ("until", (t0 + offset + 10).to_string()),
            ("format", "pprof".into()),
        ];
        let response = client
            .post(with_query(&server.base, "/ingest", &params))
            .header("X-Scope-OrgID", TENANT)
            .body(bytes)
            .send()
            .unwrap();
        assert_eq!(response.status(), 200, "{name} {file}: {}", response.text().unwrap());
    }
    Some(Setup { server, dir, go_dir: fixtures.join("go"), go, t0 })
}

/// The querier.v1 protos as a descriptor set, compiled by protoc from PyPI's grpcio-tools.
fn descriptors(dir: &Path) -> Option<PathBuf> {
    let python = repo().join(".tools/otlp/bin/python");
    if !python.is_file() {
        missing_prerequisite(&format!("{} (grpcio-tools, from scripts/ensure-tools.sh)", python.display()));
        return None;
    }
    let out = dir.join("querier.binpb");
    let protos = repo().join("backend/tests/querier/proto");
    let status = Command::new(python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&protos)
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg("querier/v1/querier.proto")
        .status()
        .unwrap();
    assert!(status.success(), "protoc failed on {}", protos.display());
    Some(out)
}

/// Runs the clients on `calls`; one result per call (`{ok}` or `{error: {code, message}}`).
fn run_clients(setup: &Setup, tenant: &str, calls: Vec<Value>) -> Option<Vec<Value>> {
    for package in ["@perses-dev/pyroscope-plugin", "@connectrpc/connect-node", "@bufbuild/protobuf"] {
        if !repo().join("node_modules").join(package).is_dir() {
            missing_prerequisite(&format!("npm package {package} (npm ci)"));
            return None;
        }
    }
    let plan = json!({
        "base": setup.server.base,
        "tenant": tenant,
        "descriptors": descriptors(&setup.dir)?,
        "calls": calls,
    });
    let mut child = Command::new("node")
        .arg(repo().join("backend/tests/querier/client.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs the clients");
    serde_json::to_writer(child.stdin.take().unwrap(), &plan).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "client.mjs failed: {}", String::from_utf8_lossy(&out.stderr));
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results.len(), plan["calls"].as_array().unwrap().len());
    Some(results)
}

fn ok(result: &Value) -> &Value {
    result.get("ok").unwrap_or_else(|| panic!("the call failed: {result}"))
}

/// A number of a JSON answer: proto3 JSON writes 64-bit integers as strings.
fn int(v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or_else(|| panic!("{v} is not an integer"))
}

/// A flame graph from an answer: flamebearer JSON (`levels` of numbers) or a Connect
/// `FlameGraph`/`FlameGraphDiff` (`levels` of `{values}`).
fn flame(names: &Value, levels: &Value, total: &Value, ticks: Option<(i64, i64)>) -> Flamebearer {
    let levels = levels
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.get("values").unwrap_or(l).as_array().map_or(Vec::new(), |v| v.iter().map(int).collect()))
        .collect();
    let names = names.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
    Flamebearer { names, levels, num_ticks: int(total), max_self: 0, ticks }
}

/// `go tool pprof -top` of the files merged, exactly (`-unit` of the type's smallest
/// unit): the total and each function's flat and cum, by name.
fn pprof_rows(setup: &Setup, files: &[&str], sample_index: &str, unit: &str) -> (i64, BTreeMap<String, (i64, i64)>) {
    let paths: Vec<&Path> = files.iter().map(Path::new).collect();
    let flags = [
        "-nodecount=1000000",
        "-nodefraction=0",
        "-edgefraction=0",
        &format!("-unit={unit}"),
        &format!("-sample_index={sample_index}"),
    ];
    let top = read_pprof_top(&pprof_top_merged(&setup.go, &setup.go_dir, &paths, &flags));
    let value = |text: &str| -> i64 {
        text.trim_end_matches(|c: char| c.is_ascii_alphabetic()).parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    let rows = top.rows.iter().map(|r| (r.name.clone(), (value(&r.flat), value(&r.cum)))).collect();
    (value(&top.total), rows)
}

/// Checks a flame graph (of `side`) against pprof's numbers for `files`: the total and
/// every function's self and total.
fn check_flame(what: &str, graph: &Flamebearer, side: usize, expected: &(i64, BTreeMap<String, (i64, i64)>)) {
    let (total, rows) = expected;
    let got = graph.totals_by_name(side);
    assert_eq!(got.get("total").map(|r| r.1), Some(*total), "{what}: the root's total");
    for (name, &(flat, cum)) in rows {
        assert_eq!(got.get(name), Some(&(flat, cum)), "{what}: {name}'s self and total");
    }
    let extra: Vec<&String> = got.keys().filter(|n| *n != "total" && !rows.contains_key(*n)).collect();
    let zero: Vec<&&String> = extra.iter().filter(|n| got[**n] != (0, 0)).collect();
    assert!(zero.is_empty(), "{what}: names pprof does not show: {zero:?}");
}

#[test]
fn perses_and_connect_clients_read_what_pprof_reads() {
    let Some(setup) = setup() else { return };
    let (t0, base, compare, heap) = (setup.t0, "base/cpu.pb.gz", "compare/cpu.pb.gz", "base/heap.pb.gz");
    let (start, end) = ((t0 - 60) * 1000, (t0 + 600) * 1000);
    let select = |selector: &str, extra: Value| {
        let mut request = json!({ "profileTypeID": CPU, "labelSelector": selector, "start": start.to_string(), "end": end.to_string(), "maxNodes": "100000" });
        request.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        request
    };
    let series_of = |selector: &str, extra: Value| {
        let mut request = select(selector, extra);
        request.as_object_mut().unwrap().remove("maxNodes");
        request
    };
    let connect = |method: &str, request: Value, binary: bool| json!({ "client": "connect", "method": method, "request": request, "binary": binary });
    let perses =
        |f: &str, params: Value, body: Value| json!({ "client": "perses", "fn": f, "params": params, "body": body });
    let render = |query: &str| {
        perses(
            "searchProfiles",
            json!({ "query": query, "from": t0 - 60, "until": t0 + 600, "maxNodes": 100000 }),
            Value::Null,
        )
    };
    let calls = vec![
        perses("searchProfileTypes", json!({}), json!({})),
        perses("searchLabelNames", json!({}), json!({})),
        perses("searchLabelValues", json!({}), json!({ "name": "region" })),
        perses("searchServices", json!({}), Value::Null),
        render(&format!("{CPU}{{service_name=\"checkout\"}}")),
        render(&format!("{CPU}{{service_name=~\"check.*|search\",region=\"eu\"}}")),
        connect("ProfileTypes", json!({ "start": start.to_string(), "end": end.to_string() }), false),
        connect("SelectMergeStacktraces", select("{region!=\"eu\"}", json!({})), true),
        connect("SelectMergeProfile", select("{service_name=\"checkout\"}", json!({})), true),
        connect("SelectSeries", series_of("{}", json!({ "step": 10, "groupBy": ["service_name"] })), false),
        connect(
            "SelectSeries",
            series_of(
                "{service_name=\"checkout\"}",
                json!({ "step": 60, "aggregation": "TIME_SERIES_AGGREGATION_TYPE_AVERAGE" }),
            ),
            true,
        ),
        connect(
            "Diff",
            json!({ "left": select("{service_name=\"checkout\",region=\"eu\"}", json!({})), "right": select("{region=\"us\"}", json!({})) }),
            true,
        ),
        connect(
            "LabelNames",
            json!({ "matchers": ["{service_name=\"search\"}"], "start": start.to_string(), "end": end.to_string() }),
            false,
        ),
        connect(
            "LabelValues",
            json!({ "name": "region", "matchers": ["{service_name=\"search\"}"], "start": start.to_string(), "end": end.to_string() }),
            true,
        ),
        connect(
            "Series",
            json!({ "matchers": [format!("{{service_name=\"checkout\",__profile_type__=\"{CPU}\"}}")], "labelNames": ["region", "service_name"], "start": start.to_string(), "end": end.to_string() }),
            false,
        ),
        connect(
            "SelectMergeStacktraces",
            select("{}", json!({ "format": "PROFILE_FORMAT_DOT", "maxNodes": "20" })),
            false,
        ),
        connect(
            "SelectMergeStacktraces",
            json!({ "profileTypeID": INUSE, "labelSelector": "{service_name=\"checkout\"}", "start": start.to_string(), "end": end.to_string(), "maxNodes": "100000" }),
            false,
        ),
        connect("SelectMergeStacktraces", select("{region=eu}", json!({})), true),
        connect("SelectMergeStacktraces", select("{}", json!({ "format": "PROFILE_FORMAT_TREE" })), false),
        connect(
            "SelectMergeStacktraces",
            json!({ "profileTypeID": "process_cpu", "start": start.to_string(), "end": end.to_string() }),
            true,
        ),
    ];
    let Some(r) = run_clients(&setup, TENANT, calls) else { return };

    // Perses: the query editor's lists.
    let types: Vec<&str> =
        ok(&r[0])["profileTypes"].as_array().unwrap().iter().map(|t| t["ID"].as_str().unwrap()).collect();
    for id in [CPU, "process_cpu:samples:count:cpu:nanoseconds", INUSE, "memory:alloc_space:bytes:space:bytes"] {
        assert!(types.contains(&id), "{id} in {types:?}");
    }
    let label_names = ok(&r[1])["names"].as_array().unwrap();
    assert!(label_names.contains(&json!("region")) && label_names.contains(&json!("service_name")), "{label_names:?}");
    assert_eq!(ok(&r[2])["names"], json!(["eu", "us"]));
    assert_eq!(ok(&r[3])["names"], json!(["checkout", "search"]));

    // Perses' render: the flame graph of checkout's three CPU profiles is pprof's merge of them.
    let checkout = pprof_rows(&setup, &[base, compare, base], "cpu", "ns");
    let rendered = ok(&r[4]);
    let fb = &rendered["flamebearer"];
    assert_eq!(int(&fb["numTicks"]), checkout.0);
    check_flame("render checkout", &flame(&fb["names"], &fb["levels"], &fb["numTicks"], None), 0, &checkout);
    assert_eq!(rendered["metadata"]["name"], "cpu");
    // Its timeline sums to the flame graph's total, each step to the profiles in it.
    let timeline = &rendered["timeline"];
    let samples: Vec<i64> = timeline["samples"].as_array().unwrap().iter().map(int).collect();
    assert_eq!(samples.iter().sum::<i64>(), checkout.0, "{timeline}");
    assert_eq!(int(&timeline["durationDelta"]), 15);
    let (base_total, compare_total) =
        (pprof_rows(&setup, &[base], "cpu", "ns").0, pprof_rows(&setup, &[compare], "cpu", "ns").0);
    let step_of = |offset: u64| ((t0 + offset) - int(&timeline["startTime"]) as u64) as usize / 15;
    let mut expected = vec![0; samples.len()];
    for (offset, total) in [(10, base_total), (20, compare_total), (40, base_total)] {
        expected[step_of(offset)] += total;
    }
    assert_eq!(samples, expected);

    // Regular expressions over services and labels: checkout's and search's eu profiles.
    let eu = pprof_rows(&setup, &[base, base, compare], "cpu", "ns");
    let fb = &ok(&r[5])["flamebearer"];
    check_flame("render eu", &flame(&fb["names"], &fb["levels"], &fb["numTicks"], None), 0, &eu);

    // Connect: the same types, over JSON.
    let connect_types: Vec<&str> =
        ok(&r[6])["profileTypes"].as_array().unwrap().iter().map(|t| t["ID"].as_str().unwrap()).collect();
    assert_eq!(connect_types, types);

    // region!="eu": checkout's us profile alone.
    let graph = &ok(&r[7])["flamegraph"];
    let us = pprof_rows(&setup, &[compare], "cpu", "ns");
    check_flame("region!=eu", &flame(&graph["names"], &graph["levels"], &graph["total"], None), 0, &us);

    // SelectMergeProfile: pprof bytes that go tool pprof reads as the inputs merged.
    let profile = ok(&r[8]);
    let bytes = base64_decode(profile["pprofBase64"].as_str().unwrap());
    let merged = setup.dir.join("merged.pb");
    std::fs::write(&merged, bytes).unwrap();
    let got = pprof_rows(&setup, &[merged.to_str().unwrap()], "cpu", "ns");
    assert_eq!(got, checkout);

    // SelectSeries: each 10 s step holds one profile, its pprof total; one line per service.
    let series = ok(&r[9])["series"].as_array().unwrap();
    let line = |service: &str| -> Vec<(i64, f64)> {
        let s = series.iter().find(|s| s["labels"] == json!([{ "name": "service_name", "value": service }])).unwrap();
        s["points"].as_array().unwrap().iter().map(|p| (int(&p["timestamp"]), p["value"].as_f64().unwrap())).collect()
    };
    let step10 = |offset: u64| start as i64 + ((t0 + offset) * 1000 - start) as i64 / 10_000 * 10_000;
    assert_eq!(
        line("checkout"),
        [(step10(10), base_total as f64), (step10(20), compare_total as f64), (step10(40), base_total as f64)]
    );
    assert_eq!(line("search"), [(step10(30), compare_total as f64)]);
    // A minute's step averages checkout's three profiles.
    let averaged = ok(&r[10])["series"].as_array().unwrap();
    let points: Vec<f64> =
        averaged.iter().flat_map(|s| s["points"].as_array().unwrap()).map(|p| p["value"].as_f64().unwrap()).collect();
    let sum_by_step: f64 = points.iter().sum();
    let counts = [10u64, 20, 40].map(|o| ((t0 + o) * 1000 - start) / 60_000);
    let mut per_step: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for (step, total) in counts.iter().zip([base_total, compare_total, base_total]) {
        per_step.entry(*step).or_default().push(total);
    }
    let expected_avg: f64 = per_step.values().map(|v| v.iter().sum::<i64>() as f64 / v.len() as f64).sum();
    assert!((sum_by_step - expected_avg).abs() < 1.0, "{points:?} against {per_step:?}");

    // Diff: checkout's eu profiles (left) against the us one (right), each side pprof's.
    let diff = &ok(&r[11])["flamegraph"];
    let (left, right) = (int(&diff["leftTicks"]), int(&diff["rightTicks"]));
    let eu_checkout = pprof_rows(&setup, &[base, base], "cpu", "ns");
    assert_eq!((left, right), (eu_checkout.0, us.0));
    let graph = flame(&diff["names"], &diff["levels"], &diff["total"], Some((left, right)));
    check_flame("diff left", &graph, 0, &eu_checkout);
    check_flame("diff right", &graph, 1, &us);

    // Label names and values, and series, under matchers.
    let names = ok(&r[12])["names"].as_array().unwrap();
    for name in ["region", "service_name", "__profile_type__"] {
        assert!(names.contains(&json!(name)), "{name} in {names:?}");
    }
    assert_eq!(ok(&r[13])["names"], json!(["eu"]));
    let sets = ok(&r[14])["labelsSet"].as_array().unwrap();
    assert_eq!(
        sets,
        &[
            json!({"labels": [{"name": "region", "value": "eu"}, {"name": "service_name", "value": "checkout"}]}),
            json!({"labels": [{"name": "region", "value": "us"}, {"name": "service_name", "value": "checkout"}]})
        ]
    );

    // DOT, and the heap's in-use space against pprof's.
    assert!(ok(&r[15])["dot"].as_str().unwrap().starts_with("digraph"), "{}", r[15]);
    let heap_rows = pprof_rows(&setup, &[heap], "inuse_space", "B");
    let graph = &ok(&r[16])["flamegraph"];
    check_flame("inuse_space", &flame(&graph["names"], &graph["levels"], &graph["total"], None), 0, &heap_rows);

    // Refusals as Connect errors: a bad selector and type id (invalid_argument, 3), and
    // a format stacklens does not write (unimplemented, 12).
    assert_eq!(r[17]["error"]["code"], 3, "{}", r[17]);
    assert!(r[17]["error"]["message"].as_str().unwrap().contains("quoted"), "{}", r[17]);
    assert_eq!(r[18]["error"]["code"], 12, "{}", r[18]);
    assert_eq!(r[19]["error"]["code"], 3, "{}", r[19]);

    // Another tenant sees none of it.
    let Some(other) = run_clients(
        &setup,
        "other",
        vec![perses("searchServices", json!({}), Value::Null), render(&format!("{CPU}{{}}"))],
    ) else {
        return;
    };
    assert_eq!(ok(&other[0])["names"], json!([]));
    assert_eq!(int(&ok(&other[1])["flamebearer"]["numTicks"]), 0);
}

/// `base` + `path` with `params` in its query string.
fn with_query(base: &str, path: &str, params: &[(&str, String)]) -> String {
    url::Url::parse_with_params(&format!("{base}{path}"), params).unwrap().to_string()
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

/// The HTTP routes beside the Connect ones: render-diff and label-values, and how
/// bad requests are answered (Connect errors on the Connect routes, stacklens' errors
/// on the others).
#[test]
fn render_diff_label_values_and_refusals() {
    let Some(setup) = setup() else { return };
    let client = Client::new();
    let get = |path: &str, query: &[(&str, String)]| {
        let response =
            client.get(with_query(&setup.server.base, path, query)).header("X-Scope-OrgID", TENANT).send().unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap())
    };
    let (from, until) = ((setup.t0 - 60).to_string(), (setup.t0 + 600).to_string());
    let (status, diff) = get(
        "/pyroscope/render-diff",
        &[
            ("leftQuery", format!("{CPU}{{service_name=\"checkout\",region=\"eu\"}}")),
            ("leftFrom", from.clone()),
            ("leftUntil", until.clone()),
            ("rightQuery", format!("{CPU}{{region=\"us\"}}")),
            ("rightFrom", from.clone()),
            ("rightUntil", until.clone()),
            ("maxNodes", "100000".into()),
        ],
    );
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["metadata"]["format"], "double");
    let (left, right) = (int(&diff["leftTicks"]), int(&diff["rightTicks"]));
    let eu_checkout = pprof_rows(&setup, &["base/cpu.pb.gz", "base/cpu.pb.gz"], "cpu", "ns");
    let us = pprof_rows(&setup, &["compare/cpu.pb.gz"], "cpu", "ns");
    assert_eq!((left, right), (eu_checkout.0, us.0));
    let fb = &diff["flamebearer"];
    let graph = flame(&fb["names"], &fb["levels"], &fb["numTicks"], Some((left, right)));
    check_flame("render-diff left", &graph, 0, &eu_checkout);
    check_flame("render-diff right", &graph, 1, &us);

    let (status, names) = get("/pyroscope/label-values", &[("label", "__name__".into())]);
    assert_eq!(status, 200);
    assert!(names.as_array().unwrap().contains(&json!(CPU)), "{names}");
    let (_, regions) = get("/pyroscope/label-values", &[("label", "region".into())]);
    assert_eq!(regions, json!(["eu", "us"]));

    // Bad queries: stacklens' error bodies.
    for query in [
        "",
        "{service_name=\"checkout\"}",
        "process_cpu:cpu{}",
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds{a=~\"(\"}",
    ] {
        let (status, body) = get("/pyroscope/render", &[("query", query.into())]);
        assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidParameter")), "{query}: {body}");
    }
    let (status, body) = get("/pyroscope/render", &[("query", format!("{CPU}{{}}")), ("from", "yesterday".into())]);
    assert_eq!((status, body["details"]["field"].as_str()), (400, Some("from")), "{body}");

    // Connect routes answer Connect errors: {code, message}.
    let post = |method: &str, content_type: &str, body: &'static [u8]| {
        let response = client
            .post(format!("{}/querier.v1.QuerierService/{method}", setup.server.base))
            .header("content-type", content_type)
            .header("X-Scope-OrgID", TENANT)
            .body(body)
            .send()
            .unwrap();
        (response.status().as_u16(), response.json::<Value>().unwrap())
    };
    let (status, body) = post("ProfileTypes", "text/plain", b"{}");
    assert_eq!((status, body["code"].as_str()), (415, Some("invalid_argument")), "{body}");
    let (status, body) = post("LabelValues", "application/json", b"{\"name\": 5}");
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{body}");
    let (status, body) = post("LabelValues", "application/json", b"{}");
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("name"), "{body}");
    let (status, body) = post("SelectMergeStacktraces", "application/proto", b"\xff\xff");
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{body}");
    let (status, body) = post(
        "SelectSeries",
        "application/json",
        b"{\"profileTypeID\": \"process_cpu:cpu:nanoseconds:cpu:nanoseconds\"}",
    );
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "a series needs a step: {body}");
    let (status, body) = post(
        "SelectMergeStacktraces",
        "application/json",
        b"{\"profileTypeID\": \"process_cpu:cpu:nanoseconds:cpu:nanoseconds\", \"profileIdSelector\": [\"7c9e6679-7425-40de-944b-e07fc1f90ae7\"]}",
    );
    assert_eq!((status, body["code"].as_str()), (501, Some("unimplemented")), "{body}");
}

/// Grafana's traces-to-profiles: an OTLP profile whose samples link to three spans of one
/// trace (made by OpenTelemetry's Python classes from a Go CPU profile), pushed over
/// OTLP/HTTP, then `SelectMergeSpanProfile` for one span and `SelectMergeStacktraces`
/// for the trace: each flame graph is `go tool pprof -tagfocus` of the stored profile.
#[test]
fn span_and_trace_selectors_keep_their_samples() {
    let Some(setup) = setup() else { return };
    let python = repo().join(".tools/otlp/bin/python");
    if !python.is_file() {
        missing_prerequisite(&format!("{} (opentelemetry-proto, from scripts/ensure-tools.sh)", python.display()));
        return;
    }
    let base = setup.dir.join("spans");
    let made = Command::new(&python)
        .arg(repo().join("tests/programs/otlp.py"))
        .args([
            "from-pprof",
            setup.go_dir.join("base/cpu.pb.gz").to_str().unwrap(),
            base.to_str().unwrap(),
            "traced",
            "3",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "otlp.py: {}", String::from_utf8_lossy(&made.stderr));
    let client = Client::new();
    let pushed = client
        .post(format!("{}/v1development/profiles", setup.server.base))
        .header("content-type", "application/x-protobuf")
        .header("X-Scope-OrgID", TENANT)
        .body(std::fs::read(base.with_extension("pb")).unwrap())
        .send()
        .unwrap();
    assert_eq!(pushed.status(), 200, "{}", pushed.text().unwrap());

    // The stored profile, and what pprof keeps of it for span 2 and for the trace.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let (start, end) = (now - 3_600_000, now + 60_000);
    let stored = client
        .get(with_query(
            &setup.server.base,
            "/api/v1/profiling/merge",
            &[
                ("service", "traced".into()),
                ("profileType", "cpu".into()),
                ("format", "pprof".into()),
                ("from", start.to_string()),
                ("to", end.to_string()),
            ],
        ))
        .header("X-Scope-OrgID", TENANT)
        .send()
        .unwrap();
    assert_eq!(stored.status(), 200);
    let stored_path = setup.dir.join("traced.pb.gz");
    std::fs::write(&stored_path, stored.bytes().unwrap()).unwrap();
    let stored_path = stored_path.to_str().unwrap();
    let span2 = "a2a2a2a2a2a2a2a2";
    let trace = "ab".repeat(16);
    let focused = |focus: &str| {
        let paths = [Path::new(stored_path)];
        let flags =
            ["-nodecount=1000000", "-nodefraction=0", "-edgefraction=0", "-unit=ns", "-sample_index=cpu", focus];
        let top = read_pprof_top(&pprof_top_merged(&setup.go, &setup.dir, &paths, &flags));
        let value = |t: &str| t.trim_end_matches(|c: char| c.is_ascii_alphabetic()).parse::<i64>().unwrap();
        let rows: BTreeMap<String, (i64, i64)> =
            top.rows.iter().map(|r| (r.name.clone(), (value(&r.flat), value(&r.cum)))).collect();
        // pprof's "of N total" is the whole profile's: what the focus keeps is its rows' flat.
        (rows.values().map(|r| r.0).sum(), rows)
    };
    let (one_span, whole) =
        (focused(&format!("-tagfocus=span_id=^{span2}$")), focused(&format!("-tagfocus=trace_id=^{trace}$")));
    assert!(0 < one_span.0 && one_span.0 < whole.0, "span 2 holds some of the samples: {} of {}", one_span.0, whole.0);

    let call = |method: &str, body: Value| {
        let response = client
            .post(format!("{}/querier.v1.QuerierService/{method}", setup.server.base))
            .header("content-type", "application/json")
            .header("X-Scope-OrgID", TENANT)
            .json(&body)
            .send()
            .unwrap();
        (response.status().as_u16(), response.json::<Value>().unwrap())
    };
    let ask = |extra: Value| {
        let mut body = json!({ "profileTypeID": CPU, "labelSelector": "{service_name=\"traced\"}",
            "start": start.to_string(), "end": end.to_string(), "maxNodes": "100000" });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let graph_of = |answer: &Value| {
        let g = &answer["flamegraph"];
        flame(&g["names"], &g["levels"], &g["total"], None)
    };
    let (status, span) = call("SelectMergeSpanProfile", ask(json!({ "spanSelector": [span2] })));
    assert_eq!(status, 200, "{span}");
    check_flame("span 2", &graph_of(&span), 0, &one_span);
    let (status, traced) = call("SelectMergeStacktraces", ask(json!({ "traceIdSelector": [trace.to_uppercase()] })));
    assert_eq!(status, 200, "{traced}");
    check_flame("the trace", &graph_of(&traced), 0, &whole);
    for bad in [json!({ "spanSelector": ["02"] }), json!({ "traceIdSelector": ["zz".repeat(16)] })] {
        let (status, body) = call("SelectMergeStacktraces", ask(bad.clone()));
        assert_eq!((status, body["code"].as_str()), (400, Some("invalid_argument")), "{bad}: {body}");
    }
}
