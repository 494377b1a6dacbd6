//! Write keys and typed answers (extensions §5, §5.8;
//! spec/17-exactly-once-writes.md, spec/18-conditional-writes.md):
//! receipts (of a close-only write too), repeats, claims that close an
//! epoch, the producer `403`s, `Producer-Digest`, the 4,096-producer limit,
//! `Stream-Seq` conflicts and their order with the producer checks. The
//! base protocol's producer rules (header syntax, gaps, closes) are in
//! `producers`.
//!
//! Not covered here: forgetting a producer after 7 idle days, the eviction
//! of a producer idle for an hour past the 4,096 cap, and the epoch floor
//! with its `403 producer-expired` (§5.4). Each needs the stream's clock to
//! move by hours or days, which HTTP cannot drive without waiting that
//! long; the state machine's unit tests cover them
//! (core/stream/src/store/tests_ext.rs). `epoch-closed;by=history` needs a
//! history rewrite (a restore), which a single node without a backup
//! cannot do. Answers before the body (§5.5) are not observable on an
//! in-process node and are not covered.

use futures_util::StreamExt;

use crate::support::{Node, blake3_hex, offset};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
/// The producer cap of a stream (spec/17 "Per-stream state").
const MAX_PRODUCERS: usize = 4096;

async fn node_with_text_stream() -> Node {
    let node = Node::start();
    node.create(S, TEXT).await;
    node
}

/// §5.3: every answer about an applied write carries its receipt:
/// `Stream-Offset` (where its bytes start) and `Stream-Next-Offset` (where
/// they end), with `Stream-Incarnation` (spec/43 0.8.0).
#[tokio::test]
async fn ext_5_3_a_new_write_answers_200_with_its_receipt() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "plain").await;
    let token = node.incarnation(S).await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .body("abc")
        .send()
        .await
        .expect(200)
        .expect_header("stream-offset", &offset(5))
        .expect_header("stream-next-offset", &offset(8))
        .expect_header("stream-incarnation", &token)
        .expect_header("producer-epoch", "0")
        .expect_header("producer-seq", "0")
        .expect_no_header("producer-outcome")
        .expect_no_header("producer-closed-epoch")
        .expect_no_header("stream-closed");
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 1)
        .body("defg")
        .send()
        .await
        .expect(200)
        .expect_header("stream-offset", &offset(8))
        .expect_header("stream-next-offset", &offset(12))
        .expect_header("producer-seq", "1");
}

/// §5.3: a repeat of the producer's newest write answers `204` with the
/// same receipt and no body, and applies nothing.
#[tokio::test]
async fn ext_5_3_a_repeat_of_the_newest_write_answers_204_with_the_same_receipt() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "xx").await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await.expect(200);
    node.append(S, TEXT, "yy").await;
    for _ in 0..2 {
        let repeat = node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await;
        repeat
            .expect(204)
            .expect_header("stream-offset", &offset(2))
            .expect_header("stream-next-offset", &offset(5))
            .expect_header("producer-epoch", "0")
            .expect_header("producer-seq", "0")
            .expect_no_header("producer-outcome");
        assert!(repeat.body.is_empty(), "{repeat:?}");
    }
    assert_eq!(node.read_all(S).await.text(), "xxabcyy");
}

/// §5.3: a repeat of an older write answers `204` with `Producer-Outcome:
/// receipt-evicted` and no range; `Producer-Seq` is the epoch's highest
/// applied seq.
#[tokio::test]
async fn ext_5_3_a_repeat_of_an_older_write_answers_204_receipt_evicted_without_a_range() {
    let node = node_with_text_stream().await;
    for (seq, body) in [(0, "a"), (1, "b"), (2, "c")] {
        node.post(S).content_type(TEXT).producer("p", 0, seq).body(body).send().await.expect(200);
    }
    for seq in [1, 0] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, seq)
            .body("whatever")
            .send()
            .await
            .expect(204)
            .expect_header("producer-outcome", "receipt-evicted")
            .expect_header("producer-epoch", "0")
            .expect_header("producer-seq", "2")
            .expect_no_header("stream-offset")
            .expect_no_header("stream-next-offset");
    }
    assert_eq!(node.read_all(S).await.text(), "abc");
}

/// §5.3: a close-only producer write answers `204` even when it applies
/// now, with its receipt (an empty range at the tail) and `Stream-Closed`.
#[tokio::test]
async fn ext_5_3_a_close_only_write_answers_204_with_its_receipt_and_stream_closed() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await.expect(200);
    node.post(S)
        .producer("p", 0, 1)
        .closed()
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("producer-epoch", "0")
        .expect_header("producer-seq", "1")
        .expect_header("stream-offset", &offset(3))
        .expect_header("stream-next-offset", &offset(3));
    node.head(S).send().await.expect(200).expect_header("stream-closed", "true");
}

/// §5.3: a claim that closes an earlier epoch carries `Producer-Closed-Epoch`
/// and `Producer-Closed-Seq`, and a repeat of the claim carries the same.
#[tokio::test]
async fn ext_5_3_a_claim_closing_an_epoch_reports_it_and_its_repeat_too() {
    let node = node_with_text_stream().await;
    for seq in 0..4 {
        node.post(S).content_type(TEXT).producer("p", 2, seq).body("o").send().await.expect(200);
    }
    for status in [200, 204] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 3, 0)
            .body("N")
            .send()
            .await
            .expect(status)
            .expect_header("producer-epoch", "3")
            .expect_header("producer-seq", "0")
            .expect_header("producer-closed-epoch", "2")
            .expect_header("producer-closed-seq", "3")
            .expect_header("stream-offset", &offset(4))
            .expect_header("stream-next-offset", &offset(5));
    }
    // A later write of the new epoch closes nothing.
    node.post(S)
        .content_type(TEXT)
        .producer("p", 3, 1)
        .body("N")
        .send()
        .await
        .expect(200)
        .expect_no_header("producer-closed-epoch")
        .expect_no_header("producer-closed-seq");
    // A first claim closes nothing either.
    node.post(S)
        .content_type(TEXT)
        .producer("q", 0, 0)
        .body("q")
        .send()
        .await
        .expect(200)
        .expect_no_header("producer-closed-epoch");
}

/// §5.3: a write of the epoch the current claim closed answers `403
/// PRODUCER_EPOCH_CLOSED` with `Producer-Epoch` (the current one),
/// `Producer-Outcome: epoch-closed;by=claim`, `Producer-Closed-Epoch` and
/// `Producer-Closed-Seq`, whether or not it applied before.
#[tokio::test]
async fn ext_5_3_a_write_of_the_closed_epoch_answers_403_epoch_closed_by_claim() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 0, 1).body("b").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 1, 0).body("c").send().await.expect(200);
    // Seq 1 applied before, seq 2 never did: both get the same typed answer.
    for seq in [1, 2] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, seq)
            .body("late")
            .send()
            .await
            .expect_error(403, "PRODUCER_EPOCH_CLOSED")
            .expect_header("producer-epoch", "1")
            .expect_header("producer-outcome", "epoch-closed;by=claim")
            .expect_header("producer-closed-epoch", "0")
            .expect_header("producer-closed-seq", "1");
    }
    assert_eq!(node.read_all(S).await.text(), "abc");
}

/// §5.3: a write of any other older epoch answers `403 PRODUCER_EPOCH_STALE`
/// with `Producer-Epoch` (the current one) and `Producer-Outcome:
/// stale-epoch`, without closure headers, whether or not it applied before.
#[tokio::test]
async fn ext_5_3_a_write_of_an_older_epoch_answers_403_stale_epoch() {
    let node = node_with_text_stream().await;
    for epoch in [0, 1, 2] {
        node.post(S).content_type(TEXT).producer("p", epoch, 0).body("x").send().await.expect(200);
    }
    // Seq 0 of epoch 0 applied before, seq 1 never did.
    for seq in [0, 1] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, seq)
            .body("x")
            .send()
            .await
            .expect_error(403, "PRODUCER_EPOCH_STALE")
            .expect_header("producer-epoch", "2")
            .expect_header("producer-outcome", "stale-epoch")
            .expect_no_header("producer-closed-epoch")
            .expect_no_header("producer-closed-seq");
    }
    assert_eq!(node.read_all(S).await.text(), "xxx");
}

/// §5.2: a write whose key applied with another identity (`Producer-Digest`)
/// answers `403 PRODUCER_KEY_CONFLICT` with `Producer-Epoch` and
/// `Producer-Outcome: key-conflict`, and applies nothing; the server holds
/// the identity of the newest write and of the current epoch's claim.
#[tokio::test]
async fn ext_5_2_another_identity_under_a_held_key_answers_403_key_conflict() {
    let node = node_with_text_stream().await;
    let claim = "claim-by-a";
    node.post(S)
        .content_type(TEXT)
        .producer("p", 4, 0)
        .header("producer-digest", blake3_hex(claim.as_bytes()))
        .body(claim)
        .send()
        .await
        .expect(200);
    let conflict = |body: &'static str, digest: Option<String>, seq: u64| {
        let mut req = node.post(S).content_type(TEXT).producer("p", 4, seq).body(body);
        if let Some(d) = digest {
            req = req.header("producer-digest", d);
        }
        req
    };
    // The newest write (here the claim) under another digest, or without one.
    for (body, digest) in [("claim-by-b", Some(blake3_hex(b"claim-by-b"))), ("claim-by-a", None)] {
        conflict(body, digest, 0)
            .send()
            .await
            .expect_error(403, "PRODUCER_KEY_CONFLICT")
            .expect_header("producer-epoch", "4")
            .expect_header("producer-outcome", "key-conflict");
    }
    // After more writes the claim's identity is still held for the epoch.
    node.post(S).content_type(TEXT).producer("p", 4, 1).body("1").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 4, 2).body("2").send().await.expect(200);
    conflict("claim-by-b", Some(blake3_hex(b"claim-by-b")), 0)
        .send()
        .await
        .expect_error(403, "PRODUCER_KEY_CONFLICT")
        .expect_header("producer-outcome", "key-conflict");
    // The newest write (seq 2, no digest) under a digest conflicts too.
    conflict("2", Some(blake3_hex(b"2")), 2).send().await.expect_error(403, "PRODUCER_KEY_CONFLICT");
    // An older write's identity is not held: its repeat is a duplicate.
    conflict("other", Some(blake3_hex(b"other")), 1)
        .send()
        .await
        .expect(204)
        .expect_header("producer-outcome", "receipt-evicted");
    assert_eq!(node.read_all(S).await.text(), "claim-by-a12");
}

/// §5.2 and §5.3 step 3: a repeat and a key conflict are decided by the
/// headers alone; the body is never consulted, so the same key and digest,
/// with the same body or another one, is a repeat with its receipt.
#[tokio::test]
async fn ext_5_2_a_repeat_is_decided_by_the_key_and_digest_not_the_body() {
    let node = node_with_text_stream().await;
    let digest = blake3_hex(b"abc");
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", &digest)
        .body("abc")
        .send()
        .await
        .expect(200);
    for body in ["abc", "a different body"] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, 0)
            .header("producer-digest", &digest)
            .body(body)
            .send()
            .await
            .expect(204)
            .expect_header("stream-offset", &offset(0))
            .expect_header("stream-next-offset", &offset(3));
    }
    assert_eq!(node.read_all(S).await.text(), "abc");
}

/// §5.2: a `Producer-Digest` that does not match the body answers `400
/// PRODUCER_DIGEST_MISMATCH`, applies nothing and uses up no seq; a
/// malformed digest answers `400 INVALID_HEADER`.
#[tokio::test]
async fn ext_5_2_a_digest_mismatch_answers_400_and_appends_nothing() {
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", blake3_hex(b"abc"))
        .body("abd")
        .send()
        .await
        .expect_error(400, "PRODUCER_DIGEST_MISMATCH")
        .expect_no_header("stream-offset");
    assert_eq!(node.tail(S).await, offset(0));
    // The key is still free: the same write with its digest applies.
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", blake3_hex(b"abd"))
        .body("abd")
        .send()
        .await
        .expect(200);
    let upper = blake3_hex(b"x").to_uppercase();
    for bad in [upper.as_str(), "abc", &"0".repeat(63), &"g".repeat(64)] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, 1)
            .header("producer-digest", bad)
            .body("x")
            .send()
            .await
            .expect_error(400, "INVALID_HEADER");
    }
    assert_eq!(node.read_all(S).await.text(), "abd");
}

/// §5.3: a closed stream (step 4) answers before the content and digest
/// checks (step 5).
#[tokio::test]
async fn ext_5_3_a_closed_stream_answers_409_before_the_digest_check() {
    let node = node_with_text_stream().await;
    node.close(S).await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", blake3_hex(b"other"))
        .body("x")
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_header("stream-closed", "true");
}

/// §5.3: a write with a seq above 0 from a producer the server holds no
/// state for answers `409` with `Producer-Expected-Seq: 0` and
/// `Producer-Received-Seq`.
#[tokio::test]
async fn ext_5_3_a_new_producer_with_seq_above_0_answers_409_expecting_0() {
    let node = node_with_text_stream().await;
    for (epoch, seq) in [(0, 1), (7, 3)] {
        node.post(S)
            .content_type(TEXT)
            .producer("fresh", epoch, seq)
            .body("x")
            .send()
            .await
            .expect_error(409, "PRODUCER_SEQ_CONFLICT")
            .expect_header("producer-expected-seq", "0")
            .expect_header("producer-received-seq", &seq.to_string());
    }
    assert_eq!(node.tail(S).await, offset(0));
}

/// §5.1: a create MUST NOT carry producer headers (`400`).
#[tokio::test]
async fn ext_5_1_a_create_with_producer_headers_answers_400() {
    let node = Node::start();
    node.put(S).content_type(TEXT).producer("p", 0, 0).send().await.expect_error(400, "INVALID_PRODUCER");
    node.head(S).send().await.expect_head_error(404);
}

/// §5.1: a producer key holds within one stream incarnation; a recreated
/// stream starts without producer state.
#[tokio::test]
async fn ext_5_1_producer_keys_are_scoped_to_one_incarnation() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("old").send().await.expect(200);
    node.recreate(S, TEXT).await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .body("new")
        .send()
        .await
        .expect(200)
        .expect_header("stream-offset", &offset(0));
    assert_eq!(node.read_all(S).await.text(), "new");
}

/// spec/17 "Per-stream state": a stream holds at most 4,096 producers; a
/// new producer beyond that, when none has been idle for an hour, answers
/// `429 PRODUCER_LIMIT` and appends nothing. The producers it holds keep
/// writing, and other streams are not affected.
#[tokio::test]
async fn spec_17_the_4097th_producer_answers_429_producer_limit() {
    let node = node_with_text_stream().await;
    let claims = futures_util::stream::iter(0..MAX_PRODUCERS)
        .map(|i| {
            let node = &node;
            async move { node.post(S).content_type(TEXT).producer(&format!("p{i}"), 0, 0).body("x").send().await }
        })
        .buffer_unordered(16);
    let answers: Vec<_> = claims.collect().await;
    for answer in &answers {
        answer.expect(200);
    }
    assert_eq!(node.tail(S).await, offset(MAX_PRODUCERS as u64));
    node.post(S)
        .content_type(TEXT)
        .producer("one-too-many", 0, 0)
        .body("x")
        .send()
        .await
        .expect_error(429, "PRODUCER_LIMIT")
        .expect_no_header("stream-offset");
    assert_eq!(node.tail(S).await, offset(MAX_PRODUCERS as u64));
    // Known producers go on; their repeats are answered.
    node.post(S).content_type(TEXT).producer("p0", 0, 1).body("y").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p4095", 1, 0).body("y").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p17", 0, 0).body("x").send().await.expect(204);
    // Plain appends are not producers.
    node.append(S, TEXT, "z").await;
    // The cap is per stream.
    node.create("/demo/other", TEXT).await;
    node.post("/demo/other").content_type(TEXT).producer("one-too-many", 0, 0).body("x").send().await.expect(200);
}

/// §5.8 and spec/18: an append whose `Stream-Seq` is not greater than the
/// last accepted one answers `409 STREAM_SEQ_CONFLICT` with
/// `Stream-Last-Seq` exactly as it was sent and `Stream-Next-Offset` at the
/// tail, without `Stream-Closed` or `Producer-Expected-Seq`, and commits
/// nothing.
#[tokio::test]
async fn ext_5_8_a_stream_seq_conflict_answers_409_with_stream_last_seq() {
    let node = node_with_text_stream().await;
    // Only a stream that accepted a Stream-Seq refuses one: any first value applies.
    node.post(S).content_type(TEXT).header("stream-seq", "00000000000000000007").body("a").send().await.expect(204);
    for seq in ["00000000000000000007", "00000000000000000006", "0000000000000000000", "0"] {
        node.post(S)
            .content_type(TEXT)
            .header("stream-seq", seq)
            .body("b")
            .send()
            .await
            .expect_error(409, "STREAM_SEQ_CONFLICT")
            .expect_header("stream-last-seq", "00000000000000000007")
            .expect_header("stream-next-offset", &offset(1))
            .expect_no_header("stream-closed")
            .expect_no_header("producer-expected-seq");
    }
    assert_eq!(node.read_all(S).await.text(), "a");
    // A value that is greater bytewise (not numerically) applies and is stored as sent.
    node.post(S).content_type(TEXT).header("stream-seq", "00000000000000000008-x").body("c").send().await.expect(204);
    node.post(S)
        .content_type(TEXT)
        .header("stream-seq", "00000000000000000008")
        .body("d")
        .send()
        .await
        .expect_error(409, "STREAM_SEQ_CONFLICT")
        .expect_header("stream-last-seq", "00000000000000000008-x");
}

/// §5.8: no other `409` carries `Stream-Last-Seq`: a content type that
/// differs answers `CONTENT_TYPE_MISMATCH`, a closed stream `STREAM_CLOSED`,
/// a producer gap `PRODUCER_SEQ_CONFLICT`, even on a stream that stores a
/// `Stream-Seq`.
#[tokio::test]
async fn ext_5_8_other_409s_carry_no_stream_last_seq() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "5").body("a").send().await.expect(204);
    node.post(S)
        .content_type("text/html")
        .header("stream-seq", "4")
        .body("x")
        .send()
        .await
        .expect_error(409, "CONTENT_TYPE_MISMATCH")
        .expect_no_header("stream-last-seq");
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 3)
        .body("x")
        .send()
        .await
        .expect_error(409, "PRODUCER_SEQ_CONFLICT")
        .expect_no_header("stream-last-seq");
    node.close(S).await;
    node.post(S)
        .content_type(TEXT)
        .header("stream-seq", "4")
        .body("x")
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_no_header("stream-last-seq");
}

/// §5.3 and §5.8: a producer repeat is recognized before the `Stream-Seq`
/// check, so a retry whose `Stream-Seq` is no longer greater is still a
/// duplicate (`204`).
#[tokio::test]
async fn ext_5_8_a_producer_repeat_is_decided_before_the_stream_seq_check() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).header("stream-seq", "1").body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).header("stream-seq", "2").body("b").send().await.expect(204);
    node.post(S).content_type(TEXT).producer("p", 0, 0).header("stream-seq", "1").body("a").send().await.expect(204);
}

/// §5.8: a producer write refused for its `Stream-Seq` uses up no producer
/// seq: the same seq applies once its `Stream-Seq` is greater.
#[tokio::test]
async fn ext_5_8_a_stream_seq_conflict_uses_up_no_producer_seq() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "5").body("a").send().await.expect(204);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("stream-seq", "4")
        .body("b")
        .send()
        .await
        .expect_error(409, "STREAM_SEQ_CONFLICT");
    node.post(S).content_type(TEXT).producer("p", 0, 0).header("stream-seq", "6").body("b").send().await.expect(200);
    assert_eq!(node.read_all(S).await.text(), "ab");
}
