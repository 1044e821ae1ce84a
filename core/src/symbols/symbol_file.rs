//! One symbol file of any format this module reads, opened by its first bytes: text
//! starting with `MODULE ` is a Breakpad `.sym` file, `ADDRESS TYPE NAME` lines are the
//! kernel's kallsyms, anything else is read as an ELF or Mach-O binary or debug file.
//! What callers hand to [`super::Profile::symbolize`].

use std::io::{BufReader, Read};
use std::sync::Arc;

use object::ReadRef;

use super::{AddressLookup, BreakpadSymbols, FrameRef, KernelSymbols, ObjectFile, SymbolError};

/// A parsed symbol file.
#[derive(Debug)]
pub enum SymbolFile {
    Object(ObjectFile),
    Breakpad(BreakpadSymbols),
    Kernel(KernelSymbols),
}

impl SymbolFile {
    /// Reads `data` (bytes, or a `ReadCache` over a file) as the format its first bytes say.
    pub fn parse<'data, R: ReadRef<'data>>(data: R) -> Result<Self, SymbolError> {
        Self::parse_in(data, None)
    }

    /// [`Self::parse`] for a file held whole in memory, whose DWARF is then read in place
    /// ([`ObjectFile::from_bytes`]).
    pub fn from_bytes(bytes: Arc<[u8]>) -> Result<Self, SymbolError> {
        Self::parse_in(&bytes[..], Some(&bytes))
    }

    fn parse_in<'data, R: ReadRef<'data>>(data: R, whole: Option<&Arc<[u8]>>) -> Result<Self, SymbolError> {
        let len = data.len().map_err(|()| SymbolError::Unrecognized("an unreadable file".into()))?;
        let head = data.read_bytes_at(0, len.min(128)).unwrap_or_default();
        // Text is read in slices, so that a `ReadCache` never needs it as one piece.
        let text = || BufReader::with_capacity(1 << 16, Slices { data, at: 0, len });
        if head.starts_with(super::breakpad::MAGIC) {
            return BreakpadSymbols::read(text()).map(Self::Breakpad);
        }
        if super::kallsyms::looks_like(head) {
            return KernelSymbols::read(text()).map(Self::Kernel);
        }
        ObjectFile::parse_in(data, whole).map(Self::Object)
    }

    /// The GNU build id (Mach-O: the UUID) in lowercase hex; a `.sym` file's `CODE_ID`
    /// when it describes an ELF file (whose code id is its build id).
    pub fn build_id_hex(&self) -> Option<String> {
        match self {
            Self::Object(o) => o.build_id_hex(),
            Self::Breakpad(b) => b.code_id().filter(|_| b.module().os == "Linux").map(str::to_ascii_lowercase),
            Self::Kernel(_) => None,
        }
    }

    /// The file name in `.gnu_debuglink`, for an ELF binary that has one.
    pub fn debug_link(&self) -> Option<&str> {
        match self {
            Self::Object(o) => o.debug_link(),
            Self::Breakpad(_) | Self::Kernel(_) => None,
        }
    }

    /// Whether it names anything: DWARF, a symbol table, or a `.sym` file's records.
    pub fn has_symbols(&self) -> bool {
        match self {
            Self::Object(o) => o.has_symbols(),
            Self::Breakpad(_) | Self::Kernel(_) => true,
        }
    }

    /// Whether it has line information (DWARF, or a `.sym` file's line records).
    pub fn has_lines(&self) -> bool {
        match self {
            Self::Object(o) => o.has_dwarf(),
            Self::Breakpad(_) => true,
            Self::Kernel(_) => false,
        }
    }

    /// Whether its code is here (a binary, not a debug file or a `.sym` file).
    pub fn has_code(&self) -> bool {
        match self {
            Self::Object(o) => o.has_code(),
            Self::Breakpad(_) | Self::Kernel(_) => false,
        }
    }
}

impl AddressLookup for SymbolFile {
    /// `address` in the file's own terms: an ELF virtual address, a Breakpad module offset.
    fn each_frame(&self, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) -> Result<(), SymbolError> {
        match self {
            Self::Object(o) => o.each_frame(address, each),
            Self::Breakpad(b) => b.each_frame(address, each),
            Self::Kernel(k) => k.each_frame(address, each),
        }
    }
}

/// `data` as a reader, a slice at a time.
struct Slices<R> {
    data: R,
    at: u64,
    len: u64,
}

impl<'data, R: ReadRef<'data>> Read for Slices<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let n = (buffer.len() as u64).min(self.len.saturating_sub(self.at));
        if n == 0 {
            return Ok(0);
        }
        let bytes = self.data.read_bytes_at(self.at, n).map_err(|()| std::io::Error::other("a read failed"))?;
        buffer[..bytes.len()].copy_from_slice(bytes);
        self.at += n;
        Ok(bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::SymbolFrame;

    #[test]
    fn a_sym_file_is_opened_by_its_first_bytes_from_bytes_and_from_a_read_cache() {
        let text = b"MODULE Linux x86_64 0A0 work\nFILE 0 a.c\nFUNC 10 8 0 f\n10 8 3 0\n";
        assert!(super::super::looks_like_symbol_file(text));
        let cache = object::ReadCache::new(std::io::Cursor::new(text.to_vec()));
        for file in [SymbolFile::parse(&text[..]).unwrap(), SymbolFile::parse(&cache).unwrap()] {
            assert!(matches!(file, SymbolFile::Breakpad(_)), "{file:?}");
            let frame = SymbolFrame { name: "f".into(), file: Some("a.c".into()), line: 3 };
            assert_eq!(file.lookup(0x14).unwrap(), [frame]);
        }
        assert!(matches!(SymbolFile::parse(&b"MODULE"[..]), Err(SymbolError::Unrecognized(_))));
    }
}
