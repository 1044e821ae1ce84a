//! Symbolizes every address of a file against one binary, once, and prints the time:
//! the native side of `scripts/bench-symbols.sh`, which runs llvm-symbolizer and
//! binutils addr2line on the same addresses. Not a test: it needs its inputs.
//!
//! `STACKLENS_BENCH_BINARY=BIN STACKLENS_BENCH_ADDRESSES=FILE cargo bench -p stacklens-core --bench symbols`
//! (FILE: one hex address a line; looked up each once in address order, as a profile's
//! locations are, sorting included in the time). Prints the frames to `$STACKLENS_BENCH_OUTPUT` when
//! set, as `addr2line -f -i` does, so the script can check they agree.

use std::io::Write;
use std::time::Instant;

use stacklens_core::symbols::{AddressLookup, ObjectFile};

fn main() {
    let (Some(binary), Some(addresses)) =
        (std::env::var_os("STACKLENS_BENCH_BINARY"), std::env::var_os("STACKLENS_BENCH_ADDRESSES"))
    else {
        eprintln!(
            "symbols bench: set STACKLENS_BENCH_BINARY and STACKLENS_BENCH_ADDRESSES (see scripts/bench-symbols.sh)"
        );
        return;
    };
    let text = std::fs::read_to_string(addresses).expect("reading the addresses");
    let addresses: Vec<u64> = text
        .lines()
        .map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).expect("a hex address"))
        .collect();
    let started = Instant::now();
    // As `Profile::symbolize` looks a mapping's addresses up: each once, in address order.
    let mut addresses = addresses;
    addresses.sort_unstable();
    addresses.dedup();
    let bytes = std::fs::read(binary).expect("reading the binary");
    let file = ObjectFile::parse(&bytes[..]).expect("an ELF file");
    let parsed = started.elapsed();
    let mut out = std::env::var_os("STACKLENS_BENCH_OUTPUT")
        .map(|path| std::io::BufWriter::new(std::fs::File::create(path).expect("creating the output")));
    let mut frames = 0usize;
    for &address in &addresses {
        let found = file.lookup(address).expect("a lookup");
        frames += found.len();
        if let Some(out) = &mut out {
            for f in &found {
                let file = f.file.as_deref().unwrap_or("??");
                writeln!(out, "{}\n{file}:{}", f.name, f.line).expect("writing");
            }
        }
    }
    let elapsed = started.elapsed();
    println!(
        "stacklens: {} addresses, {frames} frames in {:.2} s ({:.2} s of it reading and parsing the file), {:.0} addresses/s",
        addresses.len(),
        elapsed.as_secs_f64(),
        parsed.as_secs_f64(),
        addresses.len() as f64 / elapsed.as_secs_f64()
    );
}
