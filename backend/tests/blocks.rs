//! Compacted blocks on a real server, on a local folder and on SeaweedFS: `stacklens
//! compact` turns closed hours into blocks; merges and series over them then equal what
//! the raw pushes gave (label filters and parts of hours included, and `go tool pprof`
//! on the same files), and a one-hour merge reads one object and lists nothing. A push
//! into a compacted hour, a deleted session and a damaged block each send the hour back
//! to its raw pushes until the next pass makes its block again; `stacklens reindex`
//! makes every block again, and a server's own passes show in `/metrics`. Closed days
//! get day blocks, made from their hours' blocks, with the same answers.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{fixtures, free_port, go, json_of, pprof, read_pprof_top, temp_dir, until, Backing, Seaweed, Server};
use reqwest::blocking::Client;
use serde_json::Value;

const HOUR: u64 = 3600;
const DAY: u64 = 24 * HOUR;

/// What a merge answered that blocks must not change.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    profile_count: u64,
    total: i64,
    /// (name, flat, cum), as the answer orders them.
    rows: Vec<(String, i64, i64)>,
}

#[derive(Debug, PartialEq)]
struct Cost {
    objects: u64,
    listings: u64,
}

fn answer(merged: &Value) -> Answer {
    let rows = merged["functions"].as_array().unwrap_or_else(|| panic!("{merged}"));
    Answer {
        profile_count: merged["profileCount"].as_u64().unwrap(),
        total: merged["total"].as_i64().unwrap(),
        rows: rows
            .iter()
            .map(|f| (f["name"].as_str().unwrap().to_owned(), f["flat"].as_i64().unwrap(), f["cum"].as_i64().unwrap()))
            .collect(),
    }
}

/// One `stacklens compact` pass over `store`; its summary line.
fn compact(store: &str, env: &[(&str, &str)]) -> String {
    stacklens(&["compact", "--store", store], env)
}

/// `stacklens ARGS`, which must succeed; its standard output.
fn stacklens(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stacklens")).args(args).envs(env.iter().copied()).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "compact failed: {stdout}{stderr}");
    stdout.into_owned()
}

/// The service `shop` on a running server: pushes, merges and series.
struct Shop<'a> {
    server: &'a Server,
    http: Client,
}

impl Shop<'_> {
    fn push(&self, labels: &str, at: u64, file: &Path) {
        let url =
            format!("{}/ingest?name=shop.cpu%7B{labels}%7D&from={at}&until={}&format=pprof", self.server.base, at + 10);
        let r = self.http.post(url).body(std::fs::read(file).unwrap()).send().unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    }

    fn merge(&self, from: u64, to: u64, extra: &str) -> (Answer, Cost) {
        let url = format!(
            "{}/api/v1/profiling/merge?service=shop&profileType=cpu&from={from}&to={to}&limit=1000{extra}",
            self.server.base
        );
        let (status, merged) = json_of(self.http.get(url).send().unwrap());
        assert_eq!(status, 200, "{merged}");
        let cost =
            Cost { objects: merged["objectsRead"].as_u64().unwrap(), listings: merged["listings"].as_u64().unwrap() };
        (answer(&merged), cost)
    }

    /// The series of `[from, to)` by region, hour by hour.
    fn series(&self, from: u64, to: u64) -> Value {
        let url = format!(
            "{}/api/v1/profiling/series?service=shop&profileType=cpu&from={from}&to={to}&step=1h&groupBy=region",
            self.server.base
        );
        let (status, series) = json_of(self.http.get(url).send().unwrap());
        assert_eq!(status, 200, "{series}");
        series["series"].clone()
    }
}

fn scenario(backing: &Backing, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let Some(go) = go() else { return };
    let store = backing.url();
    // No passes of its own (the default in tests): the test runs them.
    let server = Server::start(&store, &[], env);
    let shop = Shop { server: &server, http: Client::new() };
    let http = &shop.http;
    let api = |path: &str| format!("{}{path}", server.base);
    let (base, compare) = (fx.join("go/base/cpu.pb.gz"), fx.join("go/compare/cpu.pb.gz"));
    let read = |p: &Path| std::fs::read(p).unwrap();

    // Three closed hours (see ranges.rs): eu and us in the first, eu in the second, eu
    // and us in the third; the profiles carry sample labels of their own too.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let t0 = ((now - 600) / HOUR - 3) * HOUR;
    let push = |labels: &str, at: u64, file: &Path| shop.push(labels, at, file);
    push("region=eu,pod=a", t0 + 60, &base);
    push("region=us,pod=b", t0 + 600, &compare);
    push("region=eu,pod=a", t0 + HOUR + 5, &compare);
    push("region=eu,pod=c", t0 + 2 * HOUR + 100, &compare);
    push("region=us,pod=b", t0 + 2 * HOUR + 200, &base);

    let merge = |from: u64, to: u64, extra: &str| shop.merge(from, to, extra);
    let series = || shop.series(t0, t0 + 3 * HOUR);
    // Whole hours, label filters, and ranges that cut hours.
    let queries: Vec<(u64, u64, &str)> = vec![
        (t0, t0 + 3 * HOUR, ""),
        (t0, t0 + 3 * HOUR, "&labels=region=eu"),
        (t0, t0 + 3 * HOUR, "&labels=region=us"),
        (t0 + HOUR, t0 + 2 * HOUR, ""),
        (t0 + 300, t0 + 2 * HOUR + 150, ""),
        (t0 + 2 * HOUR + 150, t0 + 3 * HOUR, "&labels=pod=b"),
    ];
    let answers = || -> Vec<Answer> { queries.iter().map(|&(from, to, extra)| merge(from, to, extra).0).collect() };
    let raw = answers();
    let raw_series = series();
    assert_eq!(raw.iter().map(|a| a.profile_count).collect::<Vec<_>>(), [5, 3, 2, 1, 3, 1]);

    // One pass makes the three hours' blocks.
    let summary = compact(&store, env);
    assert!(summary.contains("3 blocks written holding 5 profiles"), "{summary}");
    for hour in 0..3 {
        let key = format!("tenants/default/blocks/s{}/cpu/h{}.block", hex("shop"), t0 / HOUR + hour);
        assert!(backing.has(&key), "{key} after the pass");
    }
    assert_eq!(answers(), raw, "merged from blocks");
    assert_eq!(series(), raw_series, "series from blocks");
    // The whole range equals go tool pprof on the five files.
    let files: Vec<&Path> = [&base, &compare, &compare, &compare, &base].map(|p| p.as_path()).to_vec();
    let top = read_pprof_top(&pprof(go, &fx, &files, &["-top", "-unit=ns", "-nodecount=20"]));
    assert_eq!(format!("{}ns", raw[0].total), top.total);
    for (row, ours) in top.rows.iter().zip(&raw[0].rows) {
        assert_eq!((row.name.as_str(), row.flat.as_str()), (ours.0.as_str(), format!("{}ns", ours.1).as_str()));
    }
    // A one-hour merge reads its block and lists nothing; the series reads footers.
    let (_, cost) = merge(t0 + HOUR, t0 + 2 * HOUR, "");
    assert_eq!((cost.objects, cost.listings), (1, 0));

    // A late push into the second hour: the hour is merged from raw again, at once.
    push("region=eu,pod=d", t0 + HOUR + 900, &base);
    let (late, cost) = merge(t0 + HOUR, t0 + 2 * HOUR, "");
    assert_eq!(late.profile_count, 2, "{late:?}");
    assert!(cost.listings >= 1, "the changed hour is listed");
    let summary = compact(&store, env);
    assert!(summary.contains("1 blocks written holding 2 profiles"), "{summary}");
    let (again, cost) = merge(t0 + HOUR, t0 + 2 * HOUR, "");
    assert_eq!((again, cost.objects, cost.listings), (late, 1, 0));

    // A deleted session (us, in the first hour): gone from the answer at once, and from
    // the block the next pass makes.
    let (_, listed) = json_of(http.get(api("/api/v1/profiles?service=shop")).send().unwrap());
    let us = listed["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["labels"]["region"] == "us" && p["labels"]["pod"] == "b")
        .unwrap();
    let first_hour = || merge(t0, t0 + HOUR, "").0;
    let before = first_hour();
    assert_eq!(
        http.delete(api(&format!("/api/v1/profiles/{}", us["id"].as_str().unwrap()))).send().unwrap().status(),
        204
    );
    let after = first_hour();
    assert!(after.profile_count < before.profile_count, "{before:?} then {after:?}");
    compact(&store, env);
    assert_eq!(first_hour(), after);

    // A damaged block: noticed by its checksum, the hour merged from raw, the block made again.
    let key = format!("tenants/default/blocks/s{}/cpu/h{}.block", hex("shop"), t0 / HOUR + 2);
    let (good, _) = merge(t0 + 2 * HOUR, t0 + 3 * HOUR, "");
    let mut damaged = backing.read(&key).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x01;
    backing.write(&key, damaged);
    let (from_raw, cost) = merge(t0 + 2 * HOUR, t0 + 3 * HOUR, "");
    assert_eq!((&from_raw, cost.listings), (&good, 1), "merged from raw");
    assert!(!backing.has(&key), "the damaged block is cleared");
    let summary = compact(&store, env);
    assert!(summary.contains("1 blocks written"), "{summary}");
    let (rebuilt, cost) = merge(t0 + 2 * HOUR, t0 + 3 * HOUR, "");
    assert_eq!((&rebuilt, cost.objects, cost.listings), (&good, 1, 0));

    // Reindexing makes every closed hour's block again, with the same answers.
    let summary = stacklens(&["reindex", "--store", &store], env);
    // (The deleted session was the compare profile: each hour holds one profile now.)
    assert!(summary.contains("3 blocks written holding 3 profiles"), "{summary}");
    let (again, cost) = merge(t0 + 2 * HOUR, t0 + 3 * HOUR, "");
    assert_eq!((again, cost.objects, cost.listings), (good, 1, 0));

    // A server's own passes: a late push's hour gets its block again by itself.
    drop(server);
    let server = Server::start(&store, &["--compact-tick-ms", "200"], env);
    let url = format!("{}/ingest?name=shop.cpu%7Bregion=eu%7D&from={}&format=pprof", server.base, t0 + 60);
    assert_eq!(http.post(url).body(read(&base)).send().unwrap().status(), 200);
    let key = format!("tenants/default/blocks/s{}/cpu/h{}.block", hex("shop"), t0 / HOUR);
    until("the server's compactor to make the first hour's block again", Duration::from_secs(60), || {
        backing.has(&key).then_some(())
    });
    // Its progress, in Prometheus' text format (counted once the pass has looked at the
    // hour again, a moment after the block appears).
    let value = |metrics: &str, name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("stacklens_compaction_{name} ")));
        line.unwrap_or_else(|| panic!("no {name} in {metrics}")).rsplit(' ').next().unwrap().parse().unwrap()
    };
    let metrics = until("the pass to count its block", Duration::from_secs(30), || {
        let metrics = http.get(format!("{}/metrics", server.base)).send().unwrap().text().unwrap();
        (value(&metrics, "blocks_written_total") >= 1.0).then_some(metrics)
    });
    assert!(value(&metrics, "profiles_compacted_total") >= 2.0, "{metrics}");
    assert!(value(&metrics, "passes_total") >= 1.0 && value(&metrics, "pass_failures_total") == 0.0, "{metrics}");
}

/// Day blocks: two closed days, compacted, answer as their raw pushes did, a whole day
/// reading one object and a series one footer a day; a late push into an hour of a day
/// sends the day back to its hours at once and the next pass makes it again, as does a
/// damaged day block, and `reindex` makes the day blocks again.
fn days(backing: &Backing, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let store = backing.url();
    let server = Server::start(&store, &[], env);
    let shop = Shop { server: &server, http: Client::new() };
    let (base, compare) = (fx.join("go/base/cpu.pb.gz"), fx.join("go/compare/cpu.pb.gz"));
    let push = |labels: &str, at: u64, file: &Path| shop.push(labels, at, file);
    // Days d and d + 1, closed whatever the time of day.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let d = now / DAY - 3;
    let t0 = d * DAY;
    push("region=eu,pod=a", t0 + HOUR + 60, &base);
    push("region=us,pod=b", t0 + 5 * HOUR + 10, &compare);
    push("region=eu,pod=a", t0 + 23 * HOUR + 100, &compare);
    push("region=eu,pod=c", t0 + DAY + 200, &base);

    let merge = |from: u64, to: u64, extra: &str| shop.merge(from, to, extra);
    let series = || shop.series(t0, t0 + 2 * DAY);
    let queries: Vec<(u64, u64, &str)> = vec![
        (t0, t0 + DAY, ""),
        (t0, t0 + DAY, "&labels=region=eu"),
        (t0, t0 + DAY, "&labels=region=us"),
        (t0, t0 + 2 * DAY, "&labels=pod=a"),
        (t0, t0 + 2 * DAY, ""),
        (t0 + 2 * HOUR, t0 + DAY + HOUR, ""),
    ];
    let answers = || -> Vec<Answer> { queries.iter().map(|&(from, to, extra)| merge(from, to, extra).0).collect() };
    let raw = answers();
    let raw_series = series();
    assert_eq!(raw.iter().map(|a| a.profile_count).collect::<Vec<_>>(), [3, 2, 1, 2, 4, 3]);

    let summary = compact(&store, env);
    assert!(summary.contains("4 blocks written holding 4 profiles"), "{summary}");
    assert!(summary.contains("2 day blocks written"), "{summary}");
    let day_key = format!("tenants/default/blocks/s{}/cpu/d{d}.block", hex("shop"));
    assert!(backing.has(&day_key), "{day_key} after the pass");
    assert_eq!(answers(), raw, "merged from day blocks");
    assert_eq!(series(), raw_series, "series from day blocks");
    // A whole day is one object, two days two, and nothing is listed.
    let day = || merge(t0, t0 + DAY, "");
    assert_eq!((day().1.objects, day().1.listings), (1, 0));
    let (_, cost) = merge(t0, t0 + 2 * DAY, "&labels=region=eu");
    assert_eq!((cost.objects, cost.listings), (2, 0));

    // A late push into an hour of day d: the day goes back to its hours at once.
    push("region=us,pod=e", t0 + 7 * HOUR, &base);
    assert!(!backing.has(&day_key), "the day block goes with the change");
    let (late, cost) = day();
    assert_eq!(late.profile_count, 4, "{late:?}");
    assert!(cost.listings >= 1, "the changed hour is listed");
    let summary = compact(&store, env);
    assert!(summary.contains("1 blocks written holding 1 profiles") && summary.contains("1 day blocks"), "{summary}");
    let (again, cost) = day();
    assert_eq!((again, cost.objects, cost.listings), (late.clone(), 1, 0));

    // A damaged day block: its hours answer, and the next pass makes it again.
    let mut damaged = backing.read(&day_key).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x01;
    backing.write(&day_key, damaged);
    let (from_hours, _) = day();
    assert_eq!(from_hours, late, "merged from its hours");
    assert!(!backing.has(&day_key), "the damaged day block is cleared");
    let summary = compact(&store, env);
    assert!(summary.contains("1 day blocks"), "{summary}");
    assert_eq!(day(), (late.clone(), Cost { objects: 1, listings: 0 }));

    // Reindexing makes both days' blocks again.
    let summary = stacklens(&["reindex", "--store", &store], env);
    assert!(summary.contains("5 blocks written holding 5 profiles") && summary.contains("2 day blocks"), "{summary}");
    assert_eq!(day(), (late.clone(), Cost { objects: 1, listings: 0 }));

    // A server's own passes make a changed day's block again, and count it in /metrics.
    drop(server);
    let server = Server::start(&store, &["--compact-tick-ms", "200"], env);
    let shop = Shop { server: &server, http: Client::new() };
    shop.push("region=eu,pod=f", t0 + 9 * HOUR, &compare);
    let metrics = until("the server's compactor to make the day's block again", Duration::from_secs(60), || {
        let metrics = shop.http.get(format!("{}/metrics", server.base)).send().unwrap().text().unwrap();
        metrics.lines().any(|l| l.starts_with("stacklens_compaction_day_blocks_written_total 1")).then_some(metrics)
    });
    assert!(backing.has(&day_key), "{metrics}");
    let (last, cost) = shop.merge(t0, t0 + DAY, "");
    assert_eq!((last.profile_count, cost.objects, cost.listings), (late.profile_count + 1, 1, 0));
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn blocks_answer_as_raw_pushes_do_on_a_local_folder() {
    scenario(&Backing::Folder(temp_dir("blocks")), &[]);
}

#[test]
fn blocks_answer_as_raw_pushes_do_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    scenario(&Backing::Seaweed(format!("blocks-{}", free_port())), &Seaweed::env());
}

#[test]
fn day_blocks_answer_as_raw_pushes_do_on_a_local_folder() {
    days(&Backing::Folder(temp_dir("days")), &[]);
}

#[test]
fn day_blocks_answer_as_raw_pushes_do_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    days(&Backing::Seaweed(format!("days-{}", free_port())), &Seaweed::env());
}
