//! Bootstrap (extensions §3, spec/32-api-bootstrap.md, spec/20):
//! `GET {stream}/bootstrap` as an RFC 2046 `multipart/mixed` answer with a
//! fresh boundary, the snapshot part first (empty when there is none), one
//! update part per message on JSON streams and one for other streams, and
//! the complete and partial forms with Ursula's 8 MiB stopping rule.
//!
//! Not covered on this single node: the partial answer for updates held
//! only in a cold tier (there is none) and the `307`/`503` cluster answers.

use crate::support::{Answer, Node, offset, pattern};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const OCTETS: &str = "application/octet-stream";
/// Ursula's cap on the update parts of one answer (spec/32).
const CAP: usize = 8 * 1024 * 1024;

/// One part of a `multipart/mixed` body.
#[derive(Debug)]
struct Part {
    content_type: Option<String>,
    body: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

/// The boundary of a `multipart/mixed; boundary=...` content type.
fn boundary(answer: &Answer) -> String {
    let content_type = answer.must("content-type");
    let (kind, params) = content_type.split_once(';').unwrap_or((content_type, ""));
    assert_eq!(kind.trim(), "multipart/mixed", "{answer:?}");
    let value = params
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(name, _)| name.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no boundary parameter:\n{answer:?}"));
    // RFC 2046 §5.1.1: 1 to 70 characters.
    assert!((1..=70).contains(&value.len()), "boundary length:\n{answer:?}");
    value
}

/// Parses the body as RFC 2046 §5.1.1 describes it: parts between
/// `--boundary` delimiters, each delimiter after the first preceded by
/// CRLF (which belongs to the delimiter), the last one `--boundary--`.
fn multipart(answer: &Answer) -> Vec<Part> {
    let boundary = boundary(answer);
    let body = answer.body.as_ref();
    let first = format!("--{boundary}");
    let delimiter = format!("\r\n--{boundary}");
    let mut at = find(body, first.as_bytes(), 0).unwrap_or_else(|| panic!("no first delimiter:\n{answer:?}"));
    at += first.len();
    let mut out = Vec::new();
    loop {
        if body[at..].starts_with(b"--") {
            return out;
        }
        assert!(body[at..].starts_with(b"\r\n"), "a delimiter line ends with CRLF at byte {at}:\n{answer:?}");
        at += 2;
        let headers_end = find(body, b"\r\n\r\n", at)
            .map(|i| (i, i + 4))
            // A part without headers starts with its blank line.
            .or_else(|| body[at..].starts_with(b"\r\n").then_some((at, at + 2)))
            .unwrap_or_else(|| panic!("a part without a blank line after its headers:\n{answer:?}"));
        let headers = String::from_utf8_lossy(&body[at..headers_end.0]).into_owned();
        let content_type = headers
            .split("\r\n")
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.trim().to_string());
        let end = find(body, delimiter.as_bytes(), headers_end.1)
            .unwrap_or_else(|| panic!("a part without a closing delimiter:\n{answer:?}"));
        out.push(Part { content_type, body: body[headers_end.1..end].to_vec() });
        at = end + delimiter.len();
    }
}

async fn bootstrap(node: &Node, path: &str) -> Answer {
    let answer = node.get(&format!("{path}/bootstrap")).send().await;
    answer.expect(200);
    answer
}

/// A JSON update part holds exactly one stored message; whether the
/// message's trailing LF is in the part or left to the delimiter is not
/// fixed by §3.2, so both readings are accepted.
fn expect_message(part: &Part, message: &str) {
    let body = part.body.strip_suffix(b"\n").unwrap_or(&part.body);
    assert_eq!(String::from_utf8_lossy(body), message, "{part:?}");
    assert_eq!(part.content_type.as_deref(), Some(JSON), "{part:?}");
}

/// §3.2: the answer is `multipart/mixed` with a boundary, `Cache-Control:
/// no-store`, `Stream-Incarnation`, and a fresh unpredictable boundary per
/// response ("Each response uses a fresh 128-bit random multipart
/// boundary"), which no content holds.
#[tokio::test]
async fn ext_3_2_bootstrap_is_multipart_mixed_with_a_fresh_boundary_per_response() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello").await;
    let token = node.incarnation(S).await;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..5 {
        let answer = bootstrap(&node, S).await;
        answer.expect_header("cache-control", "no-store").expect_header("stream-incarnation", &token);
        let b = boundary(&answer);
        assert!(b.len() >= 22, "a 128-bit random boundary needs at least 22 characters: {b}");
        assert!(seen.insert(b.clone()), "the boundary {b} repeats across responses");
        assert_eq!(multipart(&answer).len(), 2);
    }
}

/// §3.2: with no snapshot the first part is empty with `Content-Type:
/// application/octet-stream`, `Stream-Snapshot-Offset` is `-1`, and the
/// updates begin at the earliest retained offset; the complete form ends
/// at the tail with `Stream-Up-To-Date: true`.
#[tokio::test]
async fn ext_3_2_without_a_snapshot_the_first_part_is_empty_octet_stream() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello ").await;
    node.append(S, TEXT, "world").await;
    let answer = bootstrap(&node, S).await;
    answer
        .expect_header("stream-snapshot-offset", "-1")
        .expect_header("stream-next-offset", &offset(11))
        .expect_header("stream-up-to-date", "true")
        .expect_no_header("stream-closed");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0].content_type.as_deref(), Some(OCTETS));
    assert!(parts[0].body.is_empty(), "{parts:?}");
    // §3.2: a non-JSON stream's updates MAY come as one part; Ursula sends one.
    assert_eq!(parts[1].content_type.as_deref(), Some(TEXT));
    assert_eq!(parts[1].body, b"hello world");

    // An empty stream: the empty snapshot part alone, complete.
    node.create("/demo/empty", TEXT).await;
    let answer = bootstrap(&node, "/demo/empty").await;
    answer
        .expect_header("stream-snapshot-offset", "-1")
        .expect_header("stream-next-offset", &offset(0))
        .expect_header("stream-up-to-date", "true");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert!(parts[0].body.is_empty());
}

/// §3.2: with a snapshot the first part is its raw bytes under its stored
/// content type, and the updates start exactly at the snapshot offset.
#[tokio::test]
async fn ext_3_2_the_snapshot_part_comes_first_then_the_updates_after_it() {
    let node = Node::start();
    node.create(S, OCTETS).await;
    node.append(S, OCTETS, b"\x00\x01\x02\x03\x04".to_vec()).await;
    // Binary snapshot bytes, CRLF and a delimiter-like line included, are not reframed.
    let snapshot = b"\r\n--not-a-boundary\r\n\x00\xff".to_vec();
    node.publish(S, &offset(2), "application/vnd.example", snapshot.clone()).await;
    node.append(S, OCTETS, b"\x05\x06".to_vec()).await;
    let answer = bootstrap(&node, S).await;
    answer
        .expect_header("stream-snapshot-offset", &offset(2))
        .expect_header("stream-next-offset", &offset(7))
        .expect_header("stream-up-to-date", "true");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0].content_type.as_deref(), Some("application/vnd.example"));
    assert_eq!(parts[0].body, snapshot);
    assert_eq!(parts[1].content_type.as_deref(), Some(OCTETS));
    assert_eq!(parts[1].body, b"\x02\x03\x04\x05\x06");

    // A snapshot at the tail: the snapshot part alone, complete.
    node.publish(S, &offset(7), "application/vnd.example", "all").await;
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-next-offset", &offset(7)).expect_header("stream-up-to-date", "true");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!(parts[0].body, b"all");
}

/// §3.2: on a JSON stream each update part is exactly one message, in
/// stream order, with the stream's content type and the stored message
/// text.
#[tokio::test]
async fn ext_3_2_json_updates_come_one_message_per_part() {
    let node = Node::start();
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"op": "set", "v": 1}, {"op":"set","v":2}]"#).await;
    node.append(S, JSON, r#""three""#).await;
    // `{"op":"set","v":1}\n` is 19 bytes.
    node.publish(S, &offset(19), JSON, r#"{"v":1}"#).await;
    node.append(S, JSON, "[4, [5, 6]]").await;
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-snapshot-offset", &offset(19)).expect_header("stream-up-to-date", "true");
    assert_eq!(answer.must("stream-next-offset"), node.tail(S).await);
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 5, "{parts:?}");
    assert_eq!(parts[0].content_type.as_deref(), Some(JSON));
    assert_eq!(parts[0].body, br#"{"v":1}"#);
    for (part, message) in parts[1..].iter().zip([r#"{"op":"set","v":2}"#, r#""three""#, "4", "[5,6]"]) {
        expect_message(part, message);
    }
}

/// spec/32 header table: `Stream-Closed: true` when the stream is closed and
/// the answer reaches its tail.
#[tokio::test]
async fn ext_3_2_bootstrap_of_a_closed_stream_says_stream_closed() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.post(S).content_type(TEXT).closed().body("done").send().await.expect(204);
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-closed", "true").expect_header("stream-up-to-date", "true");
}

/// §3.2 "Completeness" and spec/32: a non-JSON stream with more than 8 MiB
/// after the snapshot point answers the partial form with the snapshot part
/// only: `Stream-Next-Offset` is the snapshot point `S` and there is no
/// `Stream-Up-To-Date: true`. Ordinary reads from `S` return the rest
/// (§3.3).
#[tokio::test]
async fn ext_3_2_a_non_json_stream_over_8_mib_after_the_snapshot_answers_the_snapshot_part_only() {
    let node = Node::start();
    node.create(S, OCTETS).await;
    node.append(S, OCTETS, b"head".to_vec()).await;
    node.publish(S, &offset(4), OCTETS, "snapshot").await;
    let updates = pattern(CAP + 1);
    node.append(S, OCTETS, updates.clone()).await;
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-snapshot-offset", &offset(4)).expect_header("stream-next-offset", &offset(4));
    assert_ne!(answer.header("stream-up-to-date"), Some("true"), "a partial answer is not up to date:\n{answer:?}");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 1, "the snapshot part alone");
    assert_eq!(parts[0].body, b"snapshot");

    // The same without a snapshot: the empty part alone, at the retained offset.
    node.create("/demo/big", OCTETS).await;
    node.append("/demo/big", OCTETS, updates.clone()).await;
    let answer = bootstrap(&node, "/demo/big").await;
    answer.expect_header("stream-snapshot-offset", "-1").expect_header("stream-next-offset", &offset(0));
    assert_ne!(answer.header("stream-up-to-date"), Some("true"), "{answer:?}");
    assert_eq!(multipart(&answer).len(), 1);

    // §3.3: catch-up reads from Stream-Next-Offset return the rest.
    let mut next = offset(4);
    let mut read = Vec::new();
    loop {
        let answer = node.get(&format!("{S}?offset={next}")).send().await;
        answer.expect(200);
        read.extend_from_slice(&answer.body);
        next = answer.must("stream-next-offset").to_string();
        if answer.header("stream-up-to-date") == Some("true") {
            break;
        }
    }
    assert!(read == updates, "the catch-up reads return the updates after S");
}

/// §3.2 and spec/32: exactly 8 MiB after the snapshot point still fits in
/// one complete answer.
#[tokio::test]
async fn ext_3_2_a_non_json_stream_of_exactly_8_mib_after_the_snapshot_is_complete() {
    let node = Node::start();
    node.create(S, OCTETS).await;
    let updates = pattern(CAP);
    node.append(S, OCTETS, updates.clone()).await;
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-next-offset", &offset(CAP as u64)).expect_header("stream-up-to-date", "true");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 2);
    assert!(parts[1].body == updates);
}

/// §3.2 and spec/32: a JSON stream with more than 8 MiB of updates stops at
/// the last message boundary that keeps the parts within 8 MiB: partial,
/// `Stream-Next-Offset` at that boundary, no `Stream-Up-To-Date`, every part
/// one whole message, no byte skipped.
#[tokio::test]
async fn ext_3_2_a_json_stream_over_8_mib_stops_at_a_message_boundary_within_8_mib() {
    let node = Node::start();
    node.create(S, JSON).await;
    // Messages of 100,003 stored bytes: a quoted string of 100,000 characters and LF.
    let message = format!("\"{}\"", "m".repeat(100_000));
    let stored = message.len() + 1;
    let count = CAP / stored + 5;
    let batch = format!("[{}]", vec![message.as_str(); count].join(","));
    node.append(S, JSON, batch).await;
    let answer = bootstrap(&node, S).await;
    let fit = CAP / stored;
    answer
        .expect_header("stream-snapshot-offset", "-1")
        .expect_header("stream-next-offset", &offset((fit * stored) as u64));
    assert_ne!(answer.header("stream-up-to-date"), Some("true"), "a partial answer is not up to date:\n{answer:?}");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 1 + fit, "the snapshot part and {fit} messages");
    for part in &parts[1..] {
        expect_message(part, &message);
    }
    // The rest reads on from Stream-Next-Offset (§3.3).
    let rest = node.get(&format!("{S}?offset={}", offset((fit * stored) as u64))).send().await;
    assert_eq!(rest.expect(200).body.len(), (count - fit) * stored);
}

/// spec/32: "always includes at least one message, even when that message
/// alone exceeds the cap".
#[tokio::test]
async fn ext_3_2_a_json_message_above_8_mib_still_comes_as_one_part() {
    let node = Node::start();
    node.create(S, JSON).await;
    let big = format!("\"{}\"", "b".repeat(CAP + 10));
    node.append(S, JSON, big.clone()).await;
    node.append(S, JSON, "2").await;
    let answer = bootstrap(&node, S).await;
    answer.expect_header("stream-next-offset", &offset((big.len() + 1) as u64));
    assert_ne!(answer.header("stream-up-to-date"), Some("true"), "{answer:?}");
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 2);
    expect_message(&parts[1], &big);
}

/// §3.1 and §3.3: bootstrap is one-shot; `live=sse` (and `live=long-poll`)
/// answers `400 Bad Request`.
#[tokio::test]
async fn ext_3_1_bootstrap_with_live_answers_400() {
    let node = Node::start();
    node.create(S, TEXT).await;
    for query in ["live=sse", "live=long-poll", "offset=-1&live=sse", "live="] {
        node.get(&format!("{S}/bootstrap?{query}")).send().await.expect_error(400, "INVALID_QUERY");
    }
}

/// §3.2 "Response Codes": `404 Not Found` for a stream that does not exist.
#[tokio::test]
async fn ext_3_2_bootstrap_of_a_missing_stream_answers_404() {
    let node = Node::start();
    node.get("/demo/missing/bootstrap")
        .send()
        .await
        .expect_error(404, "BUCKET_NOT_FOUND")
        .expect_no_header("stream-incarnation");
    node.create(S, TEXT).await;
    node.delete(S).send().await.expect(204);
    node.get(&format!("{S}/bootstrap")).send().await.expect_error(404, "STREAM_NOT_FOUND");
}

/// §3.4: regular reads never return snapshot bytes.
#[tokio::test]
async fn ext_3_4_regular_reads_do_not_return_snapshot_bytes() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "abc").await;
    node.publish(S, &offset(3), TEXT, "SNAPSHOT").await;
    assert_eq!(node.read_all(S).await.text(), "abc");
}

/// A fork's bootstrap (docs/forks.md): its updates from the snapshot point
/// take the source's bytes below the fork point, then the fork's own, and
/// a snapshot of the fork may sit inside the inherited bytes.
#[tokio::test]
async fn ext_3_2_a_forks_bootstrap_reads_its_inherited_updates() {
    let node = Node::start();
    node.create("/demo/src", OCTETS).await;
    node.append("/demo/src", OCTETS, b"\x00\x01\x02\x03\x04".to_vec()).await;
    node.put("/demo/fork").header("stream-forked-from", "/demo/src").send().await.expect(201);
    node.append("/demo/fork", OCTETS, b"\x05\x06".to_vec()).await;
    let answer = bootstrap(&node, "/demo/fork").await;
    answer.expect_header("stream-next-offset", &offset(7)).expect_header("stream-up-to-date", "true");
    let parts = multipart(&answer);
    assert_eq!(parts.last().map(|p| p.body.clone()), Some(b"\x00\x01\x02\x03\x04\x05\x06".to_vec()), "{parts:?}");
    node.publish("/demo/fork", &offset(2), "application/vnd.example", "snap").await;
    let answer = bootstrap(&node, "/demo/fork").await;
    answer.expect_header("stream-snapshot-offset", &offset(2)).expect_header("stream-next-offset", &offset(7));
    let parts = multipart(&answer);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(parts[0].body, b"snap");
    assert_eq!(parts[1].body, b"\x02\x03\x04\x05\x06");
}
