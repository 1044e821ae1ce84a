//! Credentials carry the tenant: API keys per tenant (plain and hashed), admin keys,
//! HS256 and ES256 JWTs with tenant, exp and scope, on every route of a real server;
//! share links as capabilities (ids unguessable, not derived from content); owners
//! deleting what they shared, with a credential or the upload's delete token; blobs
//! under the same rules as uploads; the token file re-read on SIGHUP.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{fixtures, temp_dir, walk, Server};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const ADMIN: &str = "admin-key-1";
const ACME: &str = "acme-key-1";
const GLOBEX: &str = "globex-key-1";
const SECRET: &[u8] = b"an HS256 secret of at least 32 bytes!";

fn token_file(dir: &Path, extra: &str) -> PathBuf {
    let file = dir.join("tokens");
    let globex_hash = hex::encode(Sha256::digest(GLOBEX.as_bytes()));
    std::fs::write(&file, format!("# admins\n{ADMIN}\n\nacme:{ACME}\nglobex:sha256:{globex_hash}\n{extra}")).unwrap();
    file
}

fn jwt(claims: Value) -> String {
    encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET)).unwrap()
}

fn exp_in(seconds: i64) -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64 + seconds
}

fn start(dir: &Path) -> Server {
    let secret = dir.join("jwt-secret");
    std::fs::write(&secret, SECRET).unwrap();
    let tokens = token_file(dir, "");
    let store = format!("file://{}", dir.join("store").display());
    Server::start(
        &store,
        &["--token-file", tokens.to_str().unwrap(), "--jwt-secret-file", secret.to_str().unwrap()],
        &[],
    )
}

fn answer(r: RequestBuilder) -> (u16, Value) {
    let response = r.send().unwrap();
    let status = response.status().as_u16();
    (status, response.json().unwrap_or(Value::Null))
}

/// Routes that open a record by its (unguessable) id need no credential.
fn is_open(method: &str, path: &str) -> bool {
    method == "get"
        && matches!(
            path,
            "/healthz"
                | "/api/v1/profiles/{id}"
                | "/api/v1/profiles/{id}/raw"
                | "/api/v1/profiling/baselines/{id}"
                | "/api/v1/blobs/{id}"
        )
}

/// Diffs, symbolication and Pyroscope's queries read (a POST only because their
/// questions are bodies).
fn writes(method: &str, path: &str) -> bool {
    method != "get"
        && !matches!(path, "/api/v1/profiling/diff" | "/symbolicate/v5")
        && !path.starts_with("/querier.v1.QuerierService/")
}

/// Every documented route, as (method, path).
fn routes(http: &Client, server: &Server) -> Vec<(String, String)> {
    let doc: Value = http.get(format!("{}/api/openapi.json", server.base)).send().unwrap().json().unwrap();
    let mut routes = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            routes.push((method.clone(), path.clone()));
        }
    }
    assert_eq!(routes.len(), 51, "{routes:?}");
    routes
}

/// The gRPC route answers credentials as gRPC does: HTTP 200, the status in
/// `grpc-status` (16 UNAUTHENTICATED, 7 PERMISSION_DENIED), and for a credential that
/// passes, the framed answer to the empty message the request sends.
fn grpc_credentials(http: &Client, url: &str, read_only: &str, expired: &str, forged: &str) {
    let answer = |bearer: Option<&str>, tenant: Option<&str>| {
        let mut r = http.post(url).header("content-type", "application/grpc").body(vec![0u8; 5]);
        if let Some(b) = bearer {
            r = r.bearer_auth(b);
        }
        if let Some(t) = tenant {
            r = r.header("X-Tenant-ID", t);
        }
        let r = r.send().unwrap();
        assert_eq!(r.status(), 200, "{url}");
        let status = r.headers().get("grpc-status").map(|v| v.to_str().unwrap().to_owned());
        (status, r.bytes().unwrap().to_vec())
    };
    assert_eq!(answer(None, Some("acme")).0.as_deref(), Some("16"));
    for bad in ["wrong-key", expired, forged] {
        assert_eq!(answer(Some(bad), None).0.as_deref(), Some("16"), "{bad}");
    }
    for (key, other) in [(ACME, "globex"), (GLOBEX, "acme")] {
        assert_eq!(answer(Some(key), Some(other)).0.as_deref(), Some("7"), "{key} as {other}");
    }
    assert_eq!(answer(Some(read_only), None).0.as_deref(), Some("7"), "a read-only credential");
    for key in [ACME, ADMIN] {
        assert_eq!(answer(Some(key), Some("acme")), (None, vec![0u8; 5]), "{key}");
    }
}

#[test]
fn every_route_checks_the_credential_and_its_tenant() {
    let dir = temp_dir("auth-routes");
    let server = start(&dir);
    let http = Client::new();
    let read_only = jwt(json!({"tenant": "acme", "exp": exp_in(600), "scope": "read"}));
    let expired = jwt(json!({"tenant": "acme", "exp": exp_in(-60)}));
    let forged = encode(
        &Header::new(Algorithm::HS256),
        &json!({"tenant": "acme", "exp": exp_in(600)}),
        &EncodingKey::from_secret(b"not the server's secret, but 32 bytes"),
    )
    .unwrap();
    for (method, path) in routes(&http, &server) {
        let url = format!("{}{}", server.base, path.replace("{id}", "sess-0123456789abcdef0123456789abcdef"))
            .replace("{pipeline_name}", "p")
            .replace("{index}", "0")
            .replace("{service}", "shop")
            .replace("{buildId}", "ab")
            .replace("{artifact}", "debuginfo");
        let request = |bearer: Option<&str>, tenant: Option<&str>| {
            let mut r = http.request(method.to_uppercase().parse().unwrap(), &url).body("{}");
            if let Some(b) = bearer {
                r = r.bearer_auth(b);
            }
            if let Some(t) = tenant {
                r = r.header("X-Tenant-ID", t);
            }
            answer(r)
        };
        let code = |a: &(u16, Value)| (a.0, a.1["error_code"].as_str().map(str::to_owned));
        let route = format!("{method} {path}");
        // Liveness and this replica's counters (no tenant's data) are open to probes.
        if path == "/healthz" || path == "/metrics" {
            assert_eq!(request(None, None).0, 200);
            continue;
        }
        if path.starts_with("/opentelemetry.") {
            grpc_credentials(&http, &url, &read_only, &expired, &forged);
            continue;
        }
        // No credential.
        let none = request(None, Some("acme"));
        if is_open(&method, &path) {
            // Past authorization: the made-up id is simply unknown.
            assert_eq!(none.0, 404, "{route}: share links need no credential: {}", none.1);
            assert!(none.1["error_code"].as_str().unwrap().ends_with("NotFound"), "{route}: {}", none.1);
        } else {
            assert_eq!(code(&none), (401, Some("Unauthorized".into())), "{route}: {}", none.1);
        }
        // Invalid, expired and forged credentials.
        for bad in ["wrong-key", expired.as_str(), forged.as_str()] {
            assert_eq!(code(&request(Some(bad), None)), (401, Some("Unauthorized".into())), "{route} with {bad}");
        }
        // Basic auth carries the credential as its password (as Pyroscope's agents send it).
        let basic = |password: &str| {
            let r = http.request(method.to_uppercase().parse().unwrap(), &url).body("{}");
            answer(r.basic_auth("agent", Some(password)).header("X-Tenant-ID", "acme"))
        };
        assert_eq!(code(&basic("wrong-key")), (401, Some("Unauthorized".into())), "{route} with basic auth");
        let answered = basic(ACME);
        assert!(![401, 403].contains(&answered.0), "{route} with basic auth: {}", answered.1);
        // Another tenant's credential: 403, wherever the tenant is named.
        for (key, other) in [(ACME, "globex"), (GLOBEX, "acme")] {
            let answered = request(Some(key), Some(other));
            assert_eq!(code(&answered), (403, Some("Forbidden".into())), "{route}: {}", answered.1);
        }
        let by_query = answer(
            http.request(
                method.to_uppercase().parse().unwrap(),
                format!("{url}{}tenant=globex", if url.contains('?') { "&" } else { "?" }),
            )
            .bearer_auth(ACME)
            .body("{}"),
        );
        assert_eq!(code(&by_query), (403, Some("Forbidden".into())), "{route} ?tenant=");
        // The right credentials get past authorization (whatever the handler says next).
        for key in [ACME, &jwt(json!({"tenant": "acme", "exp": exp_in(600)})), ADMIN] {
            let answered = request(Some(key), Some("acme"));
            assert!(![401, 403].contains(&answered.0), "{route}: {}", answered.1);
        }
        // A read-only JWT may read, not write.
        let answered = request(Some(&read_only), None);
        if writes(&method, &path) {
            assert_eq!(code(&answered), (403, Some("InsufficientScope".into())), "{route}");
        } else {
            assert!(![401, 403].contains(&answered.0), "{route}: {}", answered.1);
        }
    }
}

#[test]
fn tenants_see_only_their_own_and_links_are_capabilities() {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let dir = temp_dir("auth-tenants");
    let server = start(&dir);
    let http = Client::new();
    let upload = |key: &str| {
        answer(
            http.post(format!("{}/api/v1/profiles?service=checkout", server.base)).bearer_auth(key).body(cpu.clone()),
        )
    };
    // The tenant comes from the credential: no header needed.
    let (status, acme) = upload(ACME);
    assert_eq!(status, 201, "{acme}");
    let id = acme["id"].as_str().unwrap().to_owned();
    assert_eq!(acme["shareUrl"], format!("{}/#/s/{id}?tenant=acme", server.base));
    // The same bytes again in the same tenant: the same session, stored once.
    let (status, again) = upload(ACME);
    assert_eq!((status, &again["id"]), (200, &acme["id"]));
    let raw_objects =
        walk(&dir.join("store")).into_iter().filter(|p| p.extension().is_some_and(|e| e == "raw")).count();
    assert_eq!(raw_objects, 1, "deduplicated bytes are stored once");
    // The id is not derived from the content: a fresh store gives another one.
    let fresh_dir = temp_dir("auth-fresh");
    let fresh = start(&fresh_dir);
    let (_, elsewhere) =
        answer(http.post(format!("{}/api/v1/profiles", fresh.base)).bearer_auth(ACME).body(cpu.clone()));
    assert_ne!(elsewhere["id"], acme["id"]);
    assert_eq!(elsewhere["sha256"], acme["sha256"]);
    // globex: its own (empty) listing; acme's id does not exist for it.
    let (status, listed) = answer(http.get(format!("{}/api/v1/profiles", server.base)).bearer_auth(GLOBEX));
    assert_eq!((status, &listed["profiles"]), (200, &json!([])));
    let (status, _) = answer(http.get(format!("{}/api/v1/profiles/{id}", server.base)).bearer_auth(GLOBEX));
    assert_eq!(status, 404);
    // An admin key chooses the tenant.
    let (status, listed) =
        answer(http.get(format!("{}/api/v1/profiles", server.base)).bearer_auth(ADMIN).header("X-Tenant-ID", "acme"));
    assert_eq!((status, listed["profiles"][0]["id"].as_str()), (200, Some(id.as_str())));
    // The link works without any credential.
    let link = http.get(format!("{}/api/v1/profiles/{id}/raw?tenant=acme", server.base)).send().unwrap();
    assert_eq!(link.bytes().unwrap().as_ref(), cpu.as_slice());
    // The owner deletes: the link answers 404 at once; an upload of the same bytes is a new session.
    let deleted = http.delete(format!("{}/api/v1/profiles/{id}", server.base)).bearer_auth(GLOBEX).send().unwrap();
    assert_eq!(deleted.status(), 404, "another tenant cannot delete it");
    let deleted = http.delete(format!("{}/api/v1/profiles/{id}", server.base)).bearer_auth(ACME).send().unwrap();
    assert_eq!(deleted.status(), 204);
    let (status, body) = answer(http.get(format!("{}/api/v1/profiles/{id}/raw?tenant=acme", server.base)));
    assert_eq!((status, body["error_code"].as_str()), (404, Some("ProfileNotFound")));
    let (status, listed) = answer(http.get(format!("{}/api/v1/profiles", server.base)).bearer_auth(ACME));
    assert_eq!((status, &listed["profiles"]), (200, &json!([])));
    let (status, renewed) = upload(ACME);
    assert_eq!(status, 201);
    assert_ne!(renewed["id"], acme["id"]);
    // Nothing of the deleted session is left in the store.
    let left: Vec<PathBuf> =
        walk(&dir.join("store")).into_iter().filter(|p| p.to_string_lossy().contains(&id)).collect();
    assert_eq!(left, Vec::<PathBuf>::new());
}

/// The delete token an upload gets revokes its link without a credential, in its tenant
/// only; a wrong one is refused; none and no credential is 401. Uploads of the same bytes
/// share the link, so each one's token revokes it. Tokens are kept only as hashes.
#[test]
fn delete_tokens_revoke_links_without_a_credential() {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let dir = temp_dir("auth-delete-tokens");
    let server = start(&dir);
    let http = Client::new();
    let url = |path: &str| format!("{}{path}", server.base);
    let upload = || answer(http.post(url("/api/v1/profiles")).bearer_auth(ACME).body(cpu.clone()));
    let (status, first) = upload();
    assert_eq!(status, 201, "{first}");
    let id = first["id"].as_str().unwrap().to_owned();
    let token = first["deleteToken"].as_str().unwrap().to_owned();
    let profile = url(&format!("/api/v1/profiles/{id}?tenant=acme"));
    let code = |a: (u16, Value)| (a.0, a.1["error_code"].as_str().map(str::to_owned));
    assert_eq!(code(answer(http.delete(&profile))), (401, Some("Unauthorized".into())));
    let wrong = answer(http.delete(&profile).header("X-Stacklens-Delete-Token", "0".repeat(64)));
    assert_eq!(code(wrong), (403, Some("InvalidDeleteToken".into())));
    assert_eq!(
        code(answer(http.delete(format!("{profile}&deleteToken=nope")))),
        (403, Some("InvalidDeleteToken".into()))
    );
    // In another tenant the id names nothing.
    let elsewhere = url(&format!("/api/v1/profiles/{id}?tenant=globex"));
    assert_eq!(answer(http.delete(&elsewhere).header("X-Stacklens-Delete-Token", &token)).0, 404);
    assert_eq!(http.get(&profile).send().unwrap().status(), 200, "still there");
    // The same bytes again: the same session, a token of this upload's own.
    let (status, again) = upload();
    assert_eq!((status, &again["id"]), (200, &first["id"]));
    let second = again["deleteToken"].as_str().unwrap().to_owned();
    assert_ne!(second, token);
    // Neither token is stored in clear, in any object's name or bytes.
    for file in walk(&dir.join("store")) {
        let path = file.to_string_lossy().into_owned();
        let bytes = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for t in [&token, &second] {
            assert!(!path.contains(t.as_str()) && !bytes.contains(t.as_str()), "{path} holds a delete token");
        }
    }
    // The second upload's token revokes the link for everyone (as a query parameter here).
    assert_eq!(answer(http.delete(format!("{profile}&deleteToken={second}"))).0, 204);
    assert_eq!(code(answer(http.get(&profile))), (404, Some("ProfileNotFound".into())));
    assert_eq!(answer(http.delete(&profile).header("X-Stacklens-Delete-Token", &token)).0, 404);
    // A write credential still deletes without a token.
    let (_, renewed) = upload();
    let renewed = renewed["id"].as_str().unwrap();
    let deleted = http.delete(url(&format!("/api/v1/profiles/{renewed}"))).bearer_auth(ACME).send().unwrap();
    assert_eq!(deleted.status(), 204);

    // Blobs: written under the rules of uploads, read by their id, revoked by their token.
    let blob_body = b"\x00ciphertext\xff".to_vec();
    let post_blob = |r: RequestBuilder| answer(r.body(blob_body.clone()));
    assert_eq!(code(post_blob(http.post(url("/api/v1/blobs")))), (401, Some("Unauthorized".into())));
    let other = post_blob(http.post(url("/api/v1/blobs")).bearer_auth(ACME).header("X-Tenant-ID", "globex"));
    assert_eq!(code(other), (403, Some("Forbidden".into())));
    let read_only = jwt(json!({"tenant": "acme", "exp": exp_in(600), "scope": "read"}));
    assert_eq!(
        code(post_blob(http.post(url("/api/v1/blobs")).bearer_auth(&read_only))),
        (403, Some("InsufficientScope".into()))
    );
    let (status, blob) = post_blob(http.post(url("/api/v1/blobs")).bearer_auth(ACME));
    assert_eq!(status, 201, "{blob}");
    let blob_id = blob["id"].as_str().unwrap();
    assert_eq!(blob["url"], url(&format!("/api/v1/blobs/{blob_id}?tenant=acme")));
    let blob_token = blob["deleteToken"].as_str().unwrap();
    let link = url(&format!("/api/v1/blobs/{blob_id}?tenant=acme"));
    let read = http.get(&link).send().unwrap();
    assert_eq!(read.status(), 200, "a link needs no credential");
    assert_eq!(read.bytes().unwrap().as_ref(), blob_body.as_slice());
    let (status, body) = answer(http.get(url(&format!("/api/v1/blobs/{blob_id}?tenant=globex"))));
    assert_eq!((status, body["error_code"].as_str()), (404, Some("BlobNotFound")));
    assert_eq!(code(answer(http.delete(&link))), (401, Some("Unauthorized".into())));
    let wrong = answer(http.delete(&link).header("X-Stacklens-Delete-Token", &token));
    assert_eq!(code(wrong), (403, Some("InvalidDeleteToken".into())));
    assert_eq!(answer(http.delete(&link).header("X-Stacklens-Delete-Token", blob_token)).0, 204);
    assert_eq!(code(answer(http.get(&link))), (404, Some("BlobNotFound".into())));
}

#[test]
fn the_token_file_is_read_again_on_sighup() {
    let dir = temp_dir("auth-sighup");
    let server = start(&dir);
    let http = Client::new();
    let list = |key: &str| answer(http.get(format!("{}/api/v1/profiles", server.base)).bearer_auth(key)).0;
    assert_eq!(list("initech-key"), 401);
    token_file(&dir, "initech:initech-key\n");
    let hup = std::process::Command::new("kill").args(["-HUP", &server.pid().to_string()]).status().unwrap();
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while list("initech-key") != 200 {
        assert!(Instant::now() < deadline, "the new key was not accepted after SIGHUP");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(list(ACME), 200, "the other keys stay");
}

#[test]
fn es256_jwts_from_a_public_key() {
    let dir = temp_dir("auth-es256");
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ec.pem"]);
    openssl(&["pkcs8", "-topk8", "-nocrypt", "-in", "ec.pem", "-out", "private.pem"]);
    openssl(&["ec", "-in", "ec.pem", "-pubout", "-out", "public.pem"]);
    let store = format!("file://{}", dir.join("store").display());
    let server = Server::start(&store, &["--jwt-public-key", dir.join("public.pem").to_str().unwrap()], &[]);
    let key = EncodingKey::from_ec_pem(&std::fs::read(dir.join("private.pem")).unwrap()).unwrap();
    let token = encode(&Header::new(Algorithm::ES256), &json!({"tenant": "acme", "exp": exp_in(600)}), &key).unwrap();
    let http = Client::new();
    let (status, listed) = answer(http.get(format!("{}/api/v1/profiles", server.base)).bearer_auth(&token));
    assert_eq!((status, &listed["profiles"]), (200, &json!([])));
    // An HS256 token is refused by an ES256 server, whatever its claims.
    let (status, _) = answer(
        http.get(format!("{}/api/v1/profiles", server.base))
            .bearer_auth(jwt(json!({"tenant": "acme", "exp": exp_in(600)}))),
    );
    assert_eq!(status, 401);
}

/// Without credentials configured (the local default) nothing changes: no sign-in.
#[test]
fn without_credentials_everything_stays_open() {
    let dir = temp_dir("auth-none");
    let server = Server::start(&format!("file://{}", dir.display()), &[], &[]);
    let http = Client::new();
    let (status, _) = answer(http.get(format!("{}/api/v1/profiles", server.base)).header("X-Tenant-ID", "acme"));
    assert_eq!(status, 200);
    let (status, body) = answer(http.post(format!("{}/api/v1/profiles", server.base)).body("not a profile"));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidProfile")));
}
