//! Breakpad `.sym` files, the text symbol files of crash reporters and the Firefox
//! Profiler (made by Mozilla's `dump_syms` from a binary or debug file): read line by
//! line into tables of functions, line records, inlined ranges and public symbols, then
//! looked up by module offset (an address relative to the module's load base). Only the
//! tables are kept, never the text: a 1 GB file needs its tables and one line's buffer.

use std::io::BufRead;

use rustc_hash::FxHashMap as HashMap;

use super::{AddressLookup, FrameRef, SymbolError};

/// What a `.sym` file's first line says about the module it describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakpadModule {
    /// `Linux`, `mac`, `windows`, …
    pub os: String,
    pub arch: String,
    /// The Breakpad debug id (GUID and age, uppercase hex; see [`super::breakpad_id`]).
    pub debug_id: String,
    /// The module's file name (the debug file's, for Windows).
    pub name: String,
}

/// A `FUNC` record: its line records and inlined ranges are `lines[lines]` and
/// `inlines[inlines]`, each sorted by address once the function's records are read.
#[derive(Clone, Debug)]
struct Function {
    address: u64,
    size: u64,
    name: Box<str>,
    lines: std::ops::Range<usize>,
    inlines: std::ops::Range<usize>,
}

/// A line record: `[address, address + size)` is source line `line` of file `file`.
#[derive(Clone, Copy, Debug)]
struct LineRecord {
    address: u64,
    size: u64,
    line: u32,
    file: u32,
}

/// One address range of an `INLINE` record: code of `origin` inlined at `depth`
/// (0: called by the `FUNC` itself), called from line `call_line` of `call_file`.
#[derive(Clone, Copy, Debug)]
struct InlineRange {
    address: u64,
    size: u64,
    depth: u32,
    call_line: u32,
    call_file: u32,
    origin: u32,
}

/// A parsed `.sym` file.
#[derive(Debug)]
pub struct BreakpadSymbols {
    module: BreakpadModule,
    tables: Tables,
}

const FORMAT: &str = "Breakpad .sym";

/// How every `.sym` file starts.
pub(super) const MAGIC: &[u8] = b"MODULE ";

fn corrupt(line: usize, reason: impl std::fmt::Display) -> SymbolError {
    SymbolError::Corrupt { format: FORMAT, reason: format!("line {line}: {reason}") }
}

/// The space-separated fields of a record; the last field (a name) may hold spaces.
struct Fields<'a>(&'a str);

impl<'a> Fields<'a> {
    fn next(&mut self) -> Option<&'a str> {
        if self.0.is_empty() {
            return None;
        }
        let (field, rest) = self.0.split_once(' ').unwrap_or((self.0, ""));
        self.0 = rest;
        Some(field)
    }

    /// The rest of the line: a name.
    fn rest(self) -> &'a str {
        self.0
    }

    /// The `m` (several symbols folded into one address) marker, when it is next.
    fn skip_multiple(&mut self) {
        if let Some(rest) = self.0.strip_prefix("m ") {
            self.0 = rest;
        }
    }
}

/// Reads one record's fields and says which one was missing or malformed.
struct Record<'a> {
    fields: Fields<'a>,
    line: usize,
}

impl<'a> Record<'a> {
    fn field(&mut self, what: &str) -> Result<&'a str, SymbolError> {
        self.fields.next().ok_or_else(|| corrupt(self.line, format!("no {what}")))
    }

    fn hex(&mut self, what: &str) -> Result<u64, SymbolError> {
        let field = self.field(what)?;
        u64::from_str_radix(field, 16).map_err(|_| corrupt(self.line, format!("{what} {field:?} is not hex")))
    }

    fn decimal(&mut self, what: &str) -> Result<u32, SymbolError> {
        let field = self.field(what)?;
        field.parse().map_err(|_| corrupt(self.line, format!("{what} {field:?} is not a number")))
    }
}

/// The records after `MODULE`. While they are read the last function is the one
/// whose line and `INLINE` records come next; once read, everything is sorted.
#[derive(Debug, Default)]
struct Tables {
    code_id: Option<String>,
    files: HashMap<u32, Box<str>>,
    origins: HashMap<u32, Box<str>>,
    /// Sorted by address.
    functions: Vec<Function>,
    lines: Vec<LineRecord>,
    inlines: Vec<InlineRange>,
    /// (address, name), sorted by address.
    publics: Vec<(u64, Box<str>)>,
}

/// The first line: `MODULE <os> <arch> <debug id> <name>`.
fn module_record(text: &str, number: usize) -> Result<BreakpadModule, SymbolError> {
    let Some(rest) = text.strip_prefix("MODULE ") else {
        return Err(SymbolError::Unrecognized("a text file not starting with MODULE".into()));
    };
    let mut record = Record { fields: Fields(rest), line: number };
    let os = record.field("os")?.to_owned();
    let arch = record.field("architecture")?.to_owned();
    let debug_id = record.field("debug id")?.to_owned();
    let name = record.fields.rest().to_owned();
    Ok(BreakpadModule { os, arch, debug_id, name })
}

impl Tables {
    /// Takes one line after `MODULE` (without its line break); `number` counts from 1.
    fn take(&mut self, text: &str, number: usize) -> Result<(), SymbolError> {
        let (keyword, rest) = text.split_once(' ').unwrap_or((text, ""));
        let mut record = Record { fields: Fields(rest), line: number };
        match keyword {
            "MODULE" => return Err(corrupt(number, "a second MODULE record")),
            "INFO" => {
                let kind = record.field("INFO kind")?;
                if kind == "CODE_ID" {
                    self.code_id = Some(record.field("code id")?.to_owned());
                }
            }
            "FILE" => {
                let id = record.decimal("file number")?;
                self.files.insert(id, record.fields.rest().into());
            }
            "INLINE_ORIGIN" => {
                let id = record.decimal("origin number")?;
                self.origins.insert(id, record.fields.rest().into());
            }
            "FUNC" => {
                record.fields.skip_multiple();
                let address = record.hex("address")?;
                let size = record.hex("size")?;
                record.hex("parameter size")?;
                self.end_function();
                let (lines, inlines) = (self.lines.len(), self.inlines.len());
                let name = record.fields.rest().into();
                self.functions.push(Function { address, size, name, lines: lines..lines, inlines: inlines..inlines });
            }
            "INLINE" => self.take_inline(record)?,
            "PUBLIC" => {
                record.fields.skip_multiple();
                let address = record.hex("address")?;
                record.hex("parameter size")?;
                self.publics.push((address, record.fields.rest().into()));
            }
            // Unwind information, which naming does not need.
            "STACK" => {}
            _ if keyword.bytes().next().is_some_and(|b| b.is_ascii_hexdigit()) => {
                let mut record = Record { fields: Fields(text), line: number };
                let address = record.hex("address")?;
                let size = record.hex("size")?;
                // Breakpad writes a negative line for some Windows code; it names nothing.
                let line = record.field("line")?.parse::<i64>().unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32;
                let file = record.decimal("file number")?;
                let function =
                    self.functions.last_mut().ok_or_else(|| corrupt(number, "a line record before any FUNC"))?;
                function.lines.end += 1;
                self.lines.push(LineRecord { address, size, line, file });
            }
            // Records of later format versions.
            _ => {}
        }
        Ok(())
    }

    /// `INLINE <depth> <call line> <call file> <origin> (<address> <size>)+`.
    fn take_inline(&mut self, mut record: Record<'_>) -> Result<(), SymbolError> {
        let depth = record.decimal("inline depth")?;
        let call_line = record.decimal("call line")?;
        let call_file = record.decimal("call file")?;
        let origin = record.decimal("inline origin")?;
        let number = record.line;
        if self.functions.is_empty() {
            return Err(corrupt(number, "an INLINE record before any FUNC"));
        }
        let before = self.inlines.len();
        while !record.fields.0.is_empty() {
            let address = record.hex("inline address")?;
            let size = record.hex("inline size")?;
            self.inlines.push(InlineRange { address, size, depth, call_line, call_file, origin });
        }
        if self.inlines.len() == before {
            return Err(corrupt(number, "an INLINE record without addresses"));
        }
        if let Some(function) = self.functions.last_mut() {
            function.inlines.end = self.inlines.len();
        }
        Ok(())
    }

    /// Sorts the last function's records, so that lookups can search them.
    fn end_function(&mut self) {
        if let Some(f) = self.functions.last() {
            self.lines[f.lines.clone()].sort_unstable_by_key(|l| l.address);
            self.inlines[f.inlines.clone()].sort_unstable_by_key(|i| i.address);
        }
    }

    /// Sorts what lookups search, once every record is in.
    fn finish(&mut self) {
        self.end_function();
        self.functions.sort_by_key(|f| f.address);
        self.publics.sort_by_key(|p| p.0);
    }
}

impl BreakpadSymbols {
    /// Reads a `.sym` file held in memory.
    pub fn parse(bytes: &[u8]) -> Result<Self, SymbolError> {
        Self::read(bytes)
    }

    /// Reads a `.sym` file line by line (the CLI hands in a buffered file).
    pub fn read(mut reader: impl BufRead) -> Result<Self, SymbolError> {
        // Before a first "line" is read: a binary may have no line break for megabytes.
        let head = reader.fill_buf().map_err(|e| corrupt(1, e))?;
        if head.len() >= MAGIC.len() && !head.starts_with(MAGIC) {
            return Err(SymbolError::Unrecognized("a file not starting with MODULE".into()));
        }
        let (mut module, mut tables) = (None, Tables::default());
        let mut buffer = Vec::new();
        for number in 1.. {
            buffer.clear();
            let read = reader.read_until(b'\n', &mut buffer).map_err(|e| corrupt(number, e))?;
            if read == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&buffer);
            let text = text.trim_end_matches(['\n', '\r']);
            match &module {
                _ if text.is_empty() => {}
                None => module = Some(module_record(text, number)?),
                Some(_) => tables.take(text, number)?,
            }
        }
        let module = module.ok_or_else(|| SymbolError::Unrecognized("an empty file".into()))?;
        tables.finish();
        Ok(Self { module, tables })
    }

    /// The `MODULE` record.
    pub fn module(&self) -> &BreakpadModule {
        &self.module
    }

    /// `INFO CODE_ID`: for ELF the GNU build id in hex, for Windows the PE timestamp and size.
    pub fn code_id(&self) -> Option<&str> {
        self.tables.code_id.as_deref()
    }

    /// The debug id this file's module would have if its build id (Mach-O: UUID) were
    /// `build_id` (hex, as profiles name it): what a mapping's build id is checked by.
    pub fn debug_id_of_build_id(&self, build_id: &str) -> Option<String> {
        let bytes = super::breakpad_id::bytes_of_hex(build_id)?;
        Some(match &*self.module.os {
            "mac" | "ios" => super::breakpad_id::of_uuid(&bytes),
            _ => super::breakpad_id::of_build_id(&bytes),
        })
    }

    fn file(&self, id: u32) -> Option<&str> {
        self.tables.files.get(&id).map(|f| &**f)
    }

    /// The `FUNC` whose range holds `address`, else the nearest below (for `PUBLIC`).
    fn function_at(&self, address: u64) -> (Option<&Function>, Option<&Function>) {
        let Some(i) = self.tables.functions.partition_point(|f| f.address <= address).checked_sub(1) else {
            return (None, None);
        };
        let below = &self.tables.functions[i];
        if address - below.address < below.size {
            return (Some(below), Some(below));
        }
        (None, Some(below))
    }

    /// Hands `each` the frames of `function` at `address`: innermost inlined first,
    /// from the line record there and the call sites of the `INLINE` ranges holding it.
    fn frames_in(&self, function: &Function, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) {
        let lines = &self.tables.lines[function.lines.clone()];
        let line =
            lines[..lines.partition_point(|l| l.address <= address)].last().filter(|l| address - l.address < l.size);
        let mut inlined: Vec<&InlineRange> = self.tables.inlines[function.inlines.clone()]
            .iter()
            .take_while(|i| i.address <= address)
            .filter(|i| address - i.address < i.size)
            .collect();
        inlined.sort_by_key(|i| i.depth);
        let (mut file, mut line) = line.map_or((None, 0), |l| (self.file(l.file), l.line));
        for i in inlined.iter().rev() {
            let name = self.tables.origins.get(&i.origin).map_or("", |n| &**n);
            each(FrameRef { name, file, line });
            (file, line) = (self.file(i.call_file), i.call_line);
        }
        each(FrameRef { name: &function.name, file, line });
    }
}

impl AddressLookup for BreakpadSymbols {
    /// `address` is a module offset. Outside every `FUNC`, the nearest `PUBLIC` below
    /// names it, unless a `FUNC` starts between the two (Breakpad's resolver's rule).
    fn each_frame(&self, address: u64, each: &mut dyn FnMut(FrameRef<'_>)) -> Result<(), SymbolError> {
        let (within, below) = self.function_at(address);
        if let Some(function) = within {
            self.frames_in(function, address, each);
            return Ok(());
        }
        let Some(i) = self.tables.publics.partition_point(|p| p.0 <= address).checked_sub(1) else {
            return Ok(());
        };
        let (public, name) = &self.tables.publics[i];
        if below.is_none_or(|f| f.address < *public) {
            each(FrameRef { name, file: None, line: 0 });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::SymbolFrame;

    const SYM: &str = "MODULE Linux x86_64 4660EEC9F20D2632C9EE60460DF232260 work\r
INFO CODE_ID C9EE60460DF23226C9EE60460DF23226C9EE6046
INFO GENERATOR mozilla/dump_syms 2.3.9
FILE 0 /src/work.c
FILE 1 /src/inline.h
INLINE_ORIGIN 0 square
INLINE_ORIGIN 1 add one
FUNC m 1000 40 0 main
INLINE 0 12 0 0 1010 10 1030 4
INLINE 1 30 1 1 1014 4
1000 10 10 0
1010 4 31 1
1014 4 40 1
1018 8 32 1
1020 20 14 0
PUBLIC 1100 0 helper
PUBLIC 900 0 before_main
STACK CFI INIT 1000 40 .cfa: $rsp 8 +
";

    fn frame(name: &str, file: &str, line: u32) -> SymbolFrame {
        SymbolFrame { name: name.into(), file: Some(file.into()), line }
    }

    #[test]
    fn records_are_read() {
        let sym = BreakpadSymbols::parse(SYM.as_bytes()).unwrap();
        let module = sym.module();
        assert_eq!((&*module.os, &*module.arch, &*module.name), ("Linux", "x86_64", "work"));
        assert_eq!(module.debug_id, "4660EEC9F20D2632C9EE60460DF232260");
        assert_eq!(sym.code_id(), Some("C9EE60460DF23226C9EE60460DF23226C9EE6046"));
    }

    #[test]
    fn lookups_give_inlined_frames_innermost_first() {
        let sym = BreakpadSymbols::parse(SYM.as_bytes()).unwrap();
        assert_eq!(sym.lookup(0x1004).unwrap(), [frame("main", "/src/work.c", 10)]);
        assert_eq!(
            sym.lookup(0x1012).unwrap(),
            [frame("square", "/src/inline.h", 31), frame("main", "/src/work.c", 12)]
        );
        assert_eq!(
            sym.lookup(0x1015).unwrap(),
            [
                frame("add one", "/src/inline.h", 40),
                frame("square", "/src/inline.h", 30),
                frame("main", "/src/work.c", 12)
            ]
        );
        // The inlined range's second piece.
        assert_eq!(sym.lookup(0x1031).unwrap(), [frame("square", "/src/work.c", 14), frame("main", "/src/work.c", 12)]);
    }

    #[test]
    fn publics_name_what_no_function_covers_up_to_the_next_function() {
        let sym = BreakpadSymbols::parse(SYM.as_bytes()).unwrap();
        let public = |name: &str| vec![SymbolFrame { name: name.into(), file: None, line: 0 }];
        assert_eq!(sym.lookup(0x1200).unwrap(), public("helper"));
        assert_eq!(sym.lookup(0x900).unwrap(), public("before_main"));
        assert_eq!(sym.lookup(0x1050).unwrap(), []);
        assert_eq!(sym.lookup(0x10).unwrap(), []);
    }

    #[test]
    fn malformed_records_are_corrupt_and_other_text_unrecognized() {
        assert!(matches!(BreakpadSymbols::parse(b"hello"), Err(SymbolError::Unrecognized(_))));
        assert!(matches!(BreakpadSymbols::parse(b""), Err(SymbolError::Unrecognized(_))));
        for bad in ["FUNC 1000 zz 0 f", "1000 10 1 0", "FUNC 10 10 0 f\nINLINE 0 1 0 0", "MODULE a b c d", "FILE x y"] {
            let text = format!("MODULE Linux x86_64 ID name\n{bad}\n");
            let error = BreakpadSymbols::parse(text.as_bytes()).unwrap_err();
            assert!(matches!(error, SymbolError::Corrupt { format: FORMAT, .. }), "{bad}: {error:?}");
        }
    }
}
