//! One client holding connections must not take the server down: idle connections,
//! HTTP/2 (a preface and nothing more) as well as HTTP/1, are closed after
//! `--idle-timeout-secs`; past the connection bounds the longest-idle one makes room for
//! a new client; and a server short of file descriptors keeps answering. Each test
//! holds its connections only for a bounded time, on 127.0.0.1.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::Server;
use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// What an HTTP/2 client sends first: the preface (then it may say nothing more).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Lowering the open-file limit for a child happens in this process: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A server whose process may open at most `nofile` files (sockets included).
fn start_with_fd_limit(nofile: u64, extra: &[&str]) -> Server {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, nofile, hard).unwrap();
    let server = std::panic::catch_unwind(|| Server::start("memory://", extra, &[]));
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    server.unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// `count` connections that each sent `first` and then nothing.
fn hold(port: u16, count: usize, first: &[u8]) -> Vec<TcpStream> {
    (0..count)
        .filter_map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
            stream.write_all(first).ok()?;
            Some(stream)
        })
        .collect()
}

/// Whether the server closed `stream` within `within` (what it sent before is read and dropped).
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return true, // reset
        }
    }
    false
}

/// `/healthz`'s status as a client sees it that tries three times, as clients retry a
/// connection the server shed (0: no answer at all).
fn healthz(server: &Server) -> u16 {
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let attempt = || http.get(format!("{}/healthz", server.base)).send().map_or(0, |r| r.status().as_u16());
    (0..3).map(|_| attempt()).find(|&status| status != 0).unwrap_or(0)
}

#[test]
fn idle_http2_connections_past_the_fd_limit_do_not_stop_the_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = start_with_fd_limit(256, &["--idle-timeout-secs", "3"]);
    let mut held = hold(server.port, 300, H2_PREFACE);
    assert!(held.len() >= 256, "the test holds {} connections", held.len());
    // While they are held, the server answers a new client.
    for _ in 0..3 {
        assert_eq!(healthz(&server), 200, "/healthz while {} idle HTTP/2 connections are held", held.len());
    }
    // And it closes every idle one: by the idle timeout, or earlier to make room.
    let still_open =
        held.iter_mut().map(|s| closed_within(s, Duration::from_secs(10))).filter(|closed| !closed).count();
    assert_eq!(still_open, 0, "idle HTTP/2 connections the server kept open");
    assert_eq!(healthz(&server), 200);
}

#[test]
fn an_idle_http1_connection_is_closed_after_the_idle_timeout() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start("memory://", &["--idle-timeout-secs", "2"], &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let started = Instant::now();
    assert!(closed_within(&mut stream, Duration::from_secs(10)), "the keep-alive connection stayed open");
    assert!(started.elapsed() >= Duration::from_millis(1500), "not before the idle timeout: {:?}", started.elapsed());
}

#[test]
fn a_peer_past_its_bound_loses_its_idlest_connection_not_its_new_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start("memory://", &["--max-connections-per-peer", "8", "--idle-timeout-secs", "60"], &[]);
    let mut held = hold(server.port, 8, H2_PREFACE);
    std::thread::sleep(Duration::from_millis(300));
    // A ninth from the same address: served, and one of the eight idle ones goes.
    assert_eq!(healthz(&server), 200);
    let closed = held.iter_mut().map(|s| closed_within(s, Duration::from_millis(600))).filter(|&closed| closed).count();
    assert!(closed >= 1, "no idle connection made room");
    assert!(closed < 8, "only what was needed went ({closed} of 8)");
}

/// An HTTP/2 frame: 24-bit length, type, flags, stream id, payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// `GET /healthz` for 127.0.0.1 in HPACK, literal fields without indexing.
fn healthz_block() -> Vec<u8> {
    let mut block = vec![0x82, 0x86]; // :method GET, :scheme http
    for (index, value) in [(4u8, "/healthz"), (1u8, "127.0.0.1")] {
        block.push(index); // literal without indexing, indexed name (:path 4, :authority 1)
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// Writes `frames` to a fresh HTTP/2 connection until the server stops taking them;
/// whether the server closed the connection within `within` after that.
fn flood(port: u16, frames: impl Iterator<Item = Vec<u8>>, within: Duration) -> bool {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(H2_PREFACE).unwrap();
    stream.write_all(&frame(SETTINGS, 0, 0, &[])).unwrap();
    for f in frames {
        if stream.write_all(&f).is_err() {
            break;
        }
    }
    closed_within(&mut stream, within)
}

#[test]
fn http2_floods_end_their_connection_and_not_the_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start("memory://", &[], &[]);
    // Rapid reset: open a stream and cancel it at once, 20,000 times.
    let block = healthz_block();
    let resets = (0..20_000u32).map(|i| {
        let id = 2 * i + 1;
        [frame(HEADERS, END_HEADERS | END_STREAM, id, &block), frame(RST_STREAM, 0, id, &8u32.to_be_bytes())].concat()
    });
    assert!(flood(server.port, resets, Duration::from_secs(10)), "rapid resets: the connection stayed open");
    assert_eq!(healthz(&server), 200);
    // CONTINUATION flood: one header block that never ends (16 MiB of it offered).
    let junk = [0x40, 0x7f, 0x80].iter().copied().chain(std::iter::repeat_n(b'a', 16 * 1024 - 3)).collect::<Vec<u8>>();
    let continuation = std::iter::once(frame(HEADERS, END_STREAM, 1, &block))
        .chain(std::iter::repeat_with(move || frame(CONTINUATION, 0, 1, &junk)).take(1024));
    assert!(
        flood(server.port, continuation, Duration::from_secs(10)),
        "CONTINUATION flood: the connection stayed open"
    );
    assert_eq!(healthz(&server), 200);
}
