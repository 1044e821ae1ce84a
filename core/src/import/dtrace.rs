//! DTrace aggregations of `stack()` / `ustack()`, as `dtrace -n 'profile-97 { @[ustack()]
//! = count(); }'` prints them (inferno's `collapse-dtrace`, Brendan Gregg's
//! `stackcollapse.pl` read the same):
//!
//! ```text
//! CPU     ID                    FUNCTION:NAME
//!  30  76446                       :tick-10ms
//!
//!               zfs`arc_memory_throttle+0x1
//!               genunix`fop_write+0x5d
//!
//!               libc.so.1`__pwrite+0xa
//!               app`main+0x1c
//!                 7
//! ```
//!
//! * The header (the probe's description) runs to the first blank line.
//! * A stack is its frames, leaf first, then its count alone on a line; a blank line
//!   inside a stack (between `stack()` and `ustack()`) is just a separator.
//! * A frame is `module`function+0xoffset` (or without the offset, or a bare address);
//!   the offset is dropped so a function is one frame, the module becomes its mapping.

use super::named_frames::NamedFrames;
use super::text::{self, text_error};
use crate::model::{LocationId, Profile, SourceFormat};
use crate::Result;

const FORMAT: &str = "DTrace stacks";

/// How many lines detection looks at after the header.
const DETECT_LINES: usize = 64;

fn is_count(line: &str) -> bool {
    !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
}

fn is_frame(line: &str) -> bool {
    line.contains('`') || line.strip_prefix("0x").is_some_and(|h| u64::from_str_radix(h, 16).is_ok())
}

/// Whether `text` starts like a DTrace aggregation: DTrace's `CPU ID FUNCTION:NAME`
/// header, or (with `-q`) frames with a module then a count.
pub(crate) fn looks_like_dtrace(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else { return false };
    let header: Vec<&str> = first.split_whitespace().collect();
    if header == ["CPU", "ID", "FUNCTION:NAME"] {
        return true;
    }
    if !is_frame(first) {
        return false;
    }
    for line in lines.take(DETECT_LINES) {
        if is_count(line) {
            return true;
        }
        if !is_frame(line) {
            return false;
        }
    }
    false
}

/// `module`function+0x1c` → (function, module).
fn split_frame(line: &str) -> (&str, &str) {
    let frame = match line.rsplit_once('+') {
        Some((frame, offset)) if offset.strip_prefix("0x").is_some_and(|h| u64::from_str_radix(h, 16).is_ok()) => frame,
        _ => line,
    };
    match frame.split_once('`') {
        Some((module, function)) => (function, module),
        None => (frame, ""),
    }
}

pub fn parse(bytes: &[u8], options: &super::ParseOptions) -> Result<Profile> {
    let text = text::decode(bytes);
    let mut lines = text::numbered(&text).map(|(n, l)| (n, l.trim())).peekable();
    let headed = lines.peek().is_some_and(|(_, l)| l.starts_with("CPU"));
    if headed {
        lines.by_ref().find(|(_, l)| l.is_empty());
    }
    let mut frames = NamedFrames::new(SourceFormat::Dtrace, &[("samples", "count")], options);
    let mut stack: Vec<LocationId> = Vec::new();
    let mut last_frame_line = 0;
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        if is_count(line) {
            let count = line.parse().map_err(|_| text_error(FORMAT, n, format!("count {line} is too large")))?;
            frames.sample(std::mem::take(&mut stack), vec![count])?;
            continue;
        }
        let (function, module) = split_frame(line);
        stack.push(frames.frame(function, module));
        last_frame_line = n;
    }
    if !stack.is_empty() {
        return Err(text_error(FORMAT, last_frame_line, "the input ends in the middle of a stack (no count after it)"));
    }
    if frames.profile.samples.is_empty() {
        return Err(text_error(FORMAT, 1, "no stacks"));
    }
    Ok(frames.profile)
}
