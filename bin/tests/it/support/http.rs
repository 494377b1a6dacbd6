//! Requests and answers over reqwest, with a timeout on each, and one raw
//! HTTP/1.1 exchange for requests reqwest will not send as they are.

use std::fmt;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::TIMEOUT;

/// A request being built; `send` runs it with a timeout.
pub struct Req {
    pub(super) what: String,
    pub(super) inner: reqwest::RequestBuilder,
}

impl Req {
    pub fn header(self, name: &str, value: impl AsRef<str>) -> Req {
        Req { inner: self.inner.header(name, value.as_ref()), ..self }
    }

    pub fn content_type(self, content_type: &str) -> Req {
        self.header("content-type", content_type)
    }

    pub fn body(self, body: impl Into<reqwest::Body>) -> Req {
        Req { inner: self.inner.body(body), ..self }
    }

    /// `Producer-Id`, `Producer-Epoch` and `Producer-Seq`.
    pub fn producer(self, id: &str, epoch: u64, seq: u64) -> Req {
        self.header("producer-id", id)
            .header("producer-epoch", epoch.to_string())
            .header("producer-seq", seq.to_string())
    }

    /// The `Stream-Incarnation` precondition (extensions §2.4).
    pub fn incarnation(self, token: &str) -> Req {
        self.header("stream-incarnation", token)
    }

    /// `Stream-Closed: true`.
    pub fn closed(self) -> Req {
        self.header("stream-closed", "true")
    }

    /// Sends the request and reads the whole answer.
    pub async fn send(self) -> Answer {
        let what = self.what;
        let run = async {
            let response = self.inner.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await.unwrap_or_else(|e| panic!("{what}: reading the body: {e}"));
            (status, headers, body)
        };
        let (status, headers, body) =
            tokio::time::timeout(TIMEOUT, run).await.unwrap_or_else(|_| panic!("{what}: no answer within {TIMEOUT:?}"));
        Answer { what, status, headers, body }
    }

    /// Sends the request and returns once the response head arrived; the
    /// body stays unread (for SSE).
    pub async fn open(self) -> (String, reqwest::Response) {
        let what = self.what;
        let response = tokio::time::timeout(TIMEOUT, self.inner.send())
            .await
            .unwrap_or_else(|_| panic!("{what}: no response head within {TIMEOUT:?}"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        (what, response)
    }
}

/// A complete answer. Its `Debug` form shows the request, status, headers
/// and body, so a failed assertion says what the server sent.
pub struct Answer {
    pub what: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} -> {}", self.what, self.status)?;
        for (name, value) in &self.headers {
            writeln!(f, "  {name}: {}", String::from_utf8_lossy(value.as_bytes()))?;
        }
        let shown = &self.body[..self.body.len().min(2048)];
        write!(f, "  body ({} bytes): {:?}", self.body.len(), String::from_utf8_lossy(shown))
    }
}

impl Answer {
    /// Asserts the status.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Answer {
        assert_eq!(self.status.as_u16(), status, "unexpected status:\n{self:?}");
        self
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("a visible-ASCII header value"))
    }

    /// A header that must be present.
    #[track_caller]
    pub fn must(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("missing header {name}:\n{self:?}"))
    }

    /// Asserts a header's value.
    #[track_caller]
    pub fn expect_header(&self, name: &str, value: &str) -> &Answer {
        assert_eq!(self.header(name), Some(value), "header {name}:\n{self:?}");
        self
    }

    /// Asserts a header is absent.
    #[track_caller]
    pub fn expect_no_header(&self, name: &str) -> &Answer {
        assert_eq!(self.header(name), None, "header {name} should be absent:\n{self:?}");
        self
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).unwrap_or_else(|_| panic!("body is not UTF-8:\n{self:?}"))
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}):\n{self:?}"))
    }

    /// Asserts an error answer of extensions §11: `status`, `Content-Type:
    /// application/json` and `{"error":{"code":<code>,"message":<string>}}`.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> &Answer {
        self.expect(status);
        assert_eq!(self.error_code(), code, "error code:\n{self:?}");
        self
    }

    /// The `code` of an error body, after checking the body's shape.
    #[track_caller]
    pub fn error_code(&self) -> String {
        let content_type = self.header("content-type").unwrap_or_default();
        assert!(
            content_type.split(';').next().is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json")),
            "an error answer carries Content-Type: application/json:\n{self:?}"
        );
        let body = self.json();
        let error =
            body.get("error").and_then(Value::as_object).unwrap_or_else(|| panic!("no error object:\n{self:?}"));
        let code =
            error.get("code").and_then(Value::as_str).unwrap_or_else(|| panic!("error.code is no string:\n{self:?}"));
        let message = error.get("message").and_then(Value::as_str);
        assert!(message.is_some_and(|m| !m.is_empty()), "error.message is no non-empty string:\n{self:?}");
        assert!(
            !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
            "error.code is uppercase letters and underscores:\n{self:?}"
        );
        code.to_string()
    }

    /// Asserts the error answer to a `HEAD`: the status, the JSON content
    /// type, and no body (extensions §11).
    #[track_caller]
    pub fn expect_head_error(&self, status: u16) -> &Answer {
        self.expect(status);
        assert!(
            self.header("content-type").is_some_and(|c| c.starts_with("application/json")),
            "a HEAD error carries Content-Type: application/json:\n{self:?}"
        );
        assert!(self.body.is_empty(), "a HEAD answer has no body:\n{self:?}");
        self
    }
}

/// Reads one HTTP/1.1 response whose body is framed by `Content-Length` (or
/// by the end of the connection).
pub async fn read_raw_response(tcp: &mut tokio::net::TcpStream) -> (StatusCode, HeaderMap, bytes::Bytes) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = tcp.read(&mut chunk).await.expect("reading the response");
        assert!(n > 0, "connection closed before a response head: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let code: u16 = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("a status code");
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers.append(
                HeaderName::from_bytes(name.trim().as_bytes()).expect("header name"),
                HeaderValue::from_str(value.trim()).expect("header value"),
            );
        }
    }
    let mut body = buf[head_end + 4..].to_vec();
    let length = headers.get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    loop {
        if length.is_some_and(|len| body.len() >= len) {
            break;
        }
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    if let Some(len) = length {
        body.truncate(len);
    }
    (StatusCode::from_u16(code).expect("status"), headers, body.into())
}
