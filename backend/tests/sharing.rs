//! Private sharing on a real server, on a local folder and on SeaweedFS: encrypted blobs
//! kept byte for byte and never read (analyses refuse their ids), links that expire
//! (410, then the sweep removes what only they held, while a baseline keeps its bytes
//! and a lasting upload of the same bytes keeps its link), and delete tokens.

mod common;

use std::time::Duration;

use common::{fixtures, free_port, gzip, json_of, temp_dir, until, walk, Backing, Seaweed, Server};
use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// How long a wait in these tests may take at most.
const PATIENCE: Duration = Duration::from_secs(60);

const MAX_UPLOAD: usize = 256 << 10;

/// A client of one server, for the default tenant, without credentials (none configured).
struct Api {
    http: Client,
    base: String,
}

impl Api {
    fn new(server: &Server) -> Api {
        Api { http: Client::new(), base: server.base.clone() }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn send(&self, request: RequestBuilder) -> (u16, Value) {
        json_of(request.send().unwrap())
    }

    fn post(&self, path: &str, body: Vec<u8>) -> (u16, Value) {
        self.send(self.http.post(self.url(path)).body(body))
    }

    fn post_json(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(self.http.post(self.url(path)).json(&body))
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(self.url(path)))
    }

    fn get_raw(&self, path: &str) -> Response {
        self.http.get(self.url(path)).send().unwrap()
    }

    fn delete(&self, path: &str, token: Option<&str>) -> u16 {
        let mut request = self.http.delete(self.url(path));
        if let Some(token) = token {
            request = request.header("X-Stacklens-Delete-Token", token);
        }
        request.send().unwrap().status().as_u16()
    }
}

/// `len` bytes no reader would take for anything (xorshift).
fn noise(len: usize, mut state: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn code(answer: &(u16, Value)) -> (u16, Option<&str>) {
    (answer.0, answer.1["error_code"].as_str())
}

fn blobs_scenario(backing: &Backing, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let server = Server::start(&backing.url(), &["--max-upload", &MAX_UPLOAD.to_string()], env);
    let api = Api::new(&server);
    // A gzip header before noise, and 20 MiB of zeros gzipped into a few KiB, which
    // as a profile is refused once it inflates past the cap (4 × --max-upload).
    let mut gzip_header = vec![0x1f, 0x8b, 0x08, 0x00];
    gzip_header.extend(noise(3000, 9));
    let bomb = gzip(&vec![0u8; 20 << 20]);
    assert!(bomb.len() < MAX_UPLOAD, "{}", bomb.len());
    assert_eq!(code(&api.post("/api/v1/profiles", bomb.clone())), (413, Some("InflatesTooLarge")));
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let mut blobs = Vec::new();
    for body in [noise(40_000, 7), gzip_header, bomb, cpu.clone(), vec![0xAB; MAX_UPLOAD], Vec::new()] {
        let (status, blob) = api.post("/api/v1/blobs", body.clone());
        assert_eq!(status, 201, "{blob}");
        let id = blob["id"].as_str().unwrap().to_owned();
        let hex = id.strip_prefix("blob-").unwrap();
        assert!(hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "128 random bits: {id}");
        assert_eq!(blob["url"], format!("{}/api/v1/blobs/{id}", server.base));
        assert_eq!(blob["size"], body.len());
        assert!(blob.get("expiresAt").is_none(), "{blob}");
        let token = blob["deleteToken"].as_str().unwrap().to_owned();
        assert!(token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
        // The exact bytes, not sniffed, not shared caches' to keep.
        let read = api.get_raw(&format!("/api/v1/blobs/{id}"));
        assert_eq!(read.status(), 200);
        let header = |name: &str| read.headers()[name].to_str().unwrap().to_owned();
        assert_eq!(header("content-type"), "application/octet-stream");
        assert_eq!(header("cache-control"), "private");
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert!(read.headers().get("content-encoding").is_none());
        assert_eq!(read.bytes().unwrap().as_ref(), body.as_slice());
        // The stored object is what was sent; its record keeps only the token's hash.
        assert_eq!(backing.read(&format!("tenants/default/blobs/{id}.bin")).as_deref(), Some(body.as_slice()));
        let record = backing.read(&format!("tenants/default/blobs/{id}.json")).unwrap();
        assert!(!String::from_utf8_lossy(&record).contains(&token), "the token is not stored");
        let record: Value = serde_json::from_slice(&record).unwrap();
        assert_eq!(record["deleteTokenSha256"], hex::encode(Sha256::digest(token.as_bytes())));
        assert_eq!(
            (&record["id"], &record["tenant"], &record["size"]),
            (&json!(id), &json!("default"), &json!(body.len()))
        );
        blobs.push((id, token));
    }
    // Nothing of them became a session.
    assert_eq!(api.get("/api/v1/profiles").1["profiles"], json!([]));
    let (status, e) = api.post("/api/v1/blobs", vec![1; MAX_UPLOAD + 1]);
    assert_eq!(
        (status, e["error_code"].as_str(), &e["details"]["limit"]),
        (413, Some("PayloadTooLarge"), &json!(MAX_UPLOAD))
    );

    // The server cannot analyse a blob: every route that resolves a session says so.
    let (status, session) = api.post("/api/v1/profiles", cpu);
    assert_eq!(status, 201, "{session}");
    let session = session["id"].as_str().unwrap().to_owned();
    let blob = blobs[0].0.clone();
    let encrypted = |answer: (u16, Value)| {
        assert_eq!(code(&answer), (422, Some("EncryptedBlob")), "{}", answer.1);
        assert_eq!(answer.1["details"]["id"], json!(blob));
    };
    encrypted(api.post_json("/api/v1/profiling/diff", json!({"baseId": blob, "compareId": session, "type": "cpu"})));
    encrypted(api.post_json("/api/v1/profiling/diff", json!({"baseId": session, "compareId": blob, "type": "cpu"})));
    encrypted(api.get(&format!("/api/v1/profiling/sessions/{blob}/analysis")));
    encrypted(
        api.post_json("/api/v1/profiling/baselines", json!({"label": "b", "sessionId": blob, "profileType": "cpu"})),
    );
    encrypted(
        api.get(&format!("/api/v1/observability/profiling/compare?baseProfileId={session}&comparisonProfileId={blob}")),
    );
    encrypted(api.get(&format!("/api/v1/profiles/{blob}")));
    encrypted(api.get(&format!("/api/v1/profiles/{blob}/raw")));
    // An id of the blob form that names nothing is just unknown.
    let unknown = "blob-0123456789abcdef0123456789abcdef";
    let (status, e) = api.get(&format!("/api/v1/profiling/sessions/{unknown}/analysis"));
    assert_eq!((status, e["error_code"].as_str()), (404, Some("ProfileNotFound")));
    assert_eq!(code(&api.get(&format!("/api/v1/blobs/{unknown}"))), (404, Some("BlobNotFound")));
    assert_eq!(code(&api.get(&format!("/api/v1/blobs/{session}"))), (404, Some("BlobNotFound")));

    // Deleting: a wrong token changes nothing; the right one ends the link at once.
    let (id, token) = &blobs[0];
    let path = format!("/api/v1/blobs/{id}");
    let (status, e) =
        json_of(api.http.delete(api.url(&path)).header("X-Stacklens-Delete-Token", "nope").send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (403, Some("InvalidDeleteToken")));
    assert_eq!(api.delete(&path, Some(&blobs[1].1)), 403, "another blob's token");
    assert_eq!(api.get_raw(&path).status(), 200);
    assert_eq!(api.delete(&path, Some(token)), 204);
    assert_eq!(code(&api.get(&path)), (404, Some("BlobNotFound")));
    assert!(!backing.has(&format!("tenants/default/blobs/{id}.bin")), "the bytes are gone");
    assert!(!backing.has(&format!("tenants/default/blobs/{id}.json")), "the record is gone");
    assert_eq!(api.delete(&path, Some(token)), 404);
    // The token as a query parameter; and without credentials configured, no token is needed.
    let (id, token) = &blobs[1];
    assert_eq!(api.delete(&format!("/api/v1/blobs/{id}?deleteToken={token}"), None), 204);
    assert_eq!(api.get_raw(&format!("/api/v1/blobs/{id}")).status(), 404);
    assert_eq!(api.delete(&format!("/api/v1/blobs/{}", blobs[2].0), None), 204);
    assert_eq!(api.get_raw(&format!("/api/v1/blobs/{}", blobs[3].0)).status(), 200, "the others stay");
}

#[test]
fn blobs_are_kept_unread_on_a_local_folder() {
    blobs_scenario(&Backing::Folder(temp_dir("blobs")), &[]);
}

#[test]
fn blobs_are_kept_unread_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    blobs_scenario(&Backing::Seaweed(format!("blobs-{}", free_port())), &Seaweed::env());
}

/// Long enough for the uploads that must happen before it passes, short enough to wait for.
const LIFE: &str = "5s";

fn expiry_scenario(backing: &Backing, env: &[(&str, &str)]) {
    let Some(fx) = fixtures() else { return };
    let read = |f: &str| std::fs::read(fx.join(f)).unwrap();
    // No sweep while the links' 410 is looked at (it would make them 404 meanwhile);
    // a second server on the same store sweeps.
    let unswept = Server::start(&backing.url(), &["--min-expires-in", "1s", "--retention-tick-ms", "3600000"], env);
    let api = Api::new(&unswept);
    let upload = |query: &str, body: &[u8]| {
        let answer = api.post(&format!("/api/v1/profiles?{query}"), body.to_vec());
        assert!([200, 201].contains(&answer.0), "{query}: {}", answer.1);
        answer
    };
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();

    // D: expiring, then uploaded again without an expiry: its link no longer expires.
    let d = read("go/base/mutex.pb.gz");
    let (status, first_d) = upload(&format!("expiresIn={LIFE}"), &d);
    assert!(status == 201 && first_d["expiresAt"].is_string(), "{first_d}");
    let (status, again_d) = upload("", &d);
    assert_eq!((status, id(&again_d)), (200, id(&first_d)), "the same bytes, the same session");
    assert!(again_d.get("expiresAt").is_none(), "{again_d}");
    assert_ne!(again_d["deleteToken"], first_d["deleteToken"], "each upload has its own token");
    // E: expiring, then uploaded again with a later expiry: it expires then.
    let e = read("go/base/block.pb.gz");
    let (_, first_e) = upload(&format!("expiresIn={LIFE}"), &e);
    let (status, again_e) = upload("expiresIn=1h", &e);
    assert_eq!((status, id(&again_e)), (200, id(&first_e)));
    let later = again_e["expiresAt"].as_str().unwrap();
    assert!(later > first_e["expiresAt"].as_str().unwrap(), "{later}");
    assert_eq!(api.get(&format!("/api/v1/profiles/{}", id(&first_e))).1["expiresAt"], json!(later));
    // And again with a shorter one: extended, never shortened.
    let (_, shorter) = upload("expiresIn=2s", &e);
    assert_eq!(shorter["expiresAt"], json!(later));
    // C: lasting, then uploaded again with an expiry: it stays lasting.
    let c = read("go/base/cpu.pb.gz");
    let (status, lasting) = upload("", &c);
    assert!(status == 201 && lasting.get("expiresAt").is_none(), "{lasting}");
    let (status, again_c) = upload("expiresIn=1s", &c);
    assert_eq!((status, id(&again_c)), (200, id(&lasting)));
    assert!(again_c.get("expiresAt").is_none(), "{again_c}");
    // A: expires, with a service (so in the time index too).
    let a = read("go/compare/cpu.pb.gz");
    let (status, expiring) = upload(&format!("expiresIn={LIFE}&service=shop"), &a);
    assert_eq!(status, 201);
    assert!(expiring["expiresAt"].as_str().unwrap() > expiring["createdAt"].as_str().unwrap(), "{expiring}");
    // B: expires (asked by header), but a baseline holds it.
    let b = read("go/base/heap.pb.gz");
    let (status, held) = json_of(
        api.http
            .post(api.url("/api/v1/profiles"))
            .header("X-Stacklens-Expires-In", LIFE)
            .body(b.clone())
            .send()
            .unwrap(),
    );
    assert!(status == 201 && held["expiresAt"].is_string(), "{held}");
    let (status, baseline) = api.post_json(
        "/api/v1/profiling/baselines",
        json!({"label": "kept", "sessionId": id(&held), "profileType": "memory"}),
    );
    assert_eq!(status, 201, "{baseline}");
    let baseline = baseline["baselineId"].as_str().unwrap().to_owned();
    // F: a blob that expires.
    let (status, blob) = api.post(&format!("/api/v1/blobs?expiresIn={LIFE}"), noise(5000, 3));
    assert!(status == 201 && blob["expiresAt"].is_string(), "{blob}");
    let blob_id = id(&blob);
    let listed = |api: &Api| -> Vec<String> {
        api.get("/api/v1/profiles").1["profiles"].as_array().unwrap().iter().map(id).collect()
    };
    assert_eq!(listed(&api).len(), 5);

    // Its time up, every route of A's link answers 410 Expired.
    let (a_id, b_id) = (id(&expiring), id(&held));
    until("A's link to expire", PATIENCE, || (api.get(&format!("/api/v1/profiles/{a_id}")).0 == 410).then_some(()));
    let gone = |answer: (u16, Value), at: &Value| {
        assert_eq!(code(&answer), (410, Some("Expired")), "{}", answer.1);
        assert_eq!(&answer.1["details"]["expiresAt"], at);
    };
    gone(api.get(&format!("/api/v1/profiles/{a_id}")), &expiring["expiresAt"]);
    gone(api.get(&format!("/api/v1/profiles/{a_id}/raw")), &expiring["expiresAt"]);
    gone(
        api.post_json("/api/v1/profiling/diff", json!({"baseId": id(&lasting), "compareId": a_id, "type": "cpu"})),
        &expiring["expiresAt"],
    );
    gone(api.get(&format!("/api/v1/profiling/sessions/{a_id}/analysis")), &expiring["expiresAt"]);
    gone(
        api.post_json("/api/v1/profiling/baselines", json!({"label": "x", "sessionId": a_id, "profileType": "cpu"})),
        &expiring["expiresAt"],
    );
    until("F's link to expire", PATIENCE, || {
        (api.get_raw(&format!("/api/v1/blobs/{blob_id}")).status() == 410).then_some(())
    });
    gone(api.get(&format!("/api/v1/blobs/{blob_id}")), &blob["expiresAt"]);
    until("B's link to expire", PATIENCE, || (api.get(&format!("/api/v1/profiles/{b_id}")).0 == 410).then_some(()));
    // The others live on.
    for lives in [&lasting, &first_d, &first_e] {
        let (status, record) = api.get(&format!("/api/v1/profiles/{}", id(lives)));
        assert_eq!(status, 200, "{record}");
    }

    // A sweeping server removes A's bytes and record, and F's; B's are held by the baseline.
    drop(unswept);
    let sweeping = Server::start(&backing.url(), &["--min-expires-in", "1s", "--retention-tick-ms", "200"], env);
    let api = Api::new(&sweeping);
    until("the sweep to remove A and F", PATIENCE, || {
        let blob_gone = !backing.has(&format!("tenants/default/blobs/{blob_id}.bin"))
            && !backing.has(&format!("tenants/default/blobs/{blob_id}.json"));
        (backing.session_stored(&a_id) == (false, false) && blob_gone).then_some(())
    });
    assert_eq!(code(&api.get(&format!("/api/v1/profiles/{a_id}"))), (404, Some("ProfileNotFound")));
    assert_eq!(code(&api.get(&format!("/api/v1/blobs/{blob_id}"))), (404, Some("BlobNotFound")));
    assert_eq!(backing.session_stored(&b_id), (true, true), "the baseline holds B's bytes");
    assert_eq!(code(&api.get(&format!("/api/v1/profiles/{b_id}"))), (410, Some("Expired")));
    let (status, diff) =
        api.post_json("/api/v1/profiling/diff", json!({"baseId": baseline, "compareId": baseline, "type": "memory"}));
    assert_eq!((status, &diff["baseSessionId"]), (200, &json!(b_id)), "{diff}");
    let mut alive = vec![id(&lasting), id(&first_d), id(&first_e)];
    alive.sort();
    let mut now_listed = listed(&api);
    now_listed.sort();
    assert_eq!(now_listed, alive);
    // Nothing of A or F is left: no listing or time-index entry, reference or expiring entry.
    if let Backing::Folder(dir) = backing {
        let left: Vec<_> = walk(dir).into_iter().filter(|p| p.to_string_lossy().contains(&a_id)).collect();
        assert!(left.is_empty(), "{left:?}");
        let left: Vec<_> = walk(dir).into_iter().filter(|p| p.to_string_lossy().contains(&blob_id)).collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // A's bytes again: a new session, with a new link.
    let (status, renewed) = api.post("/api/v1/profiles", a.clone());
    assert_eq!(status, 201, "{renewed}");
    assert_ne!(id(&renewed), a_id);
    // Deleting the baseline releases B's bytes.
    assert_eq!(api.delete(&format!("/api/v1/profiling/baselines/{baseline}"), None), 204);
    assert_eq!(backing.session_stored(&b_id), (false, false));
}

#[test]
fn links_expire_on_a_local_folder() {
    expiry_scenario(&Backing::Folder(temp_dir("expiry")), &[]);
}

#[test]
fn links_expire_on_seaweedfs() {
    let Some(_weed) = Seaweed::start() else { return };
    expiry_scenario(&Backing::Seaweed(format!("expiry-{}", free_port())), &Seaweed::env());
}
