//! Shared by the timing examples.

use std::ffi::OsString;
use std::path::PathBuf;

/// The file to time: `arg` when given, else `default` in the fixtures folder
/// (`$STACKLENS_FIXTURES`, or `../shared/fixtures` beside the repository).
pub fn input(arg: Option<OsString>, default: &str) -> PathBuf {
    arg.map(PathBuf::from).unwrap_or_else(|| {
        let fixtures = std::env::var_os("STACKLENS_FIXTURES")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
        fixtures.join(default)
    })
}
