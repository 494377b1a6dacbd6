//! `Node`: a node or gateway under test, in the test process or as a real
//! `ursula` process, and the request helpers every test uses.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::in_process::InProcess;
use super::{Answer, Req, START_TIMEOUT, Sse, TIMEOUT, cluster, read_raw_response, through_gateway};

/// A running node (or gateway) on 127.0.0.1 with a port the OS chose:
/// inside the test process, or an `ursula` process that is killed on drop
/// and whose stderr is printed when the test fails.
pub struct Node {
    host: Host,
    /// The WAL of a node on the Raft engine, removed with the node.
    _data: Option<tempfile::TempDir>,
    /// A directory shared with other nodes (a [`cluster::Layout`]'s), kept
    /// as long as any of them runs.
    _shared_dir: Option<std::sync::Arc<tempfile::TempDir>>,
    /// With `URSULA_TEST_ENGINE=gateway`: the voters behind this gateway.
    _voters: Vec<Node>,
    _layout: Option<cluster::Layout>,
    base: String,
    addr: String,
    client: reqwest::Client,
}

/// Where a node runs.
pub(super) enum Host {
    InProcess(InProcess),
    Process(Process),
}

/// An `ursula` child process and what it wrote to stderr.
pub(super) struct Process {
    pub child: Child,
    pub stderr: Arc<Mutex<Vec<u8>>>,
    pub stderr_reader: Option<JoinHandle<()>>,
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
    ///
    /// With `URSULA_TEST_ENGINE=process` it is the development node as an
    /// `ursula` process. Otherwise (the default) it is the development node
    /// inside the test process, unless `extra` holds more than
    /// `--json-reads ndjson|array`.
    pub fn start_with(extra: &[&str]) -> Node {
        if through_gateway() {
            return cluster::gateway_over_voters(extra);
        }
        let engine = std::env::var("URSULA_TEST_ENGINE").unwrap_or_default();
        let raft = engine == "raft";
        // `process`: the development node as an `ursula` process, to compare.
        let in_process = !raft && engine != "process";
        let json_reads = match extra {
            [] => Some(None),
            ["--json-reads", mode @ ("ndjson" | "array")] => Some(Some(*mode)),
            _ => None,
        };
        if let (true, Some(json_reads)) = (in_process, json_reads) {
            let (node, addr) = InProcess::start(json_reads);
            return Node::at(Host::InProcess(node), addr, None);
        }
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

    /// A node started with exactly `args` (after the binary), keeping `data`
    /// alive as long as it. A gateway serves at once and answers `503
    /// NO_UPSTREAM` until it found its cluster: this waits until it is ready.
    pub fn spawn(args: &[String], data: Option<tempfile::TempDir>) -> Node {
        // `URSULA_TEST_LOG` lets a person debugging a test see more of the nodes.
        let log = std::env::var("URSULA_TEST_LOG").unwrap_or_default();
        let node = Node::spawn_logging(args, data, &log);
        if args.first().is_some_and(|a| a == "gateway") {
            node.wait_ready_blocking();
        }
        node
    }

    /// As `spawn`, logging what the `URSULA_LOG` filter `log` lets through
    /// (empty: the binary's default, as an operator gets it).
    pub fn spawn_logging(args: &[String], data: Option<tempfile::TempDir>, log: &str) -> Node {
        Node::spawn_env(args, data, log, &[])
    }

    /// As `spawn_logging`, with `env` set. No `OTEL_*` or `RUST_LOG` of the
    /// test's own environment reaches the process.
    pub fn spawn_env(args: &[String], data: Option<tempfile::TempDir>, log: &str, env: &[(&str, String)]) -> Node {
        Node::spawn_command(Command::new(env!("CARGO_BIN_EXE_ursula")), args, data, log, env)
    }

    /// A node in the network namespace `netns` (`ip netns exec` runs the
    /// binary in place: the child is the node itself).
    pub fn spawn_in_netns(netns: &str, args: &[String]) -> Node {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", netns, env!("CARGO_BIN_EXE_ursula")]);
        let log = std::env::var("URSULA_TEST_LOG").unwrap_or_default();
        Node::spawn_command(command, args, None, &log, &[])
    }

    fn spawn_command(
        mut command: Command,
        args: &[String],
        data: Option<tempfile::TempDir>,
        log: &str,
        env: &[(&str, String)],
    ) -> Node {
        for (name, _) in std::env::vars() {
            if name.starts_with("OTEL_") || name == "RUST_LOG" {
                command.env_remove(name);
            }
        }
        match log {
            "" => command.env_remove("URSULA_LOG"),
            filter => command.env("URSULA_LOG", filter),
        };
        command.envs(env.iter().map(|(k, v)| (k, v)));
        let mut child = command
            .args(args)
            // No ./ursula.toml of the source tree may change the node.
            .current_dir(std::env::temp_dir())
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

        Node::at(Host::Process(Process { child, stderr, stderr_reader }), addr, data)
    }

    /// The in-memory node inside the test process, whatever
    /// `URSULA_TEST_ENGINE` says, with `config` as its config file (it must
    /// keep the in-memory engine), for tests of the node's own settings.
    pub fn in_process_with(config: &str) -> Node {
        let (node, addr) = InProcess::start_with_config(config, None);
        Node::at(Host::InProcess(node), addr, None)
    }

    fn at(host: Host, addr: String, data: Option<tempfile::TempDir>) -> Node {
        // A pooled connection idle for a second is not reused: the shortest
        // server idle timeout of the tests is 2 s, and a connection the
        // server closes just as it is reused fails the request.
        let client = reqwest::Client::builder()
            .no_proxy()
            .pool_idle_timeout(std::time::Duration::from_secs(1))
            .build()
            .expect("building the HTTP client");
        let base = format!("http://{addr}");
        Node { host, _data: data, _shared_dir: None, _voters: Vec::new(), _layout: None, base, addr, client }
    }

    /// Lets `by` of the node's time pass: an in-process node's clock moves
    /// on at once; a process's clock is the wall clock, so this sleeps.
    pub async fn pass_time(&self, by: Duration) {
        match &self.host {
            Host::InProcess(node) => node.advance(by),
            Host::Process(_) => tokio::time::sleep(by).await,
        }
    }

    /// Waits until at least `n` readers wait for news (the `live_readers`
    /// figure of `/__ursula/metrics`), so a test writes only once its
    /// long-poll or SSE session is registered.
    pub async fn wait_live_readers(&self, n: u64) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let metrics = self.get("/__ursula/metrics").send().await;
            let waiting = metrics.json().get("live_readers").and_then(Value::as_u64);
            if waiting.is_some_and(|w| w >= n) {
                return;
            }
            assert!(Instant::now() < deadline, "{n} live readers never registered:\n{metrics:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(super) fn process_ref(&self) -> &Process {
        match &self.host {
            Host::Process(p) => p,
            Host::InProcess(_) => panic!("{} runs inside the test process, not as a child", self.base),
        }
    }

    /// The child process; durability tests kill and signal it.
    pub(super) fn process(&mut self) -> &mut Process {
        match &mut self.host {
            Host::Process(p) => p,
            Host::InProcess(_) => panic!("{} runs inside the test process, not as a child", self.base),
        }
    }

    /// Keeps the voters behind a gateway (and their files) alive with it.
    pub(super) fn share_dir(&mut self, dir: std::sync::Arc<tempfile::TempDir>) {
        self._shared_dir = Some(dir);
    }

    pub(super) fn keep_voters(&mut self, voters: Vec<Node>, layout: cluster::Layout) {
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
        let Host::Process(p) = &mut self.host else { return };
        let _ = p.child.kill();
        let _ = p.child.wait();
        if thread::panicking() {
            let text = finish_stderr(&p.stderr, p.stderr_reader.take());
            if text.trim().is_empty() {
                eprintln!("(ursula at {} wrote nothing to stderr)", self.base);
                return;
            }
            eprintln!("---- ursula stderr ({}) ----\n{text}\n---- end of ursula stderr ----", self.base);
        }
    }
}

pub(super) fn finish_stderr(buf: &Arc<Mutex<Vec<u8>>>, reader: Option<JoinHandle<()>>) -> String {
    if let Some(reader) = reader {
        let _ = reader.join();
    }
    let bytes = buf.lock().unwrap_or_else(|p| p.into_inner());
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
#[should_panic(expected = "before printing its address")]
fn node_start_fails_fast_when_ursula_exits() {
    // An invalid flag value makes the binary exit at once; `start` must say
    // so instead of waiting out its timeout.
    let _node = Node::start_with(&["--json-reads", "xml"]);
}
