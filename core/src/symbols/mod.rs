//! Names for addresses. Profiles from perf, eBPF agents and stripped production
//! binaries carry addresses and mappings; this module turns them into functions,
//! files and lines from the binaries and debug files the caller hands in. No I/O:
//! the CLI reads files and debuginfod, the page reads dropped files, the server its
//! store; each gives this module bytes and asks it for names.

use std::sync::Arc;

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

/// Reads `len` bytes of `reader` (a file, `len` its size) into one shared buffer for
/// [`SymbolFile::from_bytes`]: allocated once, never copied afterwards.
pub fn read_shared(mut reader: impl std::io::Read, len: u64) -> std::io::Result<Arc<[u8]>> {
    let len = usize::try_from(len).map_err(|_| std::io::Error::other(format!("{len} bytes do not fit in memory")))?;
    let mut bytes: Arc<[u8]> = std::iter::repeat_n(0, len).collect();
    reader.read_exact(Arc::get_mut(&mut bytes).expect("a new Arc is not shared"))?;
    Ok(bytes)
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

/// A [`SymbolFrame`] borrowed from the file that found it, for callers that intern or
/// print names rather than keep them: a profile's million lookups then copy nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef<'a> {
    pub name: &'a str,
    pub file: Option<&'a str>,
    pub line: u32,
}

impl FrameRef<'_> {
    pub fn to_owned(self) -> SymbolFrame {
        SymbolFrame { name: self.name.to_owned(), file: self.file.map(str::to_owned), line: self.line }
    }
}

impl SymbolFrame {
    pub fn as_ref(&self) -> FrameRef<'_> {
        FrameRef { name: &self.name, file: self.file.as_deref(), line: self.line }
    }
}

/// Something that names addresses of one module: an ELF or Mach-O file with its DWARF,
/// a Go pclntab, a Breakpad `.sym` file, the kernel's kallsyms.
pub trait AddressLookup {
    /// Hands `each` the frames at `address` in the module's own address space (an ELF
    /// virtual address, a Breakpad module offset), innermost first; none when the
    /// module does not cover it. An error comes before any frame is handed over.
    fn each_frame(&self, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) -> Result<(), SymbolError>;

    /// The frames at `address`, owned: for callers that keep them.
    fn lookup(&self, address: u64) -> Result<Vec<SymbolFrame>, SymbolError> {
        let mut frames = Vec::new();
        self.each_frame(address, &mut |f| frames.push(f.to_owned()))?;
        Ok(frames)
    }
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
