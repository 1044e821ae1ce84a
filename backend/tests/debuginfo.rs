//! Debug files on the server: uploads by build id, the debuginfod protocol answered to
//! elfutils' own client (`debuginfod-find`), and a real upstream `debuginfod` (elfutils)
//! whose files the server fetches and keeps; an upstream that hangs is asked once.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{free_port, json_of, missing_prerequisite, symbol_fixtures, temp_dir, until, Server};

/// The GNU build id of an ELF file, as binutils' `readelf -n` prints it.
fn readelf_build_id(path: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(path).output().expect("readelf (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).expect("a build id note").trim().to_owned()
}

fn put(server: &Server, id: &str, bytes: Vec<u8>) -> (u16, serde_json::Value) {
    let url = format!("{}/api/v1/debuginfo/{id}", server.base);
    json_of(reqwest::blocking::Client::new().put(url).body(bytes).send().unwrap())
}

fn get(server: &Server, path: &str) -> (u16, Vec<u8>) {
    let r = reqwest::blocking::get(format!("{}{path}", server.base)).unwrap();
    (r.status().as_u16(), r.bytes().unwrap().to_vec())
}

#[test]
fn uploads_are_checked_by_build_id_and_served_as_debuginfod_serves_them() {
    let Some(dir) = symbol_fixtures() else { return };
    let store = temp_dir("debuginfo");
    let server = Server::start(store.to_str().unwrap(), &[], &[]);
    let (stripped, debug) = (dir.join("bin/symwork-c.stripped"), dir.join("bin/symwork-c.debug"));
    let id = readelf_build_id(&stripped);
    let debug_bytes = std::fs::read(&debug).unwrap();

    let (status, body) = put(&server, &id, debug_bytes.clone());
    assert_eq!((status, body["artifacts"].clone()), (201, serde_json::json!(["debuginfo"])), "{body}");
    let (status, body) = put(&server, &id.to_uppercase(), std::fs::read(&stripped).unwrap());
    assert_eq!((status, body["artifacts"].clone()), (201, serde_json::json!(["executable"])), "{body}");

    // Another program's file under this id, a file that is no binary, and an id that is none.
    let other = std::fs::read(dir.join("bin/symwork-cpp.debug")).unwrap();
    let (status, body) = put(&server, &id, other);
    assert_eq!((status, body["error_code"].as_str()), (422, Some("BuildIdMismatch")), "{body}");
    assert_eq!(body["details"]["fileBuildId"], readelf_build_id(&dir.join("bin/symwork-cpp")));
    let (status, body) = put(&server, &id, b"\x7fELF but not really".to_vec());
    assert_eq!((status, body["error_code"].as_str()), (400, Some("NotAnObjectFile")), "{body}");
    let (status, body) = put(&server, "xyz", debug_bytes.clone());
    assert_eq!((status, body["error_code"].as_str()), (400, Some("InvalidParameter")), "{body}");

    assert_eq!(get(&server, &format!("/buildid/{id}/debuginfo")), (200, debug_bytes.clone()));
    assert_eq!(get(&server, &format!("/buildid/{id}/executable")).1, std::fs::read(&stripped).unwrap());
    assert_eq!(get(&server, &format!("/buildid/{id}/source/x.c")).0, 404);
    assert_eq!(get(&server, &format!("/buildid/{}/debuginfo", "ab".repeat(20))).0, 404);

    // elfutils' own client, against stacklens as its debuginfod.
    if which("debuginfod-find").is_none() {
        return missing_prerequisite("debuginfod-find (Debian package debuginfod)");
    }
    let cache = temp_dir("debuginfod-client");
    let out = Command::new("debuginfod-find")
        .args(["debuginfo", &id])
        .env("DEBUGINFOD_URLS", &server.base)
        .env("DEBUGINFOD_CACHE_PATH", &cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "debuginfod-find: {}", String::from_utf8_lossy(&out.stderr));
    let path = String::from_utf8(out.stdout).unwrap();
    assert_eq!(std::fs::read(path.trim()).unwrap(), debug_bytes);
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// Debian's elfutils `debuginfod`, serving the ELF files under `dir`; killed when dropped.
struct Debuginfod(Child);

impl Drop for Debuginfod {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_debuginfod(dir: &Path, port: u16) -> Debuginfod {
    let db = temp_dir("debuginfod-db").join("db.sqlite");
    let child = Command::new("debuginfod")
        .args(["-F", "-p", &port.to_string(), "-d", db.to_str().unwrap(), "-t", "1", "-g", "0"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("debuginfod");
    Debuginfod(child)
}

#[test]
fn files_an_upstream_debuginfod_has_are_fetched_once_and_kept() {
    let Some(dir) = symbol_fixtures() else { return };
    if which("debuginfod").is_none() {
        return missing_prerequisite("debuginfod (Debian package debuginfod)");
    }
    let id = readelf_build_id(&dir.join("bin/symwork-cpp"));
    let debug_bytes = std::fs::read(dir.join("bin/symwork-cpp.debug")).unwrap();
    let port = free_port();
    let upstream = start_debuginfod(&dir.join("bin"), port);
    let upstream_url = format!("http://127.0.0.1:{port}");
    // The upstream answers once its first scan has indexed the folder.
    until("debuginfod to index the fixtures", Duration::from_secs(60), || {
        let r = reqwest::blocking::get(format!("{upstream_url}/buildid/{id}/debuginfo")).ok()?;
        (r.status().as_u16() == 200).then_some(())
    });
    let store = temp_dir("debuginfo-upstream");
    let server = Server::start(store.to_str().unwrap(), &["--debuginfod", &upstream_url], &[]);
    let (status, fetched) = get(&server, &format!("/buildid/{id}/debuginfo"));
    assert_eq!(status, 200);
    // elfutils serves the split-off debug file or the unstripped binary (both carry the
    // DWARF); either way it is a file of this build id.
    let candidates = [debug_bytes, std::fs::read(dir.join("bin/symwork-cpp")).unwrap()];
    assert!(candidates.contains(&fetched), "the upstream's file: {} bytes", fetched.len());
    drop(upstream);
    assert_eq!(get(&server, &format!("/buildid/{id}/debuginfo")), (200, fetched), "kept in the store");
}

#[test]
fn an_upstream_that_hangs_is_bounded_and_remembered_as_a_miss() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let seen = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(stream); // never answered
        }
    });
    let store = temp_dir("debuginfo-hang");
    let upstream = format!("http://127.0.0.1:{port}");
    let server =
        Server::start(store.to_str().unwrap(), &["--debuginfod", &upstream, "--debuginfod-timeout-secs", "1"], &[]);
    let path = format!("/buildid/{}/debuginfo", "cd".repeat(20));
    let (status, body) = get(&server, &path);
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(get(&server, &path).0, 404);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the miss is remembered, the upstream not asked again");
}

/// gperftools' profile of the stripped C program, its mappings given their build ids
/// (its `/proc/self/maps` text names none): what an agent that sends addresses sends.
fn gperftools_profile_with_build_ids(dir: &Path) -> Vec<u8> {
    let bytes = std::fs::read(dir.join("symwork-c.gperftools.prof")).unwrap();
    let mut profile = stacklens_core::parse(&bytes).unwrap();
    let id = readelf_build_id(&dir.join("bin/symwork-c"));
    let id = profile.strings.intern(&id);
    let mut named = 0;
    for m in 0..profile.mappings.len() {
        if profile.str(profile.mappings[m].filename).ends_with("/bin/symwork-c.stripped") {
            profile.mappings[m].build_id = id;
            named += 1;
        }
    }
    assert_eq!(named, 1, "the profile maps the stripped binary");
    stacklens_core::export::pprof::write(&profile)
}

#[test]
fn stored_profiles_are_named_from_uploaded_debug_files_when_merged() {
    let Some(dir) = symbol_fixtures() else { return };
    let store = temp_dir("debuginfo-merge");
    let server = Server::start(store.to_str().unwrap(), &[], &[]);
    let http = reqwest::blocking::Client::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let pushed = http
        .post(format!("{}/ingest?name=symwork.cpu&from={}&until={}&format=pprof", server.base, now - 60, now - 50))
        .body(gperftools_profile_with_build_ids(&dir))
        .send()
        .unwrap();
    assert_eq!(pushed.status(), 200);
    let merge =
        format!("{}/api/v1/profiling/merge?service=symwork&profileType=cpu&from={}&limit=50", server.base, now - 3600);
    let names = |merged: &serde_json::Value| -> Vec<String> {
        merged["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_owned()).collect()
    };
    let (status, before) = json_of(http.get(&merge).send().unwrap());
    assert_eq!(status, 200, "{before}");
    assert!(!names(&before).iter().any(|n| n == "hash_block"), "{before}");

    let id = readelf_build_id(&dir.join("bin/symwork-c"));
    assert_eq!(put(&server, &id, std::fs::read(dir.join("bin/symwork-c.debug")).unwrap()).0, 201);
    assert_eq!(put(&server, &id, std::fs::read(dir.join("bin/symwork-c.stripped")).unwrap()).0, 201);
    let (status, after) = json_of(http.get(&merge).send().unwrap());
    assert_eq!(status, 200, "{after}");
    let names = names(&after);
    for function in ["hash_block", "integrate", "sieve"] {
        assert!(names.iter().any(|n| n == function), "{function} in {names:?}");
    }
    // The raw bytes stay as uploaded: the symbolized names are computed, not stored.
    assert_eq!(after["total"], before["total"]);
}

/// The Breakpad id of an ELF build id, as `dump_syms` writes it: the first 16 bytes as a
/// GUID whose three leading fields are little-endian, then the age 0.
fn breakpad_id(build_id: &str) -> String {
    let b = &build_id[..32];
    let swap = |s: &str| s.as_bytes().chunks(2).rev().map(|c| std::str::from_utf8(c).unwrap()).collect::<String>();
    format!("{}{}{}{}0", swap(&b[..8]), swap(&b[8..12]), swap(&b[12..16]), &b[16..]).to_uppercase()
}

/// `addr2line -f -i -e BIN ADDR`: (function, file:line) innermost first.
fn addr2line(binary: &Path, address: u64) -> Vec<(String, String)> {
    let out = Command::new("addr2line").arg("-f").arg("-i").arg("-e").arg(binary).arg(format!("{address:#x}")).output();
    let text = String::from_utf8(out.expect("addr2line (binutils)").stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines.chunks(2).map(|p| (p[0].to_owned(), p[1].split(" (discriminator").next().unwrap().to_owned())).collect()
}

#[test]
fn the_firefox_profilers_symbol_api_names_module_offsets_as_addr2line_does() {
    let Some(dir) = symbol_fixtures() else { return };
    let store = temp_dir("debuginfo-symbolicate");
    let server = Server::start(store.to_str().unwrap(), &[], &[]);
    let binary = dir.join("bin/symwork-c");
    let id = readelf_build_id(&binary);
    assert_eq!(put(&server, &id, std::fs::read(dir.join("bin/symwork-c.debug")).unwrap()).0, 201);
    // The program's own frames in its perf script text: offsets in the PIE, whose first
    // segment is at 0, so module offsets and addresses agree.
    let script = std::fs::read_to_string(dir.join("symwork-c.perf-script.txt")).unwrap();
    let mut offsets: Vec<u64> = script
        .lines()
        .filter(|l| l.ends_with("/bin/symwork-c.stripped)"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert!(offsets.len() >= 5, "{offsets:?}");
    let stack: Vec<serde_json::Value> = offsets.iter().map(|&o| serde_json::json!([0, o])).collect();
    let request = serde_json::json!({
        "memoryMap": [["symwork-c", breakpad_id(&id)], ["libc.so.6", "00000000000000000000000000000000A"]],
        "stacks": [stack, [[1, 4096], [-1, 16]]],
    });
    let r = reqwest::blocking::Client::new().post(format!("{}/symbolicate/v5", server.base)).json(&request).send();
    let (status, body) = json_of(r.unwrap());
    assert_eq!(status, 200, "{body}");
    let result = &body["results"][0];
    assert_eq!(result["found_modules"][format!("symwork-c/{}", breakpad_id(&id))], true, "{body}");
    assert_eq!(result["found_modules"]["libc.so.6/00000000000000000000000000000000A"], false);
    let frames = result["stacks"][0].as_array().unwrap();
    assert_eq!(frames.len(), offsets.len());
    assert!(frames.iter().any(|f| f.get("inlines").is_some()), "some address is in an inlined function");
    for (frame, &offset) in frames.iter().zip(&offsets) {
        assert_eq!(frame["module_offset"], format!("{offset:#x}"));
        let mut ours: Vec<(String, String)> = frame["inlines"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                (f["function"].as_str().unwrap().to_owned(), format!("{}:{}", f["file"].as_str().unwrap(), f["line"]))
            })
            .collect();
        ours.push((
            frame["function"].as_str().unwrap().to_owned(),
            format!("{}:{}", frame["file"].as_str().unwrap(), frame["line"]),
        ));
        assert_eq!(ours, addr2line(&binary, offset), "at {offset:#x}");
    }
    let unknown = &result["stacks"][1];
    assert_eq!(unknown[0]["module"], "libc.so.6");
    assert!(unknown[0].get("function").is_none() && unknown[1].get("module").is_none(), "{unknown}");
}
