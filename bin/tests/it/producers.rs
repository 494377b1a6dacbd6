//! Idempotent producers on `POST` as the base protocol has them (§5.2.1,
//! spec/17): the producer headers and their values, duplicates decided by
//! the key, sequence gaps, seq 0 of a new epoch, producer closes, per-stream
//! state and JSON arrays. What extensions §5 adds on top (receipts, repeats
//! of older writes, epoch closure, the producer `403`s, digests, the
//! producer cap, `Stream-Seq`) is tested once, in `ext_write_keys`.

use crate::append::{JSON, S, TEXT, node_with_json_stream, node_with_text_stream};
use crate::support::{Node, offset};

#[tokio::test]
async fn producer_duplicate_is_decided_by_its_key_whatever_its_body() {
    // Without Producer-Digest a repeat with another body is still a duplicate.
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("abc").send().await.expect(200);
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("other").send().await.expect(204);
    assert_eq!(node.read_all(S).await.text(), "abc");
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
