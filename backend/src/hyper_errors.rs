//! hyper answers a request it cannot parse (a URI longer than 64 KiB, a header section
//! larger than its read buffer, bytes that are not HTTP/1) on its own, before any handler
//! runs: a 414, 431 or 400 with an empty body, and then it closes the connection.
//! [`JsonErrors`] wraps a connection and rewrites exactly those answers into the API's
//! error shape, so that every error a client gets carries a JSON body.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection whose bare parse-error answers from hyper come out as JSON errors.
pub struct JsonErrors<S> {
    inner: S,
    /// A rewritten answer being written, and how much of it is written.
    replacement: Option<(Vec<u8>, usize)>,
}

impl<S> JsonErrors<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, replacement: None }
    }
}

/// The JSON answer for one of hyper's own: a 400, 414 or 431 status line, headers
/// without a content type, `content-length: 0` and nothing after them. The API's own
/// errors always have a JSON body and a content type, so they never match.
fn rewrite(answer: &[u8]) -> Option<Vec<u8>> {
    // Every write passes here: bodies and answers with one are let through at a glance.
    if answer.len() > 1024 || !answer.starts_with(b"HTTP/1.1 4") || !answer.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(answer).ok()?;
    let head = text.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let (code, message) = match status_line.strip_prefix("HTTP/1.1 ")?.get(..3)? {
        "400" => ("BadRequest", "the request is not valid HTTP/1.1 (a malformed request line or header)"),
        "414" => ("UriTooLong", "the URI is longer than the 64 KiB the server reads"),
        "431" => ("RequestHeaderFieldsTooLarge", "the request's header section is larger than the server reads"),
        _ => return None,
    };
    let headers: Vec<&str> = lines.collect();
    let named = |h: &str, name: &str| h.len() > name.len() && h[..name.len()].eq_ignore_ascii_case(name);
    let empty = headers.iter().any(|h| named(h, "content-length:") && h["content-length:".len()..].trim() == "0");
    if !empty || headers.iter().any(|h| named(h, "content-type:")) {
        return None;
    }
    let body = serde_json::json!({ "message": message, "error_code": code, "details": {} }).to_string();
    let mut out = format!("{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len());
    for h in headers.iter().filter(|h| !named(h, "content-length:") && !named(h, "connection:")) {
        out.push_str(h);
        out.push_str("\r\n");
    }
    out.push_str("connection: close\r\n\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

impl<S: AsyncWrite + Unpin> JsonErrors<S> {
    /// Writes the pending replacement; `written` is what the caller asked to write.
    fn finish_replacement(&mut self, cx: &mut Context<'_>, written: usize) -> Poll<io::Result<usize>> {
        let Some((bytes, done)) = self.replacement.as_mut() else { return Poll::Ready(Ok(written)) };
        while *done < bytes.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        self.replacement = None;
        Poll::Ready(Ok(written))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // hyper writes its answer in one piece and, until it is taken, offers it again.
        if self.replacement.is_none() {
            match rewrite(buf) {
                Some(json) => self.replacement = Some((json, 0)),
                None => return Pin::new(&mut self.inner).poll_write(cx, buf),
            }
        }
        self.finish_replacement(cx, buf.len())
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // An answer without a body is its head alone.
        if self.replacement.is_some() || (bufs.len() == 1 && rewrite(&bufs[0]).is_some()) {
            return self.poll_write(cx, &bufs[0]);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.finish_replacement(cx, 0))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.finish_replacement(cx, 0))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn hyper_answers_become_json_and_others_pass() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Mon, 23 Nov 2026 11:00:00 GMT\r\n\r\n";
        let json = String::from_utf8(rewrite(bare).unwrap()).unwrap();
        let (head, body) = json.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            head,
            format!(
                "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 date: Mon, 23 Nov 2026 11:00:00 GMT\r\nconnection: close",
                body.len()
            )
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        let message = "the request's header section is larger than the server reads";
        assert_eq!(
            body,
            serde_json::json!({"message": message, "error_code": "RequestHeaderFieldsTooLarge", "details": {}})
        );
        // The API's own errors, answers with a body, and other statuses are left alone.
        for other in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 10\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert_eq!(rewrite(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
