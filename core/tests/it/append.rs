//! `POST /{bucket}/{stream}` (spec/27-append.md, base protocol §5.2, §5.2.1,
//! §5.3, §7.1; extensions JSON Message Text, §5, §10): appends, closes,
//! `Stream-Seq`, idempotent producers and the request size limit.

use bytes::Bytes;

use crate::support::{BLAKE3_ABC, BLAKE3_HELLO, MAX_REQUEST_BYTES, Node, offset};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";

async fn node_with_text_stream() -> Node {
    let node = Node::start();
    node.create(S, TEXT).await;
    node
}

async fn node_with_json_stream() -> Node {
    let node = Node::start();
    node.create(S, JSON).await;
    node
}

// ---------------------------------------------------------------------------
// 204: plain appends
// ---------------------------------------------------------------------------

#[tokio::test]
async fn plain_append_answers_204_with_next_offset_and_no_body() {
    let node = node_with_text_stream().await;
    let answer = node.post(S).content_type(TEXT).body("hello world").send().await;
    answer
        .expect(204)
        .expect_header("stream-next-offset", &offset(11))
        .expect_no_header("etag")
        .expect_no_header("stream-closed")
        .expect_no_header("producer-epoch")
        .expect_no_header("stream-offset");
    assert!(answer.body.is_empty(), "{answer:?}");
}

#[tokio::test]
async fn appends_are_read_back_in_order_with_increasing_offsets() {
    let node = node_with_text_stream().await;
    let first = node.append(S, TEXT, "one,").await.must("stream-next-offset").to_string();
    let second = node.append(S, TEXT, "two,").await.must("stream-next-offset").to_string();
    let third = node.append(S, TEXT, "three").await.must("stream-next-offset").to_string();
    assert!(first < second && second < third, "offsets sort in stream order: {first} {second} {third}");
    assert_eq!(node.read_all(S).await.text(), "one,two,three");
    assert_eq!(node.tail(S).await, third);
}

#[tokio::test]
async fn plain_appends_without_producer_headers_are_not_deduplicated() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "x").await;
    node.append(S, TEXT, "x").await;
    assert_eq!(node.read_all(S).await.text(), "xx");
}

#[tokio::test]
async fn append_content_type_is_compared_after_normalization() {
    let node = Node::start();
    node.create(S, "application/json; charset=utf-8").await;
    for content_type in ["application/json;charset=utf-8", "Application/JSON;  Charset=UTF-8"] {
        node.append(S, content_type, "{}").await;
    }
}

#[tokio::test]
async fn append_with_prefer_return_minimal_is_answered_as_usual() {
    // Removed in 0.6.0 and ignored since (spec/43 "Removed").
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("prefer", "return=minimal").body("x").send().await.expect(204);
}

// ---------------------------------------------------------------------------
// Closing
// ---------------------------------------------------------------------------

#[tokio::test]
async fn close_only_append_answers_204_with_stream_closed_and_the_tail() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "abc").await;
    // No Content-Type: a close-only request needs none.
    node.post(S)
        .closed()
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(3));
    node.head(S).send().await.expect(200).expect_header("stream-closed", "true");
}

#[tokio::test]
async fn close_only_append_ignores_its_content_type() {
    // Base protocol §5.2: with an empty body the server must not reject on Content-Type.
    let node = node_with_text_stream().await;
    node.post(S).content_type("application/x-unrelated").closed().send().await.expect(204);
}

#[tokio::test]
async fn close_only_append_of_a_closed_stream_answers_204_again() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "abc").await;
    node.close(S).await;
    node.post(S)
        .closed()
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(3));
}

#[tokio::test]
async fn append_with_stream_closed_appends_the_body_then_closes() {
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type(TEXT)
        .closed()
        .body("last")
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(4));
    let read = node.read_all(S).await;
    assert_eq!(read.text(), "last");
    read.expect_header("stream-closed", "true");
}

#[tokio::test]
async fn append_to_closed_stream_answers_409_with_stream_closed_and_next_offset() {
    let node = node_with_text_stream().await;
    node.append(S, TEXT, "abc").await;
    node.close(S).await;
    node.post(S)
        .content_type(TEXT)
        .body("more")
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_header("stream-closed", "true")
        .expect_header("stream-next-offset", &offset(3));
    // An append-and-close of a closed stream is no idempotent close.
    node.post(S).content_type(TEXT).closed().body("more").send().await.expect_error(409, "STREAM_CLOSED");
    assert_eq!(node.read_all(S).await.text(), "abc");
}

#[tokio::test]
async fn append_to_closed_stream_with_another_content_type_answers_stream_closed_first() {
    // Base protocol §5.2 error precedence: closure before content type.
    let node = node_with_text_stream().await;
    node.close(S).await;
    node.post(S)
        .content_type("application/octet-stream")
        .body("x")
        .send()
        .await
        .expect_error(409, "STREAM_CLOSED")
        .expect_header("stream-closed", "true");
}

// ---------------------------------------------------------------------------
// 400 and 409: content
// ---------------------------------------------------------------------------

#[tokio::test]
async fn append_to_a_missing_stream_answers_404() {
    let node = Node::start();
    node.post("/demo/missing").content_type(TEXT).body("x").send().await.expect_error(404, "STREAM_NOT_FOUND");
    // POST never creates a stream.
    node.head("/demo/missing").send().await.expect_head_error(404);
}

#[tokio::test]
async fn append_with_an_empty_body_answers_400_empty_append() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).send().await.expect_error(400, "EMPTY_APPEND");
    // A Stream-Closed value other than `true` does not make it a close.
    node.post(S).content_type(TEXT).header("stream-closed", "yes").send().await.expect_error(400, "EMPTY_APPEND");
    node.head(S).send().await.expect(200).expect_no_header("stream-closed");
}

#[tokio::test]
async fn append_without_content_type_answers_400_missing_content_type() {
    let node = node_with_text_stream().await;
    node.post(S).body("x").send().await.expect_error(400, "MISSING_CONTENT_TYPE");
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn append_with_a_malformed_content_type_answers_400_invalid_header() {
    let node = node_with_text_stream().await;
    node.post(S).content_type("not a mime type").body("x").send().await.expect_error(400, "INVALID_HEADER");
}

#[tokio::test]
async fn append_with_another_content_type_answers_409_content_type_mismatch() {
    let node = node_with_text_stream().await;
    node.post(S)
        .content_type("application/octet-stream")
        .body("x")
        .send()
        .await
        .expect_error(409, "CONTENT_TYPE_MISMATCH")
        .expect_no_header("stream-last-seq")
        .expect_no_header("stream-closed");
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn append_with_parameters_the_stream_lacks_answers_409_content_type_mismatch() {
    let node = node_with_json_stream().await;
    node.post(S)
        .content_type("application/json; charset=utf-8")
        .body("{}")
        .send()
        .await
        .expect_error(409, "CONTENT_TYPE_MISMATCH");
}

#[tokio::test]
async fn append_json_stores_message_text_minus_insignificant_whitespace() {
    let node = node_with_json_stream().await;
    // Member order, duplicates, number spelling and escapes are kept; whitespace inside strings too.
    let body = "{ \"b\" : 1.50e3 ,\n\t\"a\" : [ 1 , 1e400 ] , \"b\" : \"x  y\" , \"u\" : \"\\ud800\" }";
    node.append(S, JSON, body).await;
    assert_eq!(node.read_all(S).await.text(), "{\"b\":1.50e3,\"a\":[1,1e400],\"b\":\"x  y\",\"u\":\"\\ud800\"}\n");
}

#[tokio::test]
async fn append_json_array_stores_one_message_per_element() {
    let node = node_with_json_stream().await;
    node.append(S, JSON, r#"[{"event":"click"},{"event":"navigation"}]"#).await;
    node.append(S, JSON, "[[1,2], [3,4]]").await;
    node.append(S, JSON, "[[[1,2,3]]]").await;
    assert_eq!(
        node.read_all(S).await.text(),
        "{\"event\":\"click\"}\n{\"event\":\"navigation\"}\n[1,2]\n[3,4]\n[[1,2,3]]\n"
    );
}

#[tokio::test]
async fn append_empty_json_array_answers_400() {
    // Base protocol §7.1.
    let node = node_with_json_stream().await;
    node.post(S).content_type(JSON).body("[]").send().await.expect_error(400, "EMPTY_APPEND");
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn append_invalid_json_answers_400_and_appends_nothing() {
    let node = node_with_json_stream().await;
    for body in [&b"{\"a\":"[..], b"[{}, nope]", b"{} {}", b"\"\xff\xfe\"", b"01"] {
        let answer = node.post(S).content_type(JSON).body(body.to_vec()).send().await;
        answer.expect(400);
        answer.error_code();
    }
    assert_eq!(node.tail(S).await, offset(0));
}

#[tokio::test]
async fn append_json_deeper_than_127_levels_answers_400() {
    let node = node_with_json_stream().await;
    let nested = |depth: usize| format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    node.append(S, JSON, nested(127)).await;
    // Depth is measured per message, after flattening.
    node.append(S, JSON, format!("[{}]", nested(127))).await;
    let answer = node.post(S).content_type(JSON).body(nested(128)).send().await;
    answer.expect(400);
    answer.error_code();
}

#[tokio::test]
async fn append_with_a_header_removed_in_0_6_0_answers_400() {
    // spec/43 "Removed": `Stream-Record-Match` on an append answers 400.
    let node = node_with_text_stream().await;
    let answer = node.post(S).content_type(TEXT).header("stream-record-match", "3").body("x").send().await;
    answer.expect(400);
    answer.error_code();
    assert_eq!(node.tail(S).await, offset(0));
}

// ---------------------------------------------------------------------------
// Stream-Seq (spec/18, extensions §5.8)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn append_with_a_greater_stream_seq_is_accepted_and_stored() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "001").body("a").send().await.expect(204);
    node.post(S).content_type(TEXT).header("stream-seq", "002").body("b").send().await.expect(204);
    assert_eq!(node.read_all(S).await.text(), "ab");
}

#[tokio::test]
async fn append_with_stream_seq_not_greater_answers_409_with_stream_last_seq() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "b").body("one").send().await.expect(204);
    for seq in ["b", "a"] {
        node.post(S)
            .content_type(TEXT)
            .header("stream-seq", seq)
            .body("two")
            .send()
            .await
            .expect_error(409, "STREAM_SEQ_CONFLICT")
            .expect_header("stream-last-seq", "b")
            .expect_header("stream-next-offset", &offset(3))
            .expect_no_header("stream-closed")
            .expect_no_header("producer-expected-seq");
    }
    assert_eq!(node.read_all(S).await.text(), "one");
}

#[tokio::test]
async fn stream_seq_compares_bytewise_not_numerically() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "9").body("a").send().await.expect(204);
    node.post(S)
        .content_type(TEXT)
        .header("stream-seq", "10")
        .body("b")
        .send()
        .await
        .expect_error(409, "STREAM_SEQ_CONFLICT")
        .expect_header("stream-last-seq", "9");
}

#[tokio::test]
async fn append_without_stream_seq_is_not_checked_and_keeps_the_stored_value() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "5").body("a").send().await.expect(204);
    node.append(S, TEXT, "b").await;
    node.post(S)
        .content_type(TEXT)
        .header("stream-seq", "5")
        .body("c")
        .send()
        .await
        .expect_error(409, "STREAM_SEQ_CONFLICT")
        .expect_header("stream-last-seq", "5");
}

#[tokio::test]
async fn stream_seq_of_256_bytes_is_accepted_and_longer_answers_400() {
    let node = node_with_text_stream().await;
    node.post(S).content_type(TEXT).header("stream-seq", "a".repeat(256)).body("x").send().await.expect(204);
    node.post(S)
        .content_type(TEXT)
        .header("stream-seq", "b".repeat(257))
        .body("x")
        .send()
        .await
        .expect_error(400, "INVALID_HEADER");
    assert_eq!(node.tail(S).await, offset(1));
}

#[tokio::test]
async fn stream_seq_scope_is_the_stream() {
    let node = Node::start();
    node.create("/demo/one", TEXT).await;
    node.create("/demo/two", TEXT).await;
    node.post("/demo/one").content_type(TEXT).header("stream-seq", "9").body("x").send().await.expect(204);
    node.post("/demo/two").content_type(TEXT).header("stream-seq", "1").body("x").send().await.expect(204);
}

// ---------------------------------------------------------------------------
// 413: the request limit (extensions §10)
// ---------------------------------------------------------------------------

#[tokio::test]
async fn append_body_declared_larger_than_32_mib_answers_413_with_max_request_bytes() {
    let node = node_with_text_stream().await;
    let too_large = MAX_REQUEST_BYTES + 1;
    node.raw(&format!("POST {S} HTTP/1.1\r\nContent-Type: {TEXT}\r\nContent-Length: {too_large}"))
        .await
        .expect_error(413, "REQUEST_TOO_LARGE")
        .expect_header("ursula-max-request-bytes", "33554432");
    assert_eq!(node.tail(S).await, offset(0));
    // Every route has the limit, a create too.
    node.raw(&format!("PUT /demo/big HTTP/1.1\r\nContent-Type: {TEXT}\r\nContent-Length: {too_large}"))
        .await
        .expect_error(413, "REQUEST_TOO_LARGE")
        .expect_header("ursula-max-request-bytes", "33554432");
    node.head("/demo/big").send().await.expect_head_error(404);
}

#[tokio::test]
async fn append_of_exactly_32_mib_is_accepted() {
    let node = Node::start();
    node.create(S, "application/octet-stream").await;
    // Streamed in 1 MiB pieces that share one buffer, with a declared length.
    let piece = Bytes::from(vec![b'x'; 1024 * 1024]);
    let pieces = (0..32).map(move |_| Ok::<_, std::io::Error>(piece.clone()));
    node.post(S)
        .content_type("application/octet-stream")
        .header("content-length", MAX_REQUEST_BYTES.to_string())
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(pieces)))
        .send()
        .await
        .expect(204)
        .expect_header("stream-next-offset", &offset(MAX_REQUEST_BYTES));
}

// ---------------------------------------------------------------------------
// Idempotent producers (base protocol §5.2.1, extensions §5)
// ---------------------------------------------------------------------------

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
