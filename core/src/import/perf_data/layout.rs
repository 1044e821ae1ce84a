//! The perf.data layout, checked before `linux-perf-data` reads it: the crate sizes its
//! buffers from the file's own counts (a feature section's size, a count of events or
//! strings) before it reads them, so a corrupt file could ask for exabytes. Every
//! section, feature and count it will allocate for is checked here against the bytes
//! there are; the header strings it would read the same way are read here instead.
//!
//! Two layouts: a file (`perf record -o FILE`: a header with sections, then the
//! feature sections after the data) and a pipe (`perf record -o -`: a 16-byte header,
//! then records only, the attributes and features among them as records of their own).

/// `PERFILE2`'s header: magic, size, attr_size, three sections, the feature bitmap.
const HEADER: usize = 8 + 8 + 8 + 3 * 16 + 32;
/// A file's attribute entry at its smallest: `PERF_ATTR_SIZE_VER0` and an id section.
const MIN_ATTR_SIZE: u64 = 64 + 16;
/// A pipe's header: the magic and its own size.
const PIPE_HEADER: u64 = 16;
const HEADER_EVENT_DESC: u32 = 12;
/// `PERF_RECORD_HEADER_FEATURE`: a feature section sent as a record.
const RECORD_HEADER_FEATURE: u32 = 80;
/// `PERF_RECORD_AUXTRACE`: its trace data (of the size it states) follows the record.
const RECORD_AUXTRACE: u32 = 71;
/// `PERF_RECORD_COMPRESSED` and `PERF_RECORD_COMPRESSED2`: records zstd packed
/// (`perf record -z`), which [`super::inflate`] unpacks.
pub(super) const RECORD_COMPRESSED: u32 = 81;
pub(super) const RECORD_COMPRESSED2: u32 = 83;
/// `PERF_RECORD_FINISHED_ROUND`: records before it need not be sorted with those after
/// the next one.
pub(super) const RECORD_FINISHED_ROUND: u32 = 68;

/// Where a file's or a pipe's records lie, found by [`check`].
pub(super) struct RecordsAt {
    pub range: std::ops::Range<usize>,
    /// Whether some are zstd-compressed.
    pub compressed: bool,
    /// A file's (a pipe has none): how many feature sections' entries follow the records.
    pub file_features: Option<usize>,
}

/// Reads the file's integers in its byte order.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    pub big_endian: bool,
}

impl<'a> Reader<'a> {
    /// The whole file, in the byte order its magic says (`2ELIFREP`: big-endian).
    pub fn of_file(bytes: &'a [u8]) -> Self {
        Reader { bytes, big_endian: bytes.starts_with(b"2ELIFREP") }
    }

    /// A piece of the same file (a section, a record), read in the same byte order.
    fn within(&self, range: std::ops::Range<usize>) -> Reader<'a> {
        Reader { bytes: &self.bytes[range], big_endian: self.big_endian }
    }

    pub fn u64_at(&self, at: usize) -> Result<u64, String> {
        let b: [u8; 8] = self.bytes.get(at..at + 8).and_then(|s| s.try_into().ok()).ok_or_else(|| short(at))?;
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }

    pub fn u16_at(&self, at: usize) -> Result<u16, String> {
        let b: [u8; 2] = self.bytes.get(at..at + 2).and_then(|s| s.try_into().ok()).ok_or_else(|| short(at))?;
        Ok(if self.big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    }

    pub fn u32_at(&self, at: usize) -> Result<u32, String> {
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

/// Checks a file's or a pipe's every size (errors name the first section, count or
/// record that does not fit) and says where its records are.
pub(super) fn check(bytes: &[u8]) -> Result<RecordsAt, String> {
    if is_pipe(bytes) {
        let r = Reader::of_file(bytes);
        let range = PIPE_HEADER as usize..bytes.len();
        let compressed = check_records(&r, range.clone())?;
        return Ok(RecordsAt { range, compressed, file_features: None });
    }
    if bytes.len() < HEADER {
        return Err(format!("{} bytes is less than perf.data's {HEADER}-byte header", bytes.len()));
    }
    let r = Reader::of_file(bytes);
    let attr_size = r.u64_at(16)?;
    // The crate divides the section by this size and reserves that many attributes.
    if attr_size < MIN_ATTR_SIZE {
        return Err(format!(
            "attributes of {attr_size} bytes, less than the first perf_event_attr's 64 and its ids' 16"
        ));
    }
    let attrs = r.section_at(24, "attributes")?;
    let data = r.section_at(40, "data")?;
    let event_types = r.section_at(56, "event types")?;
    // The id sections the reader reserves room for by their sizes when there is no
    // EVENT_DESC: inside each attribute entry, and after each entry of the old event types
    // section (an attribute of attr_size bytes, then its ids' section).
    let attr_size = usize::try_from(attr_size).unwrap_or(usize::MAX);
    for entry in (attrs.0..attrs.0 + attrs.1).step_by(attr_size) {
        let end = entry.saturating_add(attr_size);
        if end <= attrs.0 + attrs.1 {
            r.section_at(end - 16, "attribute ids")?;
        }
    }
    let event_type_size = attr_size.saturating_add(16);
    for entry in (event_types.0..).step_by(event_type_size).take(event_types.1 / event_type_size) {
        r.section_at(entry + attr_size, "event type ids")?;
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
    let range = data.0..data.0 + data.1;
    let compressed = check_records(&r, range.clone())?;
    for &(feature, offset, size) in &features {
        if feature == HEADER_EVENT_DESC {
            check_event_desc(&r.within(offset..offset + size))?;
        }
    }
    Ok(RecordsAt { range, compressed, file_features: Some(features.len()) })
}

/// Whether `bytes` are perf.data in pipe mode (its header is 16 bytes, a file's 104).
pub(super) fn is_pipe(bytes: &[u8]) -> bool {
    Reader::of_file(bytes).u64_at(8) == Ok(PIPE_HEADER)
}

/// The records in `bytes[from..to]`: each must be at least its 8-byte header and lie
/// within them (a record of size 0 would never end), with an `AUXTRACE` record's trace
/// data, which follows it and which the crate reserves room for by the size the record
/// states; an EVENT_DESC feature record (a pipe's) is checked as a file's section is.
/// Says whether any is compressed.
fn check_records(r: &Reader, records: std::ops::Range<usize>) -> Result<bool, String> {
    let (mut at, to) = (records.start, records.end);
    let mut compressed = false;
    while at < to {
        let (kind, size) = (r.u32_at(at)?, usize::from(r.u16_at(at + 6)?));
        if size < 8 {
            return Err(format!("the record at byte {at} is {size} bytes, less than its own header"));
        }
        let data = if kind == RECORD_AUXTRACE { r.u64_at(at + 8)? } else { 0 };
        let end = u64::try_from(at + size).ok().and_then(|end| end.checked_add(data)).filter(|&end| end <= to as u64);
        let Some(end) = end.map(|end| end as usize) else {
            return Err(format!(
                "the record at byte {at} ({size} bytes and {data} of trace) lies past the end of its data"
            ));
        };
        compressed |= kind == RECORD_COMPRESSED || kind == RECORD_COMPRESSED2;
        // The reader skips a FINISHED_ROUND record's header without reading on: a body
        // would be read as the next records (an AUXTRACE among them, found by the
        // perf_data target, stating 8e17 bytes of trace).
        if kind == RECORD_FINISHED_ROUND && size != 8 {
            return Err(format!(
                "the FINISHED_ROUND record at byte {at} is {size} bytes; it is its 8-byte header alone"
            ));
        }
        // The reader takes the feature's number as its u64's low 32 bits.
        if kind == RECORD_HEADER_FEATURE && r.u64_at(at + 8)? as u32 == HEADER_EVENT_DESC {
            check_event_desc(&r.within((at + 16).min(end)..end))?;
        }
        at = end;
    }
    Ok(compressed)
}

/// EVENT_DESC: a count and size of attributes, then per attribute the attribute, its
/// id count, its name (a length-prefixed string) and its ids.
fn check_event_desc(r: &Reader) -> Result<(), String> {
    let past = || "an event description lies past the end of its section".to_owned();
    let (count, attr_size) = (r.u32_at(0)?, u64::from(r.u32_at(4)?));
    let mut at: u64 = 8;
    for _ in 0..count {
        let fields = usize::try_from(at + attr_size).map_err(|_| past())?;
        let field = |at: usize| r.u32_at(at).map(u64::from).map_err(|_| past());
        let (ids, name) = (field(fields)?, field(fields + 4)?);
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
