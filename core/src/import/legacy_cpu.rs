//! The legacy binary CPU profile (gperftools `profilez`, and Go's runtime/pprof before
//! Go 1.9): a header of five words, then `count, depth, pc…` records, an end marker,
//! and a text memory map (C++) or frame-name table (Java).

use super::legacy_text::java_frame_names;
use super::text::{self, AddressProfile};
use crate::model::{Profile, SourceFormat};
use crate::{Error, Result};

const FORMAT: &str = "legacy CPU profile";

#[derive(Copy, Clone)]
struct Words {
    size: usize,
    big_endian: bool,
}

impl Words {
    const ALL: [Words; 4] = [
        Words { size: 4, big_endian: false },
        Words { size: 4, big_endian: true },
        Words { size: 8, big_endian: false },
        Words { size: 8, big_endian: true },
    ];

    fn get(self, b: &[u8], at: usize) -> Option<u64> {
        let w = b.get(at..at.checked_add(self.size)?)?;
        let mut v = 0u64;
        for i in 0..self.size {
            let byte = if self.big_endian { w[i] } else { w[self.size - 1 - i] };
            v = v << 8 | u64::from(byte);
        }
        Some(v)
    }

    /// The header `0, 3, 0|1 (C++|Java), period in µs, 0`, if this word shape fits.
    fn header(self, b: &[u8]) -> Option<(bool, u64)> {
        let h: Vec<u64> = (0..5).map(|i| self.get(b, i * self.size)).collect::<Option<_>>()?;
        (h[0] == 0 && h[1] == 3 && h[2] <= 1 && h[3] > 0 && h[4] == 0).then_some((h[2] == 1, h[3]))
    }
}

pub(crate) fn is_legacy_cpu(b: &[u8]) -> bool {
    Words::ALL.iter().any(|w| w.header(b).is_some())
}

pub fn parse(b: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let (words, java, period_us) = Words::ALL
        .iter()
        .find_map(|&w| w.header(b).map(|(java, p)| (w, java, p)))
        .ok_or_else(|| Error::Binary { format: FORMAT, offset: 0, reason: "no valid header".into() })?;
    let period = i64::try_from(period_us).unwrap_or(i64::MAX).saturating_mul(1000);
    let mut pos = 5 * words.size;
    let mut records: Vec<(i64, Vec<u64>)> = Vec::new();
    let truncated = |offset| Error::Binary {
        format: FORMAT,
        offset,
        reason: "record runs past the end of the data (truncated)".into(),
    };
    while pos < b.len() {
        let at = pos;
        let count = words.get(b, pos).ok_or_else(|| truncated(at))?;
        let depth = words.get(b, pos + words.size).ok_or_else(|| truncated(at))?;
        pos += 2 * words.size;
        let remaining = (b.len() - pos) / words.size;
        if depth > remaining as u64 {
            return Err(Error::Binary {
                format: FORMAT,
                offset: at,
                reason: format!("stack depth {depth} exceeds the {remaining} words left"),
            });
        }
        let addrs: Vec<u64> = (0..depth as usize).map(|i| words.get(b, pos + i * words.size).unwrap_or(0)).collect();
        pos += depth as usize * words.size;
        if count == 0 && depth == 1 && addrs[0] == 0 {
            break; // end-of-data marker
        }
        // Return addresses point after the call; the leaf comes from the signal context
        // and is exact. Java profiles hold frame ids.
        let addrs =
            addrs.iter().enumerate().map(|(i, &a)| if !java && i > 0 { a.wrapping_sub(1) } else { a }).collect();
        records.push((i64::try_from(count).unwrap_or(i64::MAX), addrs));
    }
    if !java {
        strip_signal_frames(&mut records);
    }

    let mut builder = AddressProfile::new(SourceFormat::LegacyCpu, options);
    builder.profile.sample_types =
        vec![builder.profile.value_type("samples", "count"), builder.profile.value_type("cpu", "nanoseconds")];
    builder.profile.period_type = Some(builder.profile.value_type("cpu", "nanoseconds"));
    builder.profile.period = period;
    for (count, addrs) in records {
        let locations = builder.stack(&addrs, false);
        builder.push_sample(locations, vec![count, count.saturating_mul(period)], Vec::new())?;
    }
    let rest = text::decode(&b[pos.min(b.len())..]);
    if java {
        java_frame_names(&mut builder, rest.lines());
    } else {
        builder.memory_map(rest.lines());
    }
    Ok(builder.finish())
}

/// pprof's heuristics for frames pushed by the profiler's signal handler: a second
/// frame shared by (almost) all samples is removed, up to twice; then a leaf that
/// appears again, one byte lower, as the second frame is deduplicated.
fn strip_signal_frames(records: &mut [(i64, Vec<u64>)]) {
    let margin = records.len() / 32;
    for _ in 0..2 {
        let mut counts: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        for (_, a) in records.iter() {
            if a.len() > 1 {
                *counts.entry(a[1]).or_default() += 1;
            }
        }
        // Deterministic choice where pprof iterates a map: the most common address.
        let Some((&addr, _)) =
            counts.iter().filter(|(_, &c)| c >= records.len() - margin).max_by_key(|(&a, &c)| (c, a))
        else {
            continue;
        };
        for (_, a) in records.iter_mut() {
            if a.len() > 1 && a[1] == addr {
                a.remove(1);
            }
        }
    }
    for (_, a) in records.iter_mut() {
        if a.len() > 1 && a[0] == a[1].wrapping_add(1) {
            a.remove(1);
        }
    }
}
