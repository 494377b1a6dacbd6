//! The gateway's body budget and slow-body rules (issue 8; 0.8 release
//! notes): a large body that finds the budget spent for
//! `--body-budget-wait-ms` gets `503 UPLOAD_BUDGET_EXHAUSTED` while small
//! bodies keep their headroom, a body that stalls or trickles below
//! `--body-min-bytes-per-sec` gets `408 BODY_TOO_SLOW`, and nothing of a
//! refused body reaches the stream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::cluster::wait_ready;
use crate::support::cluster::{Layout, Planes, gateway_args};
use crate::support::{Node, read_raw_response};

const S: &str = "/gateway/bodies";
const TEXT: &str = "text/plain";
const LIMIT: u64 = 1024 * 1024;
const HEADROOM: u64 = 64 * 1024;

/// Opens a raw connection that declares a `declared`-byte body and sends
/// `piece` bytes every `every` until `stop`; hands the socket back then.
fn trickle(
    addr: &str,
    declared: u64,
    piece: usize,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<tokio::net::TcpStream> {
    let addr = addr.to_string();
    tokio::spawn(async move {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.expect("connecting");
        let head =
            format!("POST {S} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {TEXT}\r\nContent-Length: {declared}\r\n\r\n");
        tcp.write_all(head.as_bytes()).await.expect("the head");
        let mut sent = 0u64;
        while !stop.load(Ordering::Relaxed) && sent + (piece as u64) < declared {
            if tcp.write_all(&vec![b'x'; piece]).await.is_err() {
                break;
            }
            sent += piece as u64;
            tokio::time::sleep(every).await;
        }
        tcp
    })
}

async fn metric(gw: &Node, name: &str) -> u64 {
    let m = gw.get("/__ursula/gateway/metrics").send().await.expect(200).json();
    m[name].as_u64().unwrap_or_else(|| panic!("no {name} in {m}"))
}

async fn eventually(gw: &Node, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(gw, name).await != want {
        assert!(Instant::now() < deadline, "{name} never reached {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_budget_and_slow_bodies_refuse_with_nothing_forwarded() {
    let layout = Layout::new(3, "gateway-bodies", 2, Planes::Shared);
    let voters: Vec<Node> = (0..3).map(|i| layout.start(i)).collect();
    for v in &voters {
        wait_ready(v).await;
    }
    let limit = LIMIT.to_string();
    let headroom = HEADROOM.to_string();
    let budget = (LIMIT + HEADROOM).to_string();
    let flags = [
        "--max-request-body-bytes",
        &limit,
        "--small-body-max-bytes",
        "4096",
        "--small-body-headroom-bytes",
        &headroom,
        "--body-budget-bytes",
        &budget,
        "--body-budget-wait-ms",
        "300",
        "--body-stall-timeout",
        "1s",
        "--body-min-bytes-per-sec",
        "1024",
    ];
    let gw = Node::spawn(&gateway_args(&layout, &flags), None);
    wait_ready(&gw).await;
    gw.create(S, TEXT).await;
    assert_eq!(metric(&gw, "upload_budget_bytes").await, LIMIT + HEADROOM);
    let addr = gw.base().trim_start_matches("http://").to_string();

    // A body of the whole limit, arriving at 4 KiB/s: above the minimum
    // rate, so it is never cut, and it holds every byte large bodies may use.
    let stop = Arc::new(AtomicBool::new(false));
    let holder = trickle(&addr, LIMIT, 2048, Duration::from_millis(500), stop.clone());
    eventually(&gw, "upload_reserved_bytes", LIMIT).await;

    let large = gw.post(S).content_type(TEXT).body(vec![b'L'; 100 * 1024]).send().await;
    large.expect_error(503, "UPLOAD_BUDGET_EXHAUSTED").expect_header("retry-after", "1");
    // Small bodies have headroom of their own.
    gw.append(S, TEXT, "small;").await;
    assert_eq!(metric(&gw, "upload_refusals_budget").await, 1);

    // The holder stops sending: one stall window later it is cut.
    stop.store(true, Ordering::Relaxed);
    let mut tcp = holder.await.expect("the holder");
    let (status, headers, body) =
        tokio::time::timeout(Duration::from_secs(30), read_raw_response(&mut tcp)).await.expect("an answer");
    assert_eq!(status, 408, "{headers:?}");
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error body");
    assert_eq!(body["error"]["code"], "BODY_TOO_SLOW", "{body}");
    eventually(&gw, "upload_reserved_bytes", 0).await;

    // A body that keeps arriving, but below 1 KiB/s, is cut too.
    let slow = trickle(&addr, 4000, 10, Duration::from_millis(100), Arc::new(AtomicBool::new(false)));
    let mut tcp = slow.await.expect("the trickle");
    let (status, _, _) = read_raw_response(&mut tcp).await;
    assert_eq!(status, 408);
    assert_eq!(metric(&gw, "upload_refusals_too_slow").await, 2);

    // With the budget back, the large body goes through.
    let large = "L".repeat(8192);
    gw.post(S).content_type(TEXT).body(large.clone()).send().await.expect(204);
    let read = gw.read_all(S).await;
    assert!(read.text() == format!("small;{large}"), "nothing of a refused body reached the stream");
}
