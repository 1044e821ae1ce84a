//! Locating the shared fixture corpus (`../shared/fixtures` beside the repository).

use std::path::PathBuf;

/// The fixtures folder, or `None` (with a message) when it is absent outside CI.
/// Under `CI=true` a missing folder fails the test loudly.
pub fn fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("STACKLENS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    if dir.join("SOURCES.md").is_file() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("fixtures folder {} is missing (CI=true requires it)", dir.display());
    }
    eprintln!("SKIPPED: fixtures folder {} not found; set STACKLENS_FIXTURES", dir.display());
    None
}

#[allow(dead_code)] // not every test binary reads files
pub fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
