//! speedscope's file format (`https://www.speedscope.app/file-format-schema.json`):
//! one "sampled" profile of the requested sample type. speedscope's profiles in one file
//! are threads (what it and our importer read them as), so other sample types are not
//! written as profiles beside it.

use serde_json::{json, Value};

use super::folded::stacks;
use crate::analysis::query::Prepared;
use crate::Result;

pub fn write(prepared: &Prepared) -> Result<Vec<u8>> {
    let (profile, index, table) = (prepared.profile(), prepared.sample_index, prepared.frames()?);
    let frames: Vec<Value> = (0..table.node_count() as u32)
        .map(|n| match table.file(n) {
            "" => json!({ "name": table.name(n) }),
            file => json!({ "name": table.name(n), "file": file }),
        })
        .collect();
    let mut stacks = stacks(&table, index);
    stacks.sort_unstable();
    let total: i64 = stacks.iter().map(|(_, v)| *v).fold(0, i64::saturating_add);
    let (samples, weights): (Vec<_>, Vec<_>) = stacks.into_iter().unzip();
    let name = format!("{} ({})", profile.sample_type_name(index), profile.sample_type_unit(index));
    let sampled = json!({
        "type": "sampled",
        "name": name,
        "unit": unit(profile.sample_type_unit(index)),
        "startValue": 0,
        "endValue": total,
        "samples": samples,
        "weights": weights,
    });
    let document = json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": concat!("stacklens ", env!("CARGO_PKG_VERSION")),
        "name": name,
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [sampled],
    });
    Ok(serde_json::to_vec(&document).expect("JSON values serialize"))
}

/// speedscope's unit for a pprof unit; counts and anything else are "none".
fn unit(pprof_unit: &str) -> &'static str {
    match pprof_unit {
        "nanoseconds" => "nanoseconds",
        "microseconds" => "microseconds",
        "milliseconds" => "milliseconds",
        "seconds" => "seconds",
        "bytes" => "bytes",
        _ => "none",
    }
}
