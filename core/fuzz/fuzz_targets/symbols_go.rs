//! A Go pclntab read and looked up: the first 8 input bytes are a pc (little-endian),
//! looked up as an offset from the text start and as it is; the rest is the table,
//! which also serves as the module data and the memory where the inline trees are
//! looked for (Go 1.27 keeps them inside the table's section). Seeds are the symbols
//! fixtures' `.gopclntab` sections (run with FUZZ_MAX_LEN=524288 so they fit whole).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stacklens_core::symbols::GoPclnTab;

/// Where the target says the text and the table are loaded.
const TEXT: u64 = 0x401000;
const TABLE: u64 = 0x4c0000;

fuzz_target!(|data: &[u8]| {
    let Some((pc, table)) = data.split_first_chunk::<8>() else { return };
    let pc = u64::from_le_bytes(*pc);
    let Ok(mut go) = GoPclnTab::parse(table.to_vec(), Some(TEXT)) else { return };
    for candidate in go.inline_tree_candidates(TABLE, table) {
        if go.try_inline_trees(candidate, TABLE, None) {
            break;
        }
    }
    let _ = go.lookup(TEXT.wrapping_add(pc & 0xfffff));
    let _ = go.lookup(pc);
});
