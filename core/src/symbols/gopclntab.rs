//! Go's own function table, `.gopclntab` (Mach-O `__gopclntab`): what still names the
//! functions, files and lines of a Go binary stripped of its symbol table and DWARF
//! (`go build -ldflags="-s -w"`, `strip`). Reads the table versions of Go 1.2, 1.16,
//! 1.18 and 1.20+ as `debug/gosym/pclntab.go` and `runtime/symtab.go` lay them out, and
//! the inline tree (Go 1.12+) that names inlined calls as `runtime.CallersFrames` does.

use super::{SymbolError, SymbolFrame};

/// `PCDATA_InlTreeIndex`: the pc-value table giving the inline tree entry at a pc.
const PCDATA_INL_TREE_INDEX: u32 = 2;
/// Deepest inline chain followed; a deeper one is a loop in a corrupt tree.
const MAX_INLINE_DEPTH: usize = 1024;

/// The table layouts, named by the Go release that introduced each magic number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GoTableVersion {
    /// 0xfffffffb: Go 1.2 to 1.15, absolute entry pcs, one string table.
    Go12,
    /// 0xfffffffa: Go 1.16 and 1.17, separate name, file and pc-value tables.
    Go116,
    /// 0xfffffff0: Go 1.18 and 1.19, entry pcs as offsets from the text start.
    Go118,
    /// 0xfffffff1: Go 1.20 on, `_func.startLine` and a shorter inline tree entry.
    Go120,
}

impl GoTableVersion {
    /// Bytes of `_func` before its pcdata offsets.
    fn func_header_size(self, ptr_size: usize) -> usize {
        match self {
            Self::Go12 => ptr_size + 32,
            Self::Go116 => ptr_size + 36,
            Self::Go118 => 40,
            Self::Go120 => 44,
        }
    }

    /// `FUNCDATA_InlTree` (Go 1.12–1.15 still had `FUNCDATA_RegPointerMaps` before it).
    fn funcdata_inline_tree(self) -> usize {
        if self == Self::Go12 {
            4
        } else {
            3
        }
    }

    /// `runtime.inlinedCall`: its size, and where its name offset and `parentPc` are.
    fn inline_entry(self) -> (u64, u64, u64) {
        if self == Self::Go120 {
            (16, 4, 8)
        } else {
            (20, 12, 16)
        }
    }

    /// The words of `moduledata` that may hold `gofunc`: 38 in Go 1.18 and 1.19, 40
    /// once Go 1.20 added `covctrs, ecovctrs`, 43 in later layouts (seen in Go 1.27,
    /// whose `moduledata` is in `.go.module` and `gofunc` inside the pclntab section).
    fn moduledata_gofunc_words(self) -> &'static [usize] {
        match self {
            Self::Go12 | Self::Go116 => &[],
            Self::Go118 => &[38],
            Self::Go120 => &[40, 43],
        }
    }
}

/// Where the inline trees' bytes are.
#[derive(Clone, Debug, Default)]
enum Memory {
    #[default]
    Missing,
    /// In the table's own section, loaded at `address`.
    Table { address: u64 },
    /// In another section, loaded at `address`.
    Section { address: u64, bytes: Vec<u8> },
}

/// A Go pclntab read once, then looked up by pc.
#[derive(Clone, Debug)]
pub struct GoPclnTab {
    data: Vec<u8>,
    version: GoTableVersion,
    big_endian: bool,
    quantum: u64,
    ptr_size: usize,
    nfunc: usize,
    /// Go 1.2's file count (its file table is a list of string offsets).
    nfiles: usize,
    text_start: u64,
    funcnametab: usize,
    cutab: usize,
    filetab: usize,
    pctab: usize,
    /// Where `_func` offsets count from.
    funcdata: usize,
    functab: usize,
    /// Go 1.18+: `moduledata.gofunc`, which inline tree offsets count from.
    gofunc: Option<u64>,
    inline_trees: Memory,
}

fn corrupt(reason: impl Into<String>) -> SymbolError {
    SymbolError::Corrupt { format: "Go pclntab", reason: reason.into() }
}

/// `start + count * size`, or an error when it overflows.
fn offset(start: usize, count: u64, size: u64) -> Result<usize, SymbolError> {
    count
        .checked_mul(size)
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| start.checked_add(n))
        .ok_or_else(|| corrupt("offset out of range"))
}

impl GoPclnTab {
    /// Reads the table in `data` (the section's bytes). `text_address`, the text
    /// section's address, is where Go 1.18+ entry offsets count from, as `debug/gosym`
    /// takes it (the table's own `textStart` may be unrelocated); without it the
    /// table's is used.
    pub fn parse(data: Vec<u8>, text_address: Option<u64>) -> Result<Self, SymbolError> {
        if data.len() < 16 || data[4] != 0 || data[5] != 0 {
            return Err(corrupt("no pclntab header"));
        }
        let (quantum, ptr_size) = (data[6], data[7]);
        if !matches!(quantum, 1 | 2 | 4) || !matches!(ptr_size, 4 | 8) {
            return Err(corrupt(format!("pc quantum {quantum}, pointer size {ptr_size}")));
        }
        let magic = |m: u32| {
            let le = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) == m;
            let be = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) == m;
            (le || be).then_some(be)
        };
        let (version, big_endian) = [
            (0xfffffffb, GoTableVersion::Go12),
            (0xfffffffa, GoTableVersion::Go116),
            (0xfffffff0, GoTableVersion::Go118),
            (0xfffffff1, GoTableVersion::Go120),
        ]
        .into_iter()
        .find_map(|(m, v)| magic(m).map(|be| (v, be)))
        .ok_or_else(|| SymbolError::Unsupported { format: "Go pclntab", reason: "unknown magic".into() })?;
        let mut table = Self {
            data,
            version,
            big_endian,
            quantum: u64::from(quantum),
            ptr_size: usize::from(ptr_size),
            nfunc: 0,
            nfiles: 0,
            text_start: 0,
            funcnametab: 0,
            cutab: 0,
            filetab: 0,
            pctab: 0,
            funcdata: 0,
            functab: 0,
            gofunc: None,
            inline_trees: Memory::default(),
        };
        let header_word = |t: &Self, i: u64| -> Result<usize, SymbolError> {
            let v = t.word(offset(8, i, t.ptr_size as u64)?)?;
            usize::try_from(v).ok().filter(|&v| v <= t.data.len()).ok_or_else(|| corrupt("header offset out of range"))
        };
        let nfunc = table.word(8)?;
        if version == GoTableVersion::Go12 {
            table.functab = 8 + table.ptr_size;
            let files_at = offset(table.functab, nfunc.saturating_mul(2).saturating_add(1), table.field_size())?;
            table.filetab = table.u32(files_at)? as usize;
            table.nfiles = table.u32(table.filetab)? as usize;
        } else {
            // Header words: nfunc, nfiles, (Go 1.18+: textStart,) then the offsets of
            // the name, CU, file and pc-value tables and of the functab.
            let first = if version >= GoTableVersion::Go118 {
                table.text_start = match text_address {
                    Some(a) => a,
                    None => table.word(offset(8, 2, ptr_size.into())?)?,
                };
                3
            } else {
                2
            };
            table.funcnametab = header_word(&table, first)?;
            table.cutab = header_word(&table, first + 1)?;
            table.filetab = header_word(&table, first + 2)?;
            table.pctab = header_word(&table, first + 3)?;
            table.funcdata = header_word(&table, first + 4)?;
            table.functab = table.funcdata;
        }
        // The functab (entries and the end pc) must be there: this bounds nfunc.
        let functab_end = offset(table.functab, nfunc.saturating_mul(2).saturating_add(1), table.field_size())?;
        if functab_end > table.data.len() {
            return Err(corrupt(format!("{nfunc} functions do not fit")));
        }
        table.nfunc = nfunc as usize;
        Ok(table)
    }

    pub fn version(&self) -> GoTableVersion {
        self.version
    }

    /// Where the inline trees may be, so that inlined calls get their own frames:
    /// before Go 1.18 the first function's inline tree (funcdata holds addresses), from
    /// Go 1.18 the candidates for `moduledata.gofunc`, which inline tree offsets count
    /// from. `table_address` is this table's virtual address, `module_data` the section
    /// holding `runtime.firstmoduledata` (`.noptrdata`, Go 1.27's `.go.module`). The
    /// caller hands each, with the bytes of the section holding it, to
    /// [`Self::try_inline_trees`] until one is taken.
    pub fn inline_tree_candidates(&self, table_address: u64, module_data: &[u8]) -> Vec<u64> {
        if self.version < GoTableVersion::Go118 {
            let first = (0..self.nfunc).find_map(|i| self.inline_tree(self.func_at(i).ok()?).ok().flatten());
            return first.into_iter().collect();
        }
        let Some(moduledata) = self.find_moduledata(table_address, module_data) else { return Vec::new() };
        let words = self.version.moduledata_gofunc_words().iter();
        words.filter_map(|w| self.word_in(module_data, moduledata + w * self.ptr_size).ok()).collect()
    }

    /// Takes `candidate` as where the inline trees are when the trees read there make
    /// sense (names in the name table, call sites inside their functions); their bytes
    /// are those of the section loaded at `address`, or the table's own when `bytes` is
    /// `None`. Whether it was taken.
    pub fn try_inline_trees(&mut self, candidate: u64, address: u64, bytes: Option<Vec<u8>>) -> bool {
        let before = (self.gofunc, std::mem::take(&mut self.inline_trees));
        if self.version >= GoTableVersion::Go118 {
            self.gofunc = Some(candidate);
        }
        self.inline_trees = match bytes {
            Some(bytes) => Memory::Section { address, bytes },
            None => Memory::Table { address },
        };
        let sensible = self.inline_trees_make_sense();
        if !sensible {
            (self.gofunc, self.inline_trees) = before;
        }
        sensible
    }

    /// Whether the first entry of the first inline trees names a function and points
    /// inside its function.
    fn inline_trees_make_sense(&self) -> bool {
        let (_, name_at, parent_pc_at) = self.version.inline_entry();
        let mut checked = 0;
        for i in 0..self.nfunc {
            let Ok(func) = self.func_at(i) else { return false };
            let Ok(Some(tree)) = self.inline_tree(func) else { continue };
            let (Ok(name), Ok(parent_pc)) = (self.tree_u32(tree, name_at), self.tree_u32(tree, parent_pc_at)) else {
                return false;
            };
            let name_start = self.funcnametab.saturating_add(name as usize);
            let starts_a_name = name == 0 || self.data.get(name_start - 1) == Some(&0);
            let size = match (self.functab_pc(i), self.functab_pc(i + 1)) {
                (Ok(start), Ok(end)) => end.wrapping_sub(start),
                _ => return false,
            };
            if !starts_a_name || self.string(name_start).is_err() || u64::from(parent_pc) >= size {
                return false;
            }
            checked += 1;
            if checked == 16 {
                break;
            }
        }
        checked > 0
    }

    /// Where `runtime.firstmoduledata` is in `module_data`: the word-aligned record
    /// whose first word points at this table and whose second at its name table.
    fn find_moduledata(&self, table_address: u64, module_data: &[u8]) -> Option<usize> {
        let names = table_address.checked_add(self.funcnametab as u64)?;
        let at = |i: usize| self.word_in(module_data, i).ok();
        (0..module_data.len())
            .step_by(self.ptr_size)
            .find(|&i| at(i) == Some(table_address) && at(i + self.ptr_size) == Some(names))
    }

    /// The frames at `pc`: inlined calls innermost first, then the function.
    pub fn lookup(&self, pc: u64) -> Result<Vec<SymbolFrame>, SymbolError> {
        let Some(index) = self.function_index(pc)? else { return Ok(Vec::new()) };
        let func = self.func_at(index)?;
        let entry = self.entry(func)?;
        let mut frames = Vec::new();
        let mut pc = pc;
        if let (Some(tree), Some(index_table)) = (self.inline_tree(func)?, self.pcdata(func, PCDATA_INL_TREE_INDEX)?) {
            let (size, name_at, parent_pc_at) = self.version.inline_entry();
            let mut visited = vec![pc];
            loop {
                let ix = self.pc_value(index_table, entry, pc)?;
                if ix < 0 {
                    break;
                }
                if frames.len() == MAX_INLINE_DEPTH {
                    return Err(corrupt("inline tree loops"));
                }
                let call = offset(0, ix as u64, size)? as u64;
                let name_offset = self.tree_u32(tree, call + name_at)?;
                let parent_pc = self.tree_u32(tree, call + parent_pc_at)?;
                frames.push(self.frame(func, entry, pc, name_offset)?);
                pc = entry.wrapping_add(u64::from(parent_pc));
                // A call site leading back into the chain ends it (seen in Go 1.27 init
                // functions whose inlined calls name the entry as their call site).
                if visited.contains(&pc) {
                    break;
                }
                visited.push(pc);
            }
        }
        frames.push(self.frame(func, entry, pc, self.field(func, 1)?)?);
        Ok(frames)
    }

    /// A frame named by `name_offset`, with the file and line of `pc` in the function.
    fn frame(&self, func: usize, entry: u64, pc: u64, name_offset: u32) -> Result<SymbolFrame, SymbolError> {
        let name = self.string(offset(self.funcnametab, name_offset.into(), 1)?)?;
        let line = self.pc_value(self.field(func, 6)?, entry, pc)?;
        Ok(SymbolFrame { name, file: self.file(func, entry, pc)?, line: u32::try_from(line).unwrap_or(0) })
    }

    /// The file of `pc` in `func`, as `go12PCToFile` finds it.
    fn file(&self, func: usize, entry: u64, pc: u64) -> Result<Option<String>, SymbolError> {
        let number = self.pc_value(self.field(func, 5)?, entry, pc)?;
        if self.version == GoTableVersion::Go12 {
            if number <= 0 || number as usize >= self.nfiles {
                return Ok(None);
            }
            let name_at = self.u32(offset(self.filetab, number as u64, 4)?)?;
            return self.string(name_at as usize).map(Some);
        }
        if number < 0 {
            return Ok(None);
        }
        let cu = self.field(func, 8)?;
        let slot = u64::from(cu).checked_add(number as u64).ok_or_else(|| corrupt("file index out of range"))?;
        match self.u32(offset(self.cutab, slot, 4)?)? {
            u32::MAX => Ok(None),
            name_at => self.string(offset(self.filetab, name_at.into(), 1)?).map(Some),
        }
    }

    /// The function whose range holds `pc`, by binary search of the functab.
    fn function_index(&self, pc: u64) -> Result<Option<usize>, SymbolError> {
        if self.nfunc == 0 || pc < self.functab_pc(0)? || pc >= self.functab_pc(self.nfunc)? {
            return Ok(None);
        }
        let (mut low, mut high) = (0, self.nfunc);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if self.functab_pc(middle)? <= pc {
                low = middle;
            } else {
                high = middle;
            }
        }
        Ok(Some(low))
    }

    /// Bytes per functab field: a pointer before Go 1.18, then a 32-bit offset.
    fn field_size(&self) -> u64 {
        if self.version >= GoTableVersion::Go118 {
            4
        } else {
            self.ptr_size as u64
        }
    }

    fn functab_word(&self, slot: u64) -> Result<u64, SymbolError> {
        let at = offset(self.functab, slot, self.field_size())?;
        if self.version >= GoTableVersion::Go118 {
            self.u32(at).map(u64::from)
        } else {
            self.word(at)
        }
    }

    fn functab_pc(&self, i: usize) -> Result<u64, SymbolError> {
        let value = self.functab_word(2 * i as u64)?;
        Ok(if self.version >= GoTableVersion::Go118 { value.wrapping_add(self.text_start) } else { value })
    }

    /// Where the `_func` of function `i` starts in the table.
    fn func_at(&self, i: usize) -> Result<usize, SymbolError> {
        let func = offset(self.funcdata, self.functab_word(2 * i as u64 + 1)?, 1)?;
        let header = self.version.func_header_size(self.ptr_size);
        if func.checked_add(header).is_none_or(|end| end > self.data.len()) {
            return Err(corrupt("function record out of range"));
        }
        Ok(func)
    }

    fn entry(&self, func: usize) -> Result<u64, SymbolError> {
        if self.version >= GoTableVersion::Go118 {
            Ok(u64::from(self.u32(func)?).wrapping_add(self.text_start))
        } else {
            self.word(func)
        }
    }

    /// The `n`th 32-bit field of `_func` after its entry (1 name, 5 pcfile, 6 pcln,
    /// 7 npcdata, 8 cuOffset).
    fn field(&self, func: usize, n: u64) -> Result<u32, SymbolError> {
        let first = if self.version >= GoTableVersion::Go118 { 4 } else { self.ptr_size };
        self.u32(offset(func, n - 1, 4)?.checked_add(first).ok_or_else(|| corrupt("offset out of range"))?)
    }

    /// The pc-value table `i` of `func`, when it has one.
    fn pcdata(&self, func: usize, i: u32) -> Result<Option<u32>, SymbolError> {
        if i >= self.field(func, 7)? {
            return Ok(None);
        }
        let header = self.version.func_header_size(self.ptr_size);
        let table = self.u32(offset(func + header, i.into(), 4)?)?;
        Ok((table != 0).then_some(table))
    }

    /// The address of `func`'s inline tree, when it has one.
    fn inline_tree(&self, func: usize) -> Result<Option<u64>, SymbolError> {
        let header = self.version.func_header_size(self.ptr_size);
        let slot = self.version.funcdata_inline_tree();
        let nfuncdata = *self.data.get(func + header - 1).ok_or_else(|| corrupt("function record cut short"))?;
        if slot >= usize::from(nfuncdata) {
            return Ok(None);
        }
        let npcdata = self.field(func, 7)?;
        let mut funcdata = offset(func + header, npcdata.into(), 4)?;
        if self.version >= GoTableVersion::Go118 {
            return match self.u32(offset(funcdata, slot as u64, 4)?)? {
                u32::MAX => Ok(None),
                tree => Ok(self.gofunc.map(|base| base.wrapping_add(tree.into()))),
            };
        }
        // Pointers are aligned to their size.
        if self.ptr_size == 8 && funcdata % 8 != 0 {
            funcdata += 4;
        }
        let tree = self.word(offset(funcdata, slot as u64, self.ptr_size as u64)?)?;
        Ok((tree != 0).then_some(tree))
    }

    /// A 32-bit value at `tree + at` in the inline trees' bytes.
    fn tree_u32(&self, tree: u64, at: u64) -> Result<u32, SymbolError> {
        let (address, bytes) = match &self.inline_trees {
            Memory::Missing => return Err(corrupt("inline trees not found")),
            Memory::Table { address } => (*address, &self.data),
            Memory::Section { address, bytes } => (*address, bytes),
        };
        let start = tree
            .checked_sub(address)
            .and_then(|o| o.checked_add(at))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| corrupt("inline tree outside its section"))?;
        self.u32_in(bytes, start)
    }

    /// The value of the pc-value table at `table` for `target`, as `pcvalue` runs it;
    /// -1 when the table does not reach it.
    fn pc_value(&self, table: u32, entry: u64, target: u64) -> Result<i32, SymbolError> {
        if table == 0 {
            return Ok(-1);
        }
        let mut at = offset(self.pctab, table.into(), 1)?;
        let (mut value, mut pc) = (-1i32, entry);
        loop {
            let delta = self.varint(&mut at)?;
            if delta == 0 && pc != entry {
                return Ok(-1);
            }
            let delta = if delta & 1 != 0 { !(delta >> 1) } else { delta >> 1 };
            value = value.wrapping_add(delta as i32);
            pc = pc.wrapping_add(u64::from(self.varint(&mut at)?) * self.quantum);
            if target < pc {
                return Ok(value);
            }
        }
    }

    fn varint(&self, at: &mut usize) -> Result<u32, SymbolError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = *self.data.get(*at).ok_or_else(|| corrupt("pc-value table cut short"))?;
            *at += 1;
            value |= u32::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(corrupt("varint too long"))
    }

    /// The NUL-terminated string at `at`.
    fn string(&self, at: usize) -> Result<String, SymbolError> {
        let bytes = self.data.get(at..).ok_or_else(|| corrupt("string offset out of range"))?;
        let end = bytes.iter().position(|&b| b == 0).ok_or_else(|| corrupt("unterminated string"))?;
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }

    fn u32(&self, at: usize) -> Result<u32, SymbolError> {
        self.u32_in(&self.data, at)
    }

    fn word(&self, at: usize) -> Result<u64, SymbolError> {
        self.word_in(&self.data, at)
    }

    fn u32_in(&self, bytes: &[u8], at: usize) -> Result<u32, SymbolError> {
        let b: [u8; 4] = bytes
            .get(at..at.saturating_add(4))
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| corrupt("read past the end"))?;
        Ok(if self.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    }

    /// A pointer-sized value.
    fn word_in(&self, bytes: &[u8], at: usize) -> Result<u64, SymbolError> {
        if self.ptr_size == 4 {
            return self.u32_in(bytes, at).map(u64::from);
        }
        let b: [u8; 8] = bytes
            .get(at..at.saturating_add(8))
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| corrupt("read past the end"))?;
        Ok(if self.big_endian { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_magic_is_unsupported() {
        let header = [0xfe, 0xff, 0xff, 0xff, 0, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(GoPclnTab::parse(header.to_vec(), None), Err(SymbolError::Unsupported { .. })));
    }

    #[test]
    fn too_many_functions_for_the_table_is_corrupt() {
        let mut table = vec![0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8];
        table.extend(u64::MAX.to_le_bytes());
        table.extend([0; 64]);
        assert!(matches!(GoPclnTab::parse(table, Some(0)), Err(SymbolError::Corrupt { .. })));
    }
}
