//! Profile formats recognised from their first bytes but not imported: they get a typed
//! [`Error::Unsupported`] naming the format instead of a misleading decoder error.

use crate::Error;

/// A format recognised but not imported.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unsupported {
    OtlpProfiles,
}

/// Protobuf tag of field 1, wire type 2 (length-delimited).
const FIELD_1_BYTES: u8 = 0x0a;

/// Whether `bytes` begin like an OTLP `ExportProfilesServiceRequest`: field 1
/// (`resource_profiles`) whose message starts with field 1 (`resource`), a message too.
/// A pprof `Profile` starting with field 1 (`sample_type`) holds a `ValueType`, whose
/// fields are varints, so its first inner tag is never `0x0a`.
fn is_otlp_profiles(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&FIELD_1_BYTES) {
        return false;
    }
    // The length varint: at most 10 bytes, each but the last with its high bit set.
    let Some(length_bytes) = bytes[1..].iter().take(10).position(|b| b & 0x80 == 0) else { return false };
    bytes.get(2 + length_bytes) == Some(&FIELD_1_BYTES)
}

/// The unsupported format `bytes` (already inflated) are in, if any.
pub(crate) fn detect(bytes: &[u8]) -> Option<Unsupported> {
    is_otlp_profiles(bytes).then_some(Unsupported::OtlpProfiles)
}

/// The error for a format [`detect`] found.
pub(crate) fn error(format: Unsupported) -> Error {
    let (format, reason) = match format {
        Unsupported::OtlpProfiles => (
            "OTLP profiles (OpenTelemetry)",
            "an ExportProfilesServiceRequest, not a pprof profile; export pprof from the collector instead",
        ),
    };
    Error::Unsupported { format, reason: reason.into() }
}
