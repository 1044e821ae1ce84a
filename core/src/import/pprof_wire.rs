//! Finds where malformed protobuf goes wrong. The decoder in `pprof.rs` only notices
//! that it does, to stay fast; when it fails this walker re-reads the wire format along
//! `profile.proto`'s shape to name the byte offset and field.

use super::wire::{Fields, Value, WireError, WireErrorKind, WireType};

/// How a known field is encoded.
#[derive(Copy, Clone)]
enum Kind {
    /// Scalar varint; repeated ones may also be packed (length-delimited varints).
    Varint,
    Bytes,
    Message(&'static Schema),
}

struct Schema {
    name: &'static str,
    fields: &'static [(u32, &'static str, Kind)],
}

const VALUE_TYPE: Schema =
    Schema { name: "ValueType", fields: &[(1, "type", Kind::Varint), (2, "unit", Kind::Varint)] };
const LABEL: Schema = Schema {
    name: "Label",
    fields: &[
        (1, "key", Kind::Varint),
        (2, "str", Kind::Varint),
        (3, "num", Kind::Varint),
        (4, "num_unit", Kind::Varint),
    ],
};
const SAMPLE: Schema = Schema {
    name: "Sample",
    fields: &[(1, "location_id", Kind::Varint), (2, "value", Kind::Varint), (3, "label", Kind::Message(&LABEL))],
};
const MAPPING: Schema = Schema {
    name: "Mapping",
    fields: &[
        (1, "id", Kind::Varint),
        (2, "memory_start", Kind::Varint),
        (3, "memory_limit", Kind::Varint),
        (4, "file_offset", Kind::Varint),
        (5, "filename", Kind::Varint),
        (6, "build_id", Kind::Varint),
        (7, "has_functions", Kind::Varint),
        (8, "has_filenames", Kind::Varint),
        (9, "has_line_numbers", Kind::Varint),
        (10, "has_inline_frames", Kind::Varint),
    ],
};
const LINE: Schema = Schema {
    name: "Line",
    fields: &[(1, "function_id", Kind::Varint), (2, "line", Kind::Varint), (3, "column", Kind::Varint)],
};
const LOCATION: Schema = Schema {
    name: "Location",
    fields: &[
        (1, "id", Kind::Varint),
        (2, "mapping_id", Kind::Varint),
        (3, "address", Kind::Varint),
        (4, "line", Kind::Message(&LINE)),
        (5, "is_folded", Kind::Varint),
    ],
};
const FUNCTION: Schema = Schema {
    name: "Function",
    fields: &[
        (1, "id", Kind::Varint),
        (2, "name", Kind::Varint),
        (3, "system_name", Kind::Varint),
        (4, "filename", Kind::Varint),
        (5, "start_line", Kind::Varint),
    ],
};
const PROFILE: Schema = Schema {
    name: "Profile",
    fields: &[
        (1, "sample_type", Kind::Message(&VALUE_TYPE)),
        (2, "sample", Kind::Message(&SAMPLE)),
        (3, "mapping", Kind::Message(&MAPPING)),
        (4, "location", Kind::Message(&LOCATION)),
        (5, "function", Kind::Message(&FUNCTION)),
        (6, "string_table", Kind::Bytes),
        (7, "drop_frames", Kind::Varint),
        (8, "keep_frames", Kind::Varint),
        (9, "time_nanos", Kind::Varint),
        (10, "duration_nanos", Kind::Varint),
        (11, "period_type", Kind::Message(&VALUE_TYPE)),
        (12, "period", Kind::Varint),
        (13, "comment", Kind::Varint),
        (14, "default_sample_type", Kind::Varint),
        (15, "doc_url", Kind::Varint),
    ],
};

/// Returns the offset and a description of the first wire-format error, if any.
pub(crate) fn locate_error(buf: &[u8]) -> Option<(usize, String)> {
    walk(Fields::new(buf, 0), &PROFILE).err()
}

fn walk(mut fields: Fields<'_>, schema: &Schema) -> Result<(), (usize, String)> {
    while fields.pos < fields.buf.len() {
        let tag_at = fields.offset();
        let label = |field: u32| {
            let known = schema.fields.iter().find(|f| f.0 == field);
            known.map_or_else(|| format!("{}.{field}", schema.name), |f| format!("{}.{}", schema.name, f.1))
        };
        let (field, wire) = fields.tag().map_err(|e| match e.kind {
            WireErrorKind::FieldZero => (tag_at, format!("{}: field number 0 is invalid", schema.name)),
            WireErrorKind::UnsupportedWireType { field, wire } => {
                (tag_at, format!("{}: invalid or unsupported wire type {wire}", label(field)))
            }
            _ => described(e),
        })?;
        let known = schema.fields.iter().find(|f| f.0 == field).map(|f| f.2);
        match (wire, known) {
            (WireType::Varint, Some(Kind::Bytes | Kind::Message(_))) => {
                return Err((tag_at, format!("{}: expected a length-delimited field, found a varint", label(field))));
            }
            (WireType::Fixed64 | WireType::Fixed32, Some(_)) => {
                return Err((tag_at, format!("{}: unexpected fixed-width wire type {}", label(field), wire.number())));
            }
            _ => {}
        }
        let value = fields.value(wire).map_err(|e| match e.kind {
            WireErrorKind::FixedPastEnd => {
                (tag_at, format!("{}: fixed-width value runs past the end (truncated)", label(field)))
            }
            WireErrorKind::LengthPastEnd { len, remain } => {
                (e.offset, format!("{}: length {len} exceeds the {remain} bytes that remain (truncated)", label(field)))
            }
            _ => described(e),
        })?;
        if let Value::Bytes(body) = value {
            match known {
                Some(Kind::Message(inner)) => walk(fields.nested(body), inner)?,
                Some(Kind::Varint) => fields.packed(body, described, |_| Ok(()))?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// An error the schema adds nothing to: a malformed varint, described as it is.
fn described(e: WireError) -> (usize, String) {
    match e.kind {
        WireErrorKind::Varint(varint) => (e.offset, varint.to_string()),
        kind => (e.offset, kind.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_length_is_located() {
        // field 2 (sample), length 10, only 2 bytes follow
        let buf = [0x12, 10, 0x08, 0x01];
        let (offset, reason) = locate_error(&buf).unwrap();
        assert_eq!(offset, 1);
        assert!(reason.contains("Profile.sample"), "{reason}");
    }

    #[test]
    fn bad_nested_varint_is_located() {
        // sample { location_id packed: [0xff ...truncated] }
        let buf = [0x12, 3, 0x0a, 1, 0xff];
        let (offset, reason) = locate_error(&buf).unwrap();
        assert_eq!(offset, 4);
        assert!(reason.contains("varint"), "{reason}");
    }

    #[test]
    fn valid_input_has_no_error() {
        assert!(locate_error(&[0x60, 0x05]).is_none());
    }
}
