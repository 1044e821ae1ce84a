//! Legacy text profiles that `go tool pprof` reads: Go and tcmalloc heap
//! (`heap profile: …`), Go block/mutex and C++ contentionz (`--- contention…`),
//! and threadz. Numbers follow pprof's legacy parsers exactly (unsampling included).

use super::text::{self, is_memory_map_trigger, numbered, parse_addresses, text_error, AddressProfile};
use crate::model::{Label, LabelValue, Profile, SourceFormat};
use crate::Result;

const HEAP: &str = "heap profile text";
const CONTENTION: &str = "contention profile text";
const THREADZ: &str = "threadz profile text";

static_regex!(
    heap_header,
    r"heap profile: *(\d+): *(\d+) *\[ *(\d+): *(\d+) *\] *@ *(heap[_a-z0-9]*|growthz|fragmentationz)/?(\d*)"
);

static_regex!(heap_sample, r"^(-?\d+): *(-?\d+) *\[ *(\d+): *(\d+) *\] @([ x0-9a-f]*)$");

static_regex!(contention_sample, r"^(\d+) *(\d+) @([ x0-9a-f]*)$");

/// Runs `record` on each sample line, feeding `#` notes to the builder, until a `---`
/// section starts; a memory map section then places the frames in binaries.
/// The next `key = value` line (blank lines are skipped), left in `lines` for the caller
/// to take: its number, the trimmed line, key and value; `None` at the first other line.
fn peek_attribute<'a>(
    lines: &mut std::iter::Peekable<impl Iterator<Item = (usize, &'a str)>>,
) -> Option<(usize, &'a str, &'a str, &'a str)> {
    while let Some(&(n, line)) = lines.peek() {
        let t = line.trim();
        if t.is_empty() {
            lines.next();
            continue;
        }
        let (key, value) = t.split_once('=')?;
        return Some((n, t, key.trim(), value.trim()));
    }
    None
}

fn records<'a>(
    b: &mut AddressProfile,
    text: &'a str,
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    mut record: impl FnMut(&mut AddressProfile, usize, &str) -> Result<()>,
) -> Result<()> {
    while let Some((n, line)) = lines.next() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('#') {
            b.note(t);
            continue;
        }
        if t.starts_with("---") || is_memory_map_trigger(t) {
            // Anything after the samples: more notes, then possibly the memory map.
            for (n, line) in std::iter::once((n, line)).chain(lines) {
                if is_memory_map_trigger(line) {
                    b.memory_map(text.lines().skip(n));
                    break;
                }
                b.note(line);
            }
            break;
        }
        record(b, n, t)?;
    }
    Ok(())
}

/// The estimated unsampled value of a heap sample (pprof's `scaleHeapSample`):
/// a sample of average size S appears with probability 1-exp(-S/rate).
fn scale_heap_sample(count: i64, size: i64, rate: i64) -> (i64, i64) {
    if count == 0 || size == 0 {
        return (0, 0);
    }
    if rate <= 1 {
        return (count, size);
    }
    let avg = size as f64 / count as f64;
    let scale = 1.0 / (1.0 - (-avg / rate as f64).exp());
    ((count as f64 * scale) as i64, (size as f64 * scale) as i64)
}

pub fn parse_heap(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = numbered(&text);
    let (header_n, header) = text::header(&mut lines, HEAP)?;
    let h = heap_header()
        .captures(header)
        .ok_or_else(|| text_error(HEAP, header_n, format!("unrecognized heap header '{}'", header.trim())))?;
    let mut period: i64 = if h[6].is_empty() {
        0
    } else {
        h[6].parse().map_err(|_| text_error(HEAP, header_n, "sampling rate is not a number"))?
    };
    let has_alloc = (h[3] != h[1] && &h[3] != "0") || (h[4] != h[2] && &h[4] != "0");
    let (v2_sampling, source) = match &h[5] {
        "heapz_v2" | "heap_v2" => (true, SourceFormat::LegacyHeap),
        "heapprofile" => {
            period = 1;
            (false, SourceFormat::LegacyHeap)
        }
        // Go writes 2*MemProfileRate after the slash.
        "heap" => {
            period /= 2;
            (true, SourceFormat::GoHeapText)
        }
        "growthz" | "fragmentationz" => {
            period = 1;
            (false, SourceFormat::LegacyHeap)
        }
        other => return Err(text_error(HEAP, header_n, format!("unknown heap profile kind '{other}'"))),
    };

    let mut b = AddressProfile::new(source, options);
    let types: &[(&str, &str)] = if has_alloc {
        // alloc before inuse, so the default (last) type is inuse_space as in pprof.
        &[("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")]
    } else {
        &[("objects", "count"), ("space", "bytes")]
    };
    b.profile.sample_types = types.iter().map(|(k, u)| b.profile.value_type(k, u)).collect();
    b.profile.period_type = Some(b.profile.value_type("space", "bytes"));
    b.profile.period = period;
    let bytes_key = b.profile.strings.intern("bytes");

    records(&mut b, &text, &mut lines, |b, n, t| {
        let c = heap_sample().captures(t).ok_or_else(|| {
            text_error(HEAP, n, format!("expected '<inuse>: <bytes> [<alloc>: <bytes>] @ <addresses>', found '{t}'"))
        })?;
        let num =
            |i: usize| c[i].parse::<i64>().map_err(|_| text_error(HEAP, n, format!("'{}' is out of range", &c[i])));
        let mut values = Vec::with_capacity(4);
        let mut blocksize = 0;
        let mut add = |count: i64, size: i64, what: &str| -> Result<()> {
            if count == 0 && size != 0 {
                return Err(text_error(HEAP, n, format!("{what} count is 0 but {what} bytes is {size}")));
            }
            let (mut count, mut size) = (count, size);
            if count != 0 {
                blocksize = size / count;
                if v2_sampling {
                    (count, size) = scale_heap_sample(count, size, period);
                }
            }
            values.extend([count, size]);
            Ok(())
        };
        if has_alloc {
            add(num(3)?, num(4)?, "allocation")?;
        }
        add(num(1)?, num(2)?, "in-use")?;
        let addresses = parse_addresses(&c[5], HEAP, n)?;
        let locations = b.stack(&addresses, true);
        let labels = vec![Label { key: bytes_key, value: LabelValue::Num { value: blocksize, unit: bytes_key } }];
        b.push_sample(locations, values, labels)?;
        Ok(())
    })?;
    Ok(b.finish())
}

pub fn parse_contention(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = numbered(&text).peekable();
    let (header_n, header) = text::header(&mut lines, CONTENTION)?;
    if !header.trim_start().starts_with("--- contention") && !header.trim_start().starts_with("--- mutex:") {
        return Err(text_error(CONTENTION, header_n, "expected '--- contention' or '--- mutex:'"));
    }
    let mut b = AddressProfile::new(
        if header.contains("contentionz") { SourceFormat::Contentionz } else { SourceFormat::GoContentionText },
        options,
    );
    b.profile.sample_types =
        vec![b.profile.value_type("contentions", "count"), b.profile.value_type("delay", "nanoseconds")];
    b.profile.period_type = Some(b.profile.value_type("contentions", "count"));
    b.profile.period = 1;

    // `key = value` attributes come before the samples.
    let mut cpu_hz: i64 = 0;
    while let Some((n, _, key, value)) = peek_attribute(&mut lines) {
        let int = |v: &str| {
            let parsed = match v.strip_prefix("0x") {
                Some(h) => i64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            };
            parsed.ok_or_else(|| text_error(CONTENTION, n, format!("'{v}' is not a number")))
        };
        match key {
            "cycles/second" => cpu_hz = int(value)?,
            "sampling period" => b.profile.period = int(value)?,
            "ms since reset" => b.profile.duration_nanos = int(value)?.saturating_mul(1_000_000),
            "discarded samples" => {}
            other => return Err(text_error(CONTENTION, n, format!("unknown attribute '{other}'"))),
        }
        lines.next();
    }

    let period = b.profile.period;
    records(&mut b, &text, &mut lines, |b, n, t| {
        let c = contention_sample().captures(t).ok_or_else(|| {
            text_error(CONTENTION, n, format!("expected '<cycles> <count> @ <addresses>', found '{t}'"))
        })?;
        let num = |i: usize| {
            c[i].parse::<i64>().map_err(|_| text_error(CONTENTION, n, format!("'{}' is out of range", &c[i])))
        };
        let (mut cycles, mut count) = (num(1)?, num(2)?);
        // Delays are scaled from cycles to nanoseconds; both by the sampling period.
        if period > 0 {
            if cpu_hz > 0 {
                let ghz = cpu_hz as f64 / 1e9;
                cycles = (cycles as f64 * period as f64 / ghz) as i64;
            }
            count = count.saturating_mul(period);
        }
        let addresses = parse_addresses(&c[3], CONTENTION, n)?;
        let locations = b.stack(&addresses, true);
        b.push_sample(locations, vec![count, cycles], Vec::new())?;
        Ok(())
    })?;
    Ok(b.finish())
}

static_regex!(thread_start, r"--- Thread ([[:xdigit:]]+) \(name: (.*)/(\d+)\) stack: ---");

static_regex!(hex_number, r"0x[0-9a-f]+");

/// threadz: one stack per thread; `[same as previous thread]` bumps the previous count.
pub fn parse_threadz(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut b = AddressProfile::new(SourceFormat::Threadz, options);
    let vt = b.profile.value_type("thread", "count");
    b.profile.sample_types = vec![vt];
    b.profile.period_type = Some(vt);
    b.profile.period = 1;

    let mut lines = numbered(&text).peekable();
    // Skip the `--- threadz N ---` header and comments up to the first thread.
    while let Some(&(_, l)) = lines.peek() {
        if thread_start().is_match(l) || is_memory_map_trigger(l) {
            break;
        }
        lines.next();
    }
    while let Some((n, line)) = lines.next() {
        if is_memory_map_trigger(line) {
            b.memory_map(text.lines().skip(n));
            break;
        }
        if line.starts_with("---- no stack trace for") {
            break;
        }
        if !thread_start().is_match(line) {
            return Err(text_error(
                THREADZ,
                n,
                format!("expected a '--- Thread … stack: ---' line, found '{}'", line.trim()),
            ));
        }
        let mut addresses = Vec::new();
        let mut same_as_previous = false;
        while let Some(&(_, l)) = lines.peek() {
            let t = l.trim();
            if t.starts_with("---") {
                break;
            }
            lines.next();
            if t.contains("same as previous thread") {
                same_as_previous = true;
                continue;
            }
            for m in hex_number().find_iter(t) {
                addresses.push(
                    u64::from_str_radix(&m.as_str()[2..], 16)
                        .map_err(|_| text_error(THREADZ, n, "address out of range"))?,
                );
            }
        }
        if same_as_previous || addresses.is_empty() {
            if let Some(last) = b.profile.samples.len().checked_sub(1) {
                b.profile.samples.values_mut(last)[0] += 1;
            }
            continue;
        }
        let locations = b.stack(&addresses, true);
        b.push_sample(locations, vec![1], Vec::new())?;
    }
    Ok(b.finish())
}

const JAVA: &str = "Java profile text";

static_regex!(java_sample, r"^ *(\d+) +(\d+) +@ +([ x0-9a-f]*)$");

/// Java heapz/contentionz text: attributes, samples (`<value> <count> @ ids`), then one
/// line per frame id naming it: `0x… func (File.java:12)`.
pub fn parse_java(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = numbered(&text).peekable();
    let (header_n, header) = text::header(&mut lines, JAVA)?;
    let heap = match header.trim() {
        "--- heapz 1 ---" => true,
        "--- contentionz 1 ---" => false,
        other => return Err(text_error(JAVA, header_n, format!("unrecognized header '{other}'"))),
    };
    let mut b = AddressProfile::new(SourceFormat::JavaText, options);
    b.profile.period_type = Some(b.profile.value_type("", ""));
    while let Some((n, t, key, value)) = peek_attribute(&mut lines) {
        if java_sample().is_match(t) {
            break;
        }
        match (heap, key) {
            (_, "format") if value == "java" => {}
            (_, "format") => return Err(text_error(JAVA, n, format!("format '{value}' is not java"))),
            (true, "resolution") => {
                b.profile.sample_types =
                    vec![b.profile.value_type("inuse_objects", "count"), b.profile.value_type("inuse_space", value)];
            }
            (false, "resolution") => {
                b.profile.sample_types =
                    vec![b.profile.value_type("contentions", value), b.profile.value_type("delay", value)];
            }
            (false, "sampling period") => {
                b.profile.period_type = Some(b.profile.value_type("contentions", "count"));
                b.profile.period =
                    value.parse().map_err(|_| text_error(JAVA, n, format!("'{value}' is not a number")))?;
            }
            (false, "ms since reset") => {
                let ms: i64 = value.parse().map_err(|_| text_error(JAVA, n, format!("'{value}' is not a number")))?;
                b.profile.duration_nanos = ms.saturating_mul(1_000_000);
            }
            _ => return Err(text_error(JAVA, n, format!("unknown attribute '{key}'"))),
        }
        lines.next();
    }
    if b.profile.sample_types.is_empty() {
        return Err(text_error(JAVA, header_n, "missing 'resolution' attribute"));
    }
    while let Some(&(n, line)) = lines.peek() {
        let t = line.trim();
        if t.is_empty() {
            lines.next();
            continue;
        }
        let Some(c) = java_sample().captures(t) else { break };
        lines.next();
        let num =
            |i: usize| c[i].parse::<i64>().map_err(|_| text_error(JAVA, n, format!("'{}' is out of range", &c[i])));
        // Java puts the count second.
        let (mut count, mut value) = (num(2)?, num(1)?);
        let mut labels = Vec::new();
        if heap {
            if count == 0 {
                return Err(text_error(JAVA, n, "object count must be non-zero"));
            }
            let key = b.profile.strings.intern("bytes");
            labels.push(Label {
                key,
                value: LabelValue::Num { value: value / count, unit: crate::model::StrId::default() },
            });
            (count, value) = scale_heap_sample(count, value, 524_288);
        } else if b.profile.period != 0 {
            count = count.saturating_mul(b.profile.period);
            value = value.saturating_mul(b.profile.period);
        }
        let addresses = parse_addresses(&c[3], JAVA, n)?;
        let locations = b.stack(&addresses, false);
        b.push_sample(locations, vec![count, value], labels)?;
    }
    java_frame_names(&mut b, lines.map(|(_, l)| l));
    Ok(b.finish())
}

static_regex!(java_location, r"^\s*0x([[:xdigit:]]+)\s+(.*?)\s*$");

static_regex!(java_file_line, r"^(.*)\s+\((.+):(-?[[:digit:]]+)\)$");

static_regex!(java_path, r"^(.*)\s+\((.*)\)$");

/// Names Java frame ids from `0x… function (File.java:12)` lines.
pub(crate) fn java_frame_names<'a>(b: &mut AddressProfile, lines: impl Iterator<Item = &'a str>) {
    for line in lines {
        let Some(c) = java_location().captures(line.trim()) else { continue };
        let Ok(address) = u64::from_str_radix(&c[1], 16) else { continue };
        let rest = &c[2];
        if let Some(fl) = java_file_line().captures(rest) {
            let line_no = fl[3].parse::<i64>().ok().filter(|n| *n > 0).unwrap_or(0);
            b.name_address(address, &fl[1], &fl[2], line_no);
        } else if let Some(fp) = java_path().captures(rest) {
            // A shared library path: only its base name is interesting.
            let base = fp[2].rsplit('/').next().unwrap_or(&fp[2]);
            b.name_address(address, &fp[1], base, 0);
        } else if rest.contains("generated stub/JIT") {
            b.name_address(address, "STUB", "", 0);
        } else {
            // Agent-internal states such as "GC" or "VM".
            b.name_address(address, rest, "", 0);
        }
    }
}
