#![allow(dead_code)] // Each including test uses the helpers it needs.

//! What the symbolization tests share: the addresses perf sampled in a fixture
//! program, and the frames the reference tools (`addr2line`, `llvm-symbolizer`) print.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use super::{missing_prerequisite, read};

/// (function, file, line) of one frame, as the reference tools print it.
pub type Frame = (String, String, u32);

/// The file offsets perf recorded in `program`'s own code, each as a leaf and, when it
/// follows a call, the call instruction (offset − 1).
pub fn sampled_offsets(root: &Path, program: &str) -> BTreeSet<u64> {
    let script = String::from_utf8(read(&root.join(format!("{program}.perf-script.txt")))).unwrap();
    let dso = format!("/bin/{program}.stripped)");
    let mut offsets = BTreeSet::new();
    let mut first_in_record = true;
    for line in script.lines() {
        if !line.starts_with('\t') {
            first_in_record = true;
            continue;
        }
        if line.trim_end().ends_with(&dso) {
            let hex = line.split_whitespace().next().unwrap();
            let offset = u64::from_str_radix(hex, 16).unwrap();
            offsets.insert(if first_in_record { offset } else { offset - 1 });
        }
        first_in_record = false;
    }
    offsets
}

pub fn tool_available(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        missing_prerequisite(&format!("{tool} (binutils / llvm) for reference symbolization"));
    }
    found
}

/// Reads the frames a tool printed for each address: with `-a`/`--output-style=GNU`
/// each address is a line `0x…` followed by function/`file:line` pairs.
pub fn read_pairs(text: &str) -> Vec<Vec<Frame>> {
    let mut out: Vec<Vec<Frame>> = Vec::new();
    let mut lines = text.lines().filter(|l| !l.is_empty());
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            out.push(Vec::new());
            continue;
        }
        let place = lines.next().unwrap_or("??:0");
        let place = place.split(" (discriminator").next().unwrap();
        let (file, number) = place.rsplit_once(':').unwrap_or((place, "0"));
        out.last_mut().unwrap().push((line.to_owned(), file.to_owned(), number.parse().unwrap_or(0)));
    }
    out
}

/// The frames `tool` (`addr2line` or `llvm-symbolizer`) prints for each of `addresses`,
/// names mangled or, with `demangled`, demangled (`-C`, `--demangle`).
pub fn reference(tool: &str, binary: &Path, addresses: &[u64], demangled: bool) -> Vec<Vec<Frame>> {
    let mut command = Command::new(tool);
    match tool {
        "addr2line" => command.args(["-a", "-f", "-i"]).args(demangled.then_some("-C")).arg("-e").arg(binary),
        _ => command
            .args(["--output-style=GNU", "--print-address", "--functions=linkage", "--inlines"])
            .arg(if demangled { "--demangle" } else { "--no-demangle" })
            .arg("--obj")
            .arg(binary),
    };
    command.args(addresses.iter().map(|a| format!("0x{a:x}")));
    let out = command.output().unwrap_or_else(|e| panic!("running {tool}: {e}"));
    assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
    read_pairs(&String::from_utf8(out.stdout).unwrap())
}
