//! The pieces every command shares (the `gate` command too): their errors and exit
//! statuses, reading profiles (files, folded stacks, merged runs) and source files,
//! and writing output to a file or the terminal.

use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};

use stacklens_core::analysis::merge::Merger;
use stacklens_core::analysis::source::trim_source_path;
use stacklens_core::Profile;

/// Errors at the command-line edge, each with its exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot fetch {url}: {reason}")]
    Fetch { url: String, reason: String },
    /// A file or URL that is no profile.
    #[error("{input}: {source}")]
    Parse { input: String, source: stacklens_core::Error },
    #[error("{0}")]
    Analysis(#[from] stacklens_core::Error),
    /// A profile that cannot be merged with (or compared to) the ones before it (other
    /// sample types).
    #[error("{path}: {source}")]
    Merge { path: PathBuf, source: stacklens_core::Error },
    #[error("{0}")]
    Serve(String),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// 2 is clap's usage error; 3 unreadable input (or a failed fetch), 4 not a valid profile,
    /// 5 an analysis that cannot be done (unknown sample type, bad regex, profiles that
    /// cannot be merged, …), 6 server.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Read { .. } | CliError::Write { .. } | CliError::Fetch { .. } => 3,
            CliError::Parse { .. } => 4,
            CliError::Analysis(_) | CliError::Merge { .. } => 5,
            CliError::Serve(_) => 6,
        }
    }
}

/// A file's profile, or standard input's for "-" (`perf record -o - | stacklens top -`);
/// its bytes are dropped once inflated (see `parse_owned`).
pub(crate) fn load(path: &Path) -> Result<Profile, CliError> {
    if path.as_os_str() != STDIN {
        if let Some(profile) = load_folded(path)? {
            return Ok(profile);
        }
    }
    let (input, bytes) = (path.display().to_string(), read(path)?);
    once_gzipped(&input, &bytes)?;
    stacklens_core::parse_owned(bytes).map_err(|source| CliError::Parse { input, source })
}

/// Folded stacks read twice in 16 MiB pieces, never whole (a 1 GiB file is not held
/// beside its model); `None` when the file is not folded stacks.
fn load_folded(path: &Path) -> Result<Option<Profile>, CliError> {
    use stacklens_core::import::folded_input::{is_folded, parse_folded, Seekable, SeekableError};
    let failed = |e| match e {
        SeekableError::Read(source) => CliError::Read { path: path.to_owned(), source },
        SeekableError::Parse(source) => CliError::Parse { input: path.display().to_string(), source },
    };
    let file = std::fs::File::open(path).map_err(|source| CliError::Read { path: path.to_owned(), source })?;
    let mut input = Seekable::new(file);
    if !is_folded(&mut input).map_err(failed)? {
        return Ok(None);
    }
    parse_folded(&mut input, SeekableError::Parse).map(Some).map_err(failed)
}

/// The profiles in `files` as one: a single file as read, several merged as
/// `go tool pprof a b c` merges them, one at a time (each read, parsed and added, then
/// dropped before the next), so that merging N files never holds N models. A file the
/// merge refuses (other sample types) is named in the error.
///
/// The result is never freed: a command ends the process, which returns the memory at
/// once, while dropping a large model allocation by allocation took 8 % of `top`'s time
/// on `cpu.large.pb.gz`.
pub(crate) fn load_merged(files: &[PathBuf]) -> Result<ManuallyDrop<Profile>, CliError> {
    if let [file] = files {
        return load(file).map(ManuallyDrop::new);
    }
    let mut merger = Merger::default();
    for file in files {
        let profile = load(file)?;
        merger.add(&profile).map_err(|source| CliError::Merge { path: file.clone(), source })?;
    }
    Ok(ManuallyDrop::new(merger.finish()?))
}

/// The path that names standard input.
const STDIN: &str = "-";

/// The bytes of a file, or of standard input for "-".
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    let failed = |source| CliError::Read { path: path.to_owned(), source };
    if path.as_os_str() == STDIN {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes).map_err(failed)?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(failed)
}

/// The profile in `bytes`, read from `input` (a file or URL, named by errors).
pub(crate) fn parse(input: &str, bytes: &[u8]) -> Result<Profile, CliError> {
    once_gzipped(input, bytes)?;
    stacklens_core::parse(bytes).map_err(|source| CliError::Parse { input: input.to_owned(), source })
}

/// Refuses a gzip inside a gzip before inflating it (no profile format is written so).
fn once_gzipped(input: &str, bytes: &[u8]) -> Result<(), CliError> {
    match stacklens_core::import::twice_gzipped(bytes) {
        Some(source) => Err(CliError::Parse { input: input.to_owned(), source }),
        None => Ok(()),
    }
}

/// Report text with control characters other than newlines and tabs escaped (`\u{1b}`),
/// so names in a profile cannot drive the terminal (or rewrite a CI log).
pub(crate) fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return text.into();
    }
    text.chars()
        .map(|c| if c.is_control() && c != '\n' && c != '\t' { c.escape_unicode().to_string() } else { c.to_string() })
        .collect::<String>()
        .into()
}

/// A source file as pprof's `openSourceFile` finds it: its name trimmed (by `trim`, or by
/// the base names of the `search` folders), read as is when still absolute, else looked
/// for in each search folder and its parents. Where pprof gives up, the shorter ends of the
/// name are tried in each search folder (sources checked out elsewhere than they were
/// built). The error is pprof's message.
pub(crate) fn read_source(name: &str, search: &str, trim: &str) -> Result<String, String> {
    let read = |path: &Path| std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let trimmed = trim_source_path(name, trim, search);
    let path = Path::new(trimmed);
    let folders = || search.split(':').map(Path::new);
    let error = if path.is_absolute() {
        match read(path) {
            Ok(text) => return Ok(text),
            Err(e) => format!("open {trimmed}: {}", go_error_text(&e)),
        }
    } else {
        if let Some(text) = folders().flat_map(Path::ancestors).find_map(|dir| read(&dir.join(path)).ok()) {
            return Ok(text);
        }
        format!("could not find file {trimmed} on path {search}")
    };
    let shorter_ends = trimmed.match_indices('/').map(|(at, _)| &trimmed[at + 1..]).filter(|end| !end.is_empty());
    let shorter_ends: Vec<&str> = shorter_ends.collect();
    folders()
        .flat_map(|dir| shorter_ends.iter().map(move |end| dir.join(end)))
        .find_map(|candidate| read(&candidate).ok())
        .ok_or(error)
}

/// An I/O error as Go words it (`no such file or directory`): the OS's message, without
/// Rust's `(os error N)` and with a lower-case first letter.
fn go_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    chars.next().map(|first| first.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

/// Writes `bytes` to `path`, or to standard output for "-".
pub(crate) fn write_output(path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    let written = if path.as_os_str() == "-" {
        std::io::Write::write_all(&mut std::io::stdout().lock(), bytes)
    } else {
        std::fs::write(path, bytes)
    };
    written.map_err(|source| CliError::Write { path: path.to_owned(), source })
}

pub(crate) fn print_json(value: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(value).expect("reports serialize"));
}
