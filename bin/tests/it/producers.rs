//! Idempotent producers on `POST` (base protocol §5.2.1, extensions §5,
//! spec/17): claims, receipts, repeats, gaps, epochs and digests.

use crate::append::{JSON, S, TEXT, node_with_json_stream, node_with_text_stream};
use crate::support::{BLAKE3_ABC, BLAKE3_HELLO, Node, offset};

#[tokio::test]
async fn producer_claim_answers_200_with_producer_epoch_seq_and_stream_offset() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "ab").await;
    let answer = node.post(S).content_type(TEXT).producer("p", 0, 0).body("cde").send().await;
    answer
        .expect(200)
        .expect_header("producer-epoch", "0")
        .expect_header("producer-seq", "0")
        .expect_header("stream-offset", &offset(2))
        .expect_header("stream-next-offset", &offset(5))
        .expect_no_header("producer-closed-epoch")
        .expect_no_header("stream-closed");
}

#[tokio::test]
async fn producer_next_seq_answers_200_and_reports_its_own_range() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 1)
        .body("de")
        .send()
        .await
        .expect(200)
        .expect_header("producer-seq", "1")
        .expect_header("stream-offset", &offset(3))
        .expect_header("stream-next-offset", &offset(5));
}

#[tokio::test]
async fn producer_duplicate_of_the_newest_write_answers_204_with_the_same_receipt() {
    let node = node_with_text_stream().await;
    let first = node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await;
    first.expect(200);
    let repeat = node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await;
    repeat
        .expect(204)
        .expect_header("producer-epoch", "0")
        .expect_header("producer-seq", "0")
        .expect_header("stream-offset", first.must("stream-offset"))
        .expect_header("stream-next-offset", first.must("stream-next-offset"))
        .expect_no_header("producer-outcome");
    assert!(repeat.body.is_empty(), "{repeat:?}");
    assert_eq!(node.read_all(S).await.text(), "abc", "the data is not written twice");
}

#[tokio::test]
async fn producer_duplicate_is_decided_by_its_key_whatever_its_body() {
    // Without Producer-Digest a repeat with another body is still a duplicate.
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("other").send().await.expect(204);
    assert_eq!(node.read_all(S).await.text(), "abc");
}

#[tokio::test]
async fn producer_repeat_of_an_older_write_answers_204_receipt_evicted_without_a_range() {
    let node = node_with_text_stream().await;
    for seq in 0..3 {
        node.post(S).content_type(TEXT).producer("p", 0, seq).body("x").send().await.expect(200);
    }
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 1)
        .body("x")
        .send()
        .await
        .expect(204)
        .expect_header("producer-outcome", "receipt-evicted")
        // Producer-Seq is the epoch's highest applied seq, not the request's.
        .expect_header("producer-seq", "2")
        .expect_header("producer-epoch", "0")
        .expect_no_header("stream-offset")
        .expect_no_header("stream-next-offset");
    assert_eq!(node.read_all(S).await.text(), "xxx");
}

#[tokio::test]
async fn producer_seq_gap_answers_409_with_expected_and_received_seq() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("a").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 3)
        .body("b")
        .send()
        .await
        .expect_error(409, "PRODUCER_SEQ_CONFLICT")
        .expect_header("producer-expected-seq", "1")
        .expect_header("producer-received-seq", "3");
    assert_eq!(node.read_all(S).await.text(), "a");
    // Resending from the expected seq works.
    node.post(S).content_type(TEXT).producer("p", 0, 1).body("b").send().await.expect(200);
}

#[tokio::test]
async fn producer_unknown_to_the_stream_with_seq_above_0_answers_409_expecting_seq_0() {
    // Extensions §5.3: "... or `409` with `Producer-Received-Seq` when the
    // server holds no state for the producer".
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 4)
        .body("a")
        .send()
        .await
        .expect_error(409, "PRODUCER_SEQ_CONFLICT")
        .expect_header("producer-expected-seq", "0")
        .expect_header("producer-received-seq", "4");
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn producer_later_epoch_with_seq_above_0_answers_400_expecting_seq_0() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("a").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 1, 1)
        .body("b")
        .send()
        .await
        .expect_error(400, "INVALID_PRODUCER")
        .expect_header("producer-expected-seq", "0");
    assert_eq!(node.read_all(S).await.text(), "a");
}

#[tokio::test]
async fn producer_claim_of_a_new_epoch_reports_the_epoch_it_closed() {
    let node = node_with_text_stream().await;
    for seq in 0..3 {
        node.post(S).content_type(TEXT).producer("p", 0, seq).body("a").send().await.expect(200);
    }
    let claim = node.post(S).content_type(TEXT).producer("p", 1, 0).body("b").send().await;
    claim
        .expect(200)
        .expect_header("producer-epoch", "1")
        .expect_header("producer-seq", "0")
        .expect_header("producer-closed-epoch", "0")
        .expect_header("producer-closed-seq", "2");
    // A repeat of the claim carries the same.
    node.post(S)
        .content_type(TEXT)
        .producer("p", 1, 0)
        .body("b")
        .send()
        .await
        .expect(204)
        .expect_header("producer-closed-epoch", "0")
        .expect_header("producer-closed-seq", "2")
        .expect_header("stream-offset", claim.must("stream-offset"));
}

#[tokio::test]
async fn producer_write_of_the_epoch_a_claim_closed_answers_403_epoch_closed_by_claim() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 0, 1).body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 1, 0).body("b").send().await.expect(200);
    // Whether or not the write applied before, an older epoch gets 403.
    for seq in [1, 2] {
        node.post(S)
            .content_type(TEXT)
            .producer("p", 0, seq)
            .body("zombie")
            .send()
            .await
            .expect_error(403, "PRODUCER_EPOCH_CLOSED")
            .expect_header("producer-epoch", "1")
            .expect_header("producer-outcome", "epoch-closed;by=claim")
            .expect_header("producer-closed-epoch", "0")
            .expect_header("producer-closed-seq", "1");
    }
    assert_eq!(node.read_all(S).await.text(), "aab");
}

#[tokio::test]
async fn producer_write_of_an_older_epoch_answers_403_stale_epoch_with_the_current_epoch() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 1, 0).body("b").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 5, 0).body("c").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 1)
        .body("zombie")
        .send()
        .await
        .expect_error(403, "PRODUCER_EPOCH_STALE")
        .expect_header("producer-epoch", "5")
        .expect_header("producer-outcome", "stale-epoch")
        .expect_no_header("producer-closed-epoch");
    assert_eq!(node.read_all(S).await.text(), "abc");
}

#[tokio::test]
async fn producer_headers_must_come_together() {
    let node = node_with_text_stream().await;
    let partial: [&[(&str, &str)]; 4] = [
        &[("producer-id", "p")],
        &[("producer-id", "p"), ("producer-epoch", "0")],
        &[("producer-epoch", "0"), ("producer-seq", "0")],
        &[("producer-seq", "0")],
    ];
    for headers in partial {
        let mut req = node.post(S).content_type(TEXT).body("x");
        for (name, value) in headers {
            req = req.header(name, value);
        }
        req.send().await.expect_error(400, "INVALID_PRODUCER");
    }
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn producer_numbers_are_integers_up_to_2_pow_53_minus_1() {
    let node = node_with_text_stream().await;
    let max = (1u64 << 53) - 1;
    node.post(S).content_type(TEXT).producer("p", max, 0).body("x").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("q", max + 1, 0)
        .body("x")
        .send()
        .await
        .expect_error(400, "INVALID_PRODUCER");
    node.post(S)
        .content_type(TEXT)
        .producer("q", 0, max + 1)
        .body("x")
        .send()
        .await
        .expect_error(400, "INVALID_PRODUCER");
    for bad in ["-1", "1.0", "x", ""] {
        node.post(S)
            .content_type(TEXT)
            .header("producer-id", "r")
            .header("producer-epoch", bad)
            .header("producer-seq", "0")
            .body("x")
            .send()
            .await
            .expect_error(400, "INVALID_PRODUCER");
    }
    assert_eq!(node.read_all(S).await.text(), "x");
}

#[tokio::test]
async fn producer_id_is_non_empty_and_at_most_256_bytes() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer(&"p".repeat(256), 0, 0).body("x").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer(&"q".repeat(257), 0, 0)
        .body("x")
        .send()
        .await
        .expect_error(400, "INVALID_PRODUCER");
    node.post(S).content_type(TEXT).producer("", 0, 0).body("x").send().await.expect_error(400, "INVALID_PRODUCER");
    assert_eq!(node.read_all(S).await.text(), "x");
}

#[tokio::test]
async fn producer_state_is_per_stream() {
    let node = Node::start();
    node.create("/demo/one", TEXT).await;
    node.create("/demo/two", TEXT).await;
    node.post("/demo/one").content_type(TEXT).producer("p", 3, 0).body("a").send().await.expect(200);
    node.post("/demo/one").content_type(TEXT).producer("p", 3, 1).body("a").send().await.expect(200);
    // The same producer id starts fresh on another stream.
    node.post("/demo/two").content_type(TEXT).producer("p", 0, 0).body("b").send().await.expect(200);
}

#[tokio::test]
async fn producer_json_array_is_one_write_under_one_seq() {
    let node = node_with_json_stream().await;
    node.post(S).content_type(JSON).producer("p", 0, 0).body("[1,2,3]").send().await.expect(200);
    node.post(S).content_type(JSON).producer("p", 0, 0).body("[1,2,3]").send().await.expect(204);
    node.post(S).content_type(JSON).producer("p", 0, 1).body("4").send().await.expect(200);
    assert_eq!(node.read_all(S).await.text(), "1\n2\n3\n4\n");
}

#[tokio::test]
async fn producer_close_only_answers_204_with_its_receipt_and_stream_closed() {
    // Extensions §5.3: a close-only producer write answers 204 even when it applies now.
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

#[tokio::test]
async fn producer_repeat_of_its_own_close_answers_204_with_stream_closed() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).closed().body("end").send().await.expect(200);
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .closed()
        .body("end")
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(3));
    assert_eq!(node.read_all(S).await.text(), "end");
}

#[tokio::test]
async fn producer_append_and_close_answers_200_with_stream_closed() {
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .closed()
        .body("last")
        .send()
        .await
        .expect(200)
        .expect_header("stream-closed", "true")
        .expect_header("stream-offset", &offset(0))
        .expect_header("stream-next-offset", &offset(4));
}

#[tokio::test]
async fn producer_close_of_a_stream_it_did_not_close_answers_409_stream_closed() {
    let node = node_with_text_stream().await;
    node.close(S).await;
    node.post(S)
        .producer("p", 0, 0)
        .closed()
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_header("stream-closed", "true");
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .body("x")
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(0));
}

#[tokio::test]
async fn producer_dedup_runs_before_the_stream_seq_check() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).header("stream-seq", "1").body("a").send().await.expect(200);
    node.post(S).content_type(TEXT).header("stream-seq", "2").body("b").send().await.expect(204);
    // The retry carries a Stream-Seq that is no longer greater: still a duplicate.
    node.post(S).content_type(TEXT).producer("p", 0, 0).header("stream-seq", "1").body("a").send().await.expect(204);
}

#[tokio::test]
async fn stream_seq_conflict_uses_up_no_producer_seq() {
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

#[tokio::test]
async fn producer_digest_that_does_not_match_the_body_answers_400_and_appends_nothing() {
    // spec/27 400 row and extensions §5.2.
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", BLAKE3_ABC)
        .body("hello")
        .send()
        .await
        .expect_error(400, "PRODUCER_DIGEST_MISMATCH");
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn producer_digest_is_part_of_the_write_identity() {
    // spec/27 403 row and extensions §5.2: another body under an applied key.
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", BLAKE3_ABC)
        .body("abc")
        .send()
        .await
        .expect(200);
    // The same write again is a repeat.
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", BLAKE3_ABC)
        .body("abc")
        .send()
        .await
        .expect(204);
    // Another identity under the same key is a key conflict.
    node.post(S)
        .content_type(TEXT)
        .producer("p", 0, 0)
        .header("producer-digest", BLAKE3_HELLO)
        .body("hello")
        .send()
        .await
        .expect_error(403, "PRODUCER_KEY_CONFLICT")
        .expect_header("producer-epoch", "0")
        .expect_header("producer-outcome", "key-conflict");
    assert_eq!(node.read_all(S).await.text(), "abc");
}
