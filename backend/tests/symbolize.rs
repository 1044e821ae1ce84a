//! `stacklens symbolize` and `--symbols` / `--debuginfod` end to end, against the real
//! tools on the same inputs: `perf report` on the perf.data that the perf-script text
//! came from (a stripped Go binary named from its pclntab alone included), `go tool
//! pprof -symbolize=local` on gperftools' profile, and a real
//! debuginfod (elfutils) serving the debug file.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{free_port, go, missing_prerequisite, read_pprof_top, symbol_fixtures, temp_dir, until};

/// The symbol fixtures (`tests/programs/make.sh`) and a fresh folder named after the test.
fn setup(name: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    Some((symbol_fixtures()?, temp_dir(name)))
}

fn stacklens(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_stacklens"))
        .args(args)
        .env_remove("PPROF_BINARY_PATH")
        .env_remove("DEBUGINFOD_URLS")
        .envs(env.iter().copied())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Each physical function's (flat %, cum %) of sample type `value`, as `perf report`
/// counts them without `--inline` and Go's `pprof` names C code: a location's function
/// is its outermost line's.
fn physical_shares(pprof: &Path, value: Value) -> BTreeMap<String, (String, String)> {
    let p = stacklens_core::parse(&std::fs::read(pprof).unwrap()).unwrap();
    let physical = |l: &stacklens_core::model::LocationId| {
        let location = p.location(*l);
        match location.lines.last() {
            Some(line) => p.str(p.function(line.function).name).to_owned(),
            None => p.unsymbolized_name(location),
        }
    };
    let (mut flat, mut cum, mut total) = (BTreeMap::<String, i64>::new(), BTreeMap::<String, i64>::new(), 0);
    for sample in p.samples.iter() {
        let n = sample.values[match value {
            Value::First => 0,
            Value::Last => sample.values.len() - 1,
        }];
        total += n;
        if let Some(leaf) = sample.locations.first() {
            *flat.entry(physical(leaf)).or_default() += n;
        }
        for name in sample.locations.iter().map(physical).collect::<BTreeSet<_>>() {
            *cum.entry(name).or_default() += n;
        }
    }
    let pct = |v: i64| format!("{:.2}", v as f64 * 100.0 / total as f64);
    cum.into_iter()
        .map(|(name, c)| (pct(flat.get(&name).copied().unwrap_or(0)), name, pct(c)))
        .map(|(f, n, c)| (n, (f, c)))
        .collect()
}

/// Which of a sample's values to count: perf report's samples or pprof's default, the last.
#[derive(Clone, Copy)]
enum Value {
    First,
    Last,
}

/// `perf report --children` rows: symbol → (self %, children %).
fn perf_report(data: &Path) -> Option<BTreeMap<String, (String, String)>> {
    let out = Command::new("perf")
        .args(["report", "--stdio", "--children", "--sort", "sym", "-g", "none", "-i"])
        .arg(data)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        missing_prerequisite("perf (Debian linux-perf) for perf report");
        return None;
    };
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = text.lines().filter(|l| !l.starts_with('#') && l.contains("%  [.] ")).map(|l| {
        let t: Vec<&str> = l.split_whitespace().collect();
        (t[3..].join(" "), (t[1].trim_end_matches('%').to_owned(), t[0].trim_end_matches('%').to_owned()))
    });
    Some(rows.collect())
}

#[test]
fn perf_script_symbolized_from_a_folder_has_perf_reports_flat_and_cum() {
    let Some((f, dir)) = setup("symbolize-perf") else { return };
    let bin = f.join("bin");
    // PIE and fixed-address (with compressed DWARF). perf names C++, Rust and Go
    // functions in its own spellings (its demangler, Go's `.abi0` symbols), so those are
    // compared with addr2line and llvm-symbolizer in core/tests/symbols_lookup.rs.
    for program in ["symwork-c", "symwork-c-nopie"] {
        let Some(expected) = perf_report(&f.join(format!("{program}.perf.data"))) else { return };
        let out = dir.join(format!("{program}.pb.gz"));
        let script = f.join(format!("{program}.perf-script.txt"));
        let (script, bin) = (script.to_str().unwrap(), bin.to_str().unwrap());
        let run = stacklens(&["symbolize", script, "-o", out.to_str().unwrap(), "--symbols", bin], &[]);
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(said.contains(&format!("{program}.stripped:")) && said.contains("symbolized from"), "{said}");
        // Every function perf reports, with its self and children shares, and no other.
        let ours: BTreeMap<_, _> =
            physical_shares(&out, Value::First).into_iter().filter(|(_, (_, c))| c != "0.00").collect();
        // A frame with no mapping and no name (a frame-pointer walk that ran off the
        // stack): perf prints its address, stacklens `<unknown>`.
        let mut expected = expected;
        let unnamed: Vec<String> =
            expected.keys().filter(|k| k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit())).cloned().collect();
        if let [only] = &unnamed[..] {
            let shares = expected.remove(only).unwrap();
            expected.insert("<unknown>".into(), shares);
        }
        assert_eq!(ours, expected, "{program}");
        for name in ["sieve", "integrate", "hash_block"] {
            assert!(expected.contains_key(name), "perf report names {name}: {expected:?}");
        }
        // And `top` with the same flag shows the program's functions by name.
        let top = String::from_utf8(stacklens(&["top", script, "--symbols", bin], &[]).stdout).unwrap();
        assert!(top.contains("sieve") && top.contains("integrate") && top.contains("hash_block"), "{top}");
        assert!(!top.contains(&format!("[{program}.stripped]")), "{top}");
    }
}

#[test]
fn a_pipe_mode_recording_read_from_standard_input_has_perf_reports_self_shares() {
    let Some((f, dir)) = setup("symbolize-pipe") else { return };
    // `perf record -o - | perf inject -b`, as `perf record -o - | stacklens symbolize -` reads it.
    let data = f.join("symwork-c.pipe.perf.data");
    // perf report gives a pipe's self shares only (it shows no children column for one).
    let Some(expected) = perf_report_self(&data, "[.]") else { return };
    let out = dir.join("pipe.pb.gz");
    let run = Command::new(env!("CARGO_BIN_EXE_stacklens"))
        .args(["symbolize", "-", "-o", out.to_str().unwrap(), "--symbols", f.join("bin").to_str().unwrap()])
        .env_remove("PPROF_BINARY_PATH")
        .env_remove("DEBUGINFOD_URLS")
        .stdin(std::fs::File::open(&data).unwrap())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{said}");
    // The build id came from the pipe's HEADER_BUILD_ID records and was checked.
    assert!(said.contains("symwork-c.stripped: ") && said.contains("symbolized from"), "{said}");
    let ours: BTreeMap<_, _> = physical_shares(&out, Value::First)
        .into_iter()
        .filter(|(_, (f, _))| f != "0.00")
        .map(|(n, (f, _))| (n, f))
        .collect();
    assert_eq!(ours, expected);
    assert!(expected.contains_key("sieve") && expected.contains_key("hash_block"), "{expected:?}");
}

/// `perf report --no-children` rows of one kind (`[.]` user, `[k]` kernel): symbol → self %.
fn perf_report_self(data: &Path, kind: &str) -> Option<BTreeMap<String, String>> {
    let out =
        Command::new("perf").args(["report", "--stdio", "--no-children", "--sort", "sym", "-i"]).arg(data).output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        missing_prerequisite("perf (Debian linux-perf) for perf report");
        return None;
    };
    let rows = String::from_utf8(out.stdout).unwrap();
    let rows = rows.lines().filter(|l| !l.starts_with('#') && l.contains(&format!("%  {kind} "))).map(|l| {
        let t: Vec<&str> = l.split_whitespace().collect();
        (t[2..].join(" "), t[0].trim_end_matches('%').to_owned())
    });
    Some(rows.collect())
}

#[test]
fn kernel_frames_named_from_kallsyms_have_perf_reports_self_shares() {
    let Some((f, dir)) = setup("symbolize-kernel") else { return };
    if let Ok(why) = std::fs::read_to_string(f.join("kernel.absent")) {
        return missing_prerequisite(&format!("a recording of the kernel: {}", why.trim()));
    }
    let data = f.join("kernel.perf.data");
    let Some(expected) = perf_report_self(&data, "[k]") else { return };
    let out = dir.join("kernel.pb.gz");
    let kallsyms = f.join("kallsyms");
    let run = stacklens(
        &["symbolize", data.to_str().unwrap(), "-o", out.to_str().unwrap(), "--symbols", kallsyms.to_str().unwrap()],
        &[],
    );
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(said.contains("[kernel.kallsyms]: ") && said.contains("symbolized from"), "{said}");
    let ours = physical_shares(&out, Value::First);
    for (name, share) in &expected {
        assert_eq!(ours.get(name).map(|(flat, _)| flat), Some(share), "{name}");
    }
    assert!(expected.contains_key("read_zero"), "{expected:?}");
}

#[test]
fn symbolized_gperftools_profile_shows_what_pprof_symbolize_local_shows() {
    let Some((f, dir)) = setup("symbolize-gperftools") else { return };
    let Some(go) = go() else { return };
    let out = dir.join("c.pb.gz");
    let input = f.join("symwork-c.gperftools.prof");
    let bin = f.join("bin");
    stacklens(
        &["symbolize", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--symbols", bin.to_str().unwrap()],
        &[],
    );
    // pprof finds binaries by the mapping's base name and reads no debug link: it gets
    // the unstripped binary under the stripped one's name.
    let binaries = dir.join("binaries");
    std::fs::create_dir_all(&binaries).unwrap();
    std::os::unix::fs::symlink(bin.join("symwork-c"), binaries.join("symwork-c.stripped")).unwrap();
    let pprof = |file: &Path, symbolize: &str, path: &Path| {
        let out = Command::new(go)
            // Every node: a function of a few samples is not left out as pprof's -top would.
            .args(["tool", "pprof", symbolize, "-top", "-nodefraction=0"])
            .arg(file)
            .env("PPROF_BINARY_PATH", path)
            .env("PPROF_TMPDIR", &dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        read_pprof_top(&String::from_utf8(out.stdout).unwrap())
    };
    // Go's pprof names C code by the DWARF subprogram around each address, with no
    // inlined frames: stacklens's functions are compared as physical functions, each with
    // pprof's flat and cum shares.
    let theirs = pprof(&input, "-symbolize=local", &binaries);
    let theirs: BTreeMap<String, (String, String)> = theirs
        .rows
        .iter()
        .map(|r| (r.name.clone(), (format!("{:.2}", r.flat_pct), format!("{:.2}", r.cum_pct))))
        .collect();
    let ours = physical_shares(&out, Value::Last);
    // The program's functions: pprof names them, with the same flat and cum. (libc it
    // leaves as `[libc.so.6]`, which stacklens names from the system's libc.)
    let program: Vec<_> = theirs.iter().filter(|(name, _)| !name.starts_with('[')).collect();
    assert!(program.len() >= 3, "{theirs:?}");
    for (name, values) in program {
        assert_eq!(ours.get(name), Some(values), "{name}: ours {ours:?}");
    }
    // And stacklens's own top names the program's frames, inlined ones included.
    let ours = pprof(&out, "-symbolize=none", Path::new("/nonexistent"));
    let ours: BTreeMap<String, String> = ours.rows.into_iter().map(|r| (r.name, r.flat)).collect();
    assert!(ours.contains_key("strike") && ours.contains_key("curve"), "{ours:?}");
    assert!(!ours.contains_key("[symwork-c.stripped]"), "{ours:?}");
}

#[test]
fn a_stripped_go_binary_alone_names_what_perf_report_names_from_its_debug_file() {
    let Some((f, dir)) = setup("symbolize-go-pclntab") else { return };
    let Some(expected) = perf_report(&f.join("symwork-go.perf.data")) else { return };
    // The stripped binary without its debug file: only its .gopclntab names it.
    std::fs::copy(f.join("bin/symwork-go.stripped"), dir.join("symwork-go.stripped")).unwrap();
    let out = dir.join("go.pb.gz");
    let script = f.join("symwork-go.perf-script.txt");
    let (script, symbols) = (script.to_str().unwrap(), dir.to_str().unwrap());
    let run = stacklens(&["symbolize", script, "-o", out.to_str().unwrap(), "--symbols", symbols], &[]);
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(said.contains("symwork-go.stripped:") && said.contains("symbolized from"), "{said}");
    let ours = physical_shares(&out, Value::First);
    // The program's and sort's functions, each with perf's self and children shares.
    // (perf names some runtime frames after a data symbol, `runtime.work+0x1a5` where
    // `go tool addr2line` names `runtime.gcBgMarkWorker.func2`, or leaves them as hex,
    // which moves their samples' runtime shares.)
    let mut compared = 0;
    for (name, values) in expected.iter().filter(|(name, _)| name.starts_with("main.") || name.starts_with("sort.")) {
        assert_eq!(ours.get(name), Some(values), "{name}: ours {ours:?}");
        compared += 1;
    }
    assert!(compared >= 10, "{expected:?}");
    for name in ["main.integrate", "main.(*block).hash", "main.countKeys", "main.sortedMedian.func1"] {
        assert!(expected.contains_key(name), "perf report names {name}: {expected:?}");
    }
    let top = String::from_utf8(stacklens(&["top", script, "--symbols", symbols], &[]).stdout).unwrap();
    assert!(top.contains("main.countKeys") && !top.contains("[symwork-go.stripped]"), "{top}");
}

/// A debuginfod (elfutils) serving `dir` on 127.0.0.1, stopped when dropped.
struct Debuginfod(Child);

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn debuginfod_serves_the_debug_file_of_a_stripped_binary() {
    let Some((f, dir)) = setup("symbolize-debuginfod") else { return };
    // Only the stripped binary where the profile says it ran: no debug file beside it.
    let ran = dir.join("ran");
    let served = dir.join("served");
    std::fs::create_dir_all(&ran).unwrap();
    std::fs::create_dir_all(&served).unwrap();
    std::fs::copy(f.join("bin/symwork-c.stripped"), ran.join("symwork-c.stripped")).unwrap();
    std::fs::copy(f.join("bin/symwork-c.debug"), served.join("symwork-c.debug")).unwrap();
    let script = std::fs::read_to_string(f.join("symwork-c.perf-script.txt")).unwrap();
    let original = f.join("bin/symwork-c.stripped").canonicalize().unwrap().display().to_string();
    assert!(script.contains(&original), "the profile names {original}");
    let moved = ran.join("symwork-c.stripped").display().to_string();
    let script_path = dir.join("c.perf-script.txt");
    std::fs::write(&script_path, script.replace(&original, &moved)).unwrap();

    let port = free_port();
    let started = Command::new("debuginfod")
        .args(["-F", "-p", &port.to_string(), "-d"])
        .arg(dir.join("debuginfod.sqlite"))
        .arg(&served)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = started else { return missing_prerequisite("debuginfod (Debian debuginfod)") };
    let _server = Debuginfod(child);
    let url = format!("http://127.0.0.1:{port}");
    let id = stacklens_core::symbols::ObjectFile::parse(&std::fs::read(f.join("bin/symwork-c.debug")).unwrap()[..])
        .unwrap()
        .build_id_hex()
        .unwrap();
    let client = reqwest::blocking::Client::new();
    until("debuginfod to index the folder", Duration::from_secs(60), || {
        let r = client.get(format!("{url}/buildid/{id}/debuginfo")).send().ok()?;
        r.status().is_success().then_some(())
    });
    let cache = dir.join("cache");
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let top = stacklens(&["top", script_path.to_str().unwrap(), "--debuginfod", &url], &env);
    let text = String::from_utf8(top.stdout).unwrap();
    assert!(text.contains("sieve") && text.contains("hash_block"), "{text}\n{}", String::from_utf8_lossy(&top.stderr));
    let said = String::from_utf8_lossy(&top.stderr);
    assert!(said.contains(&format!("{url}/buildid/{id}/debuginfo")), "{said}");
    // Cached: the same names with the server gone, and DEBUGINFOD_URLS is honoured.
    drop(_server);
    let again = stacklens(&["top", script_path.to_str().unwrap()], &[env[0], ("DEBUGINFOD_URLS", &url)]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(String::from_utf8_lossy(&again.stdout).contains("sieve"), "{said}");
}

#[test]
fn a_debug_file_alone_names_a_binary_that_is_not_here() {
    let Some((f, dir)) = setup("symbolize-debug-alone") else { return };
    for program in ["symwork-c", "symwork-c-nopie"] {
        // The profile names a binary that is on no disk here (another host's path).
        let ran = f.join(format!("bin/{program}.stripped")).canonicalize().unwrap().display().to_string();
        let script = std::fs::read_to_string(f.join(format!("{program}.perf-script.txt"))).unwrap();
        assert!(script.contains(&ran), "the profile names {ran}");
        let moved = dir.join(format!("{program}.perf-script.txt"));
        std::fs::write(&moved, script.replace(&ran, &format!("/elsewhere/{program}"))).unwrap();
        let debug = f.join(format!("bin/{program}.debug"));
        let top = stacklens(&["top", moved.to_str().unwrap(), "--symbols", debug.to_str().unwrap()], &[]);
        let text = String::from_utf8(top.stdout).unwrap();
        assert!(text.contains("sieve") && text.contains("integrate"), "{program}:\n{text}");
        assert!(!text.contains(&format!("[{program}]")), "{program}:\n{text}");
    }
}

#[test]
fn a_breakpad_sym_file_names_a_binary_that_is_not_here() {
    let Some((f, dir)) = setup("symbolize-breakpad") else { return };
    // As above: the profile names a binary on another host, here only its .sym file.
    let ran = f.join("bin/symwork-c.stripped").canonicalize().unwrap().display().to_string();
    let script = std::fs::read_to_string(f.join("symwork-c.perf-script.txt")).unwrap();
    let moved = dir.join("symwork-c.perf-script.txt");
    std::fs::write(&moved, script.replace(&ran, "/elsewhere/symwork-c")).unwrap();
    let sym = f.join("sym/symwork-c.sym");
    // Given by name, and found in a folder by the mapping's name.
    for given in [sym.clone(), f.join("sym")] {
        let top = stacklens(&["top", moved.to_str().unwrap(), "--symbols", given.to_str().unwrap()], &[]);
        let (text, said) = (String::from_utf8(top.stdout).unwrap(), String::from_utf8_lossy(&top.stderr));
        assert!(said.contains("symbolized from") && said.contains("symwork-c.sym"), "{said}");
        for name in ["sieve", "integrate", "hash_block"] {
            assert!(text.contains(name), "{}:\n{text}", given.display());
        }
        assert!(!text.contains("[symwork-c]"), "{text}");
    }
    // And in Breakpad's symbol-store layout, NAME/DEBUGID/NAME.sym, by the build id a
    // profile with build ids (perf.data) gives.
    let text = std::fs::read_to_string(&sym).unwrap();
    let debug_id = text.lines().next().and_then(|module| module.split(' ').nth(3)).unwrap();
    let store = dir.join("store").join("symwork-c.stripped").join(debug_id);
    std::fs::create_dir_all(&store).unwrap();
    std::fs::copy(&sym, store.join("symwork-c.stripped.sym")).unwrap();
    let data = f.join("symwork-c.perf.data");
    let store = dir.join("store");
    let top = stacklens(&["top", data.to_str().unwrap(), "--symbols", store.to_str().unwrap()], &[]);
    let (text, said) = (String::from_utf8(top.stdout).unwrap(), String::from_utf8_lossy(&top.stderr));
    assert!(said.contains("symbolized from") && said.contains(".sym"), "{said}");
    assert!(text.contains("sieve") && text.contains("hash_block"), "{text}");
}
