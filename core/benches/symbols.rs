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

use stacklens_core::symbols::{read_shared, AddressLookup, ObjectFile};

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
        .map(str::trim)
        .map(|l| u64::from_str_radix(l.strip_prefix("0x").unwrap_or(l), 16).expect("a hex address"))
        .collect();
    let started = Instant::now();
    // As `Profile::symbolize` looks a mapping's addresses up: each once, in address order.
    let mut addresses = addresses;
    addresses.sort_unstable();
    addresses.dedup();
    // As the CLI reads a symbol file: once, whole, its DWARF then read in place.
    let opened = std::fs::File::open(binary).expect("opening the binary");
    let len = opened.metadata().expect("the binary's size").len();
    let file = ObjectFile::from_bytes(read_shared(opened, len).expect("reading the binary")).expect("an ELF file");
    let parsed = started.elapsed();
    let mut out = std::env::var_os("STACKLENS_BENCH_OUTPUT")
        .map(|path| std::io::BufWriter::new(std::fs::File::create(path).expect("creating the output")));
    // Every frame's name and file are read (their lengths summed), as a caller that
    // interns or prints them would.
    let (mut frames, mut name_bytes) = (0usize, 0usize);
    for &address in &addresses {
        file.each_frame(address, &mut |f| {
            frames += 1;
            name_bytes += f.name.len() + f.file.map_or(0, str::len);
            if let Some(out) = &mut out {
                writeln!(out, "{}\n{}:{}", f.name, f.file.unwrap_or("??"), f.line).expect("writing");
            }
        })
        .expect("a lookup");
    }
    let elapsed = started.elapsed();
    println!(
        "stacklens: {} addresses, {frames} frames ({name_bytes} bytes of names and files) in {:.2} s ({:.2} s of it reading and parsing the file), {:.0} addresses/s",
        addresses.len(),
        elapsed.as_secs_f64(),
        parsed.as_secs_f64(),
        addresses.len() as f64 / elapsed.as_secs_f64()
    );
}
