//! The perf.data layout, checked before `linux-perf-data` reads it: the crate sizes its
//! buffers from the file's own counts (a feature section's size, a count of events or
//! strings) before it reads them, so a corrupt file could ask for exabytes. Every
//! section, feature and count it will allocate for is checked here against the bytes
//! there are; the header strings it would read the same way are read here instead.

/// `PERFILE2`'s header: magic, size, attr_size, three sections, the feature bitmap.
const HEADER: usize = 8 + 8 + 8 + 3 * 16 + 32;
const HEADER_EVENT_DESC: u32 = 12;

/// Reads the file's integers in its byte order.
struct Reader<'a> {
    bytes: &'a [u8],
    big_endian: bool,
}

impl Reader<'_> {
    fn u64_at(&self, at: usize) -> Result<u64, String> {
        let b: [u8; 8] = self.bytes.get(at..at + 8).and_then(|s| s.try_into().ok()).ok_or_else(|| short(at))?;
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    fn u32_at(&self, at: usize) -> Result<u32, String> {
        let b: [u8; 4] = self.bytes.get(at..at + 4).and_then(|s| s.try_into().ok()).ok_or_else(|| short(at))?;
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    /// The `(offset, size)` section described at `at`, which must lie within the file.
    fn section_at(&self, at: usize, what: &str) -> Result<(usize, usize), String> {
        let (offset, size) = (self.u64_at(at)?, self.u64_at(at + 8)?);
        match offset.checked_add(size) {
            Some(end) if end <= self.bytes.len() as u64 => Ok((offset as usize, size as usize)),
            _ => Err(format!("the {what} section ({size} bytes at {offset}) lies past the end of the file")),
        }
    }
}

fn short(at: usize) -> String {
    format!("the file ends before byte {at}")
}

/// The feature sections' `(number, offset, size)`, every size checked; errors name the
/// first section or count that does not fit.
pub(super) fn check(bytes: &[u8]) -> Result<Vec<(u32, usize, usize)>, String> {
    if bytes.len() < HEADER {
        return Err(format!("{} bytes is less than perf.data's {HEADER}-byte header", bytes.len()));
    }
    let r = Reader { bytes, big_endian: bytes.starts_with(b"2ELIFREP") };
    let attr_size = r.u64_at(16)?;
    let attrs = r.section_at(24, "attributes")?;
    let data = r.section_at(40, "data")?;
    r.section_at(56, "event types")?;
    // The attributes' id sections, which the reader reads when there is no EVENT_DESC.
    if attr_size >= 16 {
        for entry in (attrs.0..attrs.0 + attrs.1).step_by(attr_size as usize) {
            if entry + attr_size as usize <= attrs.0 + attrs.1 {
                r.section_at(entry + attr_size as usize - 16, "attribute ids")?;
            }
        }
    }
    let mut features = Vec::new();
    let mut table = data.0 + data.1;
    for word in 0..4 {
        let bits = r.u64_at(72 + 8 * word)?;
        for bit in (0..64).filter(|b| bits >> b & 1 == 1) {
            let (offset, size) = r.section_at(table, "feature")?;
            features.push((word as u32 * 64 + bit, offset, size));
            table += 16;
        }
    }
    for &(feature, offset, size) in &features {
        if feature == HEADER_EVENT_DESC {
            check_event_desc(&Reader { bytes: &bytes[offset..offset + size], big_endian: r.big_endian })?;
        }
    }
    Ok(features)
}

/// EVENT_DESC: a count and size of attributes, then per attribute the attribute, its
/// id count, its name (a length-prefixed string) and its ids.
fn check_event_desc(r: &Reader) -> Result<(), String> {
    let past = || "an event description lies past the end of its section".to_owned();
    let (count, attr_size) = (r.u32_at(0)?, u64::from(r.u32_at(4)?));
    let mut at: u64 = 8;
    for _ in 0..count {
        let fields = usize::try_from(at + attr_size).map_err(|_| past())?;
        let (ids, name) = (u64::from(r.u32_at(fields)?), u64::from(r.u32_at(fields + 4)?));
        at += attr_size + 8 + name + 8 * ids;
        if at > r.bytes.len() as u64 {
            return Err(past());
        }
    }
    Ok(())
}

/// A header string feature (HOSTNAME, VERSION): a length, then that many bytes ending
/// in NULs.
pub(super) fn header_string(section: &[u8], big_endian: bool) -> Option<String> {
    let r = Reader { bytes: section, big_endian };
    let len = usize::try_from(r.u32_at(0).ok()?).ok()?;
    let text = section.get(4..4usize.checked_add(len)?)?;
    Some(String::from_utf8_lossy(text).trim_end_matches('\0').to_owned())
}

/// CMDLINE: a count of strings, each as [`header_string`].
pub(super) fn header_strings(section: &[u8], big_endian: bool) -> Option<Vec<String>> {
    let r = Reader { bytes: section, big_endian };
    let count = r.u32_at(0).ok()? as usize;
    let mut at: usize = 4;
    let mut out = Vec::new();
    for _ in 0..count {
        let end = at.checked_add(4)?.checked_add(usize::try_from(r.u32_at(at).ok()?).ok()?)?;
        out.push(header_string(section.get(at..end)?, big_endian)?);
        at = end;
    }
    Some(out)
}
