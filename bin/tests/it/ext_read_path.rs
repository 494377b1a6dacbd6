//! The read path and server metadata (extensions §7-§10): long-poll
//! `timeout_ms` (§9.1), `consistency=local|leader` (§9.2), `max_bytes` and
//! the 8 MiB cap (§9.3), JSON reads as NDJSON (§9.4), binary SSE (§7,
//! §9.5), URL encoding of offsets (§8), and `Ursula-Protocol`,
//! `Ursula-Cluster-Id` and `Ursula-Max-Request-Bytes` (§10).
//!
//! Not covered on this single node: `307`/`503` leader answers of §9.2,
//! and redirects and `503`s carrying the identity headers (§10).

use std::time::{Duration, Instant};

use crate::support::{Answer, Checks, Node, offset, pattern, sse_payload};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const OCTETS: &str = "application/octet-stream";
/// Ursula's cap on a read response (§9.3).
const CAP: usize = 8 * 1024 * 1024;

// ---------------------------------------------------------------------------
// §9.3 Response size
// ---------------------------------------------------------------------------

/// §9.3: `max_bytes={n}` returns at most `n` bytes; such a partial answer
/// carries no `Stream-Up-To-Date` and its `Stream-Next-Offset` is just past
/// the returned bytes, so a client continues until up to date.
#[tokio::test]
async fn ext_9_3_max_bytes_bounds_a_read_and_the_client_continues_from_next_offset() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    let mut next = "-1".to_string();
    let mut got = String::new();
    let mut reads = 0;
    loop {
        let answer = node.get(&format!("{S}?offset={next}&max_bytes=4")).send().await;
        answer.expect(200);
        assert!(answer.body.len() <= 4, "{answer:?}");
        got.push_str(&answer.text());
        next = answer.must("stream-next-offset").to_string();
        reads += 1;
        if answer.header("stream-up-to-date") == Some("true") {
            assert_eq!(next, offset(11));
            break;
        }
        assert_eq!(next, offset(got.len() as u64), "Stream-Next-Offset is just past the bytes");
    }
    assert_eq!((got.as_str(), reads), ("hello world", 3));
    // A value that is not a decimal integer is ignored: the cap alone applies.
    for bad in ["abc", "-1", "4.5", ""] {
        let answer = node.get(&format!("{S}?offset=-1&max_bytes={bad}")).send().await;
        assert_eq!(answer.expect(200).text(), "hello world", "max_bytes={bad}");
    }
}

/// §9.3: Ursula caps every read response at 8 MiB, and a larger
/// `max_bytes` is clamped to the cap; the capped answer is partial.
#[tokio::test]
async fn ext_9_3_reads_are_capped_at_8_mib_and_max_bytes_is_clamped() {
    let node = Node::start();
    node.create(S, OCTETS).await;
    let bytes = pattern(CAP + 1000);
    node.append(S, OCTETS, bytes.clone()).await;
    for query in ["offset=-1", "offset=-1&max_bytes=100000000", "offset=-1&max_bytes=18446744073709551615"] {
        let answer = node.get(&format!("{S}?{query}")).send().await;
        answer
            .expect(200)
            .expect_header("stream-next-offset", &offset(CAP as u64))
            .expect_no_header("stream-up-to-date");
        assert!(answer.body.len() == CAP && answer.body[..] == bytes[..CAP], "{query}: the first 8 MiB");
    }
    let rest = node.get(&format!("{S}?offset={}", offset(CAP as u64))).send().await;
    rest.expect(200).expect_header("stream-up-to-date", "true");
    assert!(rest.body[..] == bytes[CAP..]);
}

/// §9.3: on a live read `max_bytes` bounds each response or SSE data
/// event; Ursula raises a smaller value to 1 byte, and to 4 bytes on a text
/// SSE read.
#[tokio::test]
async fn ext_9_3_live_reads_raise_a_small_max_bytes_to_1_or_4_bytes() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "abcdefghij").await;
    let poll = node.get(&format!("{S}?offset=-1&live=long-poll&max_bytes=0")).send().await;
    assert_eq!(poll.expect(200).text(), "a");
    poll.expect_header("stream-next-offset", &offset(1)).expect_no_header("stream-up-to-date");
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse&max_bytes=1")).await;
    let events = sse.until(|e| e.is("control") && e.json()["upToDate"] == true).await;
    let data: Vec<&str> = events.iter().filter(|e| e.is("data")).map(|e| e.data.as_str()).collect();
    assert_eq!(data, ["abcd", "efgh", "ij"], "text SSE events of at most 4 bytes: {events:#?}");
    // Binary SSE: 1 byte per event.
    node.create("/demo/bin", OCTETS).await;
    node.append("/demo/bin", OCTETS, vec![1u8, 2, 3]).await;
    let mut sse = node.sse("/demo/bin?offset=-1&live=sse&max_bytes=0").await;
    let events = sse.until(|e| e.is("control") && e.json()["upToDate"] == true).await;
    assert_eq!(events.iter().filter(|e| e.is("data")).count(), 3, "{events:#?}");
    assert_eq!(sse_payload(&events, true), [1, 2, 3]);
}

// ---------------------------------------------------------------------------
// §9.1 Long-poll timeout
// ---------------------------------------------------------------------------

/// §9.1: `timeout_ms` bounds a long-poll's wait, clamped to `1..60000`; an
/// unparseable value means the default of 1000 ms.
#[tokio::test]
async fn ext_9_1_timeout_ms_bounds_the_long_poll_and_defaults_to_1000() {
    let node = Node::start();
    node.create(S, TEXT).await;
    let poll = |query: &str| node.get(&format!("{S}?offset=now&live=long-poll{query}")).send();
    let started = Instant::now();
    poll("&timeout_ms=0").await.expect(204);
    poll("&timeout_ms=50").await.expect(204);
    assert!(started.elapsed() < Duration::from_millis(900), "short timeouts: {:?}", started.elapsed());
    for query in ["&timeout_ms=abc", ""] {
        let started = Instant::now();
        poll(query).await.expect(204).expect_header("stream-up-to-date", "true");
        let waited = started.elapsed();
        assert!(
            (Duration::from_millis(900)..Duration::from_secs(10)).contains(&waited),
            "{query:?} waits about the default 1000 ms: {waited:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// §9.2 Leader consistency
// ---------------------------------------------------------------------------

/// §9.2: `consistency=local` (the default) and `consistency=leader` serve
/// catch-up reads (a single node's applied state is the leader's); any
/// other value, and `leader` combined with `live`, answer `400`.
#[tokio::test]
async fn ext_9_2_consistency_is_local_or_leader_and_leader_excludes_live() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "abc").await;
    for value in ["local", "leader"] {
        let answer = node.get(&format!("{S}?offset=-1&consistency={value}")).send().await;
        assert_eq!(answer.expect(200).text(), "abc");
        answer.expect_header("stream-up-to-date", "true");
    }
    // `local` combines with live reads.
    node.get(&format!("{S}?offset=-1&live=long-poll&consistency=local")).send().await.expect(200);
    let mut checks = Checks::new();
    for query in [
        "consistency=LEADER",
        "consistency=strong",
        "consistency=",
        "consistency=leader&live=long-poll",
        "consistency=leader&live=sse",
        "live=sse&consistency=leader",
    ] {
        let answer = node.get(&format!("{S}?offset=-1&{query}")).send().await;
        checks.run(query, || {
            answer.expect_error(400, "INVALID_QUERY");
        });
    }
    checks.finish();
}

// ---------------------------------------------------------------------------
// §9.4 JSON stream reads, §7 / §9.5 SSE
// ---------------------------------------------------------------------------

/// §9.4: reads of an `application/json` stream return the stored messages,
/// each followed by LF, as `application/x-ndjson`; `HEAD` reports
/// `application/json`; SSE carries `Stream-Data-Content-Type:
/// application/x-ndjson`; `max_bytes` counts this representation and may
/// end inside a message.
#[tokio::test]
async fn ext_9_4_json_streams_read_as_ndjson() {
    let node = Node::start();
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"a": 1,  "b" : [true, null]}, "two", 3.50e1]"#).await;
    let ndjson = "{\"a\":1,\"b\":[true,null]}\n\"two\"\n3.50e1\n";
    let read = node.read_all(S).await;
    read.expect_header("content-type", "application/x-ndjson");
    assert_eq!(read.text(), ndjson);
    let poll = node.get(&format!("{S}?offset=-1&live=long-poll")).send().await;
    poll.expect(200).expect_header("content-type", "application/x-ndjson");
    node.head(S).send().await.expect(200).expect_header("content-type", JSON);
    let part = node.get(&format!("{S}?offset=-1&max_bytes=5")).send().await;
    assert_eq!(part.expect(200).text(), "{\"a\":");
    part.expect_header("stream-next-offset", &offset(5)).expect_no_header("stream-up-to-date");
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.header("stream-data-content-type"), Some("application/x-ndjson"));
    assert_eq!(sse.header("stream-sse-data-encoding"), None);
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), ndjson.as_bytes());
    assert_eq!(control["streamNextOffset"], offset(ndjson.len() as u64));
}

/// §9.5 and §7: a stream that is neither `text/*` nor `application/json`
/// carries base64 SSE data with `Stream-Sse-Data-Encoding: base64` and its
/// own content type as `Stream-Data-Content-Type`; each data event is
/// followed by a control event naming the offset just past its bytes.
#[tokio::test]
async fn ext_9_5_binary_sse_is_base64_with_a_control_after_each_data_event() {
    let node = Node::start();
    node.create(S, "application/x-custom").await;
    let bytes: Vec<u8> = (0u8..=255).collect();
    node.append(S, "application/x-custom", bytes.clone()).await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse&max_bytes=100")).await;
    assert_eq!(sse.header("stream-sse-data-encoding"), Some("base64"));
    assert_eq!(sse.header("stream-data-content-type"), Some("application/x-custom"));
    let events = sse.until(|e| e.is("control") && e.json()["upToDate"] == true).await;
    let mut decoded = 0;
    for pair in events.chunks(2) {
        assert!(pair[0].is("data") && pair[1].is("control"), "data, then control: {events:#?}");
        decoded += sse_payload(&pair[..1], true).len();
        assert_eq!(pair[1].json()["streamNextOffset"], offset(decoded as u64));
    }
    assert_eq!(sse_payload(&events, true), bytes);
}

// ---------------------------------------------------------------------------
// §8 URL encoding
// ---------------------------------------------------------------------------

/// §8: offsets are URL-decoded where they appear, in the query as in
/// paths (snapshots: ext_snapshots).
#[tokio::test]
async fn ext_8_offsets_in_the_query_are_url_decoded() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    let encoded: String = offset(6).bytes().map(|b| format!("%{b:02x}")).collect();
    assert_eq!(node.get(&format!("{S}?offset={encoded}")).send().await.expect(200).text(), "world");
    assert_eq!(node.get(&format!("{S}?offset=%2D1")).send().await.expect(200).text(), "hello world");
}

// ---------------------------------------------------------------------------
// §10 Server metadata
// ---------------------------------------------------------------------------

async fn cluster_id(node: &Node) -> String {
    node.head("/demo/missing").send().await.must("ursula-cluster-id").to_string()
}

fn expect_identity(answer: &Answer, id: &str) {
    answer.expect_header("ursula-protocol", "2").expect_header("ursula-cluster-id", id);
}

/// §10 and the §10 note: a single node without a configured id generates
/// `u` and 32 hex digits at its first start; it is 1 to 64 of
/// `[A-Za-z0-9._-]`, and two deployments do not share one.
#[tokio::test]
async fn ext_10_a_single_node_generates_u_and_32_hex_digits_as_its_cluster_id() {
    if crate::support::through_gateway() {
        // A gateway reports its voters' configured id: nothing to generate.
        return;
    }
    let one = Node::start();
    let two = Node::start();
    let (a, b) = (cluster_id(&one).await, cluster_id(&two).await);
    for id in [&a, &b] {
        assert!(
            id.len() == 33
                && id.starts_with('u')
                && id[1..].bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "u + 32 lowercase hex digits: {id}"
        );
    }
    assert_ne!(a, b, "two nodes are two deployments");
}

/// §10: `Ursula-Protocol: 2` and the same `Ursula-Cluster-Id` on every
/// answer of the server: every `HEAD`, whatever its status, every `404`,
/// and successes and other errors too.
#[tokio::test]
async fn ext_10_identity_headers_are_on_every_answer() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello").await;
    node.publish(S, &offset(5), TEXT, "snap").await;
    let token = node.incarnation(S).await;
    let id = node.head(S).send().await.must("ursula-cluster-id").to_string();
    let mut checks = Checks::new();
    let answers = [
        ("HEAD 200", node.head(S).send().await),
        ("HEAD 404", node.head("/demo/missing").send().await),
        ("HEAD 400 bucket", node.head("/Demo/s").send().await),
        ("HEAD 400 token", node.head(S).incarnation("x").send().await),
        ("HEAD 412", node.head(S).incarnation("4503599627370496").send().await),
        ("HEAD 404 route", node.head(&format!("{S}/a/b")).send().await),
        ("HEAD snapshot 200", node.head(&format!("{S}/snapshot/{}", offset(5))).send().await),
        ("HEAD snapshot 404", node.head(&format!("{S}/snapshot/{}", offset(4))).send().await),
        ("HEAD chunk 200", node.head(&format!("{S}/incarnation/{token}/chunk/{}", offset(0))).send().await),
        ("HEAD chunk 400", node.head(&format!("{S}/incarnation/x/chunk/{}", offset(0))).send().await),
        ("HEAD chunk 416", node.head(&format!("{S}/incarnation/{token}/chunk/{}", offset(9))).send().await),
        ("HEAD bucket 405", node.head("/demo").send().await),
        ("GET 404 stream", node.get("/demo/missing?offset=-1").send().await),
        ("GET 404 route", node.get(&format!("{S}/a/b")).send().await),
        ("GET 404 snapshot", node.get(&format!("{S}/snapshot/{}", offset(4))).send().await),
        ("POST 404", node.post("/demo/missing").content_type(TEXT).body("x").send().await),
        ("PUT 404 snapshot", node.put(&format!("/demo/missing/snapshot/{}", offset(0))).send().await),
        ("DELETE 404", node.delete("/demo/missing").send().await),
        ("bootstrap 404", node.get("/demo/missing/bootstrap").send().await),
        ("GET 200", node.get(&format!("{S}?offset=-1")).send().await),
        ("GET 400", node.get(&format!("{S}?offset=bad")).send().await),
        ("GET 416", node.get(&format!("{S}?offset={}", offset(9))).send().await),
        ("long-poll 204", node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=1", offset(5))).send().await),
        ("bootstrap 200", node.get(&format!("{S}/bootstrap")).send().await),
        ("PUT 201", node.put("/demo/other").content_type(TEXT).send().await),
        ("PUT 200", node.put("/demo/other").content_type(TEXT).send().await),
        ("PUT 409", node.put("/demo/other").content_type(JSON).send().await),
        ("PUT bucket 201", node.put("/demo").send().await),
        ("POST 204", node.post("/demo/other").content_type(TEXT).body("x").send().await),
        ("POST 400", node.post("/demo/other").content_type(TEXT).send().await),
        ("PATCH 405", node.request(reqwest::Method::PATCH, S).send().await),
        ("OPTIONS 204", node.request(reqwest::Method::OPTIONS, S).send().await),
        ("DELETE 204", node.delete("/demo/other").send().await),
    ];
    for (label, answer) in &answers {
        checks.run(label, || expect_identity(answer, &id));
    }
    checks.finish();
    // The id is the same across requests and does not depend on the stream.
    node.delete(S).send().await.expect(204);
    node.create(S, TEXT).await;
    expect_identity(&node.head(S).send().await, &id);
}

/// §10: every successful `HEAD` of a stream sends `Ursula-Max-Request-Bytes`
/// as a canonical decimal, 33554432 from a node, and a node without a cold
/// backend sends no `Ursula-Max-Snapshot-Bytes`.
#[tokio::test]
async fn ext_10_head_names_the_request_limit() {
    let node = Node::start();
    for (path, content_type) in [(S, TEXT), ("/demo/j", JSON), ("/demo/b", OCTETS)] {
        node.create(path, content_type).await;
        node.head(path)
            .send()
            .await
            .expect(200)
            .expect_header("ursula-max-request-bytes", "33554432")
            .expect_no_header("ursula-max-snapshot-bytes");
    }
    node.close(S).await;
    node.head(S).send().await.expect(200).expect_header("ursula-max-request-bytes", "33554432");
}
