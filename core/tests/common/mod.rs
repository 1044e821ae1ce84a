//! Locating the shared fixture corpus (`../shared/fixtures` beside the repository), and
//! what a test does when a prerequisite (fixtures, a tool, a server) is missing.

use std::io::Write;
use std::path::PathBuf;

/// The fixtures folder, or `None` when it is absent and skipping is allowed (see
/// [`missing_prerequisite`]); otherwise a missing folder fails the test.
pub fn fixtures() -> Option<PathBuf> {
    let dir = std::env::var_os("STACKLENS_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"));
    if dir.join("SOURCES.md").is_file() {
        return Some(dir);
    }
    missing_prerequisite(&format!("fixtures folder {} not found; set STACKLENS_FIXTURES", dir.display()));
    None
}

/// A test that cannot run without `what` fails, unless skipping was opted into with
/// `STACKLENS_ALLOW_SKIP=1` outside CI. A skip is printed and appended to the file named by
/// `STACKLENS_SKIP_LOG`, so that `scripts/test.sh` counts it as skipped, not passed.
pub fn missing_prerequisite(what: &str) {
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let allowed = std::env::var("STACKLENS_ALLOW_SKIP").is_ok_and(|v| v == "1");
    if in_ci || !allowed {
        let why = if in_ci { "CI=true requires it" } else { "set STACKLENS_ALLOW_SKIP=1 to skip instead" };
        panic!("missing prerequisite: {what} ({why})");
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIPPED: {test}: {what}");
    if let Some(log) = std::env::var_os("STACKLENS_SKIP_LOG") {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log).expect("opening the skip log");
        writeln!(file, "{test}: {what}").expect("writing the skip log");
    }
}

#[allow(dead_code)] // not every test binary reads files
pub fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}
