//! One ELF or Mach-O file read for symbolization: its build id (ELF `NT_GNU_BUILD_ID`,
//! Mach-O `LC_UUID`), its `.gnu_debuglink`, its loaded segments (to turn a file
//! offset into a virtual address), its symbol table and its DWARF (line tables and
//! inlined subroutines, compressed sections included), and a Go binary's `.gopclntab`
//! where DWARF is gone. Reading is generic over
//! [`object::ReadRef`], so a caller may hand in `&[u8]` or an `object::ReadCache` that
//! reads a large file in slices; what is kept afterwards is owned.

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadRef, SymbolKind};

use super::gopclntab::GoPclnTab;
use super::{AddressLookup, FrameRef, SymbolError};

/// Symbols per block of the symbol search's index.
const BLOCK: usize = 32;

type DwarfReader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// A loaded segment: file bytes `[offset, offset + file_size)` appear at virtual
/// addresses `[address, address + file_size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    address: u64,
    offset: u64,
    file_size: u64,
    memory_size: u64,
}

/// A function symbol of `.symtab` (or `.dynsym` when there is none).
#[derive(Clone, Debug)]
struct Symbol {
    address: u64,
    /// When the table gives no size: where the next symbol or its section ends.
    size: u64,
    /// Where its name lies in [`ObjectFile::symbol_names`].
    name: std::ops::Range<usize>,
}

/// An ELF or Mach-O binary or debug file, parsed once and then looked up many times.
pub struct ObjectFile {
    build_id: Option<Vec<u8>>,
    debug_link: Option<String>,
    /// ELF `ET_EXEC` (or a Mach-O executable): linked at fixed addresses.
    fixed_address: bool,
    /// Where "relative addresses" (the Firefox Profiler's and Breakpad's module offsets)
    /// count from: Mach-O's `__TEXT` segment, else ELF's first segment.
    relative_base: u64,
    /// The build id is a Mach-O UUID (Breakpad ids keep its byte order).
    is_mach_o: bool,
    segments: Vec<Segment>,
    symbols: Vec<Symbol>,
    /// Every symbol's name, one after another: one allocation, not one per symbol.
    symbol_names: String,
    /// Whether a code section has its bytes here (a binary; a split-off debug file
    /// keeps `.text` only as a NOBITS header).
    has_code: bool,
    /// `symbols`' addresses alone, and every [`BLOCK`]th of them: a search goes through
    /// the small index and then one block, a few cache lines instead of one miss a step
    /// (the symbol search was a third of a lookup's time on an 85 MB binary).
    symbol_addresses: Vec<u64>,
    symbol_blocks: Vec<u64>,
    /// The symbol the last search found: a profile looks its addresses up in order, so
    /// that one or the next usually holds the next address.
    last_symbol: Cell<usize>,
    dwarf: Option<addr2line::Context<DwarfReader>>,
    /// A Go binary's own function table, which `-ldflags="-s -w"` and `strip` keep.
    go: Option<GoPclnTab>,
}

impl std::fmt::Debug for ObjectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectFile")
            .field("build_id", &self.build_id_hex())
            .field("debug_link", &self.debug_link)
            .field("symbols", &self.symbols.len())
            .field("has_dwarf", &self.dwarf.is_some())
            .field("go_pclntab", &self.go.as_ref().map(GoPclnTab::version))
            .finish()
    }
}

fn corrupt(reason: impl std::fmt::Display) -> SymbolError {
    SymbolError::Corrupt { format: "ELF/Mach-O", reason: reason.to_string() }
}

impl ObjectFile {
    /// Reads an ELF or Mach-O file from `data` (bytes, or a `ReadCache` over a file);
    /// the DWARF sections are copied out of it.
    pub fn parse<'data, R: ReadRef<'data>>(data: R) -> Result<Self, SymbolError> {
        Self::parse_in(data, None)
    }

    /// Reads a file held whole in memory: its uncompressed DWARF sections are read
    /// where they lie, not copied (a debug build's are most of the file).
    pub fn from_bytes(bytes: Arc<[u8]>) -> Result<Self, SymbolError> {
        Self::parse_in(&bytes[..], Some(&bytes))
    }

    /// `whole`: the same bytes as `data`, shared, when the file is in memory.
    pub(super) fn parse_in<'data, R: ReadRef<'data>>(data: R, whole: Option<&Arc<[u8]>>) -> Result<Self, SymbolError> {
        let kind = object::FileKind::parse(data).map_err(|e| SymbolError::Unrecognized(e.to_string()))?;
        if !matches!(
            kind,
            object::FileKind::Elf32 | object::FileKind::Elf64 | object::FileKind::MachO32 | object::FileKind::MachO64
        ) {
            return Err(SymbolError::Unrecognized(format!("{kind:?}")));
        }
        let file = object::File::parse(data).map_err(corrupt)?;
        let build_id = match file.build_id().map_err(corrupt)? {
            Some(id) => Some(id.to_vec()),
            None => file.mach_uuid().map_err(corrupt)?.map(|u| u.to_vec()),
        };
        let debug_link =
            file.gnu_debuglink().map_err(corrupt)?.map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        let fixed_address = file.kind() == object::ObjectKind::Executable;
        let relative_base = match file.segments().find(|s| s.name() == Ok(Some("__TEXT"))) {
            Some(text) => text.address(),
            None => file.segments().next().map_or(0, |s| s.address()),
        };
        let is_mach_o = file.format() == object::BinaryFormat::MachO;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, file_size) = s.file_range();
                Segment { address: s.address(), offset, file_size, memory_size: s.size() }
            })
            .collect();
        let (symbols, symbol_names) = function_symbols(&file);
        let has_code =
            file.sections().any(|s| s.kind() == object::SectionKind::Text && s.file_range().is_some_and(|r| r.1 > 0));
        let symbol_addresses: Vec<u64> = symbols.iter().map(|s| s.address).collect();
        let symbol_blocks = symbol_addresses.iter().step_by(BLOCK).copied().collect();
        let dwarf = load_dwarf(&file, whole)?;
        let go = load_go_table(&file)?;
        Ok(Self {
            build_id,
            debug_link,
            fixed_address,
            relative_base,
            is_mach_o,
            segments,
            symbols,
            symbol_names,
            symbol_addresses,
            symbol_blocks,
            last_symbol: Cell::new(0),
            has_code,
            dwarf,
            go,
        })
    }

    /// The build id (Mach-O: the UUID), as stored.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// The build id in lowercase hex, as profiles and debuginfod name it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }

    /// The file name in `.gnu_debuglink`: the separate debug file of a stripped binary.
    pub fn debug_link(&self) -> Option<&str> {
        self.debug_link.as_deref()
    }

    /// Whether this file has DWARF line information (else only symbol-table names).
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// Whether this file names anything: DWARF, a Go pclntab or a symbol table.
    pub fn has_symbols(&self) -> bool {
        self.dwarf.is_some() || self.go.is_some() || !self.symbols.is_empty()
    }

    /// Whether it is a Go binary with its `.gopclntab`.
    pub fn has_go_pclntab(&self) -> bool {
        self.go.is_some()
    }

    /// Whether it is linked at fixed addresses (ELF `ET_EXEC`), not position independent.
    pub fn fixed_address(&self) -> bool {
        self.fixed_address
    }

    /// The virtual address at which file offset `offset` is loaded, through the
    /// segment whose file bytes hold it (as perf's `map__rip_2objdump` and pprof's
    /// `elfexec.GetBase` do). A debug file split off with `objcopy --only-keep-debug`
    /// keeps its segments but not their file bytes: there the first segment's
    /// placement (linkers load the file's start there) stands in.
    pub fn file_offset_to_address(&self, offset: u64) -> Option<u64> {
        let holding =
            self.segments.iter().find(|s| s.file_size > 0 && s.offset <= offset && offset - s.offset < s.file_size);
        if let Some(s) = holding {
            return Some(s.address.wrapping_add(offset - s.offset));
        }
        let first = self.segments.iter().filter(|s| s.memory_size > 0).min_by_key(|s| s.address)?;
        Some(first.address.wrapping_sub(first.offset).wrapping_add(offset))
    }

    /// The virtual address of a module offset (a "relative address").
    pub fn relative_to_address(&self, offset: u64) -> u64 {
        self.relative_base.wrapping_add(offset)
    }

    /// Where the symbol-table function holding `address` starts.
    pub fn function_start(&self, address: u64) -> Option<u64> {
        self.symbol_at(address).map(|s| s.address)
    }

    /// The Breakpad debug id the Firefox Profiler and symbol servers name this file by.
    pub fn breakpad_id(&self) -> Option<String> {
        let id = self.build_id.as_deref()?;
        Some(if self.is_mach_o { super::breakpad_id::of_uuid(id) } else { super::breakpad_id::of_build_id(id) })
    }

    /// Whether `address` is a virtual address inside one of the loaded segments.
    pub fn covers_address(&self, address: u64) -> bool {
        self.segments.iter().any(|s| s.memory_size > 0 && s.address <= address && address - s.address < s.memory_size)
    }

    /// Whether its code is here: a binary, not a split-off debug file (debuginfod's
    /// "executable").
    pub fn has_code(&self) -> bool {
        self.has_code
    }

    /// Whether its segments hold file bytes (a binary, not a split-off debug file).
    pub fn has_loaded_segments(&self) -> bool {
        self.segments.iter().any(|s| s.file_size > 0)
    }

    fn symbol_name(&self, symbol: &Symbol) -> &str {
        &self.symbol_names[symbol.name.clone()]
    }

    /// The symbol-table function containing `address`.
    fn symbol_at(&self, address: u64) -> Option<&Symbol> {
        let addresses = &self.symbol_addresses;
        let holds = |i: usize| addresses[i] <= address && addresses.get(i + 1).is_none_or(|&next| address < next);
        let last = self.last_symbol.get();
        let i = match (last..addresses.len().min(last + 2)).find(|&i| holds(i)) {
            Some(i) => i,
            None => {
                let block = self.symbol_blocks.partition_point(|&a| a <= address).checked_sub(1)?;
                let start = block * BLOCK;
                let end = (start + BLOCK).min(addresses.len());
                start + addresses[start..end].partition_point(|&a| a <= address) - 1
            }
        };
        self.last_symbol.set(i);
        let s = &self.symbols[i];
        (address - s.address < s.size).then_some(s)
    }
}

impl AddressLookup for ObjectFile {
    fn each_frame(&self, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) -> Result<(), SymbolError> {
        // No code is there, and addr2line searches [address, address + 1), which
        // overflows (found by the symbols_elf fuzz target).
        if address == u64::MAX {
            return Ok(());
        }
        // Every frame is found before any is handed on: an error comes first, and the
        // last, the physical function, may still be named from the symbol table.
        let mut found = Vec::new();
        if let Some(dwarf) = &self.dwarf {
            let mut iter = dwarf.find_frames(address).skip_all_loads().map_err(corrupt)?;
            while let Some(frame) = iter.next().map_err(corrupt)? {
                found.push(frame);
            }
        }
        let Some((physical, inlined)) = found.split_last() else {
            // A Go binary without DWARF: its pclntab names functions, files and lines;
            // else the symbol table names the function.
            let go = self.go.as_ref().map(|go| go.lookup(address)).transpose()?.unwrap_or_default();
            go.iter().for_each(|f| each(f.as_ref()));
            if let (true, Some(symbol)) = (go.is_empty(), self.symbol_at(address)) {
                each(FrameRef { name: self.symbol_name(symbol), file: None, line: 0 });
            }
            return Ok(());
        };
        for frame in inlined {
            hand_on(&dwarf_name(frame), frame, each);
        }
        // The physical function's name from the symbol table where DWARF has none
        // (code DWARF does not describe; Rust's std has line tables but no function
        // entries), or where C++ DWARF has only a short name: GCC writes no linkage
        // name for a function whose template arguments are local types (a lambda), and
        // binutils and llvm-symbolizer then print the symbol table's.
        let name = dwarf_name(physical);
        let cpp = physical.function.as_ref().and_then(|f| f.language).is_some_and(is_cpp);
        let symbol = match () {
            _ if name.is_empty() => self.symbol_at(address),
            _ if cpp && !name.starts_with("_Z") => {
                self.symbol_at(address).filter(|s| self.symbol_name(s).starts_with("_Z"))
            }
            _ => None,
        };
        hand_on(symbol.map_or(&*name, |s| self.symbol_name(s)), physical, each);
        Ok(())
    }
}

/// Hands `frame` on as named, unless DWARF could not name it at all: that says nothing.
fn hand_on(name: &str, frame: &addr2line::Frame<'_, DwarfReader>, each: &mut dyn FnMut(FrameRef<'_>)) {
    let (file, line) = frame.location.as_ref().map_or((None, 0), |l| (l.file, l.line.unwrap_or(0)));
    if !name.is_empty() || file.is_some() {
        each(FrameRef { name, file, line });
    }
}

/// A DWARF frame's function name as stored, empty when DWARF names none. UTF-8 is
/// checked the fast way first; the lossy way cannot fail for an in-memory reader.
fn dwarf_name<'a>(frame: &'a addr2line::Frame<'_, DwarfReader>) -> Cow<'a, str> {
    use gimli::Reader;
    let Some(function) = &frame.function else { return Cow::Borrowed("") };
    function.name.to_string().or_else(|_| function.name.to_string_lossy()).unwrap_or_default()
}

fn is_cpp(language: gimli::DwLang) -> bool {
    matches!(
        language,
        gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_C_plus_plus_17
            | gimli::DW_LANG_C_plus_plus_20
    )
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Function symbols sorted by address, `.symtab`'s or else `.dynsym`'s, and their names.
fn function_symbols<'data, R: ReadRef<'data>>(file: &object::File<'data, R>) -> (Vec<Symbol>, String) {
    let mut names = String::new();
    let section_end = |s: &object::Symbol<'data, '_, R>| {
        let section = file.section_by_index(s.section_index()?).ok()?;
        section.address().checked_add(section.size())
    };
    let mut collect = |symbols: &mut dyn Iterator<Item = object::Symbol<'data, '_, R>>| -> Vec<Symbol> {
        names.clear();
        symbols
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                let name = s.name().ok().filter(|n| !n.is_empty())?;
                // Sizeless (`_init`, assembly): to the section's end, cut below at the next symbol.
                let size = if s.size() > 0 { s.size() } else { section_end(&s)?.saturating_sub(s.address()) };
                names.push_str(name);
                Some(Symbol { address: s.address(), size, name: names.len() - name.len()..names.len() })
            })
            .collect()
    };
    let mut symbols = collect(&mut file.symbols());
    if symbols.is_empty() {
        symbols = collect(&mut file.dynamic_symbols());
    }
    // Aliases at one address: keep the one with a size, global before local names.
    symbols.sort_by(|a, b| a.address.cmp(&b.address).then(b.size.cmp(&a.size)));
    symbols.dedup_by_key(|s| s.address);
    for i in 1..symbols.len() {
        let next = symbols[i].address;
        let previous = &mut symbols[i - 1];
        previous.size = previous.size.min(next - previous.address);
    }
    (symbols, names)
}

/// The DWARF of `file`, when it has line information; sections decompressed as needed,
/// and read in place from `whole` (the file's bytes) where they are not compressed.
fn load_dwarf<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
    whole: Option<&Arc<[u8]>>,
) -> Result<Option<addr2line::Context<DwarfReader>>, SymbolError> {
    let endian = if file.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    let has_lines = section_named(file, gimli::SectionId::DebugLine).is_some();
    if !has_lines {
        return Ok(None);
    }
    let load = |id: gimli::SectionId| -> Result<DwarfReader, SymbolError> {
        let Some(section) = section_named(file, id) else {
            return Ok(gimli::EndianArcSlice::new(Arc::from(&[][..]), endian));
        };
        if let (Some(whole), Ok(range)) = (whole, section.compressed_file_range()) {
            let end = range.offset.checked_add(range.uncompressed_size).filter(|&end| end <= whole.len() as u64);
            if let (object::CompressionFormat::None, Some(end)) = (range.format, end) {
                return Ok(gimli::EndianArcSlice::new(whole.clone(), endian).range(range.offset as usize..end as usize));
            }
        }
        Ok(gimli::EndianArcSlice::new(Arc::from(&*section.uncompressed_data().map_err(corrupt)?), endian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    addr2line::Context::from_dwarf(dwarf).map(Some).map_err(corrupt)
}

/// The Go pclntab of `file` (ELF `.gopclntab`, Mach-O `__gopclntab`), with its inline
/// trees found through `runtime.firstmoduledata` in `.noptrdata` (Go 1.27:
/// `.go.module`).
fn load_go_table<'data, R: ReadRef<'data>>(file: &object::File<'data, R>) -> Result<Option<GoPclnTab>, SymbolError> {
    let with_bytes = |names: &[&str]| {
        names.iter().filter_map(|n| file.section_by_name(n)).find(|s| s.file_range().is_some_and(|r| r.1 > 0))
    };
    let Some(section) = with_bytes(&[".gopclntab", "__gopclntab"]) else { return Ok(None) };
    let text = with_bytes(&[".text", "__text"]).map(|s| s.address());
    let mut table = GoPclnTab::parse(section.data().map_err(corrupt)?.to_vec(), text)?;
    let module_data =
        with_bytes(&[".go.module", ".noptrdata", "__noptrdata"]).and_then(|s| s.data().ok()).unwrap_or_default();
    for candidate in table.inline_tree_candidates(section.address(), module_data) {
        let holding = file.sections().find(|s| s.address() <= candidate && candidate - s.address() < s.size());
        let Some(trees) = holding.filter(|s| s.file_range().is_some_and(|r| r.1 > 0)) else { continue };
        // Go 1.27 puts them inside the pclntab section: no second copy.
        let bytes = if trees.index() == section.index() { None } else { Some(trees.data().map_err(corrupt)?.to_vec()) };
        if table.try_inline_trees(candidate, trees.address(), bytes) {
            break;
        }
    }
    Ok(Some(table))
}

/// The section for a DWARF section id (`object` maps `.debug_line` to Mach-O's
/// `__debug_line` and to ELF's old `.zdebug_line`), unless it holds no bytes, as in a
/// stripped binary's leftovers.
fn section_named<'data, 'file, R: ReadRef<'data>>(
    file: &'file object::File<'data, R>,
    id: gimli::SectionId,
) -> Option<object::Section<'data, 'file, R>> {
    file.section_by_name(id.name()).filter(|s| s.kind() != object::SectionKind::UninitializedData)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_an_object_file_is_unrecognized() {
        assert!(matches!(ObjectFile::parse(&b"hello world, not ELF"[..]), Err(SymbolError::Unrecognized(_))));
    }

    #[test]
    fn hex_is_lowercase_two_digits_each() {
        assert_eq!(hex(&[0x0a, 0xbc, 0xff]), "0abcff");
    }
}
