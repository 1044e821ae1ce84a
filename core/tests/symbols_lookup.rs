//! ELF/DWARF lookup against the reference tools run at test time: every address that
//! perf sampled in each fixture program (leaves and return addresses − 1) is named by
//! `addr2line -f -i -C` and by `llvm-symbolizer`, and stacklens must give the same
//! functions, files and lines, inlined frames included, innermost first.

mod common;

use std::path::Path;
use std::process::Command;

use common::symbol_tools::{reference, sampled_offsets, tool_available, Frame};
use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::symbols::{AddressLookup, ObjectFile, SymbolError};

const PROGRAMS: &[&str] =
    &["symwork-c", "symwork-c-nopie", "symwork-cpp", "symwork-rust", "symwork-rust-v0", "symwork-go"];

/// Our frames in the reference tools' spelling: `??` for what is unknown. Names are
/// compared mangled: this tests the lookup, `import_demangle` tests demangling (and
/// cpp_demangle drops the parameters of some template constructors that binutils keeps).
fn ours(file: &ObjectFile, address: u64) -> Vec<Frame> {
    let frames = file.lookup(address).unwrap();
    if frames.is_empty() {
        return vec![("??".into(), "??".into(), 0)];
    }
    frames
        .into_iter()
        .map(|f| {
            let name = if f.name.is_empty() { "??".to_owned() } else { f.name };
            (name, f.file.unwrap_or_else(|| "??".into()), f.line)
        })
        .collect()
}

/// Names as both tools demangle them may differ in spelling only (a Rust legacy hash,
/// C++ template spacing, llvm-symbolizer's `(.isra.0)` or Go's `.abi0` from the symbol
/// table); the
/// rest of the name must agree.
fn same_name(ours: &str, theirs: &str) -> bool {
    let plain = |s: &str| {
        let s = match s.rfind(" (.") {
            Some(at) if s.ends_with(')') => &s[..at],
            _ => s,
        };
        let s = match s.rsplit_once("::h") {
            Some((path, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => path,
            _ => s,
        };
        // Go's assembly ABI wrappers: llvm-symbolizer names the symbol, DWARF the function.
        s.trim_end_matches(".abi0").replace(' ', "")
    };
    plain(ours) == plain(theirs)
}

/// Checks every sampled address of `program` against each tool's frames: the same
/// number of frames and lines as each tool; each name and file as at least one tool
/// prints it. The tools differ in a few spellings: binutils names the CU's file for some
/// inlined C++ library lines where llvm-symbolizer and the line table name the header,
/// and names an inlined lambda or Go's inlined frames by their caller's symbol, while
/// llvm-symbolizer names the symbol table's `.isra.0` clone or `_init` over the PLT.
fn compare(tools: &[&str], root: &Path, program: &str) -> usize {
    let binary = root.join(format!("bin/{program}"));
    let file = ObjectFile::parse(&read(&binary)[..]).unwrap();
    let addresses: Vec<u64> =
        sampled_offsets(root, program).into_iter().map(|o| file.file_offset_to_address(o).unwrap()).collect();
    assert!(addresses.len() >= 5, "{program}: only {} sampled addresses", addresses.len());
    let references: Vec<Vec<Vec<Frame>>> =
        tools.iter().map(|tool| reference(tool, &binary, &addresses, false)).collect();
    let mut inlined = 0;
    for (i, address) in addresses.iter().enumerate() {
        let mine = ours(&file, *address);
        inlined += usize::from(mine.len() > 1);
        let said = || {
            let each = tools.iter().zip(&references).map(|(tool, r)| format!("{tool} says\n{:#?}", r[i]));
            format!("{program} 0x{address:x}: {}\nstacklens says\n{mine:#?}", each.collect::<Vec<_>>().join("\n"))
        };
        for reference in &references {
            let theirs = &reference[i];
            let agree = mine.len() == theirs.len() && mine.iter().zip(theirs).all(|(m, t)| m.2 == t.2);
            assert!(agree, "{}", said());
        }
        for (depth, frame) in mine.iter().enumerate() {
            let named = references.iter().any(|r| same_name(&frame.0, &r[i][depth].0));
            let filed = references.iter().any(|r| r[i][depth].1 == frame.1);
            assert!(named && filed, "frame {depth}: {}", said());
        }
    }
    inlined
}

#[test]
fn every_sampled_address_is_named_as_addr2line_and_llvm_symbolizer_name_it() {
    let Some(root) = symbol_fixtures() else { return };
    let tools: Vec<&str> = ["addr2line", "llvm-symbolizer"].into_iter().filter(|t| tool_available(t)).collect();
    if tools.is_empty() {
        return;
    }
    let inlined: usize = PROGRAMS.iter().map(|program| compare(&tools, &root, program)).sum();
    // The fixtures are built to inline: a lookup that ignored inlining would pass
    // only if no address had an inline chain.
    assert!(inlined > 0, "no inlined frames among the sampled addresses");
}

#[test]
fn build_id_and_debug_link_are_read() {
    let Some(root) = symbol_fixtures() else { return };
    let stripped = ObjectFile::parse(&read(&root.join("bin/symwork-c.stripped"))[..]).unwrap();
    let out = Command::new("readelf").arg("-n").arg(root.join("bin/symwork-c")).output();
    let Ok(out) = out else { return missing_prerequisite("readelf (binutils)") };
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("readelf prints a build id");
    assert_eq!(stripped.build_id_hex().as_deref(), Some(id));
    assert_eq!(stripped.debug_link(), Some("symwork-c.debug"));
    assert!(!stripped.has_dwarf());
    let debug = ObjectFile::parse(&read(&root.join("bin/symwork-c.debug"))[..]).unwrap();
    assert_eq!(debug.build_id_hex().as_deref(), Some(id));
    assert!(debug.has_dwarf());
}

#[test]
fn a_truncated_binary_gives_a_typed_error_never_a_panic() {
    let Some(root) = symbol_fixtures() else { return };
    let bytes = read(&root.join("bin/symwork-c-nopie"));
    // Every prefix length up to the headers, then a spread to the end.
    let lengths = (0..4096).chain((4096..bytes.len()).step_by(997));
    for len in lengths {
        match ObjectFile::parse(&bytes[..len]) {
            Ok(file) => {
                // What parsed must also look up without panicking.
                let _ = file.lookup(0x401237);
            }
            Err(SymbolError::Corrupt { .. } | SymbolError::Unrecognized(_) | SymbolError::Unsupported { .. }) => {}
        }
    }
}

#[test]
fn corrupt_bytes_anywhere_give_a_typed_error_or_an_answer_never_a_panic() {
    let Some(root) = symbol_fixtures() else { return };
    for program in ["symwork-c", "symwork-c-nopie", "symwork-cpp"] {
        let bytes = read(&root.join(format!("bin/{program}")));
        let good = ObjectFile::parse(&bytes[..]).unwrap();
        let addresses: Vec<u64> = sampled_offsets(&root, program)
            .into_iter()
            .filter_map(|o| good.file_offset_to_address(o))
            .take(40)
            .collect();
        // A spread of positions over the whole file (headers, symbols, DWARF), each
        // byte inverted in its own copy.
        for i in 0..600usize {
            let mut bad = bytes.clone();
            let at = i.wrapping_mul(7919) % bad.len();
            bad[at] ^= 0xff;
            if let Ok(file) = ObjectFile::parse(&bad[..]) {
                for &a in &addresses {
                    let _ = file.lookup(a);
                }
            }
        }
    }
}

#[test]
fn a_file_read_in_slices_names_addresses_as_its_bytes_do() {
    let Some(root) = symbol_fixtures() else { return };
    let path = root.join("bin/symwork-c-nopie");
    let whole = ObjectFile::parse(&read(&path)[..]).unwrap();
    // What the page does with a 2 GB file: object's ReadCache over Read + Seek.
    let cache = object::ReadCache::new(std::fs::File::open(&path).unwrap());
    let sliced = ObjectFile::parse(&cache).unwrap();
    assert_eq!(sliced.build_id(), whole.build_id());
    let addresses: Vec<u64> =
        sampled_offsets(&root, "symwork-c-nopie").into_iter().filter_map(|o| whole.file_offset_to_address(o)).collect();
    assert!(!addresses.is_empty());
    for a in addresses {
        assert_eq!(sliced.lookup(a).unwrap(), whole.lookup(a).unwrap(), "0x{a:x}");
    }
}
