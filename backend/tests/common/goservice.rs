//! The Go service of backend/tests/goservice: built once per test binary with the
//! system's Go, started on 127.0.0.1 and waited for until every busy function shows in
//! its profiles.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::{missing_prerequisite, temp_dir, until};

/// A running Go service; killed when dropped.
pub struct GoService {
    child: Child,
    pub port: u16,
}

impl GoService {
    /// Starts the service on `port` with `env` (GOSERVICE_SLOW=allocate slows one function
    /// down) and waits until it is ready; `None` (skip) without Go, except under CI=true.
    pub fn start(port: u16, env: &[(&str, &str)]) -> Option<GoService> {
        let binary = match go_binary() {
            Ok(binary) => binary,
            Err(why) => {
                missing_prerequisite(&why);
                return None;
            }
        };
        let child = Command::new(binary)
            .arg(format!("127.0.0.1:{port}"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let service = GoService { child, port };
        let ready = format!("http://127.0.0.1:{port}/ready");
        until("the Go service to be ready", Duration::from_secs(60), || {
            reqwest::blocking::get(&ready).is_ok_and(|r| r.status() == 200).then_some(())
        });
        Some(service)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for GoService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Go service, built once per test binary (`Err`: Go is not installed).
pub fn go_binary() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let go = ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
                .ok_or("Go is not installed (scripts/ensure-tools.sh installs golang-go)")?;
            let dir = temp_dir("goservice");
            let binary = dir.join("goservice");
            let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goservice/main.go");
            let built = Command::new(go)
                .args(["build", "-o", binary.to_str().unwrap(), source.to_str().unwrap()])
                .env("GOCACHE", dir.join("cache"))
                .env("GO111MODULE", "off")
                .output()
                .unwrap();
            assert!(built.status.success(), "go build: {}", String::from_utf8_lossy(&built.stderr));
            Ok(binary)
        })
        .clone()
}
