//! `stacklens open FILE|URL…` and `stacklens FILE…` as real processes on 127.0.0.1: the
//! profiles, read and checked at start, are served from memory beside the page; bad
//! input is refused before any server starts.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{fixtures, json_of, stand_in, temp_dir, until};

const BIN: &str = env!("CARGO_BIN_EXE_stacklens");

/// A folder with a stand-in page, so these tests run whether or not this binary has the
/// page built in (tests/serve.rs checks the built-in one).
fn test_page() -> PathBuf {
    let dist = temp_dir("open-dist");
    std::fs::write(dist.join("index.html"), "<!doctype html><title>stacklens open test page</title>").unwrap();
    dist
}

/// A running `stacklens ARGS… --no-browser`; killed when dropped.
struct Opened {
    child: Child,
    /// The page's address as printed.
    url: String,
    /// `http://127.0.0.1:PORT`.
    base: String,
}

impl Opened {
    /// Starts it in `cwd` and waits for the address it prints.
    fn start(cwd: &Path, args: &[&str]) -> Opened {
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--no-browser")
            .current_dir(cwd)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (found, address) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("http://") {
                    let _ = found.send(line);
                }
            }
        });
        let url = match address.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!("stacklens {args:?} printed no address: {:?}", child.wait());
            }
        };
        let base = url.split("/#").next().unwrap().to_owned();
        Opened { child, url, base }
    }

    /// The sources the address gives the page (`url=` in its hash).
    fn sources(&self) -> Vec<String> {
        let hash = self.url.split_once('#').expect("a hash").1;
        hash.split('&').map(|part| part.strip_prefix("url=").expect("only url= sources").to_owned()).collect()
    }

    fn get(&self, path: &str) -> reqwest::blocking::Response {
        reqwest::blocking::get(format!("{}{path}", self.base)).unwrap()
    }

    /// Ctrl-C, as at the terminal: it must stop, successfully.
    fn interrupt(mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let status = until("stacklens to stop on Ctrl-C", Duration::from_secs(20), || self.child.try_wait().unwrap());
        assert!(status.success(), "Ctrl-C ends it with success, got {status:?}");
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `stacklens ARGS…` in `cwd`, which must end by itself (no server may start).
fn run_to_end(cwd: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--no-browser")
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("stacklens {args:?} did not exit: did a server start?");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// Serves `files` (by `args`, run in an empty folder): the page, each file's exact bytes
/// at the address printed, JSON 404s for anything else; an upload (Share) is kept in
/// memory: the folder stays empty. Ctrl-C stops it.
fn serves_from_memory(args: &[&str], files: &[&Path]) {
    let cwd = temp_dir("open-cwd");
    let opened = Opened::start(&cwd, args);
    assert!(opened.url.starts_with("http://127.0.0.1:"), "{}", opened.url);

    let page = opened.get("/");
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(page.text().unwrap().contains("stacklens open test page"));

    let sources = opened.sources();
    assert_eq!(sources.len(), files.len(), "{sources:?}");
    for (i, (source, file)) in sources.iter().zip(files).enumerate() {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert_eq!(source, &format!("/api/v1/opened/{i}/{name}"));
        let served = opened.get(source);
        assert_eq!(served.status(), 200, "{source}");
        assert_eq!(served.bytes().unwrap(), std::fs::read(file).unwrap(), "{source}");
    }

    for unknown in [format!("/api/v1/opened/{}/x.pb.gz", files.len()), "/api/v1/opened/0/other.pb.gz".to_owned()] {
        let (status, body) = json_of(opened.get(&unknown));
        assert_eq!((status, body["error_code"].as_str()), (404, Some("OpenedProfileNotFound")), "{unknown}: {body}");
    }

    let share = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/profiles", opened.base))
        .body(std::fs::read(files[0]).unwrap())
        .send()
        .unwrap();
    assert_eq!(share.status(), 201);
    assert!(is_empty(&cwd), "nothing may be written: {:?}", std::fs::read_dir(&cwd).unwrap().collect::<Vec<_>>());
    opened.interrupt();
}

#[test]
fn open_serves_the_files_from_memory() {
    let Some(fx) = fixtures() else { return };
    let (cpu, block) = (fx.join("go/base/cpu.pb.gz"), fx.join("go/base/block.debug1.txt"));
    let dist = test_page();
    let args = ["open", cpu.to_str().unwrap(), block.to_str().unwrap(), "--dist", dist.to_str().unwrap()];
    serves_from_memory(&args, &[&cpu, &block]);
}

#[test]
fn a_file_alone_means_open() {
    let Some(fx) = fixtures() else { return };
    let cpu = fx.join("go/base/cpu.pb.gz");
    let dist = test_page();
    serves_from_memory(&[cpu.to_str().unwrap(), "--dist", dist.to_str().unwrap()], &[&cpu]);
}

/// A URL (a net/http/pprof endpoint) is fetched once at start and named by its path; one
/// that answers 404 is refused with a message.
#[test]
fn open_fetches_a_url_once() {
    let Some(fx) = fixtures() else { return };
    let cpu = std::fs::read(fx.join("go/base/cpu.pb.gz")).unwrap();
    let fetches = Arc::new(AtomicUsize::new(0));
    let (served, counted) = (cpu.clone(), fetches.clone());
    let port = stand_in(move |path| {
        (path == "/debug/pprof/profile?seconds=1").then(|| {
            counted.fetch_add(1, Ordering::SeqCst);
            served.clone()
        })
    });
    let cwd = temp_dir("open-url");
    let dist = test_page();

    let url = format!("http://127.0.0.1:{port}/debug/pprof/profile?seconds=1");
    let opened = Opened::start(&cwd, &["open", &url, "--dist", dist.to_str().unwrap()]);
    assert_eq!(opened.sources(), ["/api/v1/opened/0/profile"]);
    for _ in 0..2 {
        assert_eq!(opened.get("/api/v1/opened/0/profile").bytes().unwrap(), cpu);
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "fetched once, at start");
    opened.interrupt();

    let missing = format!("http://127.0.0.1:{port}/debug/pprof/nothing");
    let out = run_to_end(&cwd, &[&missing, "--dist", dist.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&format!("cannot fetch {missing}: the server answered 404")), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("http://"), "no server started");
    assert!(is_empty(&cwd));
}

/// Exit status 4 for a file that is no profile, 3 for one that cannot be read (as every
/// subcommand), each named, and no server started; with or without `open`.
#[test]
fn bad_input_is_refused_before_any_server_starts() {
    let cwd = temp_dir("open-bad");
    let dist = test_page();
    let notes = cwd.join("notes.txt");
    std::fs::write(&notes, "hello, not a profile\n").unwrap();
    let missing = cwd.join("missing.pb.gz");
    let (notes, missing, dist) = (notes.to_str().unwrap(), missing.to_str().unwrap(), dist.to_str().unwrap());
    for (args, code, named) in [
        (vec!["open", notes], 4, notes),
        (vec![notes], 4, notes),
        (vec!["open", missing], 3, missing),
        (vec![missing], 3, missing),
        // A relative name that does not exist is still taken for a file.
        (vec!["missing.pb.gz"], 3, "cannot read missing.pb.gz"),
    ] {
        let out = run_to_end(&cwd, &[&args[..], &["--dist", dist]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.starts_with("stacklens: ") && stderr.contains(named), "{args:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("http://"), "{args:?}: no server started");
    }

    // One bad file among good ones: nothing is served.
    if let Some(fx) = fixtures() {
        let cpu = fx.join("go/base/cpu.pb.gz");
        let out = run_to_end(&cwd, &["open", cpu.to_str().unwrap(), notes, "--dist", dist]);
        assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// A word that is neither a subcommand nor a file stays clap's usage error; help and
/// subcommands are untouched by the `stacklens FILE` form.
#[test]
fn subcommands_and_help_are_unchanged() {
    let cwd = temp_dir("open-words");
    let typo = Command::new(BIN).arg("tpo").current_dir(&cwd).output().unwrap();
    assert_eq!(typo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("unrecognized subcommand 'tpo'"));

    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("open ") && help.contains("stacklens FILE|URL…` is short for"), "{help}");

    // A file named like a subcommand does not shadow it.
    std::fs::write(cwd.join("top"), "").unwrap();
    let top = Command::new(BIN).args(["top", "--help"]).current_dir(&cwd).output().unwrap();
    assert!(top.status.success());
    assert!(String::from_utf8_lossy(&top.stdout).contains("Top functions"));
}
