//! The page (Trunk's build), from a folder or built into the binary, answered the same
//! way from either: hashed assets are immutable, everything else is revalidated by
//! ETag; unknown routes get index.html (the app's own routes), unknown files a JSON 404.

use std::path::{Path, PathBuf};

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use tower::Service;
use tower_http::services::{ServeDir, ServeFile};

use crate::api::ApiError;

/// `dist/` as it was when this binary was built; empty when it was built before
/// `trunk build` (build.rs also makes changes to `dist/` rebuild it).
#[derive(rust_embed::Embed)]
#[folder = "../dist/"]
#[allow_missing = true]
struct BuiltIn;

/// Where the page's files come from.
#[derive(Clone, Debug)]
pub enum Page {
    /// A folder: `--dist`, or `./dist` for a binary without the page.
    Dir(PathBuf),
    /// The page built into the binary.
    BuiltIn,
}

impl Page {
    /// `dist` when given; else the page built in; else `./dist`. The error says how to
    /// get one.
    pub fn choose(dist: Option<&Path>) -> Result<Page, String> {
        let dir = match dist {
            Some(dir) => dir.to_owned(),
            None if BuiltIn::get("index.html").is_some() => return Ok(Page::BuiltIn),
            None => PathBuf::from("dist"),
        };
        if !dir.join("index.html").is_file() {
            return Err(format!(
                "{}/index.html not found: build the page first (trunk build --release)",
                dir.display()
            ));
        }
        Ok(Page::Dir(dir))
    }
}

impl std::fmt::Display for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Page::Dir(dir) => write!(f, "the page in {}", dir.display()),
            Page::BuiltIn => f.write_str("the built-in page"),
        }
    }
}

pub fn router(page: &Page) -> Router {
    let files = match page {
        Page::Dir(dist) => {
            let index = ServeFile::new(dist.join("index.html"));
            let spa = tower::service_fn(move |req: Request| {
                let mut index = index.clone();
                async move {
                    if let Some(missing) = missing_file(req.uri().path()) {
                        return Ok(missing);
                    }
                    Ok(index.call(req).await.map(IntoResponse::into_response).unwrap_or_else(|e| match e {}))
                }
            });
            Router::new().fallback_service(ServeDir::new(dist).fallback(spa))
        }
        Page::BuiltIn => Router::new().fallback(built_in),
    };
    files.layer(axum::middleware::from_fn(cache_headers)).layer(axum::middleware::from_fn(read_only))
}

/// The answer to a path no file answers when it names a file (has an extension): a
/// real 404. Other paths are the app's own routes (share links): they get index.html
/// so the app loads.
fn missing_file(path: &str) -> Option<Response> {
    let last = path.rsplit('/').next().unwrap_or("");
    last.contains('.').then(|| {
        let error = ApiError::new(StatusCode::NOT_FOUND, "NotFound", format!("{path} not found"));
        error.details(json!({ "path": path })).into_response()
    })
}

/// A file of the built-in page, or index.html for a page route.
async fn built_in(req: Request) -> Response {
    let path = req.uri().path();
    if let Some(file) = built_in_file(path.trim_start_matches('/')) {
        return file;
    }
    if let Some(missing) = missing_file(path) {
        return missing;
    }
    // `Page::BuiltIn` is only chosen when index.html is there.
    built_in_file("index.html").unwrap_or_else(|| StatusCode::NOT_FOUND.into_response())
}

/// Its content hash is its ETag (a built-in file has no modification time).
fn built_in_file(name: &str) -> Option<Response> {
    let file = BuiltIn::get(name)?;
    let tag = format!("\"{}\"", hex::encode(file.metadata.sha256_hash()));
    Some(
        ([(header::CONTENT_TYPE, file.metadata.mimetype().to_owned()), (header::ETAG, tag)], file.data).into_response(),
    )
}

/// The page takes GET and HEAD; other methods get the API's JSON 405 rather than
/// ServeDir's empty one.
async fn read_only(req: Request, next: axum::middleware::Next) -> Response {
    if matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD) {
        return next.run(req).await;
    }
    let mut response =
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "the page takes only GET and HEAD")
            .into_response();
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

/// Trunk names built assets `name-<16 hex>.ext`: such a file never changes.
fn is_hashed_asset(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or("");
    let stem = file.split('.').next().unwrap_or("");
    let stem = stem.strip_suffix("_bg").unwrap_or(stem);
    stem.rsplit_once('-').is_some_and(|(_, hash)| hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// ETags (from size and modification time for a folder's files, replacing ServeDir's;
/// a built-in file's own) with 304 answers, and cache lifetimes.
async fn cache_headers(req: Request, next: axum::middleware::Next) -> Response {
    let hashed = is_hashed_asset(req.uri().path());
    let if_none_match = req.headers().get(header::IF_NONE_MATCH).cloned();
    let mut response = next.run(req).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let headers = response.headers_mut();
    let tag = match (headers.get(header::CONTENT_LENGTH), headers.get(header::LAST_MODIFIED), headers.get(header::ETAG))
    {
        (Some(len), Some(modified), _) => {
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&(len.as_bytes(), modified.as_bytes()), &mut hasher);
            let tag = format!("W/\"{:016x}\"", std::hash::Hasher::finish(&hasher));
            HeaderValue::from_str(&tag).expect("hex digits and quotes make a header value")
        }
        (_, _, Some(tag)) => tag.clone(),
        _ => return response,
    };
    let cache = HeaderValue::from_static(if hashed { "public, max-age=31536000, immutable" } else { "no-cache" });
    headers.insert(header::CACHE_CONTROL, cache.clone());
    headers.insert(header::ETAG, tag.clone());
    if if_none_match.is_some_and(|v| v == tag) {
        let mut not_modified = StatusCode::NOT_MODIFIED.into_response();
        not_modified.headers_mut().insert(header::ETAG, tag);
        not_modified.headers_mut().insert(header::CACHE_CONTROL, cache);
        return not_modified;
    }
    response
}
