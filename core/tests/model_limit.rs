//! `ParseOptions::max_model_bytes`: every importer that can expand its input counts
//! the samples and frames it builds and stops at the limit with `Error::ModelTooLarge`,
//! building nothing more; the same inputs parse without the limit.

mod common;

use common::hostile;
use stacklens_core::import::{FRAME_BYTES, SAMPLE_BYTES};
use stacklens_core::model::{Line, Sample, SourceFormat};
use stacklens_core::{parse, parse_with, Error, ParseOptions, Profile};

/// The limit of these tests: far less than any of the inputs expands to.
const LIMIT: u64 = 4 << 20;

/// `bytes` parse as `format`, expanding past [`LIMIT`], and stop there when limited
/// (plain and gzipped: the limit holds after inflating too).
fn stops_at_the_limit(bytes: &[u8], format: SourceFormat) {
    let whole = parse(bytes).unwrap();
    assert_eq!(whole.source, format);
    let counted = whole.samples.len() as u64 * SAMPLE_BYTES
        + whole.samples.iter().map(|s| s.locations.len() as u64).sum::<u64>() * FRAME_BYTES;
    assert!(counted > LIMIT, "{format:?}: {} bytes expand to only {counted} bytes of model", bytes.len());
    let options = ParseOptions { max_model_bytes: LIMIT, ..Default::default() };
    for input in [bytes.to_vec(), hostile::gzip(bytes)] {
        let err = parse_with(&input, &options).unwrap_err();
        assert_eq!(err, Error::ModelTooLarge { limit: LIMIT }, "{format:?}");
        assert_eq!(err.code(), "ModelTooLarge");
    }
}

#[test]
fn firefox_samples_walking_a_deep_chain_stop_at_the_limit() {
    let bytes = hostile::firefox(2_000, 500);
    assert!(hostile::gzip(&bytes).len() < 10_000);
    stops_at_the_limit(&bytes, SourceFormat::FirefoxProfiler);
}

#[test]
fn a_callgrind_call_graph_unfolding_stops_at_the_limit() {
    let bytes = hostile::callgrind(10, 6);
    assert!(bytes.len() < 20_000);
    stops_at_the_limit(&bytes, SourceFormat::Callgrind);
}

#[test]
fn nested_chrome_trace_events_stop_at_the_limit() {
    stops_at_the_limit(&hostile::chrome_durations(1_000), SourceFormat::ChromeTrace);
}

#[test]
fn a_v8_cpuprofile_chain_stops_at_the_limit() {
    stops_at_the_limit(&hostile::v8_cpuprofile(1_000, 1_000), SourceFormat::V8CpuProfile);
}

#[test]
fn folded_stacks_stop_at_the_limit() {
    stops_at_the_limit(&hostile::folded("main", 500, 1_000), SourceFormat::Folded);
}

#[test]
fn perf_script_records_stop_at_the_limit() {
    stops_at_the_limit(&hostile::perf_script(100, 3_000), SourceFormat::PerfScript);
}

#[test]
fn pprof_samples_are_counted_before_they_are_decoded() {
    let mut p = Profile::new(SourceFormat::Built);
    p.sample_types = vec![p.value_type("samples", "count")];
    let f = p.add_function("f", "", "f.go", 0);
    let l = p.add_location(1, vec![Line { function: f, line: 1, column: 0 }]);
    for _ in 0..20_000 {
        p.samples.push(Sample { locations: vec![l; 20], values: vec![1], labels: vec![] });
    }
    // Plain protobuf, as `encode` writes it.
    stops_at_the_limit(&stacklens_core::export::pprof::encode(&p), SourceFormat::Pprof);
}
