//! The gateway's usage log (`--usage-log`, issue 19): a scripted mix of
//! appends, reads, long-polls and SSE for two tenants (one through access
//! tokens, one anonymous), whose logged totals equal exactly the bytes the
//! client sent and received, while the sink fails and recovers, and across
//! a gateway restart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Node;
use crate::support::cluster::{Layout, Planes, gateway_args};
use crate::support::issuer::{Issuer, SigningKey};

const TEXT: &str = "text/plain";
const CHUNK: u64 = 1024;

/// (bucket, principal subject or "-", class) → [requests, request bytes, response bytes, chunks].
type Totals = BTreeMap<(String, String, String), [u64; 4]>;

struct Script {
    expected: Totals,
    http: reqwest::Client,
    base: String,
}

impl Script {
    fn count(&mut self, bucket: &str, who: Option<&str>, class: &str, sent: u64, received: u64) {
        let row = self.expected.entry((bucket.into(), who.unwrap_or("-").into(), class.into())).or_default();
        row[0] += 1;
        row[1] += sent;
        row[2] += received;
        if class == "append" {
            row[3] += sent.div_ceil(CHUNK).max(1);
        }
    }

    /// Sends a request and counts what went and came back, whole.
    async fn send(&mut self, method: reqwest::Method, path: &str, token: Option<&str>, body: &str, class: &str) -> u16 {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if method == reqwest::Method::PUT || !body.is_empty() {
            req = req.header("content-type", TEXT);
        }
        if !body.is_empty() {
            req = req.body(body.to_string());
        }
        let bucket = path.trim_start_matches('/').split('/').next().unwrap_or_default();
        let who = token.map(|_| "alice");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let attempt = req.try_clone().expect("a request that can be repeated");
            let answer = attempt.send().await.expect("an answer");
            let status = answer.status().as_u16();
            let received = answer.bytes().await.expect("the whole body").len() as u64;
            // Every answer of the surface is billed, a refusal too.
            self.count(bucket, who, class, body.len() as u64, received);
            // A group still electing its first leader refuses with 503: nothing applied.
            if status != 503 || Instant::now() > deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The mix: appends of several sizes, creates, a close, catch-up reads,
    /// HEADs, long-polls with and without data, and an SSE read to its end.
    async fn run(&mut self, alice: &str, round: u32) {
        use reqwest::Method;
        let a = format!("/tenant-a/s{round}");
        let p = format!("/tenant-pub/s{round}");
        assert_eq!(self.send(Method::PUT, &a, Some(alice), "", "admin").await, 201);
        assert_eq!(self.send(Method::PUT, &p, Some(alice), "first,", "append").await, 201);
        for size in [1, 100, 1024, 1025, 5000] {
            let body = "x".repeat(size);
            assert_eq!(self.send(Method::POST, &a, Some(alice), &body, "append").await, 204);
            assert_eq!(self.send(Method::POST, &p, Some(alice), &body, "append").await, 204);
        }
        for path in [&a, &p] {
            let status = self.send(Method::GET, &format!("{path}?offset=-1"), Some(alice), "", "read").await;
            assert_eq!(status, 200);
        }
        for _ in 0..3 {
            assert_eq!(self.send(Method::GET, &format!("{p}?offset=-1"), None, "", "read").await, 200);
            assert_eq!(self.send(Method::HEAD, &p, None, "", "read").await, 200);
        }
        let poll = format!("{p}?offset=-1&live=long-poll&timeout_ms=50");
        assert_eq!(self.send(Method::GET, &poll, None, "", "live_read").await, 200);
        let tail = format!("{p}?offset=now&live=long-poll&timeout_ms=50");
        assert_eq!(self.send(Method::GET, &tail, None, "", "live_read").await, 204);
        // SSE to its end: the stream is closed, so the session ends by itself.
        let close = self.http.post(format!("{}{a}", self.base)).header("authorization", format!("Bearer {alice}"));
        let closed = close.header("stream-closed", "true").send().await.expect("a close");
        assert_eq!(closed.status(), 204);
        self.count("tenant-a", Some("alice"), "append", 0, closed.bytes().await.expect("body").len() as u64);
        let sse = format!("{a}?offset=-1&live=sse");
        assert_eq!(self.send(Method::GET, &sse, Some(alice), "", "live_read").await, 200);
        assert_eq!(self.send(Method::DELETE, &a, Some(alice), "", "admin").await, 204);
    }
}

/// Sums the records of every line of the log.
fn logged(path: &std::path::Path) -> (Totals, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let mut totals = Totals::new();
    for line in &lines {
        for r in line["records"].as_array().expect("records") {
            let who = r["principal"]["subject"].as_str().unwrap_or("-").to_string();
            let key = (
                r["bucket"].as_str().expect("bucket").to_string(),
                who,
                r["class"].as_str().expect("class").to_string(),
            );
            let row = totals.entry(key).or_default();
            for (i, field) in ["requests", "request_bytes", "response_bytes", "chunks"].iter().enumerate() {
                row[i] += r[field].as_u64().expect("a count");
            }
        }
    }
    (totals, lines)
}

#[tokio::test]
async fn the_usage_log_counts_exactly_what_clients_sent_and_received() {
    let key = SigningKey::ec("ec-1");
    let issuer = Issuer::start(&[&key]).await;
    let alice = issuer.token(&key, "alice", 600);
    let layout = Layout::new(3, "usage-suite", 4, Planes::Shared);
    let _voters: Vec<Node> = (0..layout.voters()).map(|i| layout.start(i)).collect();
    let dir = tempfile::tempdir().expect("a directory");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[[bucket]]\nid = \"tenant-a\"\nowners = [{{ issuer = \"{0}\", subject = \"alice\" }}]\n\
             [[bucket]]\nid = \"tenant-pub\"\npublic_read = true\nowners = [{{ issuer = \"{0}\", subject = \"alice\" }}]\n",
            issuer.url
        ),
    )
    .expect("the policy");
    // The log's directory does not exist yet: the sink fails until it does.
    let log_dir = dir.path().join("logs");
    let log = log_dir.join("usage.jsonl");
    let (policy, log_arg) = (policy.display().to_string(), log.display().to_string());
    let args = gateway_args(
        &layout,
        &[
            "--auth-issuer",
            &issuer.url,
            "--auth-audience",
            &issuer.audience,
            "--auth-policy",
            &policy,
            "--usage-log",
            &log_arg,
            "--usage-flush-secs",
            "1",
            "--usage-chunk-bytes",
            "1024",
        ],
    );
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(30)).build().expect("a client");
    let start = |args: &[String]| {
        let gateway = Node::spawn_logging(args, None, "");
        let base = gateway.base().to_string();
        (gateway, base)
    };
    let (gateway, base) = start(&args);
    let mut script = Script { expected: Totals::new(), http: http.clone(), base };
    script.wait_serving(&alice).await;
    script.run(&alice, 1).await;
    // Windows close and fail to be written; then the sink recovers.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gateway.stderr_text().contains("the usage log could not be written") {
        assert!(Instant::now() < deadline, "the sink never failed:\n{}", gateway.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    script.run(&alice, 2).await;
    std::fs::create_dir_all(&log_dir).expect("the log's directory");
    // A clean stop writes the last window; a new gateway goes on.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _) = gateway.terminate();
    assert!(status.success(), "{status:?}");
    let (gateway, base) = start(&args);
    script.base = base;
    script.wait_serving(&alice).await;
    script.run(&alice, 3).await;
    let (status, _) = gateway.terminate();
    assert!(status.success(), "{status:?}");

    let (totals, lines) = logged(&log);
    assert_eq!(totals, script.expected, "logged totals against what the client sent and received");
    // Two gateways, each with its own id and rising sequence numbers from 0.
    let mut by_gateway: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in &lines {
        assert_eq!(line["version"], 1);
        let id = line["gateway_id"].as_str().expect("gateway_id").to_string();
        by_gateway.entry(id).or_default().push(line["sequence"].as_u64().expect("sequence"));
    }
    assert_eq!(by_gateway.len(), 2, "{lines:#?}");
    for sequences in by_gateway.values() {
        assert_eq!(*sequences, (0..sequences.len() as u64).collect::<Vec<_>>(), "no gap");
    }
}

impl Script {
    /// Waits until the gateway serves an owner's request, counting every
    /// probe the surface answered (not the gateway's `NO_UPSTREAM` before
    /// it found its voters, which no tenant is billed for).
    async fn wait_serving(&mut self, token: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let probe = self.http.get(format!("{}/tenant-a/probe?offset=-1", self.base));
            let answer = probe.header("authorization", format!("Bearer {token}")).send().await;
            if let Ok(answer) = answer {
                let status = answer.status().as_u16();
                let body = answer.bytes().await.expect("the body");
                let code = serde_json::from_slice::<Value>(&body).ok().map(|v| v["error"]["code"].clone());
                if code != Some(Value::from("NO_UPSTREAM")) {
                    self.count("tenant-a", Some("alice"), "read", 0, body.len() as u64);
                }
                if status == 404 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "the gateway never served");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
