//! `stacklens open FILE|URL…` (or just `stacklens FILE…`), the `go tool pprof -http`
//! habit: the profiles, read (a URL fetched once) and checked at start, are kept in
//! memory and served read-only beside the page, which the browser opens with them in
//! its address (`#url=…`, as any `url=` source). Nothing is written anywhere.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;

/// A command-line argument `open` takes: a file, or an http(s) URL.
pub enum Source<'a> {
    File(&'a Path),
    Url(&'a str),
}

impl<'a> Source<'a> {
    pub fn of(arg: &'a std::ffi::OsStr) -> Source<'a> {
        match arg.to_str() {
            Some(url) if is_url(url) => Source::Url(url),
            _ => Source::File(Path::new(arg)),
        }
    }

    /// What the page's tab shows: the file's name, or the URL's last path segment
    /// (`…/debug/pprof/profile?seconds=5` is `profile`).
    pub fn name(&self) -> String {
        let name = match self {
            Source::File(path) => path.file_name().map(|n| n.to_string_lossy().into_owned()),
            Source::Url(url) => url::Url::parse(url).ok().and_then(|url| {
                let last = url.path_segments().and_then(|mut s| s.rfind(|s| !s.is_empty()).map(str::to_owned));
                last.or_else(|| url.host_str().map(str::to_owned))
            }),
        };
        url_safe(&name.unwrap_or_default())
    }
}

pub fn is_url(arg: &str) -> bool {
    ["http://", "https://"].iter().any(|scheme| arg.get(..scheme.len()).is_some_and(|s| s.eq_ignore_ascii_case(scheme)))
}

/// A name that goes into a URL path as is: other characters become `_`, and one made
/// only of dots (which a browser would resolve as `.` or `..`) becomes `profile`.
fn url_safe(name: &str) -> String {
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    if safe.trim_start_matches('.').is_empty() {
        "profile".to_owned()
    } else {
        safe
    }
}

/// How much longer than the profile's `seconds=` a pprof endpoint may take to answer
/// (a fetch here, or a capture's).
pub const FETCH_SLACK_SECS: u64 = 30;

/// Fetches a profile once. pprof endpoints answer after `seconds=N`, so the timeout is
/// that plus the slack captures allow.
pub fn fetch(url: &str) -> Result<Bytes, String> {
    let seconds = url::Url::parse(url)
        .ok()
        .and_then(|u| u.query_pairs().find(|(k, _)| k == "seconds").and_then(|(_, v)| v.parse::<u64>().ok()))
        .unwrap_or(0);
    let timeout = Duration::from_secs(seconds.saturating_add(FETCH_SLACK_SECS));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(body_of(reqwest::Client::new().get(url).timeout(timeout))).map_err(|(_, reason)| reason)
}

/// Sends `request` and gives the body of a success; else what went wrong: the
/// connection's error, or the status (also given) with the start of what the server
/// said (the message of a stacklens API error).
pub async fn body_of(request: reqwest::RequestBuilder) -> Result<Bytes, (Option<reqwest::StatusCode>, String)> {
    let response = request.send().await.map_err(|e| (None, with_causes(&e)))?;
    let status = response.status();
    if status.is_success() {
        return response.bytes().await.map_err(|e| (None, with_causes(&e)));
    }
    let body = response.bytes().await.unwrap_or_default();
    let said = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(error) => error["message"].as_str().map(str::to_owned),
        Err(_) => std::str::from_utf8(&body).ok().and_then(|text| text.lines().next()).map(|line| line.to_owned()),
    };
    let reason = match said.map(|text| text.trim().chars().take(300).collect::<String>()).filter(|t| !t.is_empty()) {
        Some(text) => format!("the server answered {status}: {text}"),
        None => format!("the server answered {status}"),
    };
    Err((Some(status), reason))
}

/// reqwest's message with its causes, which say what went wrong (connection refused,
/// timed out, …).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// A profile `open` serves.
pub struct OpenedProfile {
    pub name: String,
    pub bytes: Bytes,
}

/// The profiles `open` serves, in command-line order (none for `serve`).
#[derive(Default)]
pub struct Opened(Vec<OpenedProfile>);

impl Opened {
    pub fn push(&mut self, name: String, bytes: Bytes) {
        self.0.push(OpenedProfile { name, bytes });
    }

    /// The profile at `index`, when `name` is its name.
    pub fn get(&self, index: usize, name: &str) -> Option<&OpenedProfile> {
        self.0.get(index).filter(|p| p.name == name)
    }

    /// The page's address hash with each profile as a source to fetch (names are
    /// URL-safe): `#url=/api/v1/opened/0/cpu.pb.gz&…`, the route of api::opened::raw.
    pub fn hash(&self) -> String {
        let urls: Vec<String> =
            self.0.iter().enumerate().map(|(i, p)| format!("url=/api/v1/opened/{i}/{}", p.name)).collect();
        format!("#{}", urls.join("&"))
    }
}

/// The page at `address` with `hash`; a server on every interface is reached through
/// loopback.
pub fn page_url(address: SocketAddr, hash: &str) -> String {
    let ip = match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/{hash}", SocketAddr::new(ip, address.port()))
}

/// Starts the user's browser on `url` and does not wait for it: `$BROWSER` (commands
/// separated by `:`, `%s` standing for the URL, as Python's webbrowser reads it), else
/// the system's opener. False when none could be started.
pub fn browse(url: &str) -> bool {
    const SYSTEM: &str = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let from_env = std::env::var("BROWSER").unwrap_or_default();
    for command in from_env.split(':').chain([SYSTEM]) {
        let mut words = command.split_whitespace();
        let Some(program) = words.next() else { continue };
        let mut args: Vec<String> = words.map(|w| w.replace("%s", url)).collect();
        if !command.contains("%s") {
            args.push(url.to_owned());
        }
        let started =
            Command::new(program).args(&args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        if let Ok(mut child) = started {
            // Reaped in the background: the browser may run as long as it likes.
            std::thread::spawn(move || child.wait());
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_url_safe_and_come_from_the_file_or_the_url_path() {
        let name = |arg: &str| Source::of(arg.as_ref()).name();
        assert_eq!(name("/tmp/x/cpu.pb.gz"), "cpu.pb.gz");
        assert_eq!(name("my heap #2.prof"), "my_heap__2.prof");
        assert_eq!(name("http://host:6060/debug/pprof/profile?seconds=5"), "profile");
        assert_eq!(name("HTTPS://host/debug/pprof/heap/"), "heap");
        assert_eq!(name("http://host:6060/"), "host");
        assert_eq!(name("http://[::1]:6060"), "___1_");
        assert_eq!(name("..."), "profile");
        assert!(matches!(Source::of("http:/x".as_ref()), Source::File(_)));
    }

    #[test]
    fn the_page_url_names_each_profile_by_index() {
        let mut opened = Opened::default();
        opened.push("cpu.pb.gz".into(), Bytes::from_static(b"a"));
        opened.push("profile".into(), Bytes::from_static(b"b"));
        assert_eq!(
            page_url("0.0.0.0:8080".parse().unwrap(), &opened.hash()),
            "http://127.0.0.1:8080/#url=/api/v1/opened/0/cpu.pb.gz&url=/api/v1/opened/1/profile"
        );
        assert_eq!(page_url("[::]:1".parse().unwrap(), "#"), "http://[::1]:1/#");
        assert_eq!(page_url("10.1.2.3:80".parse().unwrap(), "#"), "http://10.1.2.3:80/#");
        assert!(opened.get(1, "profile").is_some());
        assert!(opened.get(1, "cpu.pb.gz").is_none());
        assert!(opened.get(2, "profile").is_none());
    }
}
