//! Issue 17, finding 1: a client cannot hold a connection with no load.
//! A request head must arrive within `server.header_read_timeout`, a
//! connection with no request in flight closes after `server.idle_timeout`,
//! and a body that stalls answers `408 BODY_TOO_SLOW` after
//! `server.body_stall_timeout`, while other clients are served. A live read
//! is a request in flight: it is never cut as idle. The bounds below are
//! generous (the machine is shared); without the timeouts these
//! connections stay open for minutes.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Node, offset, read_raw_response};

const SHORT: &str = "[server]\nheader_read_timeout = \"1s\"\nidle_timeout = \"2s\"\nbody_stall_timeout = \"1s\"\n";
/// Longer than any timeout above, far shorter than a connection held forever.
const CLOSED_WITHIN: Duration = Duration::from_secs(20);

fn addr(node: &Node) -> String {
    node.base().trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection; panics past `CLOSED_WITHIN`.
async fn closed_by_server(tcp: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let read_all = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(CLOSED_WITHIN, read_all).await.expect("the server closed the connection");
    seen
}

#[tokio::test]
async fn a_request_head_sent_byte_by_byte_is_cut_while_others_are_served() {
    let node = Node::in_process_with(SHORT);
    node.create("/demo/s", "text/plain").await;
    let mut slow = TcpStream::connect(addr(&node)).await.expect("connecting");
    let head = b"GET /demo/s?offset=-1 HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let started = Instant::now();
    let trickle = async {
        for b in head {
            if slow.write_all(&[*b]).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    };
    // Meanwhile a well-behaved client is served.
    let (cut, ()) = tokio::join!(trickle, async {
        node.read_all("/demo/s").await;
    });
    if !cut {
        // The whole head went out (slower than the timeout allows): no answer may follow.
        let seen = closed_by_server(&mut slow).await;
        assert!(!seen.starts_with(b"HTTP/1.1 200"), "a head that took {:?} was served", started.elapsed());
    }
    assert!(started.elapsed() < CLOSED_WITHIN);
}

#[tokio::test]
async fn an_idle_connection_is_closed_and_a_fresh_one_served() {
    let node = Node::in_process_with(SHORT);
    node.create("/demo/s", "text/plain").await;
    // A connection that never sends a byte.
    let mut silent = TcpStream::connect(addr(&node)).await.expect("connecting");
    // A keep-alive connection idle after one request.
    let mut kept = TcpStream::connect(addr(&node)).await.expect("connecting");
    kept.write_all(b"HEAD /demo/s HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("writing");
    let (status, _, _) = read_raw_response(&mut kept).await;
    assert_eq!(status.as_u16(), 200);
    closed_by_server(&mut silent).await;
    closed_by_server(&mut kept).await;
    node.read_all("/demo/s").await;
}

#[tokio::test]
async fn a_long_poll_longer_than_the_idle_timeout_is_not_idle() {
    let node = Node::in_process_with(SHORT);
    node.create("/demo/s", "text/plain").await;
    node.append("/demo/s", "text/plain", "abc").await;
    // Waits 3 s for data on a connection whose idle timeout is 2 s.
    let poll = node.get(&format!("/demo/s?offset={}&live=long-poll&timeout_ms=3000", offset(3))).send().await;
    poll.expect(204).expect_header("stream-up-to-date", "true");
}

#[tokio::test]
async fn a_body_that_stalls_answers_408_and_appends_nothing() {
    let node = Node::in_process_with(SHORT);
    node.create("/demo/s", "text/plain").await;
    let mut tcp = TcpStream::connect(addr(&node)).await.expect("connecting");
    let head = "POST /demo/s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n0123456789";
    tcp.write_all(head.as_bytes()).await.expect("writing");
    let (status, headers, body) =
        tokio::time::timeout(CLOSED_WITHIN, read_raw_response(&mut tcp)).await.expect("an answer");
    assert_eq!(status.as_u16(), 408, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("BODY_TOO_SLOW"), "{headers:?}");
    assert_eq!(node.tail("/demo/s").await, offset(0), "nothing was appended");
}

#[tokio::test]
async fn a_partial_head_is_cut_at_the_head_timeout_not_after_a_graceful_close() {
    let node = Node::in_process_with(SHORT);
    let mut partial = TcpStream::connect(addr(&node)).await.expect("connecting");
    partial.write_all(b"GET /demo/s HTTP/1.1\r\nHo").await.expect("writing");
    let started = Instant::now();
    let seen = closed_by_server(&mut partial).await;
    assert!(seen.is_empty(), "{}", String::from_utf8_lossy(&seen));
    // The head timeout is 1 s and the check runs every 250 ms; a graceful
    // close waits 5 s more for a head in progress before it cuts.
    let took = started.elapsed();
    assert!(took < Duration::from_millis(4500), "cut after {took:?}");
}

#[tokio::test]
async fn a_refused_body_is_drained_past_the_head_timeout_and_its_client_reads_the_answer() {
    let node = Node::in_process_with(SHORT);
    node.create("/demo/s", "text/plain").await;
    let mut tcp = TcpStream::connect(addr(&node)).await.expect("connecting");
    // No Host: refused at once (400), while the body is still on its way.
    let chunks = 8;
    let head = format!("POST /demo/s HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n", chunks * 100);
    tcp.write_all(head.as_bytes()).await.expect("writing the head");
    // The body takes 3.2 s, past the 1 s head timeout: the connection is
    // draining it, not waiting for a head, so it must not be cut.
    for i in 0..chunks {
        tokio::time::sleep(Duration::from_millis(400)).await;
        tcp.write_all(&[b'x'; 100]).await.unwrap_or_else(|e| panic!("chunk {i} of the body: {e}"));
    }
    let (status, _, body) = tokio::time::timeout(CLOSED_WITHIN, read_raw_response(&mut tcp)).await.expect("an answer");
    assert_eq!(status.as_u16(), 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(node.tail("/demo/s").await, offset(0), "nothing was appended");
    // Drained, the connection waits for a head again, and is cut for none.
    closed_by_server(&mut tcp).await;
}
