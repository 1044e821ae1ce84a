//! Writers: a profile in the formats other tools read, and standalone flame graphs.
//! pprof keeps everything; the others carry one sample type's stacks at a granularity,
//! with the filters applied, as the reports see them.

pub mod folded;
pub mod html;
pub mod otlp;
pub mod pprof;
pub mod speedscope;
pub mod svg;

use serde::{Deserialize, Serialize};

use crate::analysis::Prepared;
use crate::{Error, Result};

/// An output format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// Gzipped `profile.proto`, for `go tool pprof` and every pprof consumer.
    Pprof,
    /// Folded stacks (`a;b;c 12`), for FlameGraph and inferno.
    Folded,
    /// speedscope's JSON file format.
    Speedscope,
    /// A standalone flame graph with zoom and search.
    Svg,
    /// A standalone page: flame graph, top table and search.
    Html,
    /// OpenTelemetry profiles (`ProfilesData`, protobuf), for OTLP receivers.
    Otlp,
}

impl ExportFormat {
    pub const ALL: [ExportFormat; 6] = [
        ExportFormat::Pprof,
        ExportFormat::Folded,
        ExportFormat::Speedscope,
        ExportFormat::Svg,
        ExportFormat::Html,
        ExportFormat::Otlp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "pprof",
            ExportFormat::Folded => "folded",
            ExportFormat::Speedscope => "speedscope",
            ExportFormat::Svg => "svg",
            ExportFormat::Html => "html",
            ExportFormat::Otlp => "otlp",
        }
    }

    /// The usual file name ending.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "pb.gz",
            ExportFormat::Folded => "folded",
            ExportFormat::Speedscope => "speedscope.json",
            ExportFormat::Svg => "svg",
            ExportFormat::Html => "html",
            ExportFormat::Otlp => "otlp.pb",
        }
    }

    /// The media type of a written file.
    pub fn media_type(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "application/gzip",
            ExportFormat::Folded => "text/plain",
            ExportFormat::Speedscope => "application/json",
            ExportFormat::Svg => "image/svg+xml",
            ExportFormat::Html => "text/html",
            ExportFormat::Otlp => "application/x-protobuf",
        }
    }

    /// The format a file name asks for by its ending, if any.
    pub fn from_file_name(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        let ends = |suffixes: &[&str]| suffixes.iter().any(|s| name.ends_with(s));
        // `.otlp.pb` before pprof's `.pb`.
        if ends(&[".otlp.pb", ".otlp"]) {
            Some(ExportFormat::Otlp)
        } else if ends(&[".pb.gz", ".pb", ".pprof", ".prof.gz"]) {
            Some(ExportFormat::Pprof)
        } else if ends(&[".folded", ".collapsed", ".folded.txt"]) {
            Some(ExportFormat::Folded)
        } else if ends(&[".speedscope.json", ".speedscope"]) {
            Some(ExportFormat::Speedscope)
        } else if ends(&[".svg"]) {
            Some(ExportFormat::Svg)
        } else if ends(&[".html", ".htm"]) {
            Some(ExportFormat::Html)
        } else {
            None
        }
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ExportFormat::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = ExportFormat::ALL.iter().map(|f| f.name()).collect();
            format!("unknown output format '{s}' ({})", names.join(", "))
        })
    }
}

/// The prepared profile written as `format`: its sample type leads, its filters apply,
/// and the stack formats name frames at its granularity (pprof output keeps every
/// location).
pub fn export(prepared: &Prepared, format: ExportFormat) -> Result<Vec<u8>> {
    let (profile, index) = (prepared.profile(), prepared.sample_index);
    if profile.sample_types.is_empty() {
        return Err(Error::Invalid("the profile has no sample types to write".into()));
    }
    match format {
        ExportFormat::Pprof => {
            let mut filtered = profile.filter_compiled(prepared.filters());
            filtered.default_sample_type = filtered.sample_types[index].kind;
            Ok(pprof::write(&filtered))
        }
        ExportFormat::Folded => folded::write(prepared),
        ExportFormat::Speedscope => speedscope::write(prepared),
        ExportFormat::Svg => svg::write(prepared),
        ExportFormat::Html => html::write(prepared),
        ExportFormat::Otlp => Ok(otlp::write(&profile.filter_compiled(prepared.filters()), index)),
    }
}
