//! Typed errors. Every parse error says what is wrong and where (byte offset or line),
//! so the page, the API and the CLI can show it as is.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    #[error("the input is empty")]
    Empty,

    #[error("unrecognized profile format: {hint}")]
    UnknownFormat { hint: String },

    #[error("gzip data is corrupt or truncated near compressed byte {offset}: {reason}")]
    Gzip { offset: u64, reason: String },

    #[error("decompressed data exceeds the limit of {limit} bytes (a gzip bomb, or raise the limit)")]
    TooLarge { limit: u64 },

    #[error(
        "the profile expands to more than {limit} bytes of model (its samples and the frames of their stacks), \
         the limit on what a parse may build"
    )]
    ModelTooLarge { limit: u64 },

    #[error("not enough memory to decompress: {bytes} bytes could not be allocated")]
    OutOfMemory { bytes: u64 },

    #[error("malformed protobuf at byte {offset}: {reason}")]
    Protobuf { offset: usize, reason: String },

    #[error("invalid profile: {what} refers to {target} id {id}, which does not exist")]
    DanglingReference { what: String, target: &'static str, id: u64 },

    #[error("invalid profile: {0}")]
    Invalid(String),

    #[error("{format}, line {line}: {reason}")]
    Text { format: &'static str, line: usize, reason: String },

    #[error("{format}, byte {offset}: {reason}")]
    Binary { format: &'static str, offset: usize, reason: String },

    #[error("unknown sample type '{requested}'; this profile has: {}", available.join(", "))]
    UnknownSampleType { requested: String, available: Vec<String> },

    #[error("invalid {option} regular expression: {reason}")]
    InvalidRegex { option: &'static str, reason: String },

    #[error("invalid {option} value '{filter}': {reason}")]
    InvalidTagFilter { option: &'static str, filter: String, reason: String },

    #[error("the profiles do not match: {0}")]
    Incompatible(String),

    #[error("this profile has no goroutine information: {0}")]
    NotGoroutine(String),

    #[error("this profile has no sample times: {0}")]
    NoSampleTimes(String),

    /// pprof's words when `-list` finds no function.
    #[error("no matches found for regexp: {regex}")]
    NoMatchingFunction { regex: String },

    #[error("invalid transform '{text}': {reason}")]
    InvalidTransform { text: String, reason: String },

    #[error("no node named '{0}' in this profile")]
    UnknownNode(String),

    /// A gate that cannot run as configured (a bad threshold or rule, too few runs).
    #[error("{0}")]
    Gate(String),
}

impl Error {
    /// A stable machine-readable code for API responses and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Empty => "EmptyInput",
            Error::UnknownFormat { .. } => "UnknownFormat",
            Error::Gzip { .. } => "CorruptGzip",
            Error::TooLarge { .. } => "InputTooLarge",
            Error::ModelTooLarge { .. } => "ModelTooLarge",
            Error::OutOfMemory { .. } => "OutOfMemory",
            Error::Protobuf { .. } => "MalformedProtobuf",
            Error::DanglingReference { .. } | Error::Invalid(_) => "InvalidProfile",
            Error::Text { .. } => "MalformedText",
            Error::Binary { .. } => "MalformedBinary",
            Error::UnknownSampleType { .. } => "UnknownSampleType",
            Error::InvalidRegex { .. } => "InvalidRegex",
            Error::InvalidTagFilter { .. } => "InvalidTagFilter",
            Error::Incompatible(_) => "IncompatibleProfiles",
            Error::NotGoroutine(_) => "NotAGoroutineProfile",
            Error::NoSampleTimes(_) => "NoSampleTimes",
            Error::NoMatchingFunction { .. } => "NoMatchingFunction",
            Error::InvalidTransform { .. } => "InvalidTransform",
            Error::UnknownNode(_) => "UnknownNode",
            Error::Gate(_) => "InvalidGate",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
