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

/// A Rust legacy symbol that a profiler demangled only halfway, keeping the escapes and
/// the hash (`_$LT$T$GT$::fmt::h0123456789abcdef (.llvm.123)`, as DTrace and macOS
/// `sample` print them): the name `demangle` gives the mangled symbol, or `None`.
fn demangle_half_demangled_rust(raw: &str) -> Option<String> {
    let name = match raw.find(" (.llvm.") {
        Some(at) if raw.ends_with(')') => &raw[..at],
        _ => raw,
    };
    let (path, hash) = name.rsplit_once("::h")?;
    if hash.len() != 16 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) || path.is_empty() {
        return None;
    }
    let plain_segments =
        path.split("::").all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_$.".contains(&b)));
    if !plain_segments {
        // Already readable (`<T as Trait>::f`): only the hash goes.
        return Some(path.to_owned());
    }
    let mut mangled = String::from("_ZN");
    for segment in path.split("::") {
        write!(mangled, "{}{segment}", segment.len()).ok()?;
    }
    mangled.push('E');
    demangle(&mangled)
}

/// Adds a function named by a native symbol: the demangled name as `name` and the raw
/// symbol as `system_name` (both `raw` when it is not mangled).
pub(crate) fn add_native_function(p: &mut Profile, raw: &str, filename: &str, start_line: i64) -> FunctionId {
    add_named(p, demangle(raw), raw, filename, start_line)
}

/// [`add_native_function`] for symbols a profiler printed (DTrace, macOS `sample`),
/// which may be Rust symbols demangled only halfway.
pub(crate) fn add_printed_symbol_function(p: &mut Profile, raw: &str) -> FunctionId {
    add_named(p, demangle(raw).or_else(|| demangle_half_demangled_rust(raw)), raw, "", 0)
}

fn add_named(p: &mut Profile, demangled: Option<String>, raw: &str, filename: &str, start_line: i64) -> FunctionId {
    p.add_function(demangled.as_deref().unwrap_or(raw), raw, filename, start_line)
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

    #[test]
    fn finishes_half_demangled_rust() {
        use super::demangle_half_demangled_rust as half;
        let cases = [
            (
                "_$LT$std..thread..JoinHandle$LT$T$GT$$GT$::join::hca6aa63e512626da",
                "<std::thread::JoinHandle<T>>::join",
            ),
            (
                "std::panicking::try::do_call::hab896c32750930ec (.llvm.7886897009887049720)",
                "std::panicking::try::do_call",
            ),
            (
                "<tokio::future::poll_fn::PollFn<F> as core::future::future::Future>::poll::hdb622d175ae42c67",
                "<tokio::future::poll_fn::PollFn<F> as core::future::future::Future>::poll",
            ),
        ];
        for (raw, name) in cases {
            assert_eq!(half(raw).as_deref(), Some(name), "{raw}");
        }
        for raw in ["main", "f::h123", "::h0123456789abcdef", "a::hxyz3456789abcdef"] {
            assert_eq!(half(raw), None, "{raw}");
        }
    }
}
