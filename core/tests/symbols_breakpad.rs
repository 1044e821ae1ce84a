//! Breakpad `.sym` lookup against the reference tools run at test time: the `.sym` files
//! Mozilla's `dump_syms` wrote from the fixture programs (tests/programs/make.sh) must
//! name every address perf sampled as `addr2line -f -i -C` and `llvm-symbolizer` name it
//! from the binary's DWARF: the same functions, files and lines, inlined frames
//! included, innermost first.

mod common;

use std::path::Path;
use std::process::Command;

use common::symbol_tools::{reference, sampled_offsets, tool_available, Frame};
use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::symbols::breakpad_id;
use stacklens_core::symbols::{AddressLookup, BreakpadSymbols, ObjectFile, SymbolError};

const PROGRAMS: &[&str] = &["symwork-c", "symwork-cpp", "symwork-rust"];

fn sym_file(root: &Path, program: &str) -> BreakpadSymbols {
    BreakpadSymbols::parse(&read(&root.join(format!("sym/{program}.sym")))).unwrap()
}

/// Names are compared by what they name, not by their spelling: dump_syms writes
/// demangled names (symbolic's demangler, without the return type, Rust without its
/// `::h…` hash, inlined functions qualified), addr2line `-C` binutils' (with the return
/// type; an inlined function by its DWARF name, which GCC leaves unqualified and
/// spells `long unsigned int` where the demangler says `unsigned long`). So both are
/// reduced to the function's path: template arguments, parameters and lambda bodies
/// (`<…>`, `(…)`, `{…}`) removed, then the last word (after a return type), without a
/// trailing `const`; the paths must be equal, or one the other with more namespaces.
fn same_name(ours: &str, theirs: &str) -> bool {
    let (ours, theirs) = (function_path(ours), function_path(theirs));
    ours == theirs || ours.ends_with(&format!("::{theirs}")) || theirs.ends_with(&format!("::{ours}"))
}

fn function_path(name: &str) -> String {
    let mut depth = 0usize;
    let mut kept = String::new();
    for c in name.chars() {
        match c {
            '<' | '(' | '{' => depth += 1,
            '>' | ')' | '}' => depth = depth.saturating_sub(1),
            _ if depth == 0 => kept.push(c),
            _ => {}
        }
    }
    let kept = kept.trim().trim_end_matches(" const");
    let last = kept.rsplit(' ').next().unwrap_or_default();
    match last.rsplit_once("::h") {
        Some((path, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => path.to_owned(),
        _ => last.to_owned(),
    }
}

/// Checks every sampled address of `program` against each tool's demangled frames: the
/// same number of frames, files and lines as each tool; each name as at least one tool
/// names it. The tools differ in a few names: binutils names an inlined lambda by its
/// caller's symbol, and neither demangles one of libstdc++'s `std::swap` symbols (nor
/// does dump_syms). Where no symbol covers an address (the PLT) dump_syms writes a
/// `PUBLIC` named after the section, `<.plt ELF section in NAME>`, where addr2line says
/// `??` and llvm-symbolizer `_init`. Returns how many addresses had inlined frames.
fn compare(tools: &[&str], root: &Path, program: &str) -> usize {
    let binary = root.join(format!("bin/{program}"));
    let file = ObjectFile::parse(&read(&binary)[..]).unwrap();
    let sym = sym_file(root, program);
    let addresses: Vec<u64> =
        sampled_offsets(root, program).into_iter().map(|o| file.file_offset_to_address(o).unwrap()).collect();
    assert!(addresses.len() >= 5, "{program}: only {} sampled addresses", addresses.len());
    let references: Vec<Vec<Vec<Frame>>> =
        tools.iter().map(|tool| reference(tool, &binary, &addresses, true)).collect();
    // Breakpad's module offsets count from the first PT_LOAD segment's address.
    let base = file.relative_to_address(0);
    let section = format!("<.plt ELF section in {program}>");
    let (mut inlined, mut differ) = (0, Vec::new());
    for (i, address) in addresses.iter().enumerate() {
        let frames = sym.lookup(address - base).unwrap();
        let mine: Vec<Frame> =
            frames.into_iter().map(|f| (f.name, f.file.unwrap_or_else(|| "??".into()), f.line)).collect();
        inlined += usize::from(mine.len() > 1);
        let plt = mine == [(section.clone(), "??".into(), 0)];
        let agree = plt
            || references.iter().all(|r| {
                let theirs = &r[i];
                theirs.len() == mine.len() && theirs.iter().zip(&mine).all(|(t, m)| t.1 == m.1 && t.2 == m.2)
            }) && mine
                .iter()
                .enumerate()
                .all(|(depth, m)| references.iter().any(|r| same_name(&m.0, &r[i][depth].0)));
        if !agree {
            let short = |f: &Frame| format!("{} {}:{}", function_path(&f.0), f.1, f.2);
            let each = tools
                .iter()
                .zip(&references)
                .map(|(tool, r)| format!("{tool} says\n{:#?}", r[i].iter().map(short).collect::<Vec<_>>()));
            let mine: Vec<_> = mine.iter().map(short).collect();
            let each = each.collect::<Vec<_>>().join("\n");
            differ.push(format!("{program} 0x{address:x}: {each}\nthe .sym says\n{mine:#?}"));
        }
    }
    assert!(differ.is_empty(), "{} of {} addresses differ:\n{}", differ.len(), addresses.len(), differ.join("\n"));
    inlined
}

#[test]
fn every_sampled_address_is_named_as_addr2line_names_it() {
    let Some(root) = symbol_fixtures() else { return };
    let tools: Vec<&str> = ["addr2line", "llvm-symbolizer"].into_iter().filter(|t| tool_available(t)).collect();
    if tools.len() < 2 {
        return;
    }
    let inlined: usize = ["symwork-c", "symwork-cpp"].iter().map(|program| compare(&tools, &root, program)).sum();
    // dump_syms ran with --inlines and the programs inline: a reader that ignored
    // INLINE records would pass only if no address had an inline chain.
    assert!(inlined > 0, "no inlined frames among the sampled addresses");
}

#[test]
fn module_record_names_the_build_id_as_a_breakpad_debug_id() {
    let Some(root) = symbol_fixtures() else { return };
    for program in PROGRAMS {
        let out = Command::new("readelf").arg("-n").arg(root.join(format!("bin/{program}"))).output();
        let Ok(out) = out else { return missing_prerequisite("readelf (binutils)") };
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("readelf prints a build id");
        let bytes: Vec<u8> = (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap()).collect();
        let sym = sym_file(&root, program);
        let module = sym.module();
        assert_eq!((&*module.os, &*module.arch, &*module.name), ("Linux", "x86_64", *program));
        assert_eq!(module.debug_id, breakpad_id::of_build_id(&bytes), "{program}");
        assert_eq!(sym.code_id().map(str::to_ascii_lowercase).as_deref(), Some(id), "{program}");
    }
}

/// What a damaged file may give: an answer, or a typed error.
fn read_damaged(bytes: &[u8], addresses: &[u64]) {
    match BreakpadSymbols::parse(bytes) {
        Ok(sym) => {
            for &a in addresses {
                let _ = sym.lookup(a);
            }
        }
        Err(SymbolError::Corrupt { .. } | SymbolError::Unrecognized(_) | SymbolError::Unsupported { .. }) => {}
    }
}

#[test]
fn truncated_or_corrupt_sym_files_give_an_answer_or_a_typed_error_never_a_panic() {
    let Some(root) = symbol_fixtures() else { return };
    // symwork-rust's 1.6 MB would take minutes in a debug build; the C and C++ files
    // have every record kind (INLINE and INLINE_ORIGIN included).
    for program in ["symwork-c", "symwork-cpp"] {
        let bytes = read(&root.join(format!("sym/{program}.sym")));
        let addresses: Vec<u64> = sampled_offsets(&root, program).into_iter().take(40).collect();
        // Every prefix through the first records, then a spread to the end.
        for len in (0..4096.min(bytes.len())).chain((4096..bytes.len()).step_by(997)) {
            read_damaged(&bytes[..len], &addresses);
        }
        // A spread of positions, each byte replaced in its own copy by one that breaks
        // a record: a field separator, a line break, a non-hex digit, invalid UTF-8.
        for i in 0..800usize {
            let mut bad = bytes.clone();
            let at = i.wrapping_mul(7919) % bad.len();
            bad[at] = [b' ', b'\n', b'g', 0xff][i % 4];
            read_damaged(&bad, &addresses);
        }
    }
}
