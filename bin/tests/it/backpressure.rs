//! Admission backpressure (spec/07, spec/38 "Write path"): the node refuses
//! with `503`, a `Retry-After` and the spec's code instead of holding more
//! memory: write bodies past `server.http_inflight_body_size`, live reads
//! past `runtime.live_read_max_waiters_per_core`, and, on a cluster node,
//! writes with a body while its Raft log is over twice
//! `raft.snapshot_log_budget`. The uncommitted-bytes gate needs a quorum
//! that does not answer: it is in `cluster_faults`.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cluster_leadership::{client, create, start_all};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};

const S: &str = "/backpressure/s";
const BIN: &str = "application/octet-stream";
const PATIENCE: Duration = Duration::from_secs(30);

async fn metric(node: &Node, name: &str) -> u64 {
    let metrics = node.get("/__ursula/metrics").send().await;
    metrics.json().get(name).and_then(Value::as_u64).unwrap_or_else(|| panic!("no {name} in {metrics:?}"))
}

#[tokio::test]
async fn a_body_past_the_inflight_budget_is_refused_until_the_held_one_is_answered() {
    let node = Node::in_process_with("[server]\nhttp_inflight_body_size = \"1MiB\"\n");
    node.create(S, BIN).await;
    // A body of 700,000 declared bytes holds its share while it trickles in.
    let declared = 700_000usize;
    let addr = node.base().trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let head =
        format!("POST {S} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {BIN}\r\nContent-Length: {declared}\r\n\r\n");
    slow.write_all(head.as_bytes()).await.expect("head");
    slow.write_all(&vec![b'a'; 1000]).await.expect("a first part");
    let deadline = Instant::now() + PATIENCE;
    while metric(&node, "ingress_body_bytes_inflight").await < declared as u64 {
        assert!(Instant::now() < deadline, "the slow body never took its share");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // 700,000 + 400,000 > 1 MiB: refused at once, nothing applied.
    let refused = node.post(S).content_type(BIN).body(vec![b'b'; 400_000]).send().await;
    refused.expect_error(503, "INGRESS_BODY_BYTES_LIMIT_REACHED").must("retry-after");
    node.post(S).content_type(BIN).body(vec![b'c'; 300_000]).send().await.expect(204);
    // The slow body ends and is answered; its share comes back.
    slow.write_all(&vec![b'a'; declared - 1000]).await.expect("the rest");
    let mut answer = vec![0u8; 1024];
    let n = slow.read(&mut answer).await.expect("an answer");
    let answer = String::from_utf8_lossy(&answer[..n]).to_string();
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    drop(slow);
    node.post(S).content_type(BIN).body(vec![b'b'; 400_000]).send().await.expect(204);
    assert_eq!(metric(&node, "ingress_body_bytes_inflight").await, 0);
    assert_eq!(metric(&node, "ingress_body_bytes_refusals").await, 1);
    let tail = node.read_all(S).await;
    assert_eq!(tail.body.len(), 300_000 + declared + 400_000, "the refused body left nothing");
}

#[tokio::test]
async fn live_reads_past_the_waiter_cap_answer_503_and_the_cap_is_per_core() {
    let node = Node::in_process_with(
        "[runtime]\ncore_count = 2\nlive_read_max_waiters_per_core = 1\n[raft]\ngroup_count = 4\n",
    );
    node.create(S, BIN).await;
    let poll = || node.get(&format!("{S}?offset=now&live=long-poll&timeout_ms=30000")).send();
    let (first, second) = (tokio::spawn(poll()), tokio::spawn(poll()));
    node.wait_live_readers(2).await;
    poll().await.expect_error(503, "LIVE_READ_BACKPRESSURE").must("retry-after");
    assert_eq!(metric(&node, "live_read_max_waiters").await, 2, "one per core, two cores");
    assert_eq!(metric(&node, "live_read_backpressure_events").await, 1);
    // The waiters are answered as usual, and then there is room again.
    node.post(S).content_type(BIN).body("x").send().await.expect(204);
    first.await.expect("first").expect(200);
    second.await.expect("second").expect(200);
    let third = tokio::spawn(poll());
    node.wait_live_readers(1).await;
    node.post(S).content_type(BIN).body("y").send().await.expect(204);
    third.await.expect("third").expect(200);
}

#[tokio::test]
async fn no_waiter_cap_means_no_refusal() {
    let node = Node::in_process_with("[runtime]\nlive_read_max_waiters_per_core = 0\n");
    node.create(S, BIN).await;
    assert_eq!(metric(&node, "live_read_max_waiters").await, 0);
    let polls: Vec<_> = (0..8)
        .map(|_| tokio::spawn(node.get(&format!("{S}?offset=now&live=long-poll&timeout_ms=30000")).send()))
        .collect();
    node.wait_live_readers(8).await;
    node.post(S).content_type(BIN).body("x").send().await.expect(204);
    for poll in polls {
        poll.await.expect("poll").expect(200);
    }
}

/// A cluster node whose log is past twice its budget refuses writes with
/// a body (`RAFT_LOG_PRESSURE`) but not deletes; a snapshot brings the
/// log down and writes resume below 1.5 times the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_node_refuses_bodies_while_its_log_is_over_twice_the_budget() {
    let mut layout = Layout::new(3, "log-pressure", 1, Planes::Shared);
    layout.raft_extra = "snapshot_log_budget = \"64KiB\"\nsnapshot_backstop_logs = 100000\n".into();
    // The snapshot driver sleeps: only the operator's snapshot shrinks the log.
    layout.sections = "[storage.snapshot]\ndrive_interval = \"60m\"\n".into();
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    create(&http, &urls, S).await;
    create(&http, &urls, "/backpressure/other").await;
    let append = |body: Vec<u8>| {
        let (http, url) = (http.clone(), urls[0].clone());
        async move {
            let answer = http.post(format!("{url}{S}")).header("content-type", "text/plain").body(body).send().await;
            let answer = answer.expect("an answer");
            let status = answer.status().as_u16();
            let retry = answer.headers().get("retry-after").is_some();
            let body: Value = serde_json::from_slice(&answer.bytes().await.unwrap_or_default()).unwrap_or(Value::Null);
            (status, retry, body["error"]["code"].as_str().unwrap_or_default().to_owned())
        }
    };
    // 200 KiB > 2 x 64 KiB: the next write with a body is refused.
    assert_eq!(append(vec![b'a'; 200 * 1024]).await.0, 204);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, retry, code) = append(b"b".to_vec()).await;
        if status == 503 {
            assert_eq!(code, "RAFT_LOG_PRESSURE");
            assert!(retry, "a Retry-After");
            break;
        }
        assert_eq!(status, 204, "{code}");
        assert!(Instant::now() < deadline, "the log pressure gate never closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A delete carries no body: it goes through.
    let deleted = http.delete(format!("{}/backpressure/other", urls[0])).send().await.expect("delete");
    assert_eq!(deleted.status(), 204);
    let leader_metrics = crate::cluster_leadership::metrics(&http, &urls[0]).await.expect("metrics");
    assert_eq!(leader_metrics["raft_log_pressure"], true);
    assert!(leader_metrics["raft_log_bytes_high_watermark"].as_u64().unwrap_or(0) >= 200 * 1024);
    // Every voter snapshots its group: the log falls and writes resume.
    for i in 0..layout.voters() {
        let (status, _) =
            crate::ctl::admin(&http, &layout, i, reqwest::Method::POST, "/__ursula/raft/0/snapshot").await;
        assert_eq!(status, 200);
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, _, code) = append(b"c".to_vec()).await;
        if status == 204 {
            break;
        }
        assert_eq!(code, "RAFT_LOG_PRESSURE");
        assert!(Instant::now() < deadline, "writes never resumed after the snapshot");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `raft.append_transport_budget_bytes` (spec/07): with a budget smaller
/// than one append, each batch to a peer takes the whole budget and the
/// other peer's batch waits for it; every write still replicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transport_budget_smaller_than_an_append_holds_batches_back_and_loses_nothing() {
    let mut layout = Layout::new(3, "transport-budget", 1, Planes::Shared);
    layout.raft_extra = "append_transport_budget_bytes = \"16KiB\"\n".into();
    let nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    create(&http, &urls, S).await;
    let leader = leader_url(&http, &urls).await;
    let writers = (0..4u8).map(|w| {
        let (http, url) = (http.clone(), format!("{leader}{S}"));
        tokio::spawn(async move {
            for _ in 0..10 {
                let answer = http.post(&url).header("content-type", "text/plain").body(vec![b'a' + w; 32 * 1024]);
                assert_eq!(answer.send().await.expect("an answer").status().as_u16(), 204);
            }
        })
    });
    for w in writers.collect::<Vec<_>>() {
        w.await.expect("a writer");
    }
    let mut waits = 0;
    for node in nodes.iter().flatten() {
        let m = node.get("/__ursula/metrics").send().await.json();
        assert_eq!(m["raft_append_transport_budget_bytes"], 16 * 1024, "{m}");
        waits += m["raft_append_transport_outbound_waits"].as_u64().unwrap_or(0);
        // The slower follower's batches may still be out; then nothing is held.
        let deadline = Instant::now() + PATIENCE;
        while node.get("/__ursula/metrics").send().await.json()["raft_append_transport_outbound_bytes"] != 0 {
            assert!(Instant::now() < deadline, "outbound bytes stay charged");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(waits > 0, "no batch waited for the budget");
    // Every voter holds the 40 appends.
    for node in nodes.iter().flatten() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let read = node.get(&format!("{S}?offset=-1&consistency=local")).send().await;
            if read.status == 200 && read.body.len() == 40 * 32 * 1024 {
                break;
            }
            assert!(Instant::now() < deadline, "a voter lacks appends: {} bytes", read.body.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The client URL of the voter that leads the one group.
async fn leader_url(http: &reqwest::Client, urls: &[String]) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for url in urls {
            if let Ok(answer) = http.get(format!("{url}/__ursula/metrics")).send().await
                && let Ok(m) = serde_json::from_slice::<Value>(&answer.bytes().await.unwrap_or_default())
                && m["raft_groups"][0]["current_leader"] == m["node_id"]
            {
                return url.clone();
            }
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
