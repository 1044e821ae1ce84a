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

pub mod art_trace;
mod call_graph;
pub mod callgrind;
pub mod chrome_trace;
pub mod demangle;
mod detect_text;
pub mod dhat;
pub mod dtrace;
pub mod firefox;
pub mod folded;
pub mod folded_input;
pub mod ghc;
mod gzip;
pub use gzip::{grow as grow_inflated, gzip_inside, inflate_buffer, is_gzip, twice_gzipped};
pub mod instruments;
pub mod jfr;
pub mod legacy_cpu;
pub mod legacy_text;
pub mod macos_sample;
mod named_frames;
pub mod perf_data;
pub mod perf_script;
pub mod pmcstat;
pub mod pprof;
pub use pprof::IncrementalParse;
pub mod otlp;
mod pprof_wire;
pub mod pstats;
mod room;
pub mod wire;
pub use room::{model_bytes, profile_bytes, Room, FRAME_BYTES, SAMPLE_BYTES};
pub mod safari;
pub mod simpleperf;
pub mod speedscope;
pub mod stackprof;
mod text;
pub mod v8;
pub mod v8_log;
pub mod vsprof;
pub mod vtune;

use crate::model::{SampleTime, SourceFormat};
use crate::{Error, Profile, Result};

/// Limits that keep hostile input from exhausting memory.
#[derive(Clone, Debug)]
pub struct ParseOptions {
    /// Maximum size of gzip-decompressed data (default 1 GiB).
    pub max_inflated_bytes: u64,
    /// Most the model may grow to, in bytes as [`Room`] counts them (samples and the
    /// frames of their stacks); past it the parse fails with [`Error::ModelTooLarge`].
    /// Default: no limit.
    pub max_model_bytes: u64,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self { max_inflated_bytes: 1 << 30, max_model_bytes: u64::MAX }
    }
}

/// What [`detect`] found in the bytes: a format an importer reads, named by the
/// [`SourceFormat`] of the profiles it makes (its importer may refine it: a heap text
/// written by gperftools becomes [`SourceFormat::LegacyHeap`]), or what the bytes are
/// when no importer is named yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    /// A JSON document: its shape says which format (see [`JSON_FORMATS`]).
    Json,
    /// Recognisably not a supported profile (HTML, text no importer claims).
    Unrecognized,
    /// A format an importer reads, serialized by its source format's name.
    #[serde(untagged)]
    Of(SourceFormat),
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
    let inflated = inflate_if_gzip(bytes, options, progress)?;
    parse_plain(inflated.as_deref().unwrap_or(bytes), options, progress)
}

/// [`parse`] taking the bytes, so that gzip input is dropped once inflated: a caller
/// that read a file for this (the CLI) does not hold it beside the model being built.
pub fn parse_owned(bytes: Vec<u8>) -> Result<Profile> {
    let (progress, options) = (&mut |_, _| {}, &ParseOptions::default());
    // Replacing the gzip bytes by their inflated form drops them before the parse.
    let plain = inflate_if_gzip(&bytes, options, progress)?.unwrap_or(bytes);
    parse_plain(&plain, options, progress)
}

/// The inflated bytes when `bytes` is gzip, `None` when it is not.
fn inflate_if_gzip(bytes: &[u8], options: &ParseOptions, progress: Progress<'_>) -> Result<Option<Vec<u8>>> {
    if bytes.is_empty() {
        return Err(Error::Empty);
    }
    if !gzip::is_gzip(bytes) {
        return Ok(None);
    }
    let inflated = gzip::inflate(bytes, options.max_inflated_bytes, progress)?;
    if inflated.is_empty() {
        return Err(Error::Empty);
    }
    // One level only: a gzip inside a gzip is not a profile format anyone writes.
    Ok(Some(inflated))
}

fn parse_plain(bytes: &[u8], options: &ParseOptions, progress: Progress<'_>) -> Result<Profile> {
    match detect(bytes) {
        Format::Of(SourceFormat::Pprof) => pprof::parse(bytes, options, progress),
        // `detect` names a text family by its Go member; the importer tells the others apart.
        Format::Of(SourceFormat::GoHeapText | SourceFormat::LegacyHeap) => legacy_text::parse_heap(bytes, options),
        Format::Of(SourceFormat::GoContentionText | SourceFormat::Contentionz) => {
            legacy_text::parse_contention(bytes, options)
        }
        Format::Of(SourceFormat::GoCountText) => go_text::parse_count(bytes, options),
        Format::Of(SourceFormat::GoGoroutineDump) => go_dump::parse(bytes, options),
        Format::Of(SourceFormat::LegacyCpu) => legacy_cpu::parse(bytes, options),
        Format::Of(SourceFormat::Threadz) => legacy_text::parse_threadz(bytes, options),
        Format::Of(SourceFormat::JavaText) => legacy_text::parse_java(bytes, options),
        Format::Of(SourceFormat::Folded) => folded::parse(bytes, options),
        Format::Of(SourceFormat::PerfScript) => perf_script::parse(bytes, options),
        Format::Of(SourceFormat::PerfData) => perf_data::parse(bytes, options),
        Format::Of(SourceFormat::Otlp) => otlp::parse(bytes, options),
        Format::Of(SourceFormat::Callgrind) => callgrind::parse(bytes, options),
        Format::Of(SourceFormat::Pstats) => pstats::parse(bytes, options),
        Format::Of(SourceFormat::Pmcstat) => pmcstat::parse(bytes, options),
        Format::Of(SourceFormat::Instruments) => instruments::parse(bytes, options),
        Format::Of(SourceFormat::V8Log) => v8_log::parse(bytes, options),
        Format::Of(SourceFormat::Jfr) => jfr::parse(bytes, options),
        Format::Of(SourceFormat::Dtrace) => dtrace::parse(bytes, options),
        Format::Of(SourceFormat::Vtune) => vtune::parse(bytes, options),
        Format::Of(SourceFormat::VisualStudio) => vsprof::parse(bytes, options),
        Format::Of(SourceFormat::MacosSample) => macos_sample::parse(bytes, options),
        Format::Of(SourceFormat::Simpleperf) => simpleperf::parse(bytes, options),
        Format::Of(SourceFormat::ArtTrace) => art_trace::parse(bytes, options),
        Format::Json
        | Format::Of(
            SourceFormat::FirefoxProfiler
            | SourceFormat::V8CpuProfile
            | SourceFormat::V8HeapProfile
            | SourceFormat::ChromeTrace
            | SourceFormat::Speedscope
            | SourceFormat::Stackprof
            | SourceFormat::Ghc
            | SourceFormat::Safari
            | SourceFormat::Dhat,
        ) => parse_json(bytes, options),
        // No bytes are a built profile.
        Format::Unrecognized | Format::Of(SourceFormat::Built) => Err(Error::UnknownFormat { hint: describe(bytes) }),
    }
}

/// A JSON profile format: whether a document is one, and its importer.
struct JsonFormat {
    is: fn(&serde_json::Value) -> bool,
    parse: fn(&serde_json::Value, &ParseOptions) -> Result<Profile>,
}

/// JSON formats in the order they are tried; the document is parsed once.
const JSON_FORMATS: &[JsonFormat] = &[
    JsonFormat { is: firefox::is_firefox, parse: firefox::parse },
    JsonFormat { is: speedscope::is_speedscope, parse: speedscope::parse },
    JsonFormat { is: chrome_trace::is_chrome_trace, parse: chrome_trace::parse },
    JsonFormat { is: v8::is_heapprofile, parse: v8::parse_heapprofile },
    JsonFormat { is: v8::is_cpuprofile, parse: v8::parse_cpuprofile },
    JsonFormat { is: stackprof::is_stackprof, parse: stackprof::parse },
    JsonFormat { is: ghc::is_ghc, parse: ghc::parse },
    JsonFormat { is: safari::is_safari, parse: safari::parse },
    JsonFormat { is: dhat::is_dhat, parse: dhat::parse },
    JsonFormat { is: otlp::is_otlp_json, parse: otlp::parse_json },
];

fn parse_json(bytes: &[u8], options: &ParseOptions) -> Result<Profile> {
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| Error::UnknownFormat {
        hint: format!("this looks like JSON but is not valid JSON (line {}, column {}: {e})", e.line(), e.column()),
    })?;
    match JSON_FORMATS.iter().find(|f| (f.is)(&json)) {
        Some(format) => (format.parse)(&json, options),
        None => Err(Error::UnknownFormat { hint: describe_json(&json) }),
    }
}

/// What a JSON document no importer reads looks like.
fn describe_json(json: &serde_json::Value) -> String {
    match json {
        serde_json::Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(8).map(String::as_str).collect();
            let more = if map.len() > keys.len() { ", …" } else { "" };
            format!("JSON with top-level keys {}{more}, not a profile format stacklens reads", keys.join(", "))
        }
        serde_json::Value::Array(items) => {
            format!("a JSON array of {} items, not a profile format stacklens reads", items.len())
        }
        _ => "a JSON value that is not a profile".into(),
    }
}

/// How many leading bytes of unrecognised binary input the error message shows.
const BINARY_MAGIC_SHOWN: usize = 12;

/// What bytes no importer reads look like, for the error message.
fn describe(bytes: &[u8]) -> String {
    if !looks_like_text(bytes) {
        let magic: String = bytes.iter().take(BINARY_MAGIC_SHOWN).map(|b| format!("{b:02x}")).collect();
        return format!("binary, magic {magic}, not a profile format stacklens reads");
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim_start().to_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return "this is an HTML page, not a profile".into();
    }
    if head.starts_with('<') {
        return "this is XML or HTML, not a profile".into();
    }
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let shown: String = first.chars().take(60).collect();
    let more = if shown.len() < first.len() { "…" } else { "" };
    format!("text starting with \"{shown}{more}\", not a profile format stacklens reads")
}

/// Whether the start of `bytes` is text: UTF-8 without the control characters protobuf
/// always has early on (field tags, lengths).
fn looks_like_text(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    let valid = match std::str::from_utf8(head) {
        Ok(_) => head,
        // A character cut at the end of the window is still text.
        Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
        Err(_) => return false,
    };
    !valid.is_empty() && !text::starts_binary(valid)
}

/// Detects the format of uncompressed bytes. Binary input goes to the pprof decoder
/// only when it starts like a `profile.proto` message (the decoder then reports where it
/// fails); text is never decoded as protobuf.
pub fn detect(bytes: &[u8]) -> Format {
    if bytes.starts_with(jfr::MAGIC) {
        return Format::Of(SourceFormat::Jfr);
    }
    if pstats::looks_like_pstats(bytes) {
        return Format::Of(SourceFormat::Pstats);
    }
    if legacy_cpu::is_legacy_cpu(bytes) {
        return Format::Of(SourceFormat::LegacyCpu);
    }
    if callgrind::looks_like_callgrind(bytes) {
        return Format::Of(SourceFormat::Callgrind);
    }
    if bytes.starts_with(simpleperf::MAGIC) {
        return Format::Of(SourceFormat::Simpleperf);
    }
    if bytes.starts_with(art_trace::MAGIC) {
        return Format::Of(SourceFormat::ArtTrace);
    }
    if perf_data::looks_like_perf_data(bytes) {
        return Format::Of(SourceFormat::PerfData);
    }
    if otlp::looks_like_otlp(bytes) {
        return Format::Of(SourceFormat::Otlp);
    }
    if let Some(format) = detect_text::detect_text(bytes) {
        return format;
    }
    if !looks_like_text(bytes) && pprof::starts_like_profile(bytes) {
        return Format::Of(SourceFormat::Pprof);
    }
    Format::Unrecognized
}

/// The spans of one thread's samples taken at `starts` (in any order): each lasts until
/// the next sample taken after it, as Firefox Profiler draws samples; the last one lasts
/// `last`. Entry `i` is for `starts[i]`.
pub(crate) fn spans_until_next(starts: &[i64], last: i64) -> Vec<SampleTime> {
    let mut order: Vec<usize> = (0..starts.len()).collect();
    order.sort_by_key(|&i| starts[i]);
    let mut spans = vec![SampleTime::default(); starts.len()];
    for (k, &i) in order.iter().enumerate() {
        let duration = order.get(k + 1).map_or(last, |&next| starts[next].saturating_sub(starts[i]));
        spans[i] = SampleTime { start: starts[i], duration };
    }
    spans
}

/// The median of the positive times between consecutive samples of each series (a
/// thread's times, in the order taken): the sampling interval. 0 without any.
pub(crate) fn median_interval<'a>(series: impl IntoIterator<Item = &'a [i64]>) -> i64 {
    let mut gaps: Vec<i64> =
        series.into_iter().flat_map(|times| times.windows(2).map(|w| w[1] - w[0])).filter(|&g| g > 0).collect();
    if gaps.is_empty() {
        return 0;
    }
    let mid = gaps.len() / 2;
    *gaps.select_nth_unstable(mid).1
}
