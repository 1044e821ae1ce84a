//! The same bytes sent by different senders are one stored session, and each sender's
//! hold ends its own way: an upload's link expires or its delete token revokes it, the
//! server's retention removes old time-index entries, a schedule's retention removes its
//! captures. Whichever ends, what the others were acknowledged for stays: an agent's push
//! stays in the merge, a capture and a baseline keep reading the bytes, and a blob (never
//! shared) keeps its own. One real server per way of ending, on a local folder.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{fixtures, json_of, stand_in, temp_dir, until, Server};
use reqwest::blocking::Client;
use serde_json::json;

/// How long a wait in these tests may take at most.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Copy, Clone, Debug, PartialEq)]
enum Ending {
    /// The upload's link expires (`expiresIn`).
    Expiry,
    /// The upload's delete token revokes its link.
    DeleteToken,
    /// The server's `--retention-days` removes the push's old entry.
    Retention,
    /// A schedule's `retentionDays` removes the capture and its entry.
    ScheduleRetention,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Every holder of one profile's bytes, then `ending`; then what each of the others
/// holds is checked.
fn every_other_holder_keeps_its_data(ending: Ending) {
    let Some(fx) = fixtures() else { return };
    // A real CPU profile, taken now: an upload files its entry at the profile's own time.
    let mut profile = stacklens_core::parse(&std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap()).unwrap();
    profile.time_nanos = now_secs() as i64 * 1_000_000_000;
    let bytes = stacklens_core::export::pprof::write(&profile);
    let served = bytes.clone();
    let target = stand_in(move |_| Some(served.clone()));
    let targets = temp_dir("holders-targets").join("targets.toml");
    std::fs::write(
        &targets,
        format!("[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{target}/debug/pprof\"\n"),
    )
    .unwrap();
    let store = format!("file://{}", temp_dir("holders-store").display());
    let mut args = vec![
        "--targets",
        targets.to_str().unwrap(),
        "--min-expires-in",
        "1s",
        "--retention-tick-ms",
        "100",
        "--schedule-tick-ms",
        "100",
    ];
    if ending == Ending::Retention {
        args.extend(["--retention-days", "1"]);
    }
    let server = Server::start(&store, &args, &[]);
    let http = Client::new();
    let api = |path: &str| format!("{}{path}", server.base);
    let get = |path: &str| json_of(http.get(api(path)).send().unwrap());
    let started = now_secs();

    // The upload, naming the service (so it files a time-index entry of its own).
    let expires = if ending == Ending::Expiry { "&expiresIn=3s" } else { "" };
    let (status, upload) =
        json_of(http.post(api(&format!("/api/v1/profiles?service=shop{expires}"))).body(bytes.clone()).send().unwrap());
    assert_eq!(status, 201, "{upload}");
    let session = upload["id"].as_str().unwrap().to_owned();
    // The push: two days old when the server's retention is what ends (it removes the
    // push's entry alone), else now.
    let pushed_at = if ending == Ending::Retention { started - 2 * 86_400 } else { started };
    let r = http
        .post(api(&format!("/ingest?name=shop.cpu&from={pushed_at}&until={}&format=pprof", pushed_at + 10)))
        .body(bytes.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().unwrap());
    // The capture from the target serving the same bytes.
    let (status, capture) = json_of(
        http.post(api("/api/v1/observability/profiling/start"))
            .json(&json!({"service": "shop", "profileType": "cpu", "durationSeconds": 1}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 202, "{capture}");
    let capture_id = capture["id"].as_str().unwrap().to_owned();
    let capture = until("the capture", PATIENCE, || {
        let (_, c) = get(&format!("/api/v1/observability/profiling/{capture_id}"));
        (c["status"] != "running").then_some(c)
    });
    assert_eq!(capture["sessionId"].as_str(), Some(session.as_str()), "one session for the same bytes: {capture}");
    // The baseline of the session, and a blob of the same bytes.
    let (status, baseline) = json_of(
        http.post(api("/api/v1/profiling/baselines"))
            .json(&json!({"label": "v1", "sessionId": session, "profileType": "cpu"}))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 201, "{baseline}");
    let baseline_id = baseline["baselineId"].as_str().unwrap().to_owned();
    let (status, blob) = json_of(http.post(api("/api/v1/blobs")).body(bytes.clone()).send().unwrap());
    assert_eq!(status, 201, "{blob}");
    let blob_id = blob["id"].as_str().unwrap().to_owned();

    let merged = |from: u64, to: u64| {
        let (status, merged) =
            get(&format!("/api/v1/profiling/merge?service=shop&profileType=cpu&from={from}&to={to}"));
        assert_eq!(status, 200, "{merged}");
        merged["profileCount"].as_u64().unwrap()
    };
    let (recent_from, recent_to) = (started - 60, now_secs() + 60);
    let expected_before = if ending == Ending::Retention { 2 } else { 3 };
    assert_eq!(merged(recent_from, recent_to), expected_before, "the upload's, the push's and the capture's entries");

    // The ending, and what each remaining holder should see after it.
    let (expected_after, link_after) = match ending {
        Ending::Expiry => {
            until("the upload's link to expire", PATIENCE, || {
                (http.get(api(&format!("/api/v1/profiles/{session}"))).send().unwrap().status() != 200).then_some(())
            });
            // The sweep ends the link (every 100 ms here): the upload's entry leaves the index.
            until("the sweep to take the upload's entry", PATIENCE, || {
                (merged(recent_from, recent_to) != 3).then_some(())
            });
            (2, None)
        }
        Ending::DeleteToken => {
            let token = upload["deleteToken"].as_str().unwrap();
            let r = http
                .delete(api(&format!("/api/v1/profiles/{session}")))
                .header("X-Stacklens-Delete-Token", token)
                .send()
                .unwrap();
            assert_eq!(r.status(), 204, "{}", r.text().unwrap());
            (2, Some(404))
        }
        Ending::Retention => {
            // The sweep may have removed it already: it was past the retention when pushed.
            until("the retention to remove the old push's entry", PATIENCE, || {
                (merged(pushed_at - 60, pushed_at + 60) == 0).then_some(())
            });
            (2, Some(200))
        }
        Ending::ScheduleRetention => {
            let schedule = json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": 0.00001,
                "enabled": false});
            let (status, body) =
                json_of(http.post(api("/api/v1/observability/profiling/continuous")).json(&schedule).send().unwrap());
            assert_eq!(status, 201, "{body}");
            until("the schedule's retention to remove the capture", PATIENCE, || {
                let (status, _) = get(&format!("/api/v1/observability/profiling/{capture_id}"));
                (status == 404).then_some(())
            });
            (2, Some(200))
        }
    };
    // Past a few more sweeps, nothing else has gone.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        merged(recent_from, now_secs() + 60),
        expected_after,
        "{ending:?} ends one holder's entry: the others' stay in the merge"
    );
    if let Some(status) = link_after {
        let link = http.get(api(&format!("/api/v1/profiles/{session}"))).send().unwrap().status();
        assert_eq!(link.as_u16(), status, "the upload's link after {ending:?}");
    }
    // The baseline still reads the bytes, and so does the capture (unless it was what ended).
    let raw = |path: &str| http.get(api(path)).send().unwrap();
    let (status, base) = get(&format!("/api/v1/profiling/baselines/{baseline_id}"));
    assert_eq!(status, 200, "{base}");
    let compare = format!(
        "/api/v1/observability/profiling/compare?baseProfileId={baseline_id}&comparisonProfileId={}",
        if ending == Ending::ScheduleRetention { baseline_id.as_str() } else { capture_id.as_str() }
    );
    let (status, compared) = get(&compare);
    assert_eq!(status, 200, "the baseline (and capture) read their bytes after {ending:?}: {compared}");
    let blob = raw(&format!("/api/v1/blobs/{blob_id}"));
    assert_eq!(blob.status(), 200);
    assert_eq!(blob.bytes().unwrap().as_ref(), bytes.as_slice(), "the blob keeps its own bytes");
}

#[test]
fn an_upload_link_that_expires_leaves_the_others_data() {
    every_other_holder_keeps_its_data(Ending::Expiry);
}

#[test]
fn a_delete_token_revokes_the_link_and_leaves_the_others_data() {
    every_other_holder_keeps_its_data(Ending::DeleteToken);
}

#[test]
fn the_servers_retention_removes_the_old_push_and_leaves_the_others_data() {
    every_other_holder_keeps_its_data(Ending::Retention);
}

#[test]
fn a_schedules_retention_removes_its_captures_and_leaves_the_others_data() {
    every_other_holder_keeps_its_data(Ending::ScheduleRetention);
}
