//! Requests a browser is made to send for another site. Two attacks reach a server that
//! has no credentials (what `serve.sh` and `stacklens open` start) through its users'
//! browsers:
//! - cross-site request forgery: another site's page posts to this server (a form or a
//!   `text/plain` fetch needs no CORS preflight), so state-changing requests whose
//!   `Origin` or `Sec-Fetch-Site` says they come from another site are refused unless
//!   `--cors-origin` trusts that origin (the rule of Go's `http.CrossOriginProtection`);
//! - DNS rebinding: a name the attacker controls is made to resolve to 127.0.0.1, so that
//!   their page, now "same-origin", reads and writes the local server. Every request must
//!   name this server: an IP address, `localhost`, the `--public-url`'s host or an
//!   `--allowed-host`.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ApiError;

/// Which hosts and origins the server answers.
#[derive(Debug, Default)]
pub struct Policy {
    /// Origins (`scheme://host[:port]`, lowercase) whose pages may change state here.
    trusted_origins: Vec<String>,
    any_origin: bool,
    /// Host names (lowercase, no port) the server answers to besides IP addresses and localhost.
    hosts: Vec<String>,
    any_host: bool,
}

/// `scheme://host[:port]` of a URL, lowercase, as browsers send it in `Origin`.
fn origin_of(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization().to_ascii_lowercase())
}

/// The host name of an authority (`host[:port]`, `[v6]:port`), lowercase, brackets dropped.
fn host_name(authority: &str) -> String {
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => authority.rsplit_once(':').map_or(authority, |(host, _port)| host),
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Policy {
    /// From `--cors-origin` (`*` for any), `--public-url` and `--allowed-host` (`*` for any).
    pub fn new(cors_origins: &[String], public_url: Option<&str>, allowed_hosts: &[String]) -> Result<Policy, String> {
        let mut policy = Policy {
            any_origin: cors_origins.iter().any(|o| o == "*"),
            any_host: allowed_hosts.iter().any(|h| h == "*"),
            ..Policy::default()
        };
        for origin in cors_origins.iter().filter(|o| *o != "*") {
            policy
                .trusted_origins
                .push(origin_of(origin).ok_or_else(|| format!("--cors-origin {origin}: not an origin"))?);
        }
        if let Some(public) = public_url {
            let url = url::Url::parse(public).map_err(|e| format!("--public-url {public}: {e}"))?;
            let host = url.host_str().ok_or_else(|| format!("--public-url {public}: no host"))?;
            policy.hosts.push(host_name(host));
            policy.trusted_origins.extend(origin_of(public));
        }
        policy.hosts.extend(allowed_hosts.iter().filter(|h| *h != "*").map(|h| host_name(h)));
        Ok(policy)
    }

    /// Whether a request naming `authority` is for this server.
    fn answers(&self, authority: &str) -> bool {
        let name = host_name(authority);
        self.any_host
            || name.parse::<IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.hosts.contains(&name)
    }

    /// Why a request that changes state is refused as coming from another site's page, if it is.
    fn foreign(&self, method: &Method, headers: &HeaderMap, authority: Option<&str>) -> Option<String> {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return None;
        }
        let text = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase());
        let origin = text(header::ORIGIN.as_str());
        if self.any_origin || origin.as_ref().is_some_and(|o| self.trusted_origins.contains(o)) {
            return None;
        }
        match text("sec-fetch-site").as_deref() {
            // The page is this server's own, or the user typed the address.
            Some("same-origin" | "none") => None,
            Some(site) => Some(format!("the request came from a {site} page ({})", origin.as_deref().unwrap_or("?"))),
            // Older browsers: the Origin's host must be the one the request was sent to.
            None => {
                let origin = origin?;
                let same = origin
                    .split_once("://")
                    .is_some_and(|(_, host)| authority.is_some_and(|authority| host.eq_ignore_ascii_case(authority)));
                (!same).then(|| format!("the request came from a page of {origin}"))
            }
        }
    }
}

/// The authority a request was sent to: HTTP/2's `:authority`, else the `Host` header.
fn authority(request: &Request) -> Option<String> {
    request
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| request.headers().get(header::HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()))
}

/// Refuses requests for other hosts (421) and state-changing requests from other sites' pages (403).
pub async fn check(policy: Arc<Policy>, request: Request, next: Next) -> Response {
    let authority = authority(&request);
    if let Some(authority) = authority.as_deref().filter(|a| !policy.answers(a)) {
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "UnknownHost",
            format!(
                "this server does not answer to the host '{authority}': use its address, or start it with \
                 --public-url or --allowed-host naming that host"
            ),
        )
        .details(json!({ "host": authority }))
        .into_response();
    }
    if let Some(why) = policy.foreign(request.method(), request.headers(), authority.as_deref()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "CrossOriginRequest",
            format!("{why}: pages of other sites may not change this server's data (--cors-origin trusts an origin)"),
        )
        .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn hosts_are_addresses_localhost_the_public_url_and_the_allowed() {
        let policy = Policy::new(&[], Some("https://Profiles.Example.com/base/"), &["intra.lan".into()]).unwrap();
        for host in [
            "127.0.0.1:8080",
            "[::1]:8080",
            "10.1.2.3",
            "localhost:8080",
            "app.localhost",
            "profiles.example.com",
            "PROFILES.example.com.:443",
            "intra.lan:8080",
        ] {
            assert!(policy.answers(host), "{host}");
        }
        for host in ["evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "example.com"] {
            assert!(!policy.answers(host), "{host}");
        }
        assert!(Policy::new(&[], None, &["*".into()]).unwrap().answers("anything.example"));
    }

    #[test]
    fn state_changes_from_other_sites_are_refused() {
        let policy = Policy::new(&["https://grafana.example".into()], None, &[]).unwrap();
        let post =
            |pairs: &[(&'static str, &str)]| policy.foreign(&Method::POST, &headers(pairs), Some("127.0.0.1:8080"));
        assert!(post(&[]).is_none(), "an agent or curl sends no Origin");
        assert!(post(&[("origin", "http://127.0.0.1:8080")]).is_none(), "the server's own page");
        assert!(post(&[("origin", "http://evil.example")]).is_some());
        assert!(post(&[("origin", "null")]).is_some());
        assert!(post(&[("origin", "http://127.0.0.1:9999")]).is_some(), "another port is another origin");
        assert!(post(&[("sec-fetch-site", "cross-site")]).is_some());
        assert!(post(&[("sec-fetch-site", "same-site"), ("origin", "http://127.0.0.1:9999")]).is_some());
        assert!(post(&[("sec-fetch-site", "same-origin"), ("origin", "http://127.0.0.1:8080")]).is_none());
        assert!(post(&[("sec-fetch-site", "cross-site"), ("origin", "https://grafana.example")]).is_none(), "trusted");
        let get = policy.foreign(&Method::GET, &headers(&[("origin", "http://evil.example")]), Some("127.0.0.1:8080"));
        assert!(get.is_none(), "reads are CORS's to guard");
        let any = Policy::new(&["*".into()], None, &[]).unwrap();
        assert!(any.foreign(&Method::DELETE, &headers(&[("origin", "http://evil.example")]), None).is_none());
    }
}
