//! Names for addresses. Profiles from perf, eBPF agents and stripped production
//! binaries carry addresses and mappings; this module turns them into functions,
//! files and lines from the binaries and debug files the caller hands in. No I/O:
//! the CLI reads files and debuginfod, the page reads dropped files, the server its
//! store; each gives this module bytes and asks it for names.

use thiserror::Error;

mod apply;
mod breakpad;
pub mod breakpad_id;
mod gopclntab;
mod kallsyms;
mod object_file;
mod symbol_file;
pub use apply::{Found, MappingReport, Outcome, Role, SymbolFiles, Wanted};
pub use breakpad::{BreakpadModule, BreakpadSymbols};
pub use gopclntab::{GoPclnTab, GoTableVersion};
pub use kallsyms::KernelSymbols;
pub use object::{ReadCache, ReadCacheOps};
pub use object_file::ObjectFile;
pub use symbol_file::SymbolFile;

/// Whether a file starting with `head` is one this module reads (an ELF or Mach-O
/// binary or debug file, a Breakpad `.sym` file, kallsyms), not a profile: what the
/// page asks of a dropped file.
pub fn looks_like_symbol_file(head: &[u8]) -> bool {
    const MAGICS: [&[u8]; 6] = [
        b"\x7fELF",
        b"\xfe\xed\xfa\xce",
        b"\xfe\xed\xfa\xcf",
        b"\xce\xfa\xed\xfe",
        b"\xcf\xfa\xed\xfe",
        breakpad::MAGIC,
    ];
    MAGICS.iter().any(|m| head.starts_with(m)) || kallsyms::looks_like(head)
}

/// One source frame at an address. A lookup returns these innermost inlined function
/// first and the physical function last, as `addr2line -i` prints them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolFrame {
    /// The symbol as the binary stores it (mangled); demangled where it becomes a
    /// profile function, which keeps this as its `system_name`.
    pub name: String,
    pub file: Option<String>,
    /// 0 when unknown.
    pub line: u32,
}

/// Something that names addresses of one module: an ELF or Mach-O file with its DWARF,
/// a Go pclntab, a Breakpad `.sym` file, the kernel's kallsyms.
pub trait AddressLookup {
    /// The frames at `address` in the module's own address space (an ELF virtual
    /// address, a Breakpad module offset); empty when the module does not cover it.
    fn lookup(&self, address: u64) -> Result<Vec<SymbolFrame>, SymbolError>;
}

/// Why a symbol file could not be read or used. Each names what was wrong, so a
/// report can show it beside the mapping it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SymbolError {
    #[error("{format} is truncated or corrupt: {reason}")]
    Corrupt { format: &'static str, reason: String },

    #[error("not a symbol file stacklens reads ({0})")]
    Unrecognized(String),

    #[error("unsupported {format}: {reason}")]
    Unsupported { format: &'static str, reason: String },
}
