//! `stacklens serve` (and `open`): the page, the REST API over object storage, and a
//! health check. Stateless: every replica over the same store serves the same data.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};
use tower_http::compression::CompressionLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;

use crate::api;
use crate::auth::Auth;
use crate::budget::{self, Budget};
use crate::connections::{self, Connections, Limits, Tracked};
use crate::debuginfod::{Bounds, Upstreams};
use crate::open::Opened;
use crate::page::Page;
use crate::state::{AppState, State};
use crate::store::Store;
use crate::targets::Targets;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The built page (Trunk's output) [default: the page built into this binary, else
    /// ./dist].
    #[arg(long)]
    dist: Option<PathBuf>,
    /// Object storage: file:///path, a plain folder, memory://, s3://bucket (AWS_*
    /// variables, AWS_ENDPOINT and AWS_ALLOW_HTTP for S3-compatible servers), gs://, az://.
    #[arg(long, default_value = "./data")]
    store: String,
    /// Largest accepted upload, e.g. 256MiB, 10MB, 1048576.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    max_upload: usize,
    /// API keys, one per line: `TOKEN` (admin, any tenant), `TENANT:TOKEN`, or
    /// `TENANT:sha256:HEX`; `#` comments. Re-read on SIGHUP.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Accept HS256 JWTs signed with the secret in this file (claims: tenant, exp, scope).
    #[arg(long)]
    jwt_secret_file: Option<PathBuf>,
    /// Accept RS256 or ES256 JWTs verified with this PEM public key.
    #[arg(long)]
    jwt_public_key: Option<PathBuf>,
    /// Memory for parsing and analysing profiles at once, e.g. 4GiB (default: a quarter
    /// of RAM). Work beyond it waits in a bounded queue, then gets 503 with Retry-After.
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<usize>,
    /// Largest size a gzipped profile may inflate to (default: 4 × --max-upload).
    #[arg(long, value_parser = parse_size)]
    inflate_cap: Option<usize>,
    /// Requests that may wait for memory at once; more get 503.
    #[arg(long, default_value_t = 64)]
    max_queue: usize,
    /// Seconds a client may take to send a request's headers.
    #[arg(long, default_value_t = 10)]
    header_timeout_secs: u64,
    /// Seconds a connection (HTTP/1 or HTTP/2) may carry no request before it is closed.
    #[arg(long, default_value_t = 60)]
    idle_timeout_secs: u64,
    /// Connections open at once (at most what the open-file limit leaves room for); past
    /// it the longest-idle connection is closed for a new one, or the new one is shed.
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// Connections open at once from one address, with the same rule (a reverse proxy's
    /// clients all come from its address).
    #[arg(long, default_value_t = 1024)]
    max_connections_per_peer: usize,
    /// Origins allowed to call the API from other pages (repeat for several; `*` for any).
    #[arg(long = "cors-origin")]
    cors_origins: Vec<String>,
    /// The address share links use (default: the request's Host); its host is one the
    /// server answers to, and its origin may change data.
    #[arg(long)]
    public_url: Option<String>,
    /// A host name the server answers to besides IP addresses, localhost and the
    /// --public-url's host (repeat for several; `*` for any). Requests naming another
    /// host get 421, which stops DNS rebinding.
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Services to capture profiles from (see README).
    #[arg(long)]
    targets: Option<PathBuf>,
    /// Requests taking longer (a slow body included) are answered 408.
    #[arg(long, default_value_t = 120)]
    request_timeout_secs: u64,
    /// Longest one object-storage operation may take before the request fails with 504.
    #[arg(long, default_value_t = 30)]
    store_timeout_secs: u64,
    /// Seconds past its own length after which a capture without an outcome counts as
    /// interrupted and its lease expires (more than the fetch's 30 s of slack).
    #[arg(long, default_value_t = 120, hide = true)]
    capture_grace_secs: u64,
    /// Milliseconds between two looks at the continuous-capture schedules.
    #[arg(long, default_value_t = 1000, hide = true)]
    schedule_tick_ms: u64,
    /// Days the time index keeps profiles (pushes, captures, uploads with a service),
    /// e.g. 30 or 0.5; kept until deleted without it. A baseline still pins its profile.
    #[arg(long, value_parser = parse_days)]
    retention_days: Option<Duration>,
    /// Milliseconds between two passes of the sweep that removes expired links and,
    /// with --retention-days, old index entries.
    #[arg(long, default_value_t = 60_000, hide = true)]
    retention_tick_ms: u64,
    /// Milliseconds between two compaction passes (closed hours into blocks); 0: none on
    /// this replica (`stacklens compact` runs one pass).
    #[arg(long, default_value_t = 60_000, hide = true)]
    compact_tick_ms: u64,
    /// Seconds a compaction pass holds a tenant's lease (a replica killed mid-pass keeps
    /// others from that tenant that long).
    #[arg(long, default_value_t = crate::runs::compact::LEASE_SECS, hide = true)]
    compact_lease_secs: u64,
    /// The shortest `expiresIn` uploads and blobs may ask for, e.g. 1h, 30m.
    #[arg(long, default_value = "1h", value_parser = crate::lifetime::parse)]
    min_expires_in: Duration,
    /// The longest `expiresIn` uploads and blobs may ask for, e.g. 365d, 30d.
    #[arg(long, default_value = "365d", value_parser = crate::lifetime::parse)]
    max_expires_in: Duration,
    /// An upstream debuginfod (repeat for several): the server fetches binaries and debug
    /// files it lacks from them by build id, and keeps them in its store.
    #[arg(long = "debuginfod")]
    debuginfod: Vec<String>,
    /// Seconds one upstream debuginfod request may take; one that does not answer is
    /// remembered as a miss for ten minutes.
    #[arg(long, default_value_t = 30)]
    debuginfod_timeout_secs: u64,
    /// Largest binary or debug file uploaded or fetched, e.g. 2GiB.
    #[arg(long, default_value = "2GiB", value_parser = parse_size)]
    max_debuginfo: usize,
}

fn parse_days(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(days) if days > 0.0 && days <= 36_500.0 => Ok(Duration::from_secs_f64(days * 86_400.0)),
        _ => Err(format!("'{text}' is not a number of days within (0, 36500]")),
    }
}

impl ServeArgs {
    /// `serve`'s defaults with the in-memory store, for `stacklens open`: nothing is
    /// written anywhere.
    pub fn in_memory(listen: SocketAddr, dist: Option<PathBuf>) -> ServeArgs {
        #[derive(clap::Parser)]
        struct Defaults {
            #[command(flatten)]
            args: ServeArgs,
        }
        let defaults =
            <Defaults as clap::Parser>::try_parse_from(["serve"]).expect("serve's options all have defaults");
        ServeArgs { listen, dist, store: "memory://".to_owned(), ..defaults.args }
    }
}

/// Longest request URI (path and query) accepted.
const MAX_URI: usize = 8 * 1024;

/// `256MiB`, `10MB`, `64KiB`, `1048576`.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: usize = digits.parse().map_err(|_| format!("'{text}' is not a size like 256MiB"))?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" | "k" => 1 << 10,
        "mb" => 1_000_000,
        "mib" | "m" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" | "g" => 1 << 30,
        other => return Err(format!("unknown size unit '{other}' in '{text}'")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("'{text}' is too large"))
}

/// Answers what no handler sees: URIs that are too long, and requests that take too long.
async fn guard(timeout: Duration, req: Request, next: axum::middleware::Next) -> axum::response::Response {
    if req.uri().to_string().len() > MAX_URI {
        return api::ApiError::new(
            StatusCode::URI_TOO_LONG,
            "UriTooLong",
            format!("the URI is longer than {MAX_URI} bytes"),
        )
        .into_response();
    }
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => api::ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "RequestTimeout",
            format!("the request took longer than {} s", timeout.as_secs()),
        )
        .into_response(),
    }
}

pub fn router(page: &Page, state: State, cors_origins: &[String], policy: api::Policy, timeout: Duration) -> Router {
    let policy = std::sync::Arc::new(policy);
    let mut app = api::router(state)
        .0
        .fallback_service(crate::page::router(page))
        // Raw profiles are mostly gzip already.
        .layer(
            CompressionLayer::new()
                .compress_when(DefaultPredicate::new().and(NotForContentType::const_new("application/octet-stream"))),
        )
        .layer(axum::middleware::from_fn(move |req, next| guard(timeout, req, next)))
        .layer(axum::middleware::from_fn(move |req, next| api::check_origin(policy.clone(), req, next)));
    if !cors_origins.is_empty() {
        let origins = if cors_origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(cors_origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
        };
        app = app.layer(
            CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([
                    header::CONTENT_TYPE,
                    header::AUTHORIZATION,
                    HeaderName::from_static("x-tenant-id"),
                    HeaderName::from_static("x-stacklens-expires-in"),
                    HeaderName::from_static("x-stacklens-delete-token"),
                ]),
        );
    }
    app.layer(TraceLayer::new_for_http())
}

fn invalid_input(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
}

/// Serves until SIGTERM or Ctrl-C; `listening` is told the address once it is bound.
pub fn run(args: ServeArgs, opened: Opened, listening: impl FnOnce(SocketAddr)) -> std::io::Result<()> {
    budget::tune_allocator();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .init();
    let page = Page::choose(args.dist.as_deref()).map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e))?;
    let auth = Auth::load(args.token_file.as_deref(), args.jwt_secret_file.as_deref(), args.jwt_public_key.as_deref())
        .map_err(invalid_input)?;
    let targets = match &args.targets {
        Some(path) => Targets::load(path).map_err(invalid_input)?,
        None => Targets::default(),
    };
    let policy =
        api::Policy::new(&args.cors_origins, args.public_url.as_deref(), &args.allowed_hosts).map_err(invalid_input)?;
    if args.min_expires_in > args.max_expires_in {
        return Err(invalid_input("--min-expires-in is longer than --max-expires-in"));
    }
    let store = Store::open(&args.store, Duration::from_secs(args.store_timeout_secs.max(1))).map_err(invalid_input)?;
    let budget_total = args.memory_budget.map_or_else(budget::default_total, |b| b as u64);
    let inflate_cap = args.inflate_cap.map_or((args.max_upload as u64).saturating_mul(4), |c| c as u64);
    let request_timeout = Duration::from_secs(args.request_timeout_secs);
    let budget = Budget::new(budget_total, inflate_cap, args.max_queue, request_timeout / 4);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        let address = listener.local_addr()?;
        tracing::info!(
            "listening on http://{address} with {page} and store {}; memory budget {} MiB, inflate cap {} MiB",
            store.description,
            budget.total() >> 20,
            inflate_cap >> 20
        );
        if !auth.configured() && !address.ip().is_loopback() {
            tracing::warn!(
                "listening on {address} without credentials: anyone who reaches it can read and write every tenant \
                 (use --token-file or --jwt-secret-file/--jwt-public-key)"
            );
        }
        // Before serving, so that listings find entries an earlier version wrote.
        match crate::records::refile_legacy_entries(&store).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("refiled {n} index entries into time buckets"),
            Err(e) => tracing::warn!("refiling index entries an earlier version wrote: {e}"),
        }
        let state = std::sync::Arc::new(AppState {
            store,
            auth,
            budget,
            max_upload: args.max_upload,
            public_url: args.public_url,
            targets,
            // Captures follow no redirect unless their target allows it (runs::capture).
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| std::io::Error::other(e.to_string()))?,
            schedule_tick: Duration::from_millis(args.schedule_tick_ms.max(10)),
            capture_grace: Duration::from_secs(args.capture_grace_secs),
            opened,
            lifetimes: crate::lifetime::Limits { min: args.min_expires_in, max: args.max_expires_in },
            debuginfod: Upstreams {
                urls: args.debuginfod,
                bounds: Bounds {
                    timeout: Duration::from_secs(args.debuginfod_timeout_secs.max(1)),
                    limit: args.max_debuginfo,
                },
            },
            max_debuginfo: args.max_debuginfo,
            compaction: std::sync::Arc::default(),
        });
        tokio::spawn(reload_on_hangup(state.clone()));
        if !state.targets.targets.is_empty() {
            // Continuous captures run on every replica; leases keep slots single.
            tokio::spawn(crate::runs::schedule::run_forever(state.clone()));
        }
        let tick = Duration::from_millis(args.retention_tick_ms.max(10));
        tokio::spawn(crate::runs::retention::run_forever(state.store.clone(), args.retention_days, tick));
        if args.compact_tick_ms > 0 {
            let tick = Duration::from_millis(args.compact_tick_ms.max(10));
            tokio::spawn(crate::runs::compact::run_forever(state.clone(), tick, args.compact_lease_secs.max(1)));
        }
        let app = router(&page, state, &args.cors_origins, policy, request_timeout);
        listening(address);
        let limits = Limits {
            max: connections::fitting_the_fd_limit(args.max_connections),
            per_peer: args.max_connections_per_peer.max(1),
            idle: Duration::from_secs(args.idle_timeout_secs.max(1)),
        };
        tracing::info!(
            "at most {} connections, {} per address, closed after {:?} idle",
            limits.max,
            limits.per_peer,
            limits.idle
        );
        serve_connections(listener, app, Duration::from_secs(args.header_timeout_secs), limits).await;
        Ok(())
    })
}

/// Accepts connections until SIGTERM or Ctrl-C, then lets open requests finish. Unlike
/// `axum::serve`, hyper's builder bounds how long a client may take to send headers, and
/// [`Connections`] bounds how many connections are open and how long they idle.
async fn serve_connections(listener: tokio::net::TcpListener, app: Router, header_timeout: Duration, limits: Limits) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;

    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        // A peer that stops answering pings is gone; its connection goes with it.
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20))
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(H2_MAX_HEADER_LIST)
        // Rapid reset: streams a client opens and cancels at once are bounded (h2's default).
        .max_pending_accept_reset_streams(Some(20))
        .max_local_error_reset_streams(Some(256));
    let connections = Connections::new(limits);
    // Held so that, out of file descriptors, one can be freed to accept and shed a connection.
    let mut reserve = std::fs::File::open("/dev/null").ok();
    let mut accept_errors: u64 = 0;
    let mut stop = std::pin::pin!(shutdown());
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        accept_errors += 1;
                        if accept_errors.is_power_of_two() {
                            tracing::warn!("accept: {e} ({accept_errors} accept errors so far)");
                        }
                        let out_of_fds = [nix::errno::Errno::EMFILE, nix::errno::Errno::ENFILE]
                            .iter()
                            .any(|&errno| e.raw_os_error() == Some(errno as i32));
                        // Out of file descriptors: an idle connection closes to free one, and
                        // the waiting client is accepted once it has; with none idle, the
                        // waiting one is accepted with the reserve's descriptor and shed, so
                        // the queue moves.
                        if out_of_fds && connections.evict_one_idle() {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        } else if out_of_fds && reserve.take().is_some() {
                            drop(tokio::time::timeout(Duration::from_millis(10), listener.accept()).await);
                            reserve = std::fs::File::open("/dev/null").ok();
                        } else {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        continue;
                    }
                };
                let Some(slot) = connections.admit(peer.ip()) else { continue };
                let service = TowerToHyperService::new(Tracked::new(app.clone(), slot.activity()));
                let builder = builder.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        spoke = client_spoke(&stream, header_timeout) => if !spoke { return },
                        () = slot.closing() => return,
                    }
                    let stream = crate::hyper_errors::JsonErrors::new(stream);
                    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    let mut connection = std::pin::pin!(connection);
                    tokio::select! {
                        _ = connection.as_mut() => return,
                        () = slot.closing() => connection.as_mut().graceful_shutdown(),
                    }
                    // What it carries may finish; a client that keeps it open past that is cut
                    // off. HTTP/2's graceful close waits for the client to answer a ping, which
                    // an idle attacker never does: an idle connection gets a moment only.
                    let grace = if slot.is_idle() { IDLE_CLOSING_GRACE } else { CLOSING_GRACE };
                    let _ = tokio::time::timeout(grace, connection).await;
                });
            }
            _ = &mut stop => break,
        }
    }
    connections.close_all();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while connections.count() > 0 {
        if tokio::time::Instant::now() > deadline {
            tracing::warn!("requests still open after 30 s; stopping anyway");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// HTTP/2 streams one connection may carry at once.
const H2_MAX_STREAMS: u32 = 128;
/// Largest HTTP/2 header list (a CONTINUATION flood stops there).
const H2_MAX_HEADER_LIST: u32 = 64 * 1024;
/// How long a connection asked to close may take to finish what it carries.
const CLOSING_GRACE: Duration = Duration::from_secs(30);
/// How long an idle connection asked to close has to take its GOAWAY (its descriptor
/// may be wanted by a new client).
const IDLE_CLOSING_GRACE: Duration = Duration::from_millis(100);

/// Whether the client sent, within `limit`, enough to tell HTTP/1 from HTTP/2: the
/// auto builder waits for those first bytes with no timer of its own, so a client that
/// connects and sends nothing (or part of the HTTP/2 preface) would hold a connection
/// forever; the header timeout starts after them.
async fn client_spoke(stream: &tokio::net::TcpStream, limit: Duration) -> bool {
    const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let spoke = async {
        let mut first = [0u8; 24];
        loop {
            match stream.peek(&mut first).await {
                Ok(n) if n > 0 && n < H2_PREFACE.len() && first[..n] == H2_PREFACE[..n] => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(n) => return n > 0,
                Err(_) => return false,
            }
        }
    };
    tokio::time::timeout(limit, spoke).await.unwrap_or(false)
}

/// SIGHUP re-reads the token file.
async fn reload_on_hangup(state: State) {
    #[cfg(unix)]
    {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        while hangups.recv().await.is_some() {
            match state.auth.reload() {
                Ok(n) => tracing::info!("SIGHUP: {n} API keys loaded"),
                Err(e) => tracing::error!("SIGHUP: {e}"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = state;
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}
