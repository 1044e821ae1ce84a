//! OTLP profiles into a real `stacklens serve`: OTLP/HTTP (protobuf, gzipped protobuf,
//! JSON) and OTLP/gRPC from OpenTelemetry's own Python classes and gRPC stub
//! (`tests/programs/otlp.py`, `.tools/otlp`), with a tenant's token; each lands in its
//! service's series, where the range API merges it with pprof's numbers. A broken
//! message is refused (400 InvalidProfile, gRPC INVALID_ARGUMENT) and stores nothing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixtures, gzip, json_of, missing_prerequisite, temp_dir, Server};
use prost::Message;
use reqwest::blocking::Client;
use serde_json::Value;
use stacklens_core::import::otlp::proto::{ExportProfilesServiceResponse, ProfilesData};

const TOKEN: &str = "acme-otlp-token-0123456789";

fn python() -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/otlp/bin/python");
    if python.is_file() {
        return Some(python);
    }
    missing_prerequisite(&format!("{} (opentelemetry-proto, grpcio; scripts/ensure-tools.sh)", python.display()));
    None
}

fn script(python: &Path, args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/programs/otlp.py");
    let out = Command::new(python).arg(script).args(args).output().unwrap();
    assert!(out.status.success(), "otlp.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn setup(name: &str) -> (Server, PathBuf) {
    let dir = temp_dir(name);
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("acme:{TOKEN}\n")).unwrap();
    let store = format!("file://{}", dir.join("store").display());
    (Server::start(&store, &["--token-file", tokens.to_str().unwrap()], &[]), dir)
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The last hour's merge of `service`'s `kind` profiles, by sample type `sample`.
fn merged(server: &Server, service: &str, kind: &str, sample: &str) -> Value {
    let url = format!(
        "{}/api/v1/profiling/merge?service={service}&profileType={kind}&sampleIndex={sample}&from={}&to={}&limit=5",
        server.base,
        now() - 3600,
        now() + 60
    );
    let (status, body) = json_of(Client::new().get(url).bearer_auth(TOKEN).send().unwrap());
    assert_eq!(status, 200, "{body}");
    body
}

fn post(server: &Server, content_type: &str, encoding: Option<&str>, body: Vec<u8>) -> reqwest::blocking::Response {
    let mut request = Client::new()
        .post(format!("{}/v1development/profiles", server.base))
        .bearer_auth(TOKEN)
        .header("content-type", content_type);
    if let Some(encoding) = encoding {
        request = request.header("content-encoding", encoding);
    }
    request.body(body).send().unwrap()
}

#[test]
fn otlp_over_http_and_grpc_lands_in_the_services_series_with_pprofs_numbers() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let (server, dir) = setup("otlp-push");
    let base = dir.join("cpu");
    let base_text = base.to_str().unwrap();
    script(&python, &["from-pprof", root.join("go/base/cpu.pb.gz").to_str().unwrap(), base_text, "shop"]);
    let protobuf = std::fs::read(format!("{base_text}.pb")).unwrap();

    let r = post(&server, "application/x-protobuf", Some("gzip"), gzip(&protobuf));
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-protobuf");
    let answer = ExportProfilesServiceResponse::decode(r.bytes().unwrap()).unwrap();
    assert_eq!(answer.partial_success, None);
    let r = post(&server, "application/json", None, std::fs::read(format!("{base_text}.json")).unwrap());
    let (status, answer) = json_of(r);
    assert_eq!((status, answer), (200, serde_json::json!({})));
    let address = format!("127.0.0.1:{}", server.port);
    let grpc: Value =
        serde_json::from_str(&script(&python, &["grpc-export", &address, &format!("{base_text}.pb"), TOKEN])).unwrap();
    assert_eq!(grpc["code"], "OK", "{grpc}");

    // Three pushes of go/base/cpu.pb.gz: 7.08 s of cpu each (SOURCES.md), in one series.
    // (OTLP's first profile is the default, pprof's samples here: cpu is asked for.)
    let merge = merged(&server, "shop", "cpu", "cpu");
    assert_eq!(merge["profileCount"], 3, "{merge}");
    assert_eq!((merge["sampleType"].as_str(), merge["total"].as_i64()), (Some("cpu"), Some(3 * 7_080_000_000)));
    let pprof = stacklens_core::parse(&std::fs::read(root.join("go/base/cpu.pb.gz")).unwrap()).unwrap();
    let top = &merge["functions"][0];
    let report = stacklens_core::analysis::top::top(
        &stacklens_core::analysis::Query::default().prepare(&pprof).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(top["name"], report.functions[0].name.as_str());
    assert_eq!(top["flat"].as_i64(), Some(3 * report.functions[0].flat));

    // Without the token: refused over HTTP (401) and gRPC (UNAUTHENTICATED).
    let r = Client::new()
        .post(format!("{}/v1development/profiles", server.base))
        .header("content-type", "application/x-protobuf")
        .body(protobuf.clone())
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    let grpc: Value =
        serde_json::from_str(&script(&python, &["grpc-export", &address, &format!("{base_text}.pb")])).unwrap();
    assert_eq!(grpc["code"], "UNAUTHENTICATED", "{grpc}");
}

#[test]
fn broken_messages_are_refused_whole_and_store_nothing() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let (server, dir) = setup("otlp-broken");
    let base = dir.join("cpu");
    let base_text = base.to_str().unwrap();
    script(&python, &["from-pprof", root.join("go/base/cpu.pb.gz").to_str().unwrap(), base_text, "shop"]);
    let mut data = ProfilesData::decode(&std::fs::read(format!("{base_text}.pb")).unwrap()[..]).unwrap();
    // The last sample names a stack that does not exist; every other is fine.
    let profile = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
    profile.samples.last_mut().unwrap().stack_index = 1 << 20;
    let broken = data.encode_to_vec();
    let (status, body) = json_of(post(&server, "application/x-protobuf", None, broken.clone()));
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidProfile")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("stack id 1048576"), "{body}");
    let path = dir.join("broken.pb");
    std::fs::write(&path, &broken).unwrap();
    let address = format!("127.0.0.1:{}", server.port);
    let grpc: Value =
        serde_json::from_str(&script(&python, &["grpc-export", &address, path.to_str().unwrap(), TOKEN])).unwrap();
    assert_eq!(grpc["code"], "INVALID_ARGUMENT", "{grpc}");
    assert!(grpc["details"].as_str().unwrap().contains("stack id 1048576"), "{grpc}");
    // Nothing was stored in part.
    let merge = merged(&server, "shop", "cpu", "cpu");
    assert_eq!(merge["profileCount"], 0, "{merge}");
    // Other media types and encodings are refused before the body is read.
    let (status, body) = json_of(post(&server, "text/plain", None, b"x".to_vec()));
    assert_eq!((status, body["error_code"].as_str()), (415, Some("UnsupportedMediaType")), "{body}");
    let (status, body) = json_of(post(&server, "application/x-protobuf", Some("br"), b"x".to_vec()));
    assert_eq!((status, body["error_code"].as_str()), (415, Some("UnsupportedMediaType")), "{body}");
}

#[test]
fn the_ebpf_profilers_export_files_a_series_per_executable() {
    let (Some(root), Some(python)) = (fixtures(), python()) else { return };
    let (server, dir) = setup("otlp-ebpf");
    let now_file = dir.join("ebpf-now.pb");
    let source = root.join("thirdparty/pyroscope/otel-ebpf-profile.pb.bin");
    script(&python, &["retime", source.to_str().unwrap(), now_file.to_str().unwrap()]);
    let bytes = std::fs::read(&now_file).unwrap();
    let r = post(&server, "application/x-protobuf", None, bytes.clone());
    assert_eq!(r.status(), 200);
    // Per executable (its service: the message has no service.name; kernel threads
    // have none and are unknown_service), the off-CPU time of its samples, as stacklens
    // reads the whole message.
    let p = stacklens_core::parse(&bytes).unwrap();
    let off_cpu = (0..p.sample_types.len()).find(|&i| p.sample_type_name(i) == "off_cpu").unwrap();
    let mut by_service = std::collections::BTreeMap::<String, i64>::new();
    for s in p.samples.iter() {
        let name = s.labels.iter().find(|l| p.str(l.key) == "process.executable.name").map(|l| match l.value {
            stacklens_core::model::LabelValue::Str(v) => p.str(v).to_owned(),
            _ => String::new(),
        });
        let name = name.filter(|n| !n.is_empty()).unwrap_or_else(|| "unknown_service".into());
        *by_service.entry(name).or_default() += s.values[off_cpu];
    }
    let (service, total) = by_service.iter().max_by_key(|(_, t)| **t).unwrap();
    let merge = merged(&server, service, "other", "off_cpu");
    assert!(merge["profileCount"].as_i64().unwrap() >= 1, "{merge}");
    assert_eq!((merge["sampleType"].as_str(), merge["total"].as_i64()), (Some("off_cpu"), Some(*total)), "{merge}");
}
