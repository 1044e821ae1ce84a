//! Writes the profiles that crash other tools (issue 13): a raw pprof of about 300 MB
//! (3,000,000 samples over 1,000,000 locations by default) and a folded-stacks file of
//! about 1 GiB, both from one synthetic program, the same bytes on every run.
//!
//! ```text
//! cargo run --release -p stacklens-backend --example huge -- OUT_DIR \
//!     [--samples N] [--locations N] [--folded-bytes N]
//! cargo run --release -p stacklens-backend --example huge -- OUT_DIR \
//!     --goroutines DUMP [--count N]
//! ```
//!
//! The first writes `OUT_DIR/huge.pb` (uncompressed, as `go tool pprof` and speedscope
//! take it too) and `OUT_DIR/huge.folded`, streaming: memory stays at the string table's
//! size. The second writes `OUT_DIR/goroutines.txt`: the goroutines of a real `debug=2`
//! dump (`../shared/fixtures/large/goroutine.large.debug2.txt`) repeated with new ids
//! until there are N (1,000,000 by default).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// splitmix64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The synthetic program: `locations` code locations, about five to a function, in
/// packages of files; stacks walk down a call tree from eight roots.
struct Program {
    locations: u64,
    functions: u64,
}

impl Program {
    fn new(locations: u64) -> Self {
        Program { locations: locations.max(8), functions: (locations / 5).max(8) }
    }

    fn function_of(&self, location: u64) -> u64 {
        location % self.functions
    }

    fn name(&self, function: u64) -> String {
        let package = function % 997;
        format!("example.com/svc/pkg{package:03}.(*T{}).M{function}", function % 31)
    }

    /// A stack, root first, as 0-based locations: 4 to 46 frames (25 on average). A
    /// caller mostly calls one of its first three callees, so stacks share prefixes as a
    /// real program's do, and an eighth of the time any of 64.
    fn stack(&self, rng: &mut Rng, out: &mut Vec<u64>) {
        out.clear();
        let depth = 4 + rng.below(15) + rng.below(15) + rng.below(15);
        let mut at = rng.below(8);
        out.push(at);
        for _ in 1..depth {
            let callee = if rng.below(8) == 0 { rng.below(64) } else { rng.below(3) };
            at = mix(at.wrapping_mul(64).wrapping_add(callee + 1)) % self.locations;
            out.push(at);
        }
    }
}

fn file_name(package: u64, file: u64) -> String {
    format!("/src/example.com/svc/pkg{package:03}/file{file}.go")
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(field: u64, v: u64, out: &mut Vec<u8>) {
    varint(field << 3, out);
    varint(v, out);
}

fn bytes_field(field: u64, data: &[u8], out: &mut Vec<u8>) {
    varint(field << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

/// What was written, to print and to test against.
#[derive(Debug, PartialEq)]
struct Written {
    bytes: u64,
    samples: u64,
    /// Sum of the first value (sample counts) over the samples or lines.
    total: u64,
}

const PERIOD: u64 = 10_000_000;

/// A `profile.proto` being written: top-level fields, each counted.
struct Encoder {
    file: BufWriter<std::fs::File>,
    bytes: u64,
}

impl Encoder {
    /// Top-level field `field`: the message that `build` writes.
    fn field(&mut self, field: u64, build: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        let (mut inner, mut out) = (Vec::new(), Vec::new());
        build(&mut inner);
        bytes_field(field, &inner, &mut out);
        self.raw(&out)
    }

    fn raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.bytes += bytes.len() as u64;
        self.file.write_all(bytes)
    }
}

/// `profile.proto` with samples first, as Go writes it: two sample types (samples/count,
/// cpu/nanoseconds), one mapping, a line per location, then functions and strings.
fn write_pprof(path: &Path, program: &Program, samples: u64) -> std::io::Result<Written> {
    let mut out = Encoder { file: BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?), bytes: 0 };
    // Strings: fixed ones, then each file, then each function's name.
    const FIXED: [&str; 6] = ["", "samples", "count", "cpu", "nanoseconds", "huge"];
    let files = 997 * 17;
    let file_string = |function: u64| FIXED.len() as u64 + (function % 997) * 17 + function % 17;
    let name_string = |function: u64| FIXED.len() as u64 + files + function;
    let value_type = |kind, unit| {
        move |m: &mut Vec<u8>| {
            varint_field(1, kind, m);
            varint_field(2, unit, m);
        }
    };
    out.field(1, value_type(1, 2))?;
    out.field(1, value_type(3, 4))?;
    let (mut rng, mut stack, mut total) = (Rng(0x5eed), Vec::new(), 0);
    for _ in 0..samples {
        program.stack(&mut rng, &mut stack);
        let count = 1 + rng.below(4);
        total += count;
        out.field(2, |m| {
            let (mut ids, mut values) = (Vec::new(), Vec::new());
            stack.iter().rev().for_each(|&l| varint(l + 1, &mut ids));
            bytes_field(1, &ids, m);
            varint(count, &mut values);
            varint(count * PERIOD, &mut values);
            bytes_field(2, &values, m);
        })?;
    }
    out.field(3, |m| {
        varint_field(1, 1, m);
        varint_field(2, 0x40_0000, m);
        varint_field(3, 0x40_0000 + program.locations * 16 + 16, m);
        varint_field(5, 5, m);
    })?;
    for l in 0..program.locations {
        out.field(4, |m| {
            varint_field(1, l + 1, m);
            varint_field(2, 1, m);
            varint_field(3, 0x40_0000 + l * 16, m);
            let mut line = Vec::new();
            varint_field(1, program.function_of(l) + 1, &mut line);
            varint_field(2, 10 + l % 500, &mut line);
            bytes_field(4, &line, m);
        })?;
    }
    for f in 0..program.functions {
        out.field(5, |m| {
            varint_field(1, f + 1, m);
            varint_field(2, name_string(f), m);
            varint_field(3, name_string(f), m);
            varint_field(4, file_string(f), m);
        })?;
    }
    let strings = FIXED
        .iter()
        .map(|s| s.to_string())
        .chain((0..files).map(|i| file_name(i / 17, i % 17)))
        .chain((0..program.functions).map(|f| program.name(f)));
    for s in strings {
        let mut m = Vec::new();
        bytes_field(6, s.as_bytes(), &mut m);
        out.raw(&m)?;
    }
    out.field(11, value_type(3, 4))?;
    let mut period = Vec::new();
    varint_field(12, PERIOD, &mut period);
    out.raw(&period)?;
    out.file.flush()?;
    Ok(Written { bytes: out.bytes, samples, total })
}

/// Folded stacks (`a;b;c 3`), root first, until `target` bytes are written.
fn write_folded(path: &Path, program: &Program, target: u64) -> std::io::Result<Written> {
    let mut file = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut written = Written { bytes: 0, samples: 0, total: 0 };
    let (mut rng, mut stack, mut line) = (Rng(0xf01d), Vec::new(), String::new());
    while written.bytes < target {
        program.stack(&mut rng, &mut stack);
        let count = 1 + rng.below(4);
        line.clear();
        for (i, &l) in stack.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            line.push_str(&program.name(program.function_of(l)));
        }
        line.push_str(&format!(" {count}\n"));
        file.write_all(line.as_bytes())?;
        written.bytes += line.len() as u64;
        written.samples += 1;
        written.total += count;
    }
    file.flush()?;
    Ok(written)
}

/// Goroutine blocks of a `debug=2` dump, repeated in order with ids 1..=count.
fn write_goroutines(path: &Path, dump: &str, count: u64) -> std::io::Result<Written> {
    let blocks: Vec<&str> = dump
        .split("\n\n")
        .filter_map(|b| b.trim_matches('\n').strip_prefix("goroutine "))
        .filter_map(|b| b.split_once(' ').map(|(_, rest)| rest))
        .collect();
    if blocks.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "no goroutine blocks in the dump"));
    }
    let mut file = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut bytes = 0;
    for (id, block) in (1..=count).zip(blocks.iter().cycle()) {
        let text = format!("goroutine {id} {block}\n\n");
        file.write_all(text.as_bytes())?;
        bytes += text.len() as u64;
    }
    file.flush()?;
    Ok(Written { bytes, samples: count, total: count })
}

struct Args {
    out: PathBuf,
    samples: u64,
    locations: u64,
    folded_bytes: u64,
    goroutines: Option<PathBuf>,
    count: u64,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        out: PathBuf::new(),
        samples: 3_000_000,
        locations: 1_000_000,
        folded_bytes: 1 << 30,
        goroutines: None,
        count: 1_000_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut number = |what: &str| -> Result<u64, String> {
            it.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{what} needs a number"))
        };
        match arg.as_str() {
            "--samples" => args.samples = number("--samples")?,
            "--locations" => args.locations = number("--locations")?,
            "--folded-bytes" => args.folded_bytes = number("--folded-bytes")?,
            "--count" => args.count = number("--count")?,
            "--goroutines" => args.goroutines = Some(it.next().ok_or("--goroutines needs a dump")?.into()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg}")),
            _ => args.out = PathBuf::from(arg),
        }
    }
    if args.out.as_os_str().is_empty() {
        return Err("usage: huge OUT_DIR [--samples N] [--locations N] [--folded-bytes N]\n       \
                    huge OUT_DIR --goroutines DUMP [--count N]"
            .into());
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    let run = || -> Result<(), String> {
        let args = args()?;
        std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
        if let Some(dump) = &args.goroutines {
            let text = std::fs::read_to_string(dump).map_err(|e| format!("{}: {e}", dump.display()))?;
            let path = args.out.join("goroutines.txt");
            let w = write_goroutines(&path, &text, args.count).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("{}: {} bytes, {} goroutines", path.display(), w.bytes, w.samples);
            return Ok(());
        }
        let program = Program::new(args.locations);
        let (pprof, folded) = (args.out.join("huge.pb"), args.out.join("huge.folded"));
        let w = write_pprof(&pprof, &program, args.samples).map_err(|e| format!("{}: {e}", pprof.display()))?;
        println!("{}: {} bytes, {} samples, {} locations", pprof.display(), w.bytes, w.samples, program.locations);
        let w = write_folded(&folded, &program, args.folded_bytes).map_err(|e| format!("{}: {e}", folded.display()))?;
        println!("{}: {} bytes, {} lines, {} samples in all", folded.display(), w.bytes, w.samples, w.total);
        Ok(())
    };
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("huge: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small versions of both files read back with every sample, value and name, and
    /// the same bytes from a second run.
    #[test]
    fn small_files_parse_back_whole_and_repeat() {
        let dir = std::env::temp_dir().join(format!("stacklens-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let program = Program::new(3_000);
        let pprof = write_pprof(&dir.join("a.pb"), &program, 2_000).unwrap();
        let bytes = std::fs::read(dir.join("a.pb")).unwrap();
        assert_eq!(bytes.len() as u64, pprof.bytes);
        let p = stacklens_core::parse(&bytes).unwrap();
        assert_eq!((p.samples.len(), p.locations.len(), p.functions.len()), (2_000, 3_000, 600));
        assert_eq!(p.total(0), pprof.total as i64);
        assert_eq!(p.total(1), (pprof.total * PERIOD) as i64);
        assert!(p.samples.iter().all(|s| (4..=46).contains(&s.locations.len())));
        let leaf = p.location(p.samples.sample(0).locations[0]);
        let function = p.function(leaf.lines[0].function);
        let index = (leaf.address - 0x40_0000) / 16;
        assert_eq!(p.str(function.name), program.name(program.function_of(index)));
        let f = program.function_of(index);
        assert_eq!(p.str(function.filename), file_name(f % 997, f % 17));
        write_pprof(&dir.join("b.pb"), &program, 2_000).unwrap();
        assert_eq!(bytes, std::fs::read(dir.join("b.pb")).unwrap());

        let folded = write_folded(&dir.join("a.folded"), &program, 200_000).unwrap();
        let text = std::fs::read(dir.join("a.folded")).unwrap();
        let p = stacklens_core::parse(&text).unwrap();
        assert_eq!(p.source, stacklens_core::model::SourceFormat::Folded);
        // Identical stacks become one sample.
        assert!(p.samples.len() as u64 <= folded.samples && p.samples.len() as u64 > folded.samples / 2);
        assert_eq!(p.total(0), folded.total as i64);

        let dump = "goroutine 1 [running]:\nmain.main()\n\t/src/main.go:7 +0x1d\n\n\
                    goroutine 8 [chan receive, 2 minutes]:\nmain.worker(0x0?)\n\t/src/w.go:12 +0x3b\n\
                    created by main.main\n\t/src/main.go:5 +0x25\n";
        write_goroutines(&dir.join("g.txt"), dump, 5).unwrap();
        let p = stacklens_core::parse(&std::fs::read(dir.join("g.txt")).unwrap()).unwrap();
        let ids: Vec<u64> = p.goroutines.iter().map(|g| g.id).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5]);
        let states: Vec<&str> = p.goroutines.iter().map(|g| p.str(g.state)).collect();
        assert_eq!(states, ["running", "chan receive", "running", "chan receive", "running"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
