//! Continuous profiling over time ranges, against a real server on a local folder and on
//! SeaweedFS: profiles pushed through Pyroscope's ingest API land in the time index;
//! a range's merge equals `go tool pprof` run on the same files (and `go tool pprof`
//! reads the merged pprof URL); series totals are the sums of their profiles; label
//! filters, label listings, deletion and bad input.

mod common;

use std::path::Path;

use common::{fixtures, free_port, go, json_of, pprof, read_pprof_top, temp_dir, walk, Seaweed, Server};
use reqwest::blocking::Client;
use serde_json::Value;

const HOUR: u64 = 3600;

/// A multipart body with one `profile` part, as the Pyroscope SDKs send pprof.
fn multipart(profile: &[u8]) -> (String, Vec<u8>) {
    let boundary = "stacklens-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(profile);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `go tool pprof -top` in nanoseconds, rows as (name, flat, cum).
fn pprof_rows(go: &Path, dir: &Path, sources: &[&str], extra: &[&str]) -> (String, Vec<(String, i64, i64)>) {
    let sources: Vec<&Path> = sources.iter().map(Path::new).collect();
    let text = pprof(go, dir, &sources, &[&["-top", "-unit=ns", "-nodecount=20"], extra].concat());
    let top = read_pprof_top(&text);
    let ns = |v: &str| v.trim_end_matches("ns").parse::<i64>().unwrap_or_else(|_| panic!("{v} in {text}"));
    (top.total.clone(), top.rows.iter().map(|r| (r.name.clone(), ns(&r.flat), ns(&r.cum))).collect())
}

fn json_rows(merged: &Value) -> Vec<(String, i64, i64)> {
    merged["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_owned(), f["flat"].as_i64().unwrap(), f["cum"].as_i64().unwrap()))
        .collect()
}

fn scenario(store: &str, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let Some(go) = go() else { return };
    let server = Server::start(store, &[], env);
    let http = Client::new();
    let api = |path: &str| format!("{}{path}", server.base);
    let get = |path: &str| json_of(http.get(api(path)).send().unwrap());
    let (base, compare) = (fx.join("go/base/cpu.pb.gz"), fx.join("go/compare/cpu.pb.gz"));
    let (base, compare) = (base.to_str().unwrap(), compare.to_str().unwrap());

    // Three hours before the last closed hour's end, on an hour boundary: every hour of
    // the range is closed (an hour closes 5 minutes after its end; 10 leaves room for the
    // test's own run).
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let t0 = ((now - 600) / HOUR - 3) * HOUR;
    let push = |name: &str, from: u64, content_type: &str, body: Vec<u8>, format: &str| {
        let url = api(&format!("/ingest?name={}&from={from}&until={}&format={format}", urlencode(name), from + 10));
        http.post(url).header("content-type", content_type).body(body).send().unwrap()
    };
    let read = |p: &str| std::fs::read(p).unwrap();
    // base in eu (raw pprof), compare in us (multipart, as the SDKs send it), base again
    // in eu two hours later: the same bytes are one session with two index entries.
    let r = push("shop.cpu{region=eu,pod=a}", t0 + 60, "application/octet-stream", read(base), "pprof");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let (content_type, body) = multipart(&read(compare));
    let r = push("shop.cpu{region=us,pod=b}", t0 + 600, &content_type, body, "pprof");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r = push("shop.cpu{region=eu,pod=c}", t0 + 2 * HOUR + 5, "application/octet-stream", read(base), "pprof");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    // Text pushes of another service: folded and lines.
    let r = push("web.cpu", t0 + 30, "text/plain", b"main;serve;parse 30\nmain;serve;write 10\n".to_vec(), "folded");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    let r =
        push("web.cpu", t0 + 90, "text/plain", b"main;serve;parse\nmain;idle\nmain;serve;parse\n".to_vec(), "lines");
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());

    let range = format!("service=shop&profileType=cpu&from={t0}&to={}", t0 + 3 * HOUR);
    let merged_url = |extra: &str| api(&format!("/api/v1/profiling/merge?{range}{extra}"));

    // The merge equals go tool pprof merging the same files (base twice).
    let mut objects_read = Vec::new();
    for attempt in ["first", "cached"] {
        let (status, merged) = json_of(http.get(merged_url("&limit=20")).send().unwrap());
        assert_eq!(status, 200, "{merged}");
        assert_eq!(merged["profileCount"], 3, "{attempt}: {merged}");
        objects_read.push(merged["objectsRead"].as_u64().unwrap());
        let (total, rows) = pprof_rows(go, &fx, &[base, compare, base], &[]);
        assert_eq!(format!("{}ns", merged["total"]), total, "{attempt}");
        assert_eq!(json_rows(&merged), rows, "{attempt}");
        // go tool pprof reads the merged pprof from its URL, with the same numbers.
        let from_url = pprof_rows(go, &fx, &[&merged_url("&format=pprof")], &[]);
        assert_eq!(from_url, (total, rows), "{attempt}");
    }
    // The server counts what it reads: the first merge reads each entry's profile, the
    // second the two closed hours' cached merges instead; every format says it in headers.
    assert!(objects_read[1] < objects_read[0], "objects read, first and cached: {objects_read:?}");
    let pprof = http.get(merged_url("&format=pprof")).send().unwrap();
    let header = |name: &str| pprof.headers()[name].to_str().unwrap().parse::<u64>().unwrap();
    assert_eq!(header("stacklens-objects-read"), objects_read[1]);
    assert!(header("stacklens-listings") >= 1);
    if let Some(dir) = store.strip_prefix("file://") {
        let cached = walk(Path::new(dir)).into_iter().map(|p| p.display().to_string());
        let cached = cached.filter(|p| p.contains("/series-cache/") && p.ends_with(".pb.gz"));
        assert_eq!(cached.count(), 2, "the two closed hours the range covers whole are cached");
    }

    // A label filter: only eu's two entries, which are base twice.
    let (status, eu) = json_of(http.get(merged_url("&labels=region=eu&limit=20")).send().unwrap());
    assert_eq!((status, &eu["profileCount"]), (200, &Value::from(2)), "{eu}");
    assert_eq!(json_rows(&eu), pprof_rows(go, &fx, &[base, base], &[]).1);
    // A range inside the first hour (not whole: merged from its entries).
    let (_, first) =
        get(&format!("/api/v1/profiling/merge?service=shop&profileType=cpu&from={}&to={}&limit=20", t0, t0 + 700));
    assert_eq!(first["profileCount"], 2, "{first}");
    assert_eq!(json_rows(&first), pprof_rows(go, &fx, &[base, compare], &[]).1);
    // Folded output of the merge.
    let folded = http.get(merged_url("&format=folded")).send().unwrap();
    assert_eq!(folded.status(), 200);
    assert!(folded.text().unwrap().lines().any(|l| l.contains("compress/flate.(*compressor).findMatch")));
    // OTLP output of the merge: the same total as pprof's merge of the files.
    let otlp = http.get(merged_url("&format=otlp")).send().unwrap();
    assert_eq!(otlp.headers()["content-type"], "application/x-protobuf");
    let p = stacklens_core::parse(&otlp.bytes().unwrap()).unwrap();
    assert_eq!(p.source, stacklens_core::model::SourceFormat::Otlp);
    let cpu = (0..p.sample_types.len()).find(|&i| p.sample_type_name(i) == "cpu").unwrap();
    assert_eq!(format!("{}ns", p.total(cpu)), pprof_rows(go, &fx, &[base, compare, base], &[]).0);

    // Series: per hour, the totals of its profiles (SOURCES.md: base 7.08 s of cpu).
    let totals = |file: &str| pprof_rows(go, &fx, &[file], &[]).0.trim_end_matches("ns").parse::<i64>().unwrap();
    let (base_total, compare_total) = (totals(base), totals(compare));
    let (status, series) = get(&format!("/api/v1/profiling/series?{range}&step=1h"));
    assert_eq!(status, 200, "{series}");
    assert!(series["listings"].as_u64().unwrap() >= 1 && series["objectsRead"].is_u64(), "{series}");
    assert_eq!(series["sampleType"], "cpu");
    assert_eq!(series["unit"], "nanoseconds");
    let points = |line: &Value| -> Vec<(i64, i64)> {
        line["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["value"].as_i64().unwrap(), p["profiles"].as_i64().unwrap()))
            .collect()
    };
    assert_eq!(points(&series["series"][0]), [(base_total + compare_total, 2), (0, 0), (base_total, 1)]);
    let (_, split) = get(&format!("/api/v1/profiling/series?{range}&step=3600&groupBy=region"));
    let lines = split["series"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{split}");
    assert_eq!(
        (&lines[0]["labels"]["region"], points(&lines[0])),
        (&Value::from("eu"), vec![(base_total, 1), (0, 0), (base_total, 1)])
    );
    assert_eq!(
        (&lines[1]["labels"]["region"], points(&lines[1])),
        (&Value::from("us"), vec![(compare_total, 1), (0, 0), (0, 0)])
    );

    // Label keys and values, with how many profiles carry them.
    let (_, keys) = get(&format!("/api/v1/profiling/labels?{range}"));
    let names: Vec<&str> = keys["labels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pod", "region"]);
    let (_, values) = get(&format!("/api/v1/profiling/labels/region/values?{range}"));
    assert_eq!(values["labels"], serde_json::json!([{"name": "eu", "profiles": 2}, {"name": "us", "profiles": 1}]));
    let (_, services) = get("/api/v1/profiling/services");
    assert_eq!(
        services["series"],
        serde_json::json!([{"service": "shop", "profileType": "cpu"}, {"service": "web", "profileType": "cpu"}])
    );

    // The text pushes: folded as sent, lines counted.
    let (_, web) = get(&format!("/api/v1/profiling/merge?service=web&profileType=cpu&from={t0}&to={}", t0 + HOUR));
    assert_eq!((web["profileCount"].as_i64(), web["total"].as_i64()), (Some(2), Some(43)), "{web}");
    let parse = web["functions"].as_array().unwrap().iter().find(|f| f["name"] == "parse").unwrap();
    assert_eq!(parse["flat"], 32);

    // A diff of two ranges (eu and us in the first hour) equals the diff of their sessions.
    let (_, listed) = get("/api/v1/profiles?service=shop");
    let session = |region: &str| {
        let found = listed["profiles"].as_array().unwrap().iter().find(|p| p["labels"]["region"] == region);
        found.unwrap()["id"].as_str().unwrap().to_owned()
    };
    let post = |body: Value| json_of(http.post(api("/api/v1/profiling/diff")).json(&body).send().unwrap());
    let side = |region: &str| serde_json::json!({"service": "shop", "profileType": "cpu", "from": t0, "to": (t0 + HOUR).to_string(), "labels": {"region": region}});
    let (status, by_range) = post(serde_json::json!({"base": side("eu"), "compare": side("us")}));
    assert_eq!(status, 200, "{by_range}");
    let (status, by_id) = post(serde_json::json!({"baseId": session("eu"), "compareId": session("us"), "type": "cpu"}));
    assert_eq!(status, 200, "{by_id}");
    for field in ["regressions", "improvements", "unchanged", "overallDelta", "sampleType"] {
        assert_eq!(by_range[field], by_id[field], "{field}");
    }
    assert_eq!(
        (&by_range["baseRange"]["profileCount"], &by_range["compareRange"]["labels"]["region"]),
        (&Value::from(1), &Value::from("us"))
    );
    for side in ["baseRange", "compareRange"] {
        assert!(by_range[side]["objectsRead"].as_u64().unwrap() >= 1, "each side reads its profile: {by_range}");
    }
    let movers = by_range["topMovers"].as_array().unwrap();
    assert_eq!(movers.len(), 10, "{by_range}");
    let deltas: Vec<f64> = movers.iter().map(|m| m["deltaPct"].as_f64().unwrap().abs()).collect();
    assert!(deltas.windows(2).all(|w| w[0] >= w[1]) && deltas[0] > 0.0, "{deltas:?}");
    // Goroutine ranges: the newStacks and growthCount envelope, as for ids.
    let dump = |side: &str| std::fs::read(fx.join(format!("go/{side}/goroutine.debug2.txt"))).unwrap();
    for (side, at) in [("base", t0 + 60), ("compare", t0 + HOUR + 60)] {
        let r = push("shop.goroutine", at, "text/plain", dump(side), "folded");
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    }
    let hour = |h: u64| serde_json::json!({"service": "shop", "profileType": "goroutine", "from": t0 + h * HOUR, "to": t0 + (h + 1) * HOUR});
    let (status, growth) = post(serde_json::json!({"base": hour(0), "compare": hour(1)}));
    assert_eq!(status, 200, "{growth}");
    let (_, goroutines) = get("/api/v1/profiles?service=shop&profileType=goroutine");
    let ids: Vec<&str> = goroutines["profiles"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    // Listed newest first: the compare dump, then the base dump.
    let (_, by_ids) = post(serde_json::json!({"baseId": ids[1], "compareId": ids[0], "type": "goroutine"}));
    assert_eq!((&growth["growthCount"], &growth["newStacks"]), (&by_ids["growthCount"], &by_ids["newStacks"]));
    assert!(growth["growthCount"].as_i64().unwrap() > 0, "{growth}");
    // A range with nothing in it, and a body with both ids and ranges.
    let (status, body) = post(
        serde_json::json!({"base": side("eu"), "compare": {"service": "nobody", "profileType": "cpu", "from": t0}}),
    );
    assert_eq!((status, body["error_code"].as_str()), (404, Some("NoProfiles")), "{body}");
    let (status, body) = post(serde_json::json!({"baseId": session("eu"), "base": side("eu"), "compare": side("us")}));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidRequest")), "{body}");
    let (status, body) = post(
        serde_json::json!({"base": {"service": "shop", "profileType": "cpu", "from": "soon"}, "compare": side("us")}),
    );
    assert_eq!((status, body["details"]["field"].as_str()), (400, Some("base.from")), "{body}");

    // A function's trend: per hour, its self and cum summed over the hour's profiles.
    let hot = "compress/flate.(*compressor).findMatch";
    let (status, history) = get(&format!("/api/v1/profiling/functions/{}/history?{range}&step=1h", urlencode(hot)));
    assert_eq!(status, 200, "{history}");
    for (i, hour) in [0u64, 2].into_iter().enumerate() {
        let (_, merged) = get(&format!(
            "/api/v1/profiling/merge?service=shop&profileType=cpu&from={}&to={}&limit=1000",
            t0 + hour * HOUR,
            t0 + (hour + 1) * HOUR
        ));
        let row = merged["functions"].as_array().unwrap().iter().find(|f| f["name"] == hot).unwrap().clone();
        let point = &history["points"][hour as usize];
        assert_eq!(
            (&point["self"], &point["cum"], &point["total"]),
            (&row["flat"], &row["cum"], &merged["total"]),
            "point {i}"
        );
        let share = row["flat"].as_f64().unwrap() * 100.0 / merged["total"].as_f64().unwrap();
        assert!((point["selfSharePct"].as_f64().unwrap() - share).abs() < 1e-9);
    }
    assert_eq!((&history["points"][1]["profiles"], &history["points"][1]["self"]), (&Value::from(0), &Value::from(0)));

    // Bad input: a clear 4xx, never a panic.
    for (path, code) in [
        (format!("/api/v1/profiling/merge?service=shop&profileType=cpu&from={}&to={t0}", t0 + 10), "InvalidParameter"),
        (format!("/api/v1/profiling/merge?{range}&format=svg"), "InvalidParameter"),
        (format!("/api/v1/profiling/merge?{range}&sampleIndex=nope"), "InvalidSampleIndex"),
        ("/api/v1/profiling/merge?service=shop&profileType=cpu&from=yesterday".to_owned(), "InvalidParameter"),
        ("/api/v1/profiling/merge?service=shop&profileType=cpu&from=now-90d".to_owned(), "InvalidParameter"),
        ("/api/v1/profiling/merge?profileType=cpu".to_owned(), "InvalidParameter"),
        (format!("/api/v1/profiling/merge?service=shop&profileType=disk&from={t0}"), "InvalidProfileType"),
        (format!("/api/v1/profiling/series?{range}&step=0"), "InvalidParameter"),
    ] {
        let (status, body) = get(&path);
        assert_eq!((status, body["error_code"].as_str()), (400, Some(code)), "{path}: {body}");
    }
    let (status, empty) =
        get(&format!("/api/v1/profiling/merge?service=nobody&profileType=cpu&from={t0}&to={}", t0 + 60));
    assert_eq!((status, &empty["profileCount"]), (200, &Value::from(0)), "{empty}");
    let (status, body) = json_of(
        http.get(api(&format!("/api/v1/profiling/merge?service=nobody&profileType=cpu&from={t0}&format=pprof")))
            .send()
            .unwrap(),
    );
    assert_eq!((status, body["error_code"].as_str()), (404, Some("NoProfiles")));
    for (name, body, code) in [
        ("", b"a;b 1\n".to_vec(), "InvalidParameter"),
        ("shop.cpu{region=eu", b"a;b 1\n".to_vec(), "InvalidParameter"),
        ("shop.cpu", b"\x00\x01 not a profile".to_vec(), "InvalidProfile"),
    ] {
        let (status, answer) = json_of(push(name, t0, "application/octet-stream", body, "pprof"));
        assert_eq!((status, answer["error_code"].as_str()), (400, Some(code)), "{name}: {answer}");
    }
    // A heap profile pushed as cpu is refused.
    let heap = std::fs::read(fx.join("go/base/heap.pb.gz")).unwrap();
    let (status, answer) = json_of(push("shop.cpu", t0, "application/octet-stream", heap, "pprof"));
    assert_eq!((status, answer["error_code"].as_str()), (422, Some("ProfileTypeMismatch")), "{answer}");

    // Deleting the us profile's session: the range drops it at once.
    let (_, listed) = get("/api/v1/profiles?service=shop");
    let us =
        listed["profiles"].as_array().unwrap().iter().find(|p| p["labels"]["region"] == "us").unwrap()["id"].clone();
    assert_eq!(http.delete(api(&format!("/api/v1/profiles/{}", us.as_str().unwrap()))).send().unwrap().status(), 204);
    let (_, after) = json_of(http.get(merged_url("&limit=20")).send().unwrap());
    assert_eq!(after["profileCount"], 2, "{after}");
    assert_eq!(json_rows(&after), pprof_rows(go, &fx, &[base, base], &[]).1);
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn ranges_merge_like_pprof_on_a_local_folder() {
    scenario(&format!("file://{}", temp_dir("ranges").display()), &[]);
}

#[test]
fn ranges_merge_like_pprof_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    scenario(&format!("s3://test/ranges-{}", free_port()), &Seaweed::env());
}

#[test]
fn retention_removes_old_pushes_but_not_what_a_baseline_pins() {
    let dir = temp_dir("ranges-retention");
    let store = format!("file://{}", dir.display());
    let http = Client::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let push = |server: &Server, stack: &str, from: u64| {
        let url = format!("{}/ingest?name=ret.cpu&from={from}", server.base);
        let r = http.post(url).body(format!("main;{stack} 10\n")).send().unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    };
    let sessions = |server: &Server| {
        let (_, listed) = json_of(http.get(format!("{}/api/v1/profiles?service=ret", server.base)).send().unwrap());
        let names = |p: &Value| (p["id"].as_str().unwrap().to_owned(), p["sampleCount"].as_i64().unwrap());
        listed["profiles"].as_array().unwrap().iter().map(names).collect::<Vec<_>>()
    };
    // Without retention: two pushes from an hour ago, one of them saved as a baseline.
    let (old, pinned) = {
        let server = Server::start(&store, &[], &[]);
        push(&server, "old", now - HOUR);
        push(&server, "pinned", now - HOUR + 1);
        let listed = sessions(&server);
        assert_eq!(listed.len(), 2);
        let (pinned, old) = (listed[0].0.clone(), listed[1].0.clone());
        let body = serde_json::json!({"label": "keep", "sessionId": pinned, "profileType": "cpu"});
        let (status, baseline) =
            json_of(http.post(format!("{}/api/v1/profiling/baselines", server.base)).json(&body).send().unwrap());
        assert_eq!(status, 201, "{baseline}");
        (old, pinned)
    };
    // With a retention of 10 minutes: the hour-old entries go, the fresh one stays.
    let server = Server::start(&store, &["--retention-days", "0.007", "--retention-tick-ms", "100"], &[]);
    push(&server, "fresh", now);
    let count = || {
        let url =
            format!("{}/api/v1/profiling/merge?service=ret&profileType=cpu&from=now-2h&to={}", server.base, now + 60);
        json_of(http.get(url).send().unwrap()).1["profileCount"].as_i64().unwrap()
    };
    common::until("the old entries to expire", std::time::Duration::from_secs(30), || (count() == 1).then_some(()));
    let status = |id: &str| http.get(format!("{}/api/v1/profiles/{id}/raw", server.base)).send().unwrap().status();
    common::until("the old profile to be removed", std::time::Duration::from_secs(30), || {
        (status(&old) == 404).then_some(())
    });
    assert_eq!(status(&pinned), 200, "the baseline pins its profile");
    let raws = walk(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "raw")).count();
    assert_eq!(raws, 2, "the pinned and the fresh profile's bytes are left");
    // A bad retention is refused at start.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stacklens"))
        .args(["serve", "--store", "memory://", "--retention-days", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a number of days"));
}
