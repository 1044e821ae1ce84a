//! The kernel's frames named from kallsyms, against perf: `dd` copying /dev/zero recorded
//! with its kernel frames, and /proc/kallsyms copied in the same boot
//! (tests/programs/make.sh). Every kernel address of the perf.data gains the name
//! `perf script` printed for it; kallsyms of another boot (its addresses moved, as KASLR
//! moves them) is reported and not used.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{missing_prerequisite, read, symbol_fixtures};
use stacklens_core::symbols::{Found, Outcome, Role, SymbolFile, SymbolFiles, Wanted};
use stacklens_core::Profile;

const KERNEL: &str = "[kernel.kallsyms]";

/// The fixtures' folder, when this machine could record the kernel.
fn fixtures() -> Option<PathBuf> {
    let dir = symbol_fixtures()?;
    if let Ok(why) = std::fs::read_to_string(dir.join("kernel.absent")) {
        missing_prerequisite(&format!("a recording of the kernel: {}", why.trim()));
        return None;
    }
    Some(dir)
}

/// Hands in the given kallsyms text for the kernel, nothing for anything else.
struct Kallsyms(Vec<u8>);

impl SymbolFiles for Kallsyms {
    fn find(&mut self, wanted: &Wanted) -> Option<Found> {
        (wanted.role == Role::Kernel).then(|| Found { path: "kallsyms".into(), file: SymbolFile::parse(&self.0[..]) })
    }
}

/// The kernel's frames of `perf script` text: address → function, as perf named them.
fn perf_script_kernel_names(text: &str) -> BTreeMap<u64, String> {
    let mut names = BTreeMap::new();
    for line in text.lines().filter(|l| l.trim_end().ends_with(&format!("({KERNEL})"))) {
        let mut words = line.split_whitespace();
        let (Some(address), Some(symbol)) = (words.next(), words.next()) else { continue };
        let function = symbol.rsplit_once("+0x").map_or(symbol, |(f, _)| f);
        names.insert(u64::from_str_radix(address, 16).unwrap(), function.to_owned());
    }
    names
}

/// Each kernel location's address and the names it was given (innermost first).
fn kernel_locations(p: &Profile) -> Vec<(u64, Vec<String>)> {
    p.locations
        .iter()
        .filter(|l| l.mapping.is_some_and(|m| p.str(p.mapping(m).filename) == KERNEL))
        .map(|l| (l.address, l.lines.iter().map(|line| p.str(p.function(line.function).name).to_owned()).collect()))
        .collect()
}

#[test]
fn kernel_frames_gain_the_names_perf_script_gives_them() {
    let Some(dir) = fixtures() else { return };
    let mut p = stacklens_core::parse(&read(&dir.join("kernel.perf.data"))).unwrap();
    let expected = perf_script_kernel_names(&String::from_utf8(read(&dir.join("kernel.perf-script.txt"))).unwrap());
    assert!(expected.len() > 10, "perf script names {} kernel addresses", expected.len());
    let reports = p.symbolize(&mut Kallsyms(read(&dir.join("kallsyms"))));
    let kernel = reports.iter().find(|r| r.file_name == KERNEL).expect("a report on the kernel's mapping");
    assert!(matches!(kernel.outcome, Outcome::Symbolized { locations, .. } if locations > 10), "{kernel}");
    let ours = kernel_locations(&p);
    assert!(!ours.is_empty());
    for (address, names) in &ours {
        let perfs = expected.get(address).unwrap_or_else(|| panic!("perf script has no frame at {address:#x}"));
        assert_eq!(names, std::slice::from_ref(perfs), "at {address:#x}");
    }
    // Every kernel address perf printed is a location here.
    let addresses: std::collections::BTreeSet<u64> = ours.iter().map(|(a, _)| *a).collect();
    assert!(expected.keys().all(|a| addresses.contains(a)), "{:?}", expected.keys().find(|a| !addresses.contains(a)));
}

#[test]
fn kallsyms_of_another_boot_is_reported_and_not_used() {
    let Some(dir) = fixtures() else { return };
    let mut p = stacklens_core::parse(&read(&dir.join("kernel.perf.data"))).unwrap();
    // The same kernel placed 2 MiB higher, as another boot's KASLR could place it.
    let moved: String = String::from_utf8(read(&dir.join("kallsyms")))
        .unwrap()
        .lines()
        .map(|line| {
            let (address, rest) = line.split_once(' ').unwrap();
            let address = u64::from_str_radix(address, 16).unwrap().wrapping_add(0x20_0000);
            format!("{address:016x} {rest}\n")
        })
        .collect();
    let reports = p.symbolize(&mut Kallsyms(moved.into_bytes()));
    let kernel = reports.iter().find(|r| r.file_name == KERNEL).unwrap();
    let Outcome::OtherKernel { recorded_text, file_text, .. } = kernel.outcome else { panic!("{kernel}") };
    assert_eq!(file_text, recorded_text + 0x20_0000);
    assert!(kernel.to_string().contains("another boot or kernel"), "{kernel}");
    assert!(kernel_locations(&p).iter().all(|(_, names)| names.is_empty()));
}

#[test]
fn kallsyms_with_hidden_addresses_is_an_error_that_says_why() {
    let Some(dir) = fixtures() else { return };
    let mut p = stacklens_core::parse(&read(&dir.join("kernel.perf.data"))).unwrap();
    // What a reader without CAP_SYSLOG sees under kptr_restrict.
    let hidden = "0000000000000000 T _text\n0000000000000000 t read_zero\n";
    let reports = p.symbolize(&mut Kallsyms(hidden.as_bytes().to_vec()));
    let kernel = reports.iter().find(|r| r.file_name == KERNEL).unwrap();
    assert!(matches!(kernel.outcome, Outcome::Error { .. }), "{kernel}");
    assert!(kernel.to_string().contains("kptr_restrict"), "{kernel}");
}
