//! `stacklens serve`: the page (built `dist/`) over HTTP with a health check.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use tower::Service;
use tower_http::compression::CompressionLayer;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The built page (Trunk's output).
    #[arg(long, default_value = "dist")]
    dist: PathBuf,
}

pub fn router(dist: &std::path::Path) -> Router {
    // Unknown page routes (share links) get index.html so the app loads; an unknown
    // path that names a file (has an extension) is a real 404.
    let index = ServeFile::new(dist.join("index.html"));
    let spa = tower::service_fn(move |req: Request| {
        let mut index = index.clone();
        async move {
            let last = req.uri().path().rsplit('/').next().unwrap_or("");
            if last.contains('.') {
                let body = Json(serde_json::json!({
                    "message": format!("{} not found", req.uri().path()),
                    "error_code": "NotFound",
                    "details": {"path": req.uri().path()},
                }));
                return Ok::<_, std::convert::Infallible>((StatusCode::NOT_FOUND, body).into_response());
            }
            Ok(index.call(req).await.map(IntoResponse::into_response).unwrap_or_else(|e| match e {}))
        }
    });
    Router::new()
        .route("/healthz", get(|| async { Json(serde_json::json!({"status": "ok"})) }))
        .fallback_service(ServeDir::new(dist).fallback(spa))
        .layer(CompressionLayer::new())
        .layer(TraceLayer::new_for_http())
}

pub fn run(args: ServeArgs) -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,tower_http=info".into()),
        )
        .init();
    if !args.dist.join("index.html").is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}/index.html not found: build the page first (trunk build --release)", args.dist.display()),
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        tracing::info!("listening on http://{}", listener.local_addr()?);
        axum::serve(listener, router(&args.dist)).with_graceful_shutdown(shutdown()).await
    })
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
