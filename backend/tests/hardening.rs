//! What an attacker on the network or on another site's page tried against a server
//! started as `serve.sh` starts it (no credentials): writes from other sites' pages,
//! requests for host names that are not the server's (DNS rebinding), JSON routes fed
//! `text/plain`; and schedules that pile up versions or cannot be removed.

mod common;

use common::{json_of, stand_in, temp_dir, Server};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};

/// A server with a capture target `shop`, on a local folder; extra arguments appended.
fn start(extra: &[&str]) -> (Server, std::path::PathBuf) {
    let target = stand_in(|_| Some(Vec::new()));
    let dir = temp_dir("hardening");
    let targets = dir.join("targets.toml");
    std::fs::write(
        &targets,
        format!("[[target]]\nservice = \"shop\"\nurl = \"http://127.0.0.1:{target}/debug/pprof\"\n"),
    )
    .unwrap();
    let store = dir.join("store");
    let mut args = vec!["--targets", targets.to_str().unwrap()];
    args.extend_from_slice(extra);
    (Server::start(&format!("file://{}", store.display()), &args, &[]), store)
}

fn schedule(retention_days: f64) -> Value {
    json!({"service": "shop", "profileTypes": ["cpu"], "retentionDays": retention_days, "enabled": false})
}

fn schedules(http: &Client, server: &Server) -> Vec<Value> {
    let (status, listed) =
        json_of(http.get(format!("{}/api/v1/observability/profiling/continuous", server.base)).send().unwrap());
    assert_eq!(status, 200, "{listed}");
    listed["schedules"].as_array().unwrap().clone()
}

/// The objects under `dir`, recursively.
fn objects(dir: &std::path::Path) -> usize {
    common::walk(dir).len()
}

#[test]
fn pages_of_other_sites_cannot_change_data() {
    let (server, _) = start(&[]);
    let http = Client::new();
    let url = format!("{}/api/v1/observability/profiling/continuous", server.base);
    // What the attacker's page sent: a "simple" request, no preflight.
    let forged = |r: RequestBuilder| json_of(r.header("Origin", "http://evil.example").send().unwrap());
    let (status, e) = forged(http.post(&url).header("Content-Type", "text/plain").body(schedule(0.0001).to_string()));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("CrossOriginRequest")), "{e}");
    let (status, e) = forged(http.post(&url).json(&schedule(0.0001)));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("CrossOriginRequest")), "{e}");
    // A browser that sends Fetch metadata instead of (or besides) Origin.
    let (status, e) =
        json_of(http.post(&url).header("Sec-Fetch-Site", "cross-site").json(&schedule(0.0001)).send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (403, Some("CrossOriginRequest")), "{e}");
    let (status, e) = forged(http.post(format!("{}/api/v1/profiles", server.base)).body("main;work 1\n"));
    assert_eq!((status, e["error_code"].as_str()), (403, Some("CrossOriginRequest")), "uploads too: {e}");
    assert_eq!(schedules(&http, &server), Vec::<Value>::new(), "nothing was stored");

    // JSON routes take JSON only, whoever sends it.
    let (status, e) =
        json_of(http.post(&url).header("Content-Type", "text/plain").body(schedule(1.0).to_string()).send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (415, Some("UnsupportedMediaType")), "{e}");
    let (status, e) = json_of(http.post(&url).body(schedule(1.0).to_string()).send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (415, Some("UnsupportedMediaType")), "no type: {e}");

    // The server's own page, and clients that send no Origin (curl, agents), still write.
    let own = json_of(http.post(&url).header("Origin", &server.base).json(&schedule(1.0)).send().unwrap());
    assert_eq!(own.0, 201, "{}", own.1);
    let plain = json_of(
        http.post(&url)
            .header("Content-Type", "application/json; charset=utf-8")
            .body(schedule(2.0).to_string())
            .send()
            .unwrap(),
    );
    assert_eq!(plain.0, 201, "{}", plain.1);
    // Reads from another origin are CORS's to guard: answered, without CORS headers.
    let read = http.get(&url).header("Origin", "http://evil.example").send().unwrap();
    assert_eq!(read.status(), 200);
    assert!(read.headers().get("access-control-allow-origin").is_none());

    // An origin the server trusts (--cors-origin) may write.
    let (trusting, _) = start(&["--cors-origin", "https://grafana.example"]);
    let url = format!("{}/api/v1/observability/profiling/continuous", trusting.base);
    let trusted =
        json_of(http.post(&url).header("Origin", "https://grafana.example").json(&schedule(1.0)).send().unwrap());
    assert_eq!(trusted.0, 201, "{}", trusted.1);
    let other = json_of(http.post(&url).header("Origin", "https://evil.example").json(&schedule(1.0)).send().unwrap());
    assert_eq!(other.0, 403, "{}", other.1);
}

#[test]
fn hosts_and_origins() {
    let (server, _) = start(&[]);
    let (public, _) = start(&["--public-url", "https://profiles.example.test/", "--allowed-host", "intra.lan"]);
    let http = Client::new();
    let get = |s: &Server, host: &str| {
        json_of(http.get(format!("{}/api/v1/profiles", s.base)).header("Host", host).send().unwrap())
    };
    let port = server.port;
    // DNS rebinding: a name the attacker controls, resolving to 127.0.0.1.
    for host in
        [format!("evil.example:{port}"), "rebind.127.0.0.1.nip.io".into(), format!("localhost.evil.example:{port}")]
    {
        let (status, e) = get(&server, &host);
        assert_eq!((status, e["error_code"].as_str()), (421, Some("UnknownHost")), "{host}: {e}");
    }
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "10.0.0.7".into()] {
        assert_eq!(get(&server, &host).0, 200, "{host}");
    }
    // The page is guarded too.
    let page = http.get(format!("{}/", server.base)).header("Host", "evil.example").send().unwrap();
    assert_eq!(page.status(), 421);
    // --public-url's host and --allowed-host are answered; others still are not.
    for (host, status) in [("profiles.example.test", 200), ("intra.lan:8080", 200), ("evil.example", 421)] {
        assert_eq!(get(&public, host).0, status, "{host}");
    }
    // The public URL's origin may write (the page served from behind a proxy).
    let own = http
        .post(format!("{}/api/v1/observability/profiling/continuous", public.base))
        .header("Origin", "https://profiles.example.test")
        .json(&schedule(1.0))
        .send()
        .unwrap();
    assert_eq!(own.status(), 201);
}

#[test]
fn a_schedule_keeps_one_version_and_can_be_removed() {
    let (server, store) = start(&[]);
    let http = Client::new();
    let url = format!("{}/api/v1/observability/profiling/continuous", server.base);
    let versions = || objects(&store.join("system/schedules"));
    for days in 1..=12 {
        let (status, body) = json_of(http.post(&url).json(&schedule(days as f64)).send().unwrap());
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(versions(), 1, "a save replaces the older versions");
    let listed = schedules(&http, &server);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["retentionDays"], 12.0, "the newest version wins");

    let r = http.delete(format!("{url}/shop")).send().unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(schedules(&http, &server), Vec::<Value>::new());
    assert_eq!(versions(), 0);
    let (status, e) = json_of(http.delete(format!("{url}/shop")).send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (404, Some("UnknownSchedule")), "{e}");
    let (status, e) =
        json_of(http.delete(format!("{url}/shop")).header("Origin", "http://evil.example").send().unwrap());
    assert_eq!((status, e["error_code"].as_str()), (403, Some("CrossOriginRequest")), "{e}");
}

#[test]
fn a_read_only_credential_writes_nothing_to_the_store() {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    const SECRET: &[u8] = b"an HS256 secret of at least 32 bytes!";
    let dir = temp_dir("read-only");
    let secret = dir.join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let store = dir.join("store");
    let server =
        Server::start(&format!("file://{}", store.display()), &["--jwt-secret-file", secret.to_str().unwrap()], &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let jwt = |scope: &str| {
        let claims = json!({"tenant": "acme", "exp": now + 600, "scope": scope});
        encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(SECRET)).unwrap()
    };
    let (reader, writer) = (jwt("read"), jwt("write"));
    let http = Client::new();
    // Two pushes three hours ago: their hour is closed, so reading it could be cached.
    let at = now - 3 * 3600;
    for stack in ["main;a", "main;b"] {
        let url = format!("{}/ingest?name=shop.cpu&from={at}&until={}&format=folded", server.base, at + 10);
        let r = http.post(url).bearer_auth(&writer).body(format!("{stack} 5\n")).send().unwrap();
        assert_eq!(r.status(), 200);
    }
    let caches = || objects(&store.join("tenants/acme/series-cache"));
    let range = format!("service=shop&profileType=cpu&from={}&to={}", at - 3600, at + 3600);
    let read = |token: &str| {
        for path in ["merge", "series", "labels"] {
            let url = format!("{}/api/v1/profiling/{path}?{range}", server.base);
            let (status, body) = json_of(http.get(url).bearer_auth(token).send().unwrap());
            assert_eq!(status, 200, "{path}: {body}");
        }
        let url = format!("{}/api/v1/profiling/merge?{range}", server.base);
        json_of(http.get(url).bearer_auth(token).send().unwrap()).1["profileCount"].as_u64().unwrap()
    };
    assert_eq!(read(&reader), 2);
    assert_eq!(caches(), 0, "a read-only credential's reads left objects in the store");
    assert_eq!(read(&writer), 2);
    assert!(caches() > 0, "a writer's reads cache the closed hour");
}
