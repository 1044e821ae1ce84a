//! Go count profiles in `debug=1` text: `goroutine profile: total N` and
//! `threadcreate profile: total N`. Frames are named from the `#` comment lines, and
//! `# labels: {…}` lines become sample labels.

use super::text::{self, is_memory_map_trigger, numbered, parse_addresses, text_error, AddressProfile};
use crate::model::{Profile, SourceFormat};
use crate::Result;

const FORMAT: &str = "Go count profile text";

pub fn parse_count(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = numbered(&text).peekable();
    let (header_line, header) = loop {
        match lines.next() {
            Some((_, l)) if text::is_space_or_comment(l) => continue,
            Some(found) => break found,
            None => return Err(text_error(FORMAT, 1, "no header line")),
        }
    };
    let kind = header
        .trim()
        .split_once(" profile: total ")
        .map(|(k, _)| k)
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .ok_or_else(|| text_error(FORMAT, header_line, "expected '<type> profile: total <n>'"))?;

    let mut b = AddressProfile::new(SourceFormat::GoCountText, options);
    let vt = b.profile.value_type(kind, "count");
    b.profile.sample_types = vec![vt];
    b.profile.period_type = Some(vt);
    b.profile.period = 1;

    // Whether the last sample takes the labels of the comments that follow it.
    let mut labels_follow = false;
    let mut map_section = false;
    for (n, line) in lines {
        if map_section {
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            labels_follow = false;
            continue;
        }
        if trimmed.starts_with('#') {
            if let Some(labels) = b.labels_from_comment(trimmed) {
                if labels_follow {
                    if let Some(mut sample) = b.profile.samples.pop() {
                        sample.labels = labels;
                        b.profile.samples.push(sample);
                    }
                }
            } else {
                b.note(trimmed);
            }
            continue;
        }
        if trimmed.starts_with("---") {
            map_section = is_memory_map_trigger(trimmed);
            if map_section {
                let rest: Vec<&str> = text.lines().skip(n).collect();
                b.memory_map(rest.into_iter());
            }
            continue;
        }
        let (count, stack) = trimmed
            .split_once('@')
            .ok_or_else(|| text_error(FORMAT, n, format!("expected '<count> @ <addresses>', found '{trimmed}'")))?;
        let count: i64 =
            count.trim().parse().map_err(|_| text_error(FORMAT, n, format!("'{}' is not a count", count.trim())))?;
        // pprof rejects an empty stack (`6 @`, which Go writes for threads it could not
        // unwind); we keep it as a sample with no frames so the total stays right.
        let addresses = parse_addresses(stack, FORMAT, n)?;
        let locations = b.stack(&addresses, true);
        b.push_sample(locations, vec![count], Vec::new())?;
        labels_follow = true;
    }
    Ok(b.finish())
}
