//! Tenant quotas at the gateway (`--quota-policy`, spec/08 "Quotas", issue
//! 19): through a gateway in front of three voters, each refusal is the
//! gateway's own answer (no server identity, `no-store`) and applies nothing.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::Node;
use crate::support::cluster::gateway_over_voters;

const TEXT: &str = "text/plain";
const OCTETS: &str = "application/octet-stream";

const POLICY: &str = r#"
[[bucket]]
id = "tenant-slow"
requests_per_second = 1
burst = 3

[[bucket]]
id = "tenant-live"
max_live_reads = 2

[[bucket]]
id = "tenant-small"
max_request_body_bytes = 1000

[[bucket]]
id = "tenant-uploads"
max_concurrent_uploads = 1

[[bucket]]
id = "tenant-bytes"
max_concurrent_uploads = 4
max_upload_bytes = 3145728
"#;

/// A gateway with `POLICY` (and the file, to rewrite it).
fn gateway_with_quotas() -> (Node, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("quotas.toml");
    std::fs::write(&path, POLICY).expect("the quota policy");
    let path = path.display().to_string();
    (gateway_over_voters(&["--quota-policy", &path]), dir)
}

/// The gateway's own refusal: JSON body, `no-store`, no server identity.
#[track_caller]
fn expect_gateway_refusal(answer: &crate::support::Answer, status: u16, code: &str) {
    answer.expect_error(status, code).expect_header("cache-control", "no-store");
    answer.expect_no_header("ursula-protocol").expect_no_header("ursula-cluster-id");
}

/// A rate: the burst, then `429 RATE_LIMITED` with `Retry-After` in whole
/// seconds (at least 1); a tenant at its limit does not hold back another.
#[tokio::test]
async fn a_bucket_past_its_rate_gets_429_and_other_buckets_do_not_notice() {
    let (gateway, _dir) = gateway_with_quotas();
    // The burst is served; then the rate refuses until a token comes.
    let mut answers = Vec::new();
    while answers.len() < 30 {
        let answer = gateway.get("/tenant-slow/s?offset=-1").send().await;
        let limited = answer.status == 429;
        answers.push(answer);
        if limited {
            break;
        }
    }
    assert!(answers[..3].iter().all(|a| a.status == 404), "the burst of 3 is served: {answers:?}");
    let refused = answers.last().expect("an answer");
    expect_gateway_refusal(refused, 429, "RATE_LIMITED");
    let retry: u64 = refused.must("retry-after").parse().expect("whole seconds");
    assert_eq!(retry, 1, "one token a second: a token within a second");
    // Another bucket, with no limit, is served throughout.
    gateway.create("/tenant-other/s", TEXT).await;
    for i in 0..50 {
        gateway.post("/tenant-other/s").content_type(TEXT).body(format!("{i},")).send().await.expect(204);
    }
    // A refused write applied nothing; after a second the bucket is served again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    gateway.head("/tenant-slow/s").send().await.expect(404);
}

/// Live reads: at most `max_live_reads` SSE and long-poll reads at once;
/// the slot comes back when a read ends or its client leaves.
#[tokio::test]
async fn live_reads_past_the_bound_get_429_and_a_slot_frees_when_a_read_ends() {
    let (gateway, _dir) = gateway_with_quotas();
    gateway.create("/tenant-live/s", TEXT).await;
    let first = gateway.sse("/tenant-live/s?offset=-1&live=sse").await;
    let second = gateway.sse("/tenant-live/s?offset=-1&live=sse").await;
    assert_eq!((first.status.as_u16(), second.status.as_u16()), (200, 200));
    let third = gateway.get("/tenant-live/s?offset=-1&live=long-poll&timeout_ms=100").send().await;
    expect_gateway_refusal(&third, 429, "LIVE_READS_EXHAUSTED");
    // A catch-up read is no live read.
    gateway.get("/tenant-live/s?offset=-1").send().await.expect(200);
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let poll = gateway.get("/tenant-live/s?offset=-1&live=long-poll&timeout_ms=100").send().await;
        if poll.status == 200 || poll.status == 204 {
            break;
        }
        assert!(Instant::now() < deadline, "the slot never came back:\n{poll:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(second);
}

/// A bucket's body limit: `413 REQUEST_TOO_LARGE` naming it, decided from
/// `Content-Length` before any of the body is read; a `HEAD` advertises it.
#[tokio::test]
async fn a_body_over_the_buckets_limit_gets_413_naming_it() {
    let (gateway, _dir) = gateway_with_quotas();
    gateway.create("/tenant-small/s", OCTETS).await;
    let over = gateway.post("/tenant-small/s").content_type(OCTETS).body(vec![7u8; 1001]).send().await;
    expect_gateway_refusal(&over, 413, "REQUEST_TOO_LARGE");
    over.expect_header("ursula-max-request-bytes", "1000");
    gateway.post("/tenant-small/s").content_type(OCTETS).body(vec![7u8; 1000]).send().await.expect(204);
    gateway.head("/tenant-small/s").send().await.expect(200).expect_header("ursula-max-request-bytes", "1000");
    // Only what was accepted is in the stream.
    let read = gateway.get("/tenant-small/s?offset=-1").send().await;
    assert_eq!(read.body.len(), 1000);
    // Another bucket keeps the gateway's limit.
    gateway.create("/tenant-other/s", OCTETS).await;
    gateway.head("/tenant-other/s").send().await.expect_header("ursula-max-request-bytes", "33554432");
}

/// Opens a request with a `bytes`-long body on a raw connection and sends
/// only its first byte: an upload in flight until the connection closes.
async fn upload_in_flight(gateway: &Node, path: &str, bytes: usize) -> TcpStream {
    let addr = gateway.base().trim_start_matches("http://").to_string();
    let mut tcp = TcpStream::connect(&addr).await.expect("connecting");
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {OCTETS}\r\nContent-Length: {bytes}\r\n\r\nx");
    tcp.write_all(head.as_bytes()).await.expect("the request head");
    tcp
}

/// Waits until the gateway reads a large body (it reserved its bytes under
/// the body budget): the held upload was admitted.
async fn reading_a_large_body(gateway: &Node) {
    reserved_bytes_until(gateway, "the held upload was never read", |n| n >= 2 * 1024 * 1024).await;
}

/// Waits until the gateway's reserved upload bytes satisfy `done`.
async fn reserved_bytes_until(gateway: &Node, what: &str, done: impl Fn(u64) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = gateway.get("/__ursula/gateway/metrics").send().await.json();
        if metrics["upload_reserved_bytes"].as_u64().is_some_and(&done) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Large uploads (bodies over `--small-body-max-bytes`, 1 MiB): their count
/// and their bytes in flight per bucket, each refused with `429` and
/// `Retry-After: 1` before any of the body is read.
#[tokio::test]
async fn large_uploads_past_the_buckets_bounds_get_429() {
    let (gateway, _dir) = gateway_with_quotas();
    const MIB: usize = 1024 * 1024;
    for path in ["/tenant-uploads/s", "/tenant-bytes/s"] {
        gateway.create(path, OCTETS).await;
    }
    let held = upload_in_flight(&gateway, "/tenant-uploads/s", 2 * MIB).await;
    reading_a_large_body(&gateway).await;
    let refused = gateway.post("/tenant-uploads/s").content_type(OCTETS).body(vec![1u8; 2 * MIB]).send().await;
    expect_gateway_refusal(&refused, 429, "UPLOADS_EXHAUSTED");
    refused.expect_header("retry-after", "1");
    // Small bodies are no uploads.
    gateway.post("/tenant-uploads/s").content_type(OCTETS).body(vec![1u8; 1000]).send().await.expect(204);
    drop(held);
    // The first held upload's reservation is gone before the second is counted.
    reserved_bytes_until(&gateway, "the dropped upload kept its reservation", |n| n == 0).await;

    let held = upload_in_flight(&gateway, "/tenant-bytes/s", 2 * MIB).await;
    reading_a_large_body(&gateway).await;
    let refused = gateway.post("/tenant-bytes/s").content_type(OCTETS).body(vec![1u8; 2 * MIB]).send().await;
    expect_gateway_refusal(&refused, 429, "UPLOAD_BYTES_EXHAUSTED");
    refused.expect_header("retry-after", "1");
    drop(held);
    // Once the held upload is gone, a large one goes through.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let again = gateway.post("/tenant-bytes/s").content_type(OCTETS).body(vec![2u8; 2 * MIB]).send().await;
        if again.status == 204 {
            break;
        }
        assert!(Instant::now() < deadline, "the bytes never came back:\n{again:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The quota file reloads when it changes; an invalid one keeps the quotas
/// in force.
#[tokio::test]
async fn the_quota_policy_reloads() {
    let (gateway, dir) = gateway_with_quotas();
    gateway.create("/tenant-small/s", OCTETS).await;
    let path = dir.path().join("quotas.toml");
    std::fs::write(&path, POLICY.replace("max_request_body_bytes = 1000", "max_request_body_bytes = 2000"))
        .expect("the new policy");
    let deadline = Instant::now() + Duration::from_secs(20);
    while gateway.head("/tenant-small/s").send().await.header("ursula-max-request-bytes") != Some("2000") {
        assert!(Instant::now() < deadline, "the new limit never came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gateway.post("/tenant-small/s").content_type(OCTETS).body(vec![1u8; 1500]).send().await.expect(204);
    std::fs::write(&path, "[default]\nrequests_per_secnd = 1\n").expect("a broken policy");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gateway.stderr_text().contains("kept the quota policy in force") {
        assert!(Instant::now() < deadline, "no line for the broken policy:\n{}", gateway.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gateway.head("/tenant-small/s").send().await.expect_header("ursula-max-request-bytes", "2000");
}
