//! `stacklens gate`: fails a CI job when a change made functions or packages take a
//! larger share of the profile, tested across several runs a side (see
//! stacklens_core::analysis::gate). The base runs are files, or baselines on a
//! stacklens server; with `--server` both sides are also uploaded, merged, so that the
//! report links their diff view.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bytes::Bytes;
use clap::{ArgGroup, ValueEnum};
use reqwest::StatusCode;
use stacklens_core::analysis::gate::{Gate, GateConfig, GateReport, Run, Status, Verdict};
use stacklens_core::analysis::merge::Merger;
use stacklens_core::analysis::Query;
use stacklens_core::api::{BaselineResponse, SessionResponse};
use stacklens_core::export::{export, ExportFormat};
use stacklens_core::report::gate::{github, inconclusive, junit, markdown, text};
use stacklens_core::Profile;
use url::Url;

use crate::cli::common::{for_terminal, load, parse, print_json, CliError};

/// The environment variable with the credential for the stacklens server, sent as
/// `Authorization: Bearer`.
pub const TOKEN_ENV: &str = "STACKLENS_TOKEN";

/// The exit status when the runs are too few to decide (neither 0, passed, nor 1,
/// regressed).
pub const INCONCLUSIVE: u8 = 6;

/// How long one request to the server may take (a large profile's bytes included).
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

#[derive(Copy, Clone, ValueEnum, PartialEq, Eq)]
pub enum GateFormat {
    Text,
    Json,
    /// JUnit XML: a test case each function and package, a failure each regression.
    Junit,
    /// A summary for a pull-request comment or $GITHUB_STEP_SUMMARY.
    Markdown,
    /// GitHub Actions workflow commands: an ::error annotation each regression.
    Github,
}

#[derive(clap::Args)]
#[command(group(ArgGroup::new("base_side").required(true).args(["base", "baseline_id", "baseline_url"])))]
pub struct GateArgs {
    /// The base runs: profiles of the code before the change, one a run (any format
    /// stacklens reads). It takes the names up to the next option.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    base: Vec<PathBuf>,
    /// The runs to compare with the base: profiles of the changed code, one a run.
    #[arg(long, num_args = 1.., value_name = "FILE", required = true)]
    compare: Vec<PathBuf>,
    /// Thresholds and rules (TOML): alpha, min_effect, min_relative, alternative,
    /// sample_type and [[rule]] match = "REGEX" entries; the defaults without it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Sample type by name or index, instead of the configuration's (default as pprof).
    #[arg(long)]
    sample_index: Option<String>,
    /// Base runs from baselines on the --server, a baseline a run (with $STACKLENS_TOKEN).
    #[arg(long, num_args = 1.., value_name = "ID", requires = "server")]
    baseline_id: Vec<String>,
    /// Base runs from baselines by link: the page's (…/#/b/ID) or the API's
    /// (…/api/v1/profiling/baselines/ID), a baseline a run.
    #[arg(long, num_args = 1.., value_name = "URL")]
    baseline_url: Vec<String>,
    /// A stacklens server: where --baseline-id are; both sides are uploaded to it,
    /// merged, and the report links their diff view.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    format: GateFormat,
    #[command(flatten)]
    symbols: crate::cli::symbols::SymbolArgs,
}

/// A baseline on a server: its API address and id, and the tenant its link names.
struct Baseline {
    server: Url,
    id: String,
    tenant: Option<String>,
}

/// A usage error about `what` (an option or file).
fn usage(what: impl std::fmt::Display, why: impl std::fmt::Display) -> CliError {
    CliError::Usage(format!("{what}: {why}"))
}

fn server_url(text: &str) -> Result<Url, CliError> {
    let url = Url::parse(text).map_err(|e| usage(format!("--server {text}"), e))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(usage(format!("--server {text}"), "not an http(s) address"));
    }
    Ok(url)
}

impl Baseline {
    /// A baseline's page link (`…/#/b/ID[?tenant=T]`) or API address
    /// (`…/api/v1/profiling/baselines/ID[?tenant=T]`).
    fn from_link(link: &str) -> Result<Baseline, CliError> {
        let bad = |why: &str| usage(format!("--baseline-url {link}"), why);
        let mut url = server_url(link).map_err(|_| bad("not an http(s) address"))?;
        let (id, tenant) = match url.fragment().map(str::to_owned) {
            Some(fragment) => {
                let (route, query) = fragment.split_once('?').unwrap_or((&fragment, ""));
                let id = route.strip_prefix("/b/").filter(|id| !id.is_empty() && !id.contains('/'));
                let tenant = url::form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "tenant");
                (
                    id.ok_or_else(|| bad("not a baseline link (…/#/b/ID)"))?.to_owned(),
                    tenant.map(|(_, t)| t.into_owned()),
                )
            }
            None => {
                let segments: Vec<String> = url.path_segments().into_iter().flatten().map(str::to_owned).collect();
                let at = segments.windows(5).rposition(|w| w[..4] == ["api", "v1", "profiling", "baselines"]);
                let at = at.filter(|&at| at + 5 == segments.len() && !segments[at + 4].is_empty());
                let at =
                    at.ok_or_else(|| bad("not a baseline's address (…/#/b/ID or …/api/v1/profiling/baselines/ID)"))?;
                let tenant = url.query_pairs().find(|(k, _)| k == "tenant").map(|(_, t)| t.into_owned());
                url.path_segments_mut().map_err(|()| bad("not a base"))?.clear().extend(&segments[..at]);
                (segments[at + 4].clone(), tenant)
            }
        };
        url.set_fragment(None);
        url.set_query(None);
        Ok(Baseline { server: url, id, tenant })
    }

    /// `server`'s API route `/api/v1/…segments`, for this baseline's tenant.
    fn api(&self, segments: &[&str]) -> Url {
        let mut url = api_url(&self.server, segments);
        if let Some(tenant) = &self.tenant {
            url.query_pairs_mut().append_pair("tenant", tenant);
        }
        url
    }
}

/// `server`'s API route `/api/v1/…segments` (each segment escaped).
fn api_url(server: &Url, segments: &[&str]) -> Url {
    let mut url = server.clone();
    url.set_fragment(None);
    url.set_query(None);
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(["api", "v1"]).extend(segments);
    }
    url
}

/// Requests to a stacklens server, with the credential of [`TOKEN_ENV`].
struct Remote {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    token: Option<String>,
}

impl Remote {
    fn new() -> Result<Remote, CliError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::Serve(format!("cannot start the HTTP client: {e}")))?;
        let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.trim().is_empty());
        Ok(Remote { runtime, http: reqwest::Client::new(), token })
    }

    /// The body of a successful answer to `request`; otherwise the server's words, and
    /// for 401 and 403 a word on the credential.
    fn send(&self, request: reqwest::RequestBuilder) -> Result<Bytes, String> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token.trim()),
            None => request,
        };
        self.runtime.block_on(crate::open::body_of(request.timeout(REQUEST_TIMEOUT))).map_err(|(status, reason)| {
            let refused = status.is_some_and(|s| s == StatusCode::UNAUTHORIZED || s == StatusCode::FORBIDDEN);
            match (&self.token, refused) {
                (None, true) => format!("{reason} (set {TOKEN_ENV} to a credential for this server)"),
                (Some(_), true) => format!("{reason} (the credential in {TOKEN_ENV} was refused)"),
                (_, false) => reason,
            }
        })
    }

    fn get(&self, url: &Url) -> Result<Bytes, CliError> {
        self.send(self.http.get(url.clone())).map_err(|reason| CliError::Fetch { url: url.to_string(), reason })
    }

    /// The baseline's profile: the bytes of the session it saved.
    fn baseline(&self, baseline: &Baseline) -> Result<(String, Bytes), CliError> {
        let record_url = baseline.api(&["profiling", "baselines", &baseline.id]);
        let record = self.get(&record_url)?;
        let record: BaselineResponse = serde_json::from_slice(&record)
            .map_err(|e| CliError::Fetch { url: record_url.to_string(), reason: format!("not a baseline: {e}") })?;
        let raw = baseline.api(&["profiles", &record.record.session_id, "raw"]);
        let bytes = self.get(&raw)?;
        Ok((raw.to_string(), bytes))
    }

    /// Uploads `bytes` as a profile named `name`: the page's share link of the session.
    fn upload(&self, server: &Url, name: &str, bytes: Vec<u8>) -> Result<String, CliError> {
        let mut url = api_url(server, &["profiles"]);
        url.query_pairs_mut().append_pair("name", name);
        let failed =
            |reason: String| CliError::Write { path: url.to_string().into(), source: std::io::Error::other(reason) };
        let answer = self.send(self.http.post(url.clone()).body(bytes)).map_err(failed)?;
        let session: SessionResponse =
            serde_json::from_slice(&answer).map_err(|e| failed(format!("not a stored profile: {e}")))?;
        Ok(session.share_url)
    }
}

/// The diff view of two sessions, from their share links (`BASE/#/s/ID[?tenant=T]`),
/// which carry the server's public address and the tenant.
fn diff_link(base: &str, compare: &str) -> Option<String> {
    let (address, base_rest) = base.split_once("/#/s/")?;
    let (_, compare_rest) = compare.split_once("/#/s/")?;
    let (base_id, query) =
        base_rest.split_once('?').map_or((base_rest, String::new()), |(id, q)| (id, format!("?{q}")));
    let compare_id = compare_rest.split('?').next()?;
    Some(format!("{address}/#/diff/{base_id}/{compare_id}{query}"))
}

/// The configuration file's gate, or the defaults.
fn configured(path: Option<&Path>, sample_index: Option<String>) -> Result<Gate, CliError> {
    let mut config = match path {
        None => GateConfig::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|source| CliError::Read { path: path.to_owned(), source })?;
            toml::from_str(&text).map_err(|e| usage(path.display(), e.to_string().trim_end()))?
        }
    };
    if let Some(sample_index) = sample_index {
        config.sample_type = sample_index;
    }
    let what = path.map_or_else(|| "gate".to_owned(), |p| p.display().to_string());
    Gate::new(config).map_err(|e| usage(what, e))
}

/// One side's runs, as they are read: each profile's shares (checked against the
/// first run of either side) and, for the server, the side's profiles merged.
struct Side<'a> {
    gate: &'a Gate,
    runs: Vec<Run>,
    merger: Option<Merger>,
}

impl Side<'_> {
    fn add(&mut self, input: &str, profile: Profile, first: Option<&Run>) -> Result<(), CliError> {
        let named = |source| CliError::Merge { path: input.into(), source };
        let run =
            Query::of_sample(self.gate.sample_type()).prepare(&profile).and_then(|p| Run::of(&p)).map_err(named)?;
        if let Some(first) = first.or(self.runs.first()) {
            run.check_matches(first).map_err(named)?;
        }
        if let Some(merger) = &mut self.merger {
            merger.add(&profile).map_err(named)?;
        }
        self.runs.push(run);
        Ok(())
    }

    /// The merged profile as gzipped pprof, opening in the gate's sample type.
    fn merged(self) -> Result<Option<Vec<u8>>, CliError> {
        let Some(merger) = self.merger else { return Ok(None) };
        let query = Query::of_sample(self.gate.sample_type());
        Ok(Some(export(&query.prepare(&merger.finish()?)?, ExportFormat::Pprof)?))
    }
}

pub fn run(args: GateArgs) -> Result<ExitCode, CliError> {
    let gate = configured(args.config.as_deref(), args.sample_index)?;
    let server = args.server.as_deref().map(server_url).transpose()?;
    let mut baselines: Vec<Baseline> =
        args.baseline_url.iter().map(|link| Baseline::from_link(link)).collect::<Result<_, _>>()?;
    if let Some(server) = &server {
        baselines.extend(args.baseline_id.iter().map(|id| Baseline {
            server: server.clone(),
            id: id.clone(),
            tenant: None,
        }));
    }
    let base_count = args.base.len() + baselines.len();
    gate.check_runs(base_count, args.compare.len()).map_err(|e| CliError::Usage(e.to_string()))?;
    let remote = Remote::new()?;

    let new_side = || Side { gate: &gate, runs: Vec::new(), merger: server.as_ref().map(|_| Merger::default()) };
    let mut base = new_side();
    let symbolized = |mut profile: Profile| {
        args.symbols.apply(&mut profile);
        profile
    };
    for file in &args.base {
        base.add(&file.display().to_string(), symbolized(load(file)?), None)?;
    }
    for baseline in &baselines {
        let (url, bytes) = remote.baseline(baseline)?;
        base.add(&url, symbolized(parse(&url, &bytes)?), None)?;
    }
    let mut compare = new_side();
    for file in &args.compare {
        compare.add(&file.display().to_string(), symbolized(load(file)?), base.runs.first())?;
    }
    let mut report = gate.compare(&base.runs, &compare.runs)?;
    if let Some(server) = &server {
        report.diff_url = upload_sides(&remote, server, base, compare)?;
    }

    match args.format {
        GateFormat::Json => print_json(&report),
        GateFormat::Junit => print!("{}", junit(&report)),
        GateFormat::Text => print!("{}", for_terminal(&text(&report))),
        GateFormat::Markdown => print!("{}", for_terminal(&markdown(&report))),
        GateFormat::Github => print!("{}", for_terminal(&github(&report))),
    }
    match report.status {
        Status::Passed => Ok(ExitCode::SUCCESS),
        Status::Failed => {
            eprintln!("stacklens: gate failed: {}", for_terminal(&regressed(&report)));
            Ok(ExitCode::from(1))
        }
        Status::Inconclusive => {
            eprintln!("stacklens: gate inconclusive: {}", inconclusive(&report));
            Ok(ExitCode::from(INCONCLUSIVE))
        }
    }
}

/// Both sides merged and uploaded: the link of their diff view.
fn upload_sides(remote: &Remote, server: &Url, base: Side, compare: Side) -> Result<Option<String>, CliError> {
    let (Some(base), Some(compare)) = (base.merged()?, compare.merged()?) else { return Ok(None) };
    let base = remote.upload(server, "gate-base.pb.gz", base)?;
    let compare = remote.upload(server, "gate-compare.pb.gz", compare)?;
    Ok(diff_link(&base, &compare))
}

/// `3 regressions: main.parse (flat +12.30 pp), …` for standard error.
fn regressed(report: &GateReport) -> String {
    let named: Vec<String> = report
        .rows(Verdict::Regression)
        .take(3)
        .map(|(_, row)| format!("{} ({:+.2} pp)", row.name, row.deciding().difference))
        .collect();
    let more = report.regression_count.saturating_sub(named.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let noun = if report.regression_count == 1 { "regression" } else { "regressions" };
    format!("{} {noun}: {}{more}", report.regression_count, named.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_links_name_the_server_the_id_and_the_tenant() {
        let b = Baseline::from_link("http://host:8080/#/b/0192abc").unwrap();
        assert_eq!((b.server.as_str(), b.id.as_str(), b.tenant), ("http://host:8080/", "0192abc", None));
        let b = Baseline::from_link("https://p.example/stacklens/#/b/xyz?tenant=acme").unwrap();
        assert_eq!(
            (b.server.as_str(), b.id.as_str(), b.tenant.as_deref()),
            ("https://p.example/stacklens/", "xyz", Some("acme"))
        );
        assert_eq!(
            b.api(&["profiles", "a b", "raw"]).as_str(),
            "https://p.example/stacklens/api/v1/profiles/a%20b/raw?tenant=acme"
        );
        let b = Baseline::from_link("http://h/prefix/api/v1/profiling/baselines/id1?tenant=t").unwrap();
        assert_eq!((b.server.as_str(), b.id.as_str(), b.tenant.as_deref()), ("http://h/prefix", "id1", Some("t")));
        assert_eq!(
            b.api(&["profiling", "baselines", "id1"]).as_str(),
            "http://h/prefix/api/v1/profiling/baselines/id1?tenant=t"
        );
        for bad in
            ["http://h/#/s/id", "http://h/api/v1/profiling/baselines/", "ftp://h/#/b/x", "http://h/x", "nonsense"]
        {
            assert!(Baseline::from_link(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_diff_link_keeps_the_public_address_and_tenant() {
        assert_eq!(
            diff_link("http://pub/#/s/aaa?tenant=t", "http://pub/#/s/bbb?tenant=t").as_deref(),
            Some("http://pub/#/diff/aaa/bbb?tenant=t")
        );
        assert_eq!(diff_link("http://pub/x/#/s/a", "http://pub/x/#/s/b").as_deref(), Some("http://pub/x/#/diff/a/b"));
        assert_eq!(diff_link("http://pub/", "http://pub/#/s/b"), None);
    }
}
