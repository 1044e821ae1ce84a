//! OTLP pushes: the small CPU profile as OpenTelemetry profiles (one `ProfilesData` of
//! its two sample types, service `load-otlp-http` or `load-otlp-grpc`), pushed by
//! `clients` tasks over OTLP/HTTP (gzipped protobuf) and over OTLP/gRPC (h2c), each push
//! taken at its own millisecond; then each service's last hour is merged and must count
//! every push that was answered OK (nothing lost).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use stacklens_core::import::otlp::proto::{self, any_value::Value as Any, AnyValue};

use crate::client::{failure, phase, Check, Outcome, Phase, Prepare, Watch};

/// What [`push_phases`] pushes and how hard.
pub struct OtlpLoad {
    pub pushes: usize,
    pub clients: usize,
    pub limit: Duration,
}

/// `profile` as a message of service `service`, taken at `at_nanos`.
fn message(profile: &stacklens_core::Profile, service: &str, at_nanos: u64) -> Vec<u8> {
    let mut data = stacklens_core::export::otlp::data(profile, profile.default_sample_index());
    let resource = &mut data.resource_profiles[0];
    resource.resource = Some(proto::Resource {
        attributes: vec![proto::KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue { value: Some(Any::StringValue(service.into())) }),
            key_strindex: 0,
        }],
    });
    for p in resource.scope_profiles.iter_mut().flat_map(|s| &mut s.profiles) {
        p.time_unix_nano = at_nanos;
    }
    data.encode_to_vec()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// One gRPC message: its 5-byte prefix (not compressed, big-endian length) and bytes.
fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(0);
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// The pushes over each protocol, then the count merged back per service.
pub async fn push_phases(
    base: &str,
    tenant: &str,
    small: &[u8],
    load: &OtlpLoad,
    watch: Watch,
    timeout: Duration,
) -> Result<Vec<Phase>, Box<dyn std::error::Error>> {
    let profile = stacklens_core::parse(small)?;
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64;
    let at = move |i: usize| start + i as u64 * 1_000_000;
    // Bodies made before the clock starts.
    let http_bodies: Arc<Vec<Bytes>> =
        Arc::new((0..load.pushes).map(|i| Bytes::from(gzip(&message(&profile, "load-otlp-http", at(i))))).collect());
    let grpc_bodies: Arc<Vec<Bytes>> = Arc::new(
        (0..load.pushes).map(|i| Bytes::from(grpc_frame(&message(&profile, "load-otlp-grpc", at(i))))).collect(),
    );
    let http = reqwest::Client::builder().no_proxy().timeout(timeout).build()?;
    let h2c = reqwest::Client::builder().no_proxy().timeout(timeout).http2_prior_knowledge().build()?;
    let mut phases = Vec::new();

    let prepare: Prepare = {
        let (http, base, tenant, bodies) = (http.clone(), base.to_owned(), tenant.to_owned(), http_bodies.clone());
        Arc::new(move |i| {
            http.post(format!("{base}/v1development/profiles"))
                .header("X-Tenant-ID", &tenant)
                .header("content-type", "application/x-protobuf")
                .header("content-encoding", "gzip")
                .body(bodies[i].clone())
        })
    };
    // An empty ExportProfilesServiceResponse: no partial success.
    let check: Check = Arc::new(|_, status, body| match status {
        200 if body.is_empty() => Outcome::Ok(None),
        _ => Outcome::Failed(failure(status, body)),
    });
    let (http_phase, _) = phase("OTLP/HTTP", watch, load.clients, load.pushes, load.limit, prepare, check).await;

    let prepare: Prepare = {
        let (h2c, base, tenant, bodies) = (h2c.clone(), base.to_owned(), tenant.to_owned(), grpc_bodies.clone());
        Arc::new(move |i| {
            h2c.post(format!("{base}/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"))
                .header("X-Tenant-ID", &tenant)
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(bodies[i].clone())
        })
    };
    // The framed empty response; an error is trailers only, with no message.
    let check: Check = Arc::new(|_, status, body| match (status, body) {
        (200, [0, 0, 0, 0, 0]) => Outcome::Ok(None),
        _ => Outcome::Failed(failure(status, body)),
    });
    let (grpc_phase, _) = phase("OTLP/gRPC", watch, load.clients, load.pushes, load.limit, prepare, check).await;

    // Nothing lost: each service's merge counts every push answered OK.
    for (service, phase) in [("load-otlp-http", &http_phase), ("load-otlp-grpc", &grpc_phase)] {
        let from = start / 1_000_000_000 - 60;
        let url = format!("{base}/api/v1/profiling/merge?service={service}&profileType=cpu&from={from}&limit=1");
        let merged: serde_json::Value = http.get(url).header("X-Tenant-ID", tenant).send().await?.json().await?;
        let counted = merged["profileCount"].as_u64().unwrap_or(0) as usize;
        println!("{service}: {counted} profiles merged back of {} pushes answered OK", phase.ok);
        if counted != phase.ok {
            return Err(format!("{service}: {} pushes answered OK, {counted} stored: {merged}", phase.ok).into());
        }
    }
    phases.push(http_phase);
    phases.push(grpc_phase);
    Ok(phases)
}
