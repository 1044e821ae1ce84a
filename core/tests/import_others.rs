//! The remaining third-party formats: each fixture is imported with the file's own totals,
//! or rejected with a typed error naming its format; unknown binary input names its magic.

mod common;

use std::io::Read;

use common::{fixtures, read};
use stacklens_core::import::unsupported::Unsupported;
use stacklens_core::import::{detect, Format};
use stacklens_core::{parse, Error};

/// A fixture's bytes, inflated when gzipped (as `detect` sees them).
fn inflated(path: &std::path::Path) -> Vec<u8> {
    let bytes = read(path);
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return bytes;
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn recognised_formats_that_are_not_imported_get_a_typed_error_naming_them() {
    let Some(root) = fixtures() else { return };
    let cases = [
        ("thirdparty/firefox-profiler/simpleperf-cpu-clock.trace.gz", Unsupported::Simpleperf, "Android simpleperf"),
        ("thirdparty/firefox-profiler/art-trace-regular.trace.gz", Unsupported::ArtTrace, "Android ART method trace"),
        ("thirdparty/pyroscope/otel-ebpf-profile.pb.bin", Unsupported::OtlpProfiles, "OTLP profiles (OpenTelemetry)"),
    ];
    for (name, format, shown) in cases {
        let path = root.join(name);
        assert_eq!(detect(&inflated(&path)), Format::Unsupported(format), "{name}");
        let err = parse(&read(&path)).unwrap_err();
        assert_eq!(err.code(), "UnsupportedFormat", "{name}");
        assert!(err.to_string().starts_with(&format!("unsupported: {shown}")), "{name}: {err}");
    }
}

#[test]
fn binary_input_that_is_not_protobuf_names_its_magic() {
    // 0xff is no valid tag of profile.proto's Profile (field 31, wire type 7).
    let err = parse(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00").unwrap_err();
    let Error::UnknownFormat { hint } = &err else { panic!("{err:?}") };
    assert!(hint.starts_with("binary, magic ffd8ffe000104a4649460001, "), "{hint}");
    assert_eq!(detect(b"\x07\x00\x01"), Format::Unrecognized);
    // Profile fields with their wire types still reach the pprof decoder.
    for start in [&b"\x0a\x04\x08\x01\x10\x02"[..], b"\x32\x00", b"\x50\x01", b"\x6a\x01\x00", b"\x78\x01"] {
        assert_eq!(detect(start), Format::Pprof, "{start:02x?}");
    }
    // Right field, wrong wire type: sample_type (1) as a varint, period (12) as bytes.
    for start in [&b"\x08\x01\x00"[..], b"\x62\x01\x00"] {
        assert_eq!(detect(start), Format::Unrecognized, "{start:02x?}");
    }
}
