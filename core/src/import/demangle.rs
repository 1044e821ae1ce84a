//! Demangling of native symbol names, for the importers whose names come from native
//! profilers (perf script, folded stacks, callgrind, Firefox and speedscope profiles,
//! pmcstat, Instruments deep copies, V8 tick logs):
//!
//! * Rust legacy (`_ZN…17h<hash>E`) and v0 (`_R…`) symbols, by `rustc-demangle`, in its
//!   alternate form: without the `::h0123456789abcdef` hash and v0's crate
//!   disambiguators (`trace::multiply_matrices`, not `trace[5a06…]::multiply_matrices`).
//! * C++ Itanium symbols (`_Z…`), by `cpp_demangle`, as `c++filt` prints them
//!   (`space::foo(int, bool, char)`).
//!
//! Importers keep the raw symbol as the function's `system_name` (pprof's meaning), so
//! nothing is lost; `stacklens top --raw-names` reports by it. A name that is not a
//! complete mangled symbol (already demangled by the profiler, a Go or Python name, a
//! truncated symbol) is left as it is.

use std::fmt::{self, Write as _};

use crate::model::{FunctionId, Profile};

/// Symbols longer than this are left mangled (real ones are well below it).
const MAX_INPUT: usize = 16 * 1024;

/// A demangled name longer than this is given up on: some short C++ symbols expand
/// exponentially through back references.
const MAX_OUTPUT: usize = 64 * 1024;

/// A `fmt::Write` sink that fails once `left` bytes are used up, which stops the
/// demangler instead of letting it build a huge string.
struct Capped {
    out: String,
    left: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.left = self.left.checked_sub(s.len()).ok_or(fmt::Error)?;
        self.out.push_str(s);
        Ok(())
    }
}

fn capped() -> Capped {
    Capped { out: String::new(), left: MAX_OUTPUT }
}

/// The demangled form of a mangled Rust or C++ symbol, or `None` when `raw` is not one
/// (then callers keep `raw` as the name).
pub fn demangle(raw: &str) -> Option<String> {
    if raw.len() > MAX_INPUT {
        return None;
    }
    // macOS symbols carry one more leading underscore.
    let bare = raw.strip_prefix('_').unwrap_or(raw);
    let bare = bare.strip_prefix('_').unwrap_or(bare);
    if raw.len() == bare.len() || !(bare.starts_with('Z') || bare.starts_with('R')) {
        return None;
    }
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        let mut w = capped();
        // `{:#}` leaves out the hash (legacy) and crate disambiguators (v0).
        if write!(w, "{d:#}").is_ok() && !w.out.is_empty() && w.out != raw {
            return Some(w.out);
        }
        return None;
    }
    if bare.starts_with('Z') {
        let symbol = cpp_demangle::Symbol::new(raw.as_bytes()).ok()?;
        let mut w = capped();
        symbol.structured_demangle(&mut w, &cpp_demangle::DemangleOptions::default()).ok()?;
        if !w.out.is_empty() && w.out != raw {
            return Some(w.out);
        }
    }
    None
}

/// Adds a function named by a native symbol: the demangled name as `name` and the raw
/// symbol as `system_name` (both `raw` when it is not mangled).
pub(crate) fn add_native_function(p: &mut Profile, raw: &str, filename: &str, start_line: i64) -> FunctionId {
    match demangle(raw) {
        Some(name) => p.add_function(&name, raw, filename, start_line),
        None => p.add_function(raw, raw, filename, start_line),
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn leaves_other_names_alone() {
        for name in ["main", "runtime.mallocgc", "_start", "_Run", "_Zebra", "ZN3foo3barE", "Rfoo", "", "_", "__"] {
            assert_eq!(demangle(name), None, "{name}");
        }
        let long = format!("_ZN{}E", "3abc".repeat(5000));
        assert_eq!(demangle(&long), None);
    }
}
