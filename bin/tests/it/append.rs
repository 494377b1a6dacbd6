//! `POST /{bucket}/{stream}` (spec/27-append.md, base protocol §5.2, §5.2.1,
//! §5.3, §7.1; extensions JSON Message Text, §5, §10): appends, closes,
//! `Stream-Seq`, idempotent producers and the request size limit.

use bytes::Bytes;

use crate::support::{MAX_REQUEST_BYTES, Node, offset};

pub const S: &str = "/demo/s";
pub const TEXT: &str = "text/plain";
pub const JSON: &str = "application/json";

pub async fn node_with_text_stream() -> Node {
    let node = Node::start();
    node.create(S, TEXT).await;
    node
}

pub async fn node_with_json_stream() -> Node {
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
    node.post("/demo/missing").content_type(TEXT).body("x").send().await.expect_error(404, "BUCKET_NOT_FOUND");
    node.create("/demo/other", TEXT).await;
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

#[tokio::test]
async fn a_text_stream_refuses_a_body_that_is_not_utf8_and_appends_nothing() {
    // Base protocol §5.8 (SSE carries text/* as UTF-8 text), spec/27: 400.
    let node = Node::start();
    let invalid: &[u8] = &[b'o', b'k', 0xff, 0xfe];
    node.put("/demo/bad")
        .content_type("text/plain")
        .body(invalid.to_vec())
        .send()
        .await
        .expect_error(400, "INVALID_REQUEST");
    node.head("/demo/bad").send().await.expect_head_error(404);
    node.create("/demo/t", "text/plain; charset=utf-8").await;
    node.post("/demo/t")
        .content_type("text/plain; charset=utf-8")
        .body(invalid.to_vec())
        .send()
        .await
        .expect_error(400, "INVALID_REQUEST");
    // A sequence cut in the middle is refused too; valid UTF-8 goes in.
    node.post("/demo/t").content_type("text/plain; charset=utf-8").body(vec![0xe2, 0x82]).send().await.expect(400);
    node.append("/demo/t", "text/plain; charset=utf-8", "€ ok").await;
    assert_eq!(node.read_all("/demo/t").await.text(), "€ ok");
    // Binary streams take any bytes.
    node.create("/demo/b", "application/octet-stream").await;
    node.append("/demo/b", "application/octet-stream", invalid.to_vec()).await;
}
