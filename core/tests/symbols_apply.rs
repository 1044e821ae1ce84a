//! `Profile::symbolize` on gperftools' CPU profile of the stripped C program (runtime
//! addresses, real mappings): the names and lines `addr2line` gives for the same
//! addresses, a binary of another build id reported and not used, and a truncated
//! file reported as an error while the other mapping still gains its names.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::symbols::{Found, ObjectFile, Outcome, Role, SymbolError, SymbolFile, SymbolFiles, Wanted};
use stacklens_core::Profile;

/// Answers from a fixed table: file name (base) and role → the file to hand in, its
/// bytes possibly cut short.
struct Table(HashMap<(String, Role), (PathBuf, Option<usize>)>);

impl SymbolFiles for Table {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        let base = Path::new(&wanted.file_name).file_name()?.to_str()?.to_owned();
        let (path, cut) = self.0.get(&(base, wanted.role))?;
        let bytes = read(path);
        let bytes = &bytes[..cut.unwrap_or(bytes.len())];
        Some(Found { path: path.display().to_string(), file: SymbolFile::parse(bytes) })
    }
}

/// The fixtures' `bin` folder and the gperftools profile, unsymbolized.
fn setup() -> Option<(PathBuf, Profile)> {
    let root = symbol_fixtures()?;
    let profile = stacklens_core::parse(&read(&root.join("symwork-c.gperftools.prof"))).unwrap();
    Some((root.join("bin"), profile))
}

fn table(entries: &[(&str, Role, PathBuf, Option<usize>)]) -> Table {
    Table(entries.iter().map(|(name, role, path, cut)| (((*name).to_owned(), *role), (path.clone(), *cut))).collect())
}

#[test]
fn locations_gain_the_lines_addr2line_gives_for_their_file_addresses() {
    let Some((bin, mut p)) = setup() else { return };
    let mut files = table(&[
        ("symwork-c.stripped", Role::Binary, bin.join("symwork-c.stripped"), None),
        ("symwork-c.stripped", Role::DebugFile, bin.join("symwork-c.debug"), None),
    ]);
    let reports = p.symbolize(&mut files);
    let ours = reports.iter().find(|r| r.file_name.ends_with("symwork-c.stripped")).unwrap();
    let Outcome::Symbolized { locations, .. } = ours.outcome else { panic!("{ours:?}") };
    assert!(locations > 5, "{ours:?}");
    assert_innermost_lines_are_addr2lines(&p, &bin);
    // Serializes for the page and the API, camelCase.
    let json = serde_json::to_value(&reports).unwrap();
    assert_eq!(json[0]["outcome"]["kind"], "symbolized", "{json}");
    assert!(json[0]["fileName"].as_str().unwrap().ends_with("symwork-c.stripped"));
}

/// Every named location of the program's mapping has the innermost function and line
/// `addr2line` gives for its file address.
fn assert_innermost_lines_are_addr2lines(p: &Profile, bin: &Path) {
    let m = &p.mappings[0];
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers);
    // The same addresses by hand: runtime − start + offset is the file offset, which
    // the PIE loads at the same virtual address (its PT_LOAD has offset == vaddr).
    let mut addresses = Vec::new();
    let mut expected_names = Vec::new();
    for l in p.locations.iter().filter(|l| l.mapping.is_some_and(|id| id.0 == 0) && !l.lines.is_empty()) {
        addresses.push(format!("0x{:x}", l.address - m.memory_start + m.file_offset));
        // `addr2line` without `-i` prints the innermost frame.
        let innermost = &l.lines[0];
        expected_names.push((p.str(p.function(innermost.function).name).to_owned(), innermost.line));
    }
    let out = Command::new("addr2line").args(["-f", "-e"]).arg(bin.join("symwork-c")).args(&addresses).output();
    let Ok(out) = out else { return missing_prerequisite("addr2line (binutils)") };
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, (name, line)) in expected_names.iter().enumerate() {
        let number = lines[2 * i + 1].rsplit(':').next().unwrap().split(' ').next().unwrap();
        let number = if number == "?" { "0" } else { number };
        assert_eq!((lines[2 * i], number), (name.as_str(), line.to_string().as_str()), "{}", addresses[i]);
    }
}

#[test]
fn a_breakpad_sym_file_names_locations_as_addr2line_does_when_its_debug_id_is_the_build_ids() {
    let Some((bin, mut p)) = setup() else { return };
    let sym = bin.join("../sym");
    let wanted = ObjectFile::parse(&read(&bin.join("symwork-c"))[..]).unwrap().build_id_hex().unwrap();
    p.mappings[0].build_id = p.strings.intern(&wanted);
    let mut mismatched = p.clone();
    let mut files = table(&[("symwork-c.stripped", Role::Binary, sym.join("symwork-c.sym"), None)]);
    let reports = p.symbolize(&mut files);
    assert!(matches!(reports[0].outcome, Outcome::Symbolized { locations: 6.., .. }), "{reports:?}");
    assert_innermost_lines_are_addr2lines(&p, &bin);
    // Another build's .sym file is compared by Breakpad debug id, and not used.
    let mut files = table(&[("symwork-c.stripped", Role::Binary, sym.join("symwork-cpp.sym"), None)]);
    let reports = mismatched.symbolize(&mut files);
    let id = |program: &str| ObjectFile::parse(&read(&bin.join(program))[..]).unwrap().breakpad_id().unwrap();
    let file = sym.join("symwork-cpp.sym").display().to_string();
    assert_eq!(
        reports[0].outcome,
        Outcome::BuildIdMismatch { file, wanted: id("symwork-c"), found: id("symwork-cpp") }
    );
}

#[test]
fn a_binary_of_another_build_id_is_named_and_not_used() {
    let Some((bin, mut p)) = setup() else { return };
    let wanted = ObjectFile::parse(&read(&bin.join("symwork-c"))[..]).unwrap().build_id_hex().unwrap();
    let other = ObjectFile::parse(&read(&bin.join("symwork-cpp"))[..]).unwrap().build_id_hex().unwrap();
    p.mappings[0].build_id = p.strings.intern(&wanted);
    let mut files = table(&[("symwork-c.stripped", Role::Binary, bin.join("symwork-cpp"), None)]);
    let reports = p.symbolize(&mut files);
    let expected =
        Outcome::BuildIdMismatch { file: bin.join("symwork-cpp").display().to_string(), wanted, found: other };
    assert_eq!(reports[0].outcome, expected);
    assert!(p.locations.iter().filter(|l| l.mapping.is_some_and(|id| id.0 == 0)).all(|l| l.lines.is_empty()));
    assert!(!p.mappings[0].has_functions);
}

#[test]
fn a_truncated_file_is_an_error_and_the_other_mapping_is_still_symbolized() {
    let Some((bin, mut p)) = setup() else { return };
    let mut files = table(&[
        ("symwork-c.stripped", Role::Binary, bin.join("symwork-c"), None),
        ("libc.so.6", Role::Binary, bin.join("symwork-cpp"), Some(3000)),
    ]);
    let reports = p.symbolize(&mut files);
    let by_name = |suffix: &str| &reports.iter().find(|r| r.file_name.ends_with(suffix)).unwrap().outcome;
    assert!(matches!(by_name("libc.so.6"), Outcome::Error { error: SymbolError::Corrupt { .. }, .. }), "{reports:?}");
    assert!(matches!(by_name("symwork-c.stripped"), Outcome::Symbolized { .. }), "{reports:?}");
    let names: Vec<&str> = p.functions.iter().map(|f| p.str(f.name)).collect();
    assert!(names.contains(&"sieve") && names.contains(&"integrate"), "{names:?}");
}

#[test]
fn perf_script_caller_frames_are_named_at_the_call_and_leaves_where_they_are() {
    let Some(root) = symbol_fixtures() else { return };
    let bin = root.join("bin");
    let mut p = stacklens_core::parse(&read(&root.join("symwork-c.perf-script.txt"))).unwrap();
    let mut files = table(&[
        ("symwork-c.stripped", Role::Binary, bin.join("symwork-c.stripped"), None),
        ("symwork-c.stripped", Role::DebugFile, bin.join("symwork-c.debug"), None),
    ]);
    p.symbolize(&mut files);
    // What each location of the program was used as: one probe each (a location both a
    // leaf and a caller was split). perf script's addresses are file offsets, which
    // this PIE loads at the same virtual addresses.
    let mut probes: HashMap<usize, u64> = HashMap::new();
    for sample in p.samples.iter() {
        for (depth, l) in sample.locations.iter().enumerate() {
            let location = p.location(*l);
            if !location.mapping.is_some_and(|m| p.str(p.mapping(m).filename).ends_with("symwork-c.stripped")) {
                continue;
            }
            let probe = location.address - u64::from(depth > 0);
            assert_eq!(*probes.entry(l.0 as usize).or_insert(probe), probe, "location {} used two ways", l.0);
        }
    }
    let (locations, addresses): (Vec<usize>, Vec<String>) =
        probes.iter().map(|(&l, &a)| (l, format!("0x{a:x}"))).unzip();
    let out = Command::new("addr2line").args(["-f", "-e"]).arg(bin.join("symwork-c")).args(&addresses).output();
    let Ok(out) = out else { return missing_prerequisite("addr2line (binutils)") };
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, &l) in locations.iter().enumerate() {
        let innermost = &p.locations[l].lines[0];
        let number = lines[2 * i + 1].rsplit(':').next().unwrap().split(' ').next().unwrap();
        let ours = (p.str(p.function(innermost.function).name), innermost.line.to_string());
        assert_eq!((lines[2 * i], number.to_owned()), (ours.0, ours.1), "{}", addresses[i]);
    }
}
