//! Retention (extensions §2.2 "Retention Effect", §2.4, §3.4; spec/19
//! "Checkpoint and retention", spec/30 "Advance retention"):
//! `PUT {stream}/retention/{offset}` only moves forward, exactly to the
//! requested offset, never past the visible snapshot and, on a JSON stream,
//! only to a message boundary; reads below it answer `410 Gone`.
//!
//! Not covered on this single node: the `503` of a JSON boundary that
//! cannot be verified (every byte is in memory).

use crate::support::{Node, offset};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";

fn retention(at: u64) -> String {
    format!("{S}/retention/{}", offset(at))
}

/// A text stream of `hello world` (11 bytes) with a snapshot at 8.
async fn node_with_snapshot_at_8() -> Node {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    node.publish(S, &offset(8), "application/octet-stream", "snap").await;
    node
}

/// §2.2: a successful advance answers `204` with `Stream-Retained-Offset`
/// (exactly the requested offset: "Ursula retains exactly the requested
/// offset") and `Stream-Incarnation`, and `HEAD` reports it (§2.4).
#[tokio::test]
async fn ext_2_2_retention_answers_204_with_the_exact_retained_offset() {
    let node = node_with_snapshot_at_8().await;
    let token = node.incarnation(S).await;
    let answer = node.put(&retention(3)).send().await;
    answer.expect(204).expect_header("stream-retained-offset", &offset(3)).expect_header("stream-incarnation", &token);
    assert!(answer.body.is_empty(), "{answer:?}");
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(3));
    // Up to the snapshot itself.
    node.retain(S, &offset(8)).await.expect_header("stream-retained-offset", &offset(8));
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(8));
}

/// §2.2: retention only moves forward. A boundary at or below the current
/// one succeeds, changes nothing, and reports the current
/// `Stream-Retained-Offset`, so a repeated request is safe.
#[tokio::test]
async fn ext_2_2_retention_is_monotonic_and_a_repeat_is_safe() {
    let node = node_with_snapshot_at_8().await;
    node.retain(S, &offset(6)).await;
    for at in [6, 5, 0] {
        node.retain(S, &offset(at)).await.expect_header("stream-retained-offset", &offset(6));
    }
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(6));
    assert_eq!(node.get(&format!("{S}?offset={}", offset(6))).send().await.expect(200).text(), "world");
    // At the stream's start before any advance: nothing to do, 204.
    let fresh = "/demo/fresh";
    node.create(fresh, TEXT).await;
    node.put(&format!("{fresh}/retention/{}", offset(0)))
        .send()
        .await
        .expect(204)
        .expect_header("stream-retained-offset", &offset(0));
}

/// §2.2: the server MUST reject a boundary newer than the latest published
/// snapshot (`400 INVALID_RETENTION`), also when there is none, and one
/// beyond the committed data; nothing is trimmed.
#[tokio::test]
async fn ext_2_2_retention_past_the_snapshot_or_the_tail_answers_400() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    node.put(&retention(3)).send().await.expect_error(400, "INVALID_RETENTION");
    node.publish(S, &offset(8), "application/octet-stream", "snap").await;
    for at in [9, 11, 12, 1000] {
        node.put(&retention(at)).send().await.expect_error(400, "INVALID_RETENTION");
    }
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(0));
    assert_eq!(node.read_all(S).await.text(), "hello world");
}

/// §2.1 and §2.2: on a JSON stream a boundary inside a message answers
/// `400 NOT_JSON_BOUNDARY`; message boundaries are accepted. A non-JSON
/// stream accepts any committed offset.
#[tokio::test]
async fn ext_2_2_json_retention_needs_a_message_boundary() {
    let node = Node::start();
    node.create(S, JSON).await;
    // `{"n":1}\n` `{"n":2}\n` `{"n":3}\n`: 8 bytes each.
    node.append(S, JSON, r#"[{"n":1},{"n":2},{"n":3}]"#).await;
    node.publish(S, &offset(16), JSON, r#"{"n":2}"#).await;
    for inside in [1, 7, 9, 15] {
        node.put(&retention(inside)).send().await.expect_error(400, "NOT_JSON_BOUNDARY");
    }
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(0));
    node.retain(S, &offset(8)).await;
    assert_eq!(
        node.get(&format!("{S}?offset={}", offset(8))).send().await.expect(200).text(),
        "{\"n\":2}\n{\"n\":3}\n"
    );
    node.retain(S, &offset(16)).await;
    // Non-JSON: any offset, here inside the single append.
    let node = node_with_snapshot_at_8().await;
    node.retain(S, &offset(1)).await;
    node.retain(S, &offset(7)).await;
}

/// §2.2 "After success, offsets less than `retained_offset` MUST return
/// `410 Gone`", with `Stream-Next-Offset` at the earliest readable offset
/// and the stream's `Stream-Incarnation` (§2.4), for catch-up, long-poll and
/// SSE reads; the retained offset itself reads as before.
#[tokio::test]
async fn ext_2_2_reads_below_the_retained_offset_answer_410_with_the_next_readable_offset() {
    let node = node_with_snapshot_at_8().await;
    let token = node.incarnation(S).await;
    node.retain(S, &offset(6)).await;
    for below in [0, 5] {
        for mode in ["", "&live=long-poll", "&live=sse"] {
            node.get(&format!("{S}?offset={}{mode}", offset(below)))
                .send()
                .await
                .expect_error(410, "STREAM_GONE")
                .expect_header("stream-next-offset", &offset(6))
                .expect_header("stream-incarnation", &token);
        }
    }
    let read = node.get(&format!("{S}?offset={}", offset(6))).send().await;
    assert_eq!(read.expect(200).text(), "world");
    read.expect_header("stream-next-offset", &offset(11)).expect_header("stream-up-to-date", "true");
    // `offset=now` is the tail, never below retention.
    node.get(&format!("{S}?offset=now")).send().await.expect(200);
}

/// §2.2 and spec/19: `offset=-1` names the stream's first byte, so once
/// retention trimmed it the read answers `410` (and the client bootstraps,
/// §3.4); before any advance it reads the whole stream.
#[tokio::test]
async fn ext_2_2_offset_minus_1_answers_410_once_trimmed() {
    let node = node_with_snapshot_at_8().await;
    assert_eq!(node.read_all(S).await.text(), "hello world");
    node.retain(S, &offset(8)).await;
    for query in ["offset=-1", "offset=-1&live=long-poll", "offset=-1&live=sse", ""] {
        let path = if query.is_empty() { S.to_string() } else { format!("{S}?{query}") };
        node.get(&path).send().await.expect_error(410, "STREAM_GONE").expect_header("stream-next-offset", &offset(8));
    }
    // §3.4: bootstrap rebuilds from the snapshot and the retained updates.
    let boot = node.get(&format!("{S}/bootstrap")).send().await;
    boot.expect(200)
        .expect_header("stream-snapshot-offset", &offset(8))
        .expect_header("stream-next-offset", &offset(11));
    assert!(boot.text().contains("snap") && boot.text().contains("rld"), "{boot:?}");
}

/// §2.2: retention moves with later snapshots, and a publish below the
/// retained offset answers `410` (spec/30).
#[tokio::test]
async fn ext_2_2_retention_follows_later_snapshots() {
    let node = node_with_snapshot_at_8().await;
    node.retain(S, &offset(8)).await;
    node.append(S, TEXT, "!!").await;
    node.put(&retention(10)).send().await.expect_error(400, "INVALID_RETENTION");
    node.publish(S, &offset(12), "application/octet-stream", "later").await;
    node.retain(S, &offset(12)).await;
    node.put(&format!("{S}/snapshot/{}", offset(10))).body("x").send().await.expect_error(410, "STREAM_GONE");
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_header("stream-retained-offset", &offset(12))
        .expect_header("stream-snapshot-offset", &offset(12))
        .expect_header("stream-next-offset", &offset(13));
    assert_eq!(node.get(&format!("{S}?offset={}", offset(12))).send().await.expect(200).text(), "!");
}

/// §2.2: a retention request to a missing stream answers `404`; an offset
/// the server does not issue answers `400 INVALID_OFFSET`.
#[tokio::test]
async fn ext_2_2_retention_of_a_missing_stream_or_an_invalid_offset() {
    let node = node_with_snapshot_at_8().await;
    node.put(&format!("/demo/missing/retention/{}", offset(0))).send().await.expect_error(404, "STREAM_NOT_FOUND");
    for bad in ["abc", "-1", "now", "8"] {
        node.put(&format!("{S}/retention/{bad}")).send().await.expect_error(400, "INVALID_OFFSET");
    }
    // Retention is a PUT; other methods are not allowed on the route.
    node.get(&retention(8)).send().await.expect_error(405, "METHOD_NOT_ALLOWED");
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(0));
}
