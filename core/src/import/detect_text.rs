//! Recognises the text formats from their first meaningful lines: the dispatcher above
//! the text importers (it asks each whether the text is its format), which use only the
//! helpers in [`super::text`] below them.

use super::text::{decode, starts_binary};
use super::Format;
use crate::model::SourceFormat;

static_regex!(count_header, r"^(\w+) profile: total \d+$");

static_regex!(goroutine_header, r"^goroutine \d+ (gp=\S+ m=\S+ (mp=\S+ )?)?\[");

/// The text format `bytes` hold, if any (`None` for binary input and text no format claims).
pub(crate) fn detect_text(bytes: &[u8]) -> Option<Format> {
    if starts_binary(bytes) {
        return None;
    }
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let text = decode(head);
    let mut meaningful = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = meaningful.clone().find(|l| !l.starts_with('#'))?;
    // Folded stacks whose first frame looks like markup or JSON (py-spy's `<module>`).
    if (first.starts_with('<') || first.starts_with('[')) && super::folded::looks_folded(&text) {
        return Some(Format::Of(SourceFormat::Folded));
    }
    if first.starts_with('{') || first.starts_with('[') {
        return Some(Format::Json);
    }
    if first.starts_with('<') {
        // HTML (an error page or SPA fallback): say so instead of decoding it as protobuf.
        return Some(Format::Unrecognized);
    }
    if first.starts_with("heap profile:") {
        return Some(Format::Of(SourceFormat::GoHeapText));
    }
    if first.starts_with("--- heapz 1 ---") {
        return Some(Format::Of(SourceFormat::JavaText));
    }
    if first.starts_with("--- contentionz") {
        // Java contentionz profiles declare `format = java`; C++ ones never have it.
        let java = text.lines().take(20).any(|l| l.trim_start().starts_with("format"));
        return Some(if java {
            Format::Of(SourceFormat::JavaText)
        } else {
            Format::Of(SourceFormat::GoContentionText)
        });
    }
    if first.starts_with("--- contention") || first.starts_with("--- mutex:") {
        return Some(Format::Of(SourceFormat::GoContentionText));
    }
    if first.starts_with("--- threadz") || first.starts_with("--- Thread ") {
        return Some(Format::Of(SourceFormat::Threadz));
    }
    if count_header().is_match(first) {
        return Some(Format::Of(SourceFormat::GoCountText));
    }
    if super::pmcstat::is_pmcstat(first) {
        return Some(Format::Of(SourceFormat::Pmcstat));
    }
    if super::instruments::is_deep_copy(first) {
        return Some(Format::Of(SourceFormat::Instruments));
    }
    if super::v8_log::is_v8_log(first) {
        return Some(Format::Of(SourceFormat::V8Log));
    }
    // Dumps may be preceded by a panic message or other log lines.
    if meaningful.by_ref().take(64).any(|l| goroutine_header().is_match(l)) {
        return Some(Format::Of(SourceFormat::GoGoroutineDump));
    }
    if super::macos_sample::looks_like_macos_sample(&text) {
        return Some(Format::Of(SourceFormat::MacosSample));
    }
    if super::vtune::looks_like_vtune(&text) {
        return Some(Format::Of(SourceFormat::Vtune));
    }
    if super::vsprof::looks_like_vsprof(&text) {
        return Some(Format::Of(SourceFormat::VisualStudio));
    }
    if super::dtrace::looks_like_dtrace(&text) {
        return Some(Format::Of(SourceFormat::Dtrace));
    }
    if super::perf_script::looks_like_perf_script(&text) {
        return Some(Format::Of(SourceFormat::PerfScript));
    }
    if super::folded::looks_folded(&text) {
        return Some(Format::Of(SourceFormat::Folded));
    }
    None
}
