//! The harness: a real `ursula server` process per test (`Node`), request
//! helpers over reqwest (`Req`, `Answer`), an SSE reader (`Sse`), and the
//! small codecs the assertions need (base64, CRC-32, offsets).

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub mod cluster;
mod lifecycle;
pub mod s3;
pub use lifecycle::run_to_exit;

/// How long a node may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for any single request or SSE event, so a hang fails the
/// test instead of the whole run. Generous: the machine is shared.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The protocol's request limit (extensions §10).
pub const MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;

/// BLAKE3-256 of `abc` and of `hello` (official test vectors), for
/// `Producer-Digest`; `blake3_hex` computes others.
pub const BLAKE3_ABC: &str = "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85";
pub const BLAKE3_HELLO: &str = "ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f";

/// Ursula's snapshot digest (extensions §4.4 note): the lowercase hex
/// BLAKE3 hash of the content type's length (u64 little-endian), the
/// content type and the body.
pub fn snapshot_digest(content_type: &str, body: &[u8]) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(content_type.len() as u64).to_le_bytes());
    hasher.update(content_type.as_bytes());
    hasher.update(body);
    hasher.finalize().to_hex().to_string()
}

/// The BLAKE3-256 of `body` as 64 lowercase hex digits (`Producer-Digest`).
pub fn blake3_hex(body: &[u8]) -> String {
    blake3::hash(body).to_hex().to_string()
}

/// `len` bytes of a fixed pattern that repeats every 251 bytes, so a slice
/// at the wrong place does not compare equal.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The server's offset token for byte position `n`: 20 zero-padded digits.
pub fn offset(n: u64) -> String {
    format!("{n:020}")
}

/// Whether `Node::start` puts a gateway in front of three voters
/// (`URSULA_TEST_ENGINE=gateway`).
pub fn through_gateway() -> bool {
    std::env::var("URSULA_TEST_ENGINE").is_ok_and(|e| e == "gateway")
}

// ---------------------------------------------------------------------------
// Node
// ---------------------------------------------------------------------------

/// A running `ursula server` on 127.0.0.1 with a port the OS chose. Killed on
/// drop; its stderr is printed when the test fails.
pub struct Node {
    child: Child,
    /// The WAL of a node on the Raft engine, removed with the node.
    _data: Option<tempfile::TempDir>,
    /// With `URSULA_TEST_ENGINE=gateway`: the voters behind this gateway.
    _voters: Vec<Node>,
    _layout: Option<cluster::Layout>,
    base: String,
    addr: String,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<JoinHandle<()>>,
    client: reqwest::Client,
}

impl Node {
    /// A development node with default settings.
    pub fn start() -> Node {
        Node::start_with(&[])
    }

    /// A node with extra `ursula server` arguments, e.g. `["--json-reads", "array"]`.
    /// With `URSULA_TEST_ENGINE=raft` it runs the Raft engine on a WAL in a
    /// temporary directory (`scripts/test-all.sh` runs the suite both ways).
    /// With `URSULA_TEST_ENGINE=gateway` it is an `ursula gateway` (given
    /// `extra`) in front of three voters of their own.
    pub fn start_with(extra: &[&str]) -> Node {
        if through_gateway() {
            return cluster::gateway_over_voters(extra);
        }
        let raft = std::env::var("URSULA_TEST_ENGINE").is_ok_and(|e| e == "raft");
        let data = raft.then(|| tempfile::tempdir().expect("a WAL directory"));
        let mut args: Vec<String> = vec!["server".into(), "--listen".into(), "127.0.0.1:0".into()];
        if let Some(dir) = &data {
            let config = dir.path().join("ursula.toml");
            let text = format!("[raft.wal]\npath = {:?}\n", dir.path().join("wal"));
            std::fs::write(&config, text).expect("writing the node's config");
            args.extend(["--config".into(), config.display().to_string()]);
        }
        args.extend(extra.iter().map(|a| a.to_string()));
        Node::spawn(&args, data)
    }

    /// A node started with exactly `args` (after the binary), keeping `data` alive as long as it.
    pub fn spawn(args: &[String], data: Option<tempfile::TempDir>) -> Node {
        Node::spawn_logging(args, data, "warn")
    }

    /// As `spawn`, logging what the `URSULA_LOG` filter `log` lets through.
    pub fn spawn_logging(args: &[String], data: Option<tempfile::TempDir>, log: &str) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ursula"))
            .args(args)
            // No ./ursula.toml of the source tree may change the node.
            .current_dir(std::env::temp_dir())
            .env("URSULA_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning the ursula binary");

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let stderr_reader = child.stderr.take().map(|mut pipe| {
            let sink = stderr.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&buf[..n]);
                }
            })
        });

        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        // Keeps draining stdout after the address line so the child never
        // blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let line = line.trim().replace("ursula gateway listening on", "ursula listening on");
                if let Some(addr) = line.strip_prefix("ursula listening on http://") {
                    let _ = tx.send(addr.to_string());
                }
            }
        });

        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => break addr,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // stdout closed: the child is exiting; try_wait below sees it.
                Err(mpsc::RecvTimeoutError::Disconnected) => thread::sleep(Duration::from_millis(20)),
            }
            if let Ok(Some(status)) = child.try_wait() {
                let text = finish_stderr(&stderr, stderr_reader);
                panic!("ursula exited ({status}) before printing its address; stderr:\n{text}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let text = finish_stderr(&stderr, stderr_reader);
                panic!("ursula printed no address within {START_TIMEOUT:?}; stderr:\n{text}");
            }
        };

        let client = reqwest::Client::builder().no_proxy().build().expect("building the HTTP client");
        let base = format!("http://{addr}");
        Node { child, _data: data, _voters: Vec::new(), _layout: None, base, addr, stderr, stderr_reader, client }
    }

    /// Keeps the voters behind a gateway (and their files) alive with it.
    fn keep_voters(&mut self, voters: Vec<Node>, layout: cluster::Layout) {
        self._voters = voters;
        self._layout = Some(layout);
    }

    /// Polls `/__ursula/ready` until it answers `200`, without a runtime
    /// (nodes start from synchronous code too).
    pub fn wait_ready_blocking(&self) {
        use std::io::Write as _;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let ready = std::net::TcpStream::connect(&self.addr).ok().and_then(|mut tcp| {
                let request = format!("GET /__ursula/ready HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
                tcp.write_all(request.as_bytes()).ok()?;
                let mut answer = String::new();
                tcp.read_to_string(&mut answer).ok()?;
                Some(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"))
            });
            if ready == Some(true) {
                return;
            }
            assert!(Instant::now() < deadline, "{} did not become ready within {START_TIMEOUT:?}", self.base);
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.base)
    }

    pub fn request(&self, method: Method, path_and_query: &str) -> Req {
        Req { what: format!("{method} {path_and_query}"), inner: self.client.request(method, self.url(path_and_query)) }
    }

    pub fn put(&self, path: &str) -> Req {
        self.request(Method::PUT, path)
    }

    pub fn post(&self, path: &str) -> Req {
        self.request(Method::POST, path)
    }

    pub fn get(&self, path_and_query: &str) -> Req {
        self.request(Method::GET, path_and_query)
    }

    pub fn head(&self, path: &str) -> Req {
        self.request(Method::HEAD, path)
    }

    pub fn delete(&self, path: &str) -> Req {
        self.request(Method::DELETE, path)
    }

    /// Creates an empty stream with `content_type`; the create must answer 201.
    pub async fn create(&self, path: &str, content_type: &str) -> Answer {
        let answer = self.put(path).content_type(content_type).send().await;
        answer.expect(201);
        answer
    }

    /// A plain append (no producer, no close); it must answer 204.
    pub async fn append(&self, path: &str, content_type: &str, body: impl Into<reqwest::Body>) -> Answer {
        let answer = self.post(path).content_type(content_type).body(body).send().await;
        answer.expect(204);
        answer
    }

    /// A close-only request; it must answer 204.
    pub async fn close(&self, path: &str) -> Answer {
        let answer = self.post(path).closed().send().await;
        answer.expect(204);
        answer
    }

    /// A catch-up read of the whole stream; it must answer 200.
    pub async fn read_all(&self, path: &str) -> Answer {
        let answer = self.get(&format!("{path}?offset=-1")).send().await;
        answer.expect(200);
        answer
    }

    /// The stream's tail as `HEAD` reports it.
    pub async fn tail(&self, path: &str) -> String {
        let answer = self.head(path).send().await;
        answer.expect(200);
        answer.must("stream-next-offset").to_string()
    }

    /// The node's base URL, `http://127.0.0.1:PORT`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The stream's current `Stream-Incarnation` as `HEAD` reports it.
    pub async fn incarnation(&self, path: &str) -> String {
        let answer = self.head(path).send().await;
        answer.expect(200);
        answer.must("stream-incarnation").to_string()
    }

    /// Deletes the stream and creates it again with `content_type`; returns
    /// the old and the new `Stream-Incarnation`.
    pub async fn recreate(&self, path: &str, content_type: &str) -> (String, String) {
        let old = self.incarnation(path).await;
        self.delete(path).send().await.expect(204);
        let created = self.create(path, content_type).await;
        let new = created.must("stream-incarnation").to_string();
        assert_ne!(old, new, "a recreated stream gets a new Stream-Incarnation:\n{created:?}");
        (old, new)
    }

    /// Publishes a snapshot at the offset token `at` (extensions §2.2); it
    /// must answer 204.
    pub async fn publish(&self, path: &str, at: &str, content_type: &str, body: impl Into<reqwest::Body>) -> Answer {
        let answer = self.put(&format!("{path}/snapshot/{at}")).content_type(content_type).body(body).send().await;
        answer.expect(204);
        answer
    }

    /// Advances retention to the offset token `at` (extensions §2.2); it must
    /// answer 204.
    pub async fn retain(&self, path: &str, at: &str) -> Answer {
        let answer = self.put(&format!("{path}/retention/{at}")).send().await;
        answer.expect(204);
        answer
    }

    /// A GET that stays open for its SSE events.
    pub async fn sse(&self, path_and_query: &str) -> Sse {
        Sse::open(self.get(path_and_query)).await
    }

    /// Sends `head` (request line and headers, without the blank line) on a
    /// fresh TCP connection, sends no body, and reads one response. For
    /// requests reqwest will not send as they are, such as a `Content-Length`
    /// larger than what follows.
    pub async fn raw(&self, head: &str) -> Answer {
        let what = head.lines().next().unwrap_or_default().to_string();
        let exchange = async {
            let mut tcp = tokio::net::TcpStream::connect(&self.addr).await.expect("connecting");
            let request = format!("{head}\r\nHost: {}\r\n\r\n", self.addr);
            tcp.write_all(request.as_bytes()).await.expect("writing the request head");
            read_raw_response(&mut tcp).await
        };
        let (status, headers, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {TIMEOUT:?}"));
        Answer { what, status, headers, body }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            let text = finish_stderr(&self.stderr, self.stderr_reader.take());
            if text.trim().is_empty() {
                eprintln!("(ursula at {} wrote nothing to stderr)", self.base);
                return;
            }
            eprintln!("---- ursula stderr ({}) ----\n{text}\n---- end of ursula stderr ----", self.base);
        }
    }
}

fn finish_stderr(buf: &Arc<Mutex<Vec<u8>>>, reader: Option<JoinHandle<()>>) -> String {
    if let Some(reader) = reader {
        let _ = reader.join();
    }
    let bytes = buf.lock().unwrap_or_else(|p| p.into_inner());
    String::from_utf8_lossy(&bytes).into_owned()
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

// ---------------------------------------------------------------------------
// Requests and answers
// ---------------------------------------------------------------------------

/// A request being built; `send` runs it with a timeout.
pub struct Req {
    what: String,
    inner: reqwest::RequestBuilder,
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

/// Collects failed expectations, so a test that checks many rows of a
/// table reports every wrong row at once instead of the first.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
    count: usize,
}

impl Checks {
    pub fn new() -> Checks {
        Checks::default()
    }

    /// Runs `check` (which asserts, e.g. with `Answer::expect`) and keeps
    /// its panic message under `label` instead of unwinding.
    pub fn run(&mut self, label: impl fmt::Display, check: impl FnOnce()) {
        self.count += 1;
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            self.failures.push(format!("{label}: {message}"));
        }
    }

    /// Fails the test when any check failed, listing them all.
    #[track_caller]
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} of {} checks failed:\n\n{}",
            self.failures.len(),
            self.count,
            self.failures.join("\n\n")
        );
    }
}

mod sse;
pub use sse::{Event, Sse, sse_payload};

// ---------------------------------------------------------------------------
// Small codecs
// ---------------------------------------------------------------------------

/// Standard base64 (RFC 4648, with padding); `None` when invalid.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[test]
fn codecs_match_known_vectors() {
    assert_eq!(base64_decode("AQIDBAUGBwgJCg=="), Some((1..=10).collect()));
    assert_eq!(base64_decode("aGk="), Some(b"hi".to_vec()));
    assert_eq!(base64_decode(""), Some(Vec::new()));
    assert_eq!(base64_decode("aGk"), None);
    assert_eq!(offset(42), "00000000000000000042");
    assert_eq!(blake3_hex(b"abc"), BLAKE3_ABC);
    assert_eq!(blake3_hex(b"hello"), BLAKE3_HELLO);
}

#[test]
#[should_panic(expected = "before printing its address")]
fn node_start_fails_fast_when_ursula_exits() {
    // An invalid flag value makes the binary exit at once; `start` must say
    // so instead of waiting out its timeout.
    let _node = Node::start_with(&["--json-reads", "xml"]);
}
