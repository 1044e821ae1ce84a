//! Go binaries named from their `.gopclntab` alone (`-ldflags="-s -w"`, `strip`):
//! every sampled address of the Go programs' perf recordings named as `go tool
//! addr2line` names it, the inlined frames as `llvm-symbolizer` reads them from the
//! unstripped binary's DWARF, function names as `go tool nm` lists them, and
//! truncated or corrupt tables as typed errors.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::symbols::{
    AddressLookup, Found, GoPclnTab, ObjectFile, Outcome, Role, SymbolError, SymbolFile, SymbolFiles, SymbolFrame,
    Wanted,
};

/// The distinct addresses `perf script` printed for `binary`, as virtual addresses of
/// the file (perf prints a file offset when it had no symbols), each once.
fn sampled_addresses(script: &Path, binary: &ObjectFile, name: &str) -> Vec<u64> {
    let text = String::from_utf8(read(script)).unwrap();
    let suffix = format!("/{name})");
    let mut addresses: Vec<u64> = text
        .lines()
        .filter(|l| l.trim_end().ends_with(&suffix))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .filter_map(|a| if binary.covers_address(a) { Some(a) } else { binary.file_offset_to_address(a) })
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    assert!(addresses.len() > 20, "{} addresses of {name} in {}", addresses.len(), script.display());
    addresses
}

/// Runs `program args` with one hex address a line on stdin; its stdout lines.
fn lines_for(program: &str, args: &[&str], addresses: &[u64]) -> Option<Vec<String>> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let input: String = addresses.iter().map(|a| format!("0x{a:x}\n")).collect();
    // Written beside the reading: a long input would otherwise fill both pipes.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{program} {args:?} failed");
    Some(String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect())
}

fn place(frame: &SymbolFrame) -> String {
    format!("{}:{}", frame.file.as_deref().unwrap_or("?"), frame.line)
}

/// `go tool addr2line` reads the same pclntab through `debug/gosym`, which knows no
/// inline tree: for inlined code it prints the outer (physical) function's name with
/// the innermost frame's file and line. That pair is what is compared.
fn assert_named_as_go_addr2line(object: &ObjectFile, reference: &Path, addresses: &[u64]) {
    let Some(go) = common::go() else { return };
    let lines = lines_for(go.to_str().unwrap(), &["tool", "addr2line", reference.to_str().unwrap()], addresses)
        .expect("go tool addr2line");
    assert_eq!(lines.len(), 2 * addresses.len());
    for (i, address) in addresses.iter().enumerate() {
        let frames = object.lookup(*address).unwrap();
        let (name, place_) = (&lines[2 * i], &lines[2 * i + 1]);
        if name == "?" {
            assert!(frames.is_empty(), "0x{address:x}: {frames:?}");
            continue;
        }
        // Where the table has no line (padding after a function's code) it prints
        // the -1 of its pc-value tables.
        let place_ = if place_ == ":-1" { "?:0" } else { place_ };
        let ours = (frames.last().unwrap().name.as_str(), place(&frames[0]));
        assert_eq!(ours, (name.as_str(), place_.to_owned()), "0x{address:x}: {frames:?}");
    }
}

#[test]
fn the_go_s_profile_is_named_as_go_tool_addr2line_names_it() {
    let Some(root) = symbol_fixtures() else { return };
    let binary = root.join("bin/symwork-go-s");
    let object = ObjectFile::parse(&read(&binary)[..]).unwrap();
    assert!(!object.has_dwarf() && object.has_go_pclntab());
    let addresses = sampled_addresses(&root.join("symwork-go-s.perf-script.txt"), &object, "symwork-go-s");
    assert_named_as_go_addr2line(&object, &binary, &addresses);
    let names: Vec<String> =
        addresses.iter().filter_map(|a| Some(object.lookup(*a).ok()?.last()?.name.clone())).collect();
    for f in ["main.integrate", "main.(*block).hash", "main.countKeys", "main.sortedMedian.func1"] {
        assert!(names.iter().any(|n| n == f), "{f} not among {names:?}");
    }
}

#[test]
fn the_stripped_binary_is_named_as_the_unstripped_one_by_go_addr2line_and_llvm_symbolizer() {
    let Some(root) = symbol_fixtures() else { return };
    let (unstripped, stripped) = (root.join("bin/symwork-go"), root.join("bin/symwork-go.stripped"));
    let object = ObjectFile::parse(&read(&stripped)[..]).unwrap();
    assert!(!object.has_dwarf() && object.has_go_pclntab());
    let addresses = sampled_addresses(&root.join("symwork-go.perf-script.txt"), &object, "symwork-go.stripped");
    assert_named_as_go_addr2line(&object, &unstripped, &addresses);

    // Every frame, inlined ones included, as llvm-symbolizer reads the unstripped
    // DWARF: the Go linker writes the same names and lines there as in the inline tree.
    // (Binutils' addr2line names the innermost inlined frame of Go code by its caller.)
    let object_arg = format!("--obj={}", unstripped.display());
    let Some(lines) = lines_for("llvm-symbolizer", &[&object_arg], &addresses) else {
        return missing_prerequisite("llvm-symbolizer");
    };
    let mut blocks = lines.split(|l| l.is_empty());
    let mut inlined = 0;
    for address in &addresses {
        let block = blocks.next().unwrap();
        // Its places end in a column, which Go's tables do not have, and put the
        // compilation directory `.` before `<autogenerated>`; DWARF names assembly
        // functions by their ABI0 symbol (`runtime.systemstack.abi0`), the pclntab,
        // like `go tool addr2line`, without the suffix.
        let expected: Vec<(String, String)> = block
            .chunks(2)
            .map(|c| {
                let place = c[1].rsplit_once(':').unwrap().0.trim_start_matches("./");
                (c[0].trim_end_matches(".abi0").to_owned(), place.to_owned())
            })
            .collect();
        let ours: Vec<(String, String)> =
            object.lookup(*address).unwrap().iter().map(|f| (f.name.clone(), place(f))).collect();
        assert_eq!(ours, expected, "0x{address:x}");
        inlined += usize::from(ours.len() > 1);
    }
    assert!(inlined > 0, "no sampled address is in inlined code");
}

#[test]
fn function_entries_are_named_as_go_tool_nm_lists_them() {
    let Some(root) = symbol_fixtures() else { return };
    let Some(go) = common::go() else { return };
    let out = Command::new(go).args(["tool", "nm"]).arg(root.join("bin/symwork-go")).output().unwrap();
    let object = ObjectFile::parse(&read(&root.join("bin/symwork-go.stripped"))[..]).unwrap();
    let mut checked = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut fields = line.split_whitespace();
        let (Some(address), Some("T"), Some(name)) = (fields.next(), fields.next(), fields.next()) else { continue };
        if !name.starts_with("main.") && !name.starts_with("sort.") {
            continue;
        }
        let frames = object.lookup(u64::from_str_radix(address, 16).unwrap()).unwrap();
        assert_eq!(frames.last().map(|f| f.name.as_str()), Some(name), "{line}");
        checked += 1;
    }
    assert!(checked > 10, "{checked} functions");
}

/// Hands in the one binary at `path` for every mapping asking for a binary.
struct OnlyBinary(std::path::PathBuf);

impl SymbolFiles for OnlyBinary {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        let file = SymbolFile::parse(&read(&self.0)[..]);
        (wanted.role == Role::Binary).then(|| Found { path: self.0.display().to_string(), file })
    }
}

#[test]
fn the_go_s_perf_script_is_symbolized_from_the_stripped_binary_alone() {
    let Some(root) = symbol_fixtures() else { return };
    let mut p = stacklens_core::parse(&read(&root.join("symwork-go-s.perf-script.txt"))).unwrap();
    let reports = p.symbolize(&mut OnlyBinary(root.join("bin/symwork-go-s")));
    let ours = reports.iter().find(|r| r.file_name.ends_with("/symwork-go-s")).unwrap();
    let Outcome::Symbolized { locations, debug_file: None, .. } = ours.outcome else { panic!("{ours:?}") };
    assert!(locations > 20, "{ours:?}");
    let m = p.mappings.iter().find(|m| p.str(m.filename).ends_with("/symwork-go-s")).unwrap();
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers);
    let names: Vec<&str> = p.functions.iter().map(|f| p.str(f.name)).collect();
    for f in ["main.integrate", "main.(*block).hash", "main.countKeys", "main.sortedMedian", "main.main"] {
        assert!(names.contains(&f), "{f} not among {names:?}");
    }
}

/// Addresses spread through the functions `go tool nm -size` lists in `binary` whose
/// names start with one of `packages`: each function's entry and every 37th byte.
fn addresses_in_functions(go: &Path, binary: &Path, packages: &[&str]) -> Vec<u64> {
    let out = Command::new(go).args(["tool", "nm", "-size"]).arg(binary).output().unwrap();
    let mut addresses = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [address, size, "T", name] = fields[..] else { continue };
        // `go.buildid` (and the marker `runtime.text` at its address) is the build
        // id's bytes, with no pc-value tables (offset 0), which `debug/gosym` decodes
        // anyway from the start of the pc-value data; the runtime, and stacklens, read
        // no line there.
        let build_id = ["go.buildid", "runtime.text"].contains(&name);
        if !build_id && packages.iter().any(|p| name.starts_with(p)) {
            let (start, size) = (u64::from_str_radix(address, 16).unwrap(), size.parse::<u64>().unwrap());
            addresses.extend((0..size).step_by(37).map(|o| start + o));
        }
    }
    addresses
}

/// Go cross-compiles to macOS: the Mach-O program is named through its DWARF, and
/// stripped (`-s -w`) through `__gopclntab`, as `go tool addr2line` names the
/// unstripped one. (Go 1.19 writes no `LC_UUID`, so the files have no build id.)
#[test]
fn mach_o_go_programs_are_named_as_go_tool_addr2line_names_them() {
    let Some(root) = symbol_fixtures() else { return };
    let Some(go) = common::go() else { return };
    let (unstripped, stripped) = (root.join("bin/symwork-go-darwin"), root.join("bin/symwork-go-darwin-s"));
    let with_dwarf = ObjectFile::parse(&read(&unstripped)[..]).unwrap();
    let without = ObjectFile::parse(&read(&stripped)[..]).unwrap();
    assert!(with_dwarf.has_dwarf() && !without.has_dwarf() && without.has_go_pclntab());
    assert!(with_dwarf.fixed_address() && with_dwarf.relative_to_address(0) > 0);
    // DWARF names assembly functions by their ABI0 symbols: Go code only.
    let go_code = addresses_in_functions(go, &unstripped, &["main.", "sort.", "strconv.", "fmt."]);
    assert!(go_code.len() > 500, "{}", go_code.len());
    assert_named_as_go_addr2line(&with_dwarf, &unstripped, &go_code);
    let everything = addresses_in_functions(go, &unstripped, &[""]);
    assert_named_as_go_addr2line(&without, &unstripped, &everything);
}

/// The `.gopclntab` section of a fixture binary, with its address and the text address.
fn pclntab_of(path: &Path) -> (Vec<u8>, u64) {
    use object::{Object, ObjectSection};
    let bytes = read(path);
    let file = object::File::parse(&bytes[..]).unwrap();
    let text = file.section_by_name(".text").unwrap().address();
    (file.section_by_name(".gopclntab").unwrap().data().unwrap().to_vec(), text)
}

#[test]
fn a_truncated_or_corrupt_table_is_a_typed_error_and_never_a_panic() {
    let Some(root) = symbol_fixtures() else { return };
    let (table, text) = pclntab_of(&root.join("bin/symwork-go-s"));
    let whole = GoPclnTab::parse(table.clone(), Some(text)).unwrap();
    let probes: Vec<u64> = (0..64).map(|i| text + i * 0x1357).collect();
    assert!(probes.iter().any(|p| !whole.lookup(*p).unwrap().is_empty()));
    let mut cuts = 0;
    for cut in (0..table.len()).step_by(table.len() / 200) {
        match GoPclnTab::parse(table[..cut].to_vec(), Some(text)) {
            Ok(t) => {
                for p in &probes {
                    if let Err(e) = t.lookup(*p) {
                        assert!(matches!(e, SymbolError::Corrupt { .. }), "{e}");
                    }
                }
            }
            Err(e) => {
                assert!(matches!(e, SymbolError::Corrupt { .. } | SymbolError::Unsupported { .. }), "{e}");
                cuts += 1;
            }
        }
    }
    assert!(cuts > 0);
    // Bytes overwritten across the table: lookups answer or fail, never panic or loop.
    let mut state = 0x9e3779b97f4a7c15u64;
    for round in 0..300 {
        let mut bad = table.clone();
        for _ in 0..1 + round % 16 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = (state >> 33) as usize % bad.len();
            bad[at] = (state >> 17) as u8;
        }
        if let Ok(t) = GoPclnTab::parse(bad, Some(text)) {
            for p in &probes {
                let _ = t.lookup(*p);
            }
        }
    }
    // A binary cut short is an error of the file, not a panic.
    let binary = read(&root.join("bin/symwork-go-s"));
    for cut in (0..binary.len()).step_by(binary.len() / 50) {
        if let Ok(o) = ObjectFile::parse(&binary[..cut]) {
            for p in &probes {
                let _ = o.lookup(*p);
            }
        }
    }
}
