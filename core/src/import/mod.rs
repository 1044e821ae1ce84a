//! Importers: one module per format, all producing [`Profile`]. The format is detected
//! from the bytes, never from a file name (real `.gz` files are sometimes not gzipped).

pub mod go_dump;
pub mod go_text;
/// Declares `fn $name() -> &'static Regex`, compiled on first use.
macro_rules! static_regex {
    ($name:ident, $pattern:expr) => {
        fn $name() -> &'static regex::Regex {
            static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
            RE.get_or_init(|| regex::Regex::new($pattern).expect("static regex"))
        }
    };
}

pub mod firefox;
mod gzip;
pub mod legacy_cpu;
pub mod legacy_text;
pub mod pprof;
mod pprof_wire;
mod text;

use crate::{Error, Profile, Result};

/// Limits that keep hostile input from exhausting memory.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Maximum size of gzip-decompressed data (default 1 GiB).
    pub max_inflated_bytes: u64,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self { max_inflated_bytes: 1 << 30 }
    }
}

/// What [`detect`] found in the bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    Pprof,
    GoHeapText,
    GoContentionText,
    GoCountText,
    GoGoroutineDump,
    LegacyCpu,
    Threadz,
    JavaText,
    /// Text that is recognisably not a supported profile (HTML, JSON).
    Unrecognized,
}

/// Where a parse is, for progress bars: each stage reports its own 0..=1 fraction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    Inflating,
    Decoding,
}

/// Receives progress; called at most a few hundred times per parse.
pub type Progress<'a> = &'a mut dyn FnMut(Stage, f64);

/// Parses any supported profile with default limits.
pub fn parse(bytes: &[u8]) -> Result<Profile> {
    parse_with(bytes, &ParseOptions::default())
}

pub fn parse_with(bytes: &[u8], options: &ParseOptions) -> Result<Profile> {
    parse_with_progress(bytes, options, &mut |_, _| {})
}

/// [`parse_with`], reporting how far it got.
pub fn parse_with_progress(bytes: &[u8], options: &ParseOptions, progress: Progress<'_>) -> Result<Profile> {
    if bytes.is_empty() {
        return Err(Error::Empty);
    }
    if gzip::is_gzip(bytes) {
        let inflated = gzip::inflate(bytes, options.max_inflated_bytes, progress)?;
        if inflated.is_empty() {
            return Err(Error::Empty);
        }
        // One level only: a gzip inside a gzip is not a profile format anyone writes.
        return parse_plain(&inflated, progress);
    }
    parse_plain(bytes, progress)
}

fn parse_plain(bytes: &[u8], progress: Progress<'_>) -> Result<Profile> {
    match detect(bytes) {
        Format::Pprof => pprof::parse(bytes, progress),
        Format::GoHeapText => legacy_text::parse_heap(bytes),
        Format::GoContentionText => legacy_text::parse_contention(bytes),
        Format::GoCountText => go_text::parse_count(bytes),
        Format::GoGoroutineDump => go_dump::parse(bytes),
        Format::LegacyCpu => legacy_cpu::parse(bytes),
        Format::Threadz => legacy_text::parse_threadz(bytes),
        Format::JavaText => legacy_text::parse_java(bytes),
        Format::Unrecognized => {
            // JSON is read once: a Firefox Profiler profile (samply's output) is imported.
            if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
                if let Ok(json) = serde_json::from_slice::<serde_json::Value>(bytes) {
                    if firefox::is_firefox(&json) {
                        return firefox::parse(&json);
                    }
                }
            }
            Err(Error::UnknownFormat { hint: unrecognized_hint(bytes) })
        }
    }
}

fn unrecognized_hint(bytes: &[u8]) -> String {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim_start().to_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        "this is an HTML page, not a profile".into()
    } else if head.starts_with('<') {
        "this is XML or HTML, not a profile".into()
    } else {
        "this is JSON in a format that is not supported yet".into()
    }
}

/// Detects the format of uncompressed bytes. Anything that is not a recognised text or
/// legacy binary header is treated as protobuf, whose decoder then reports where it fails.
pub fn detect(bytes: &[u8]) -> Format {
    if legacy_cpu::is_legacy_cpu(bytes) {
        return Format::LegacyCpu;
    }
    if let Some(format) = text::detect(bytes) {
        return format;
    }
    Format::Pprof
}
