//! `stacklens serve`: the page (built `dist/`) over HTTP with a health check.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::routing::get;
use axum::{Json, Router};
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
    // Unknown paths get index.html so client-side routes and share links load the app.
    let index = ServeFile::new(dist.join("index.html"));
    Router::new()
        .route("/healthz", get(|| async { Json(serde_json::json!({"status": "ok"})) }))
        .fallback_service(ServeDir::new(dist).fallback(index))
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
