//! `PUT /{bucket}` (spec/25-create-bucket.md) and `PUT /{bucket}/{stream}`
//! (spec/26-create-stream.md, base protocol §5.1, extensions §1.1).

use crate::support::{Node, offset};

// ---------------------------------------------------------------------------
// PUT /{bucket}
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_bucket_with_a_valid_id_answers_201_every_time() {
    let node = Node::start();
    for bucket in ["demo", "a_b-c", "0123", &"z".repeat(64)] {
        node.put(&format!("/{bucket}")).send().await.expect(201);
        node.put(&format!("/{bucket}")).send().await.expect(201);
    }
}

#[tokio::test]
async fn create_bucket_answers_201_when_the_bucket_already_holds_streams() {
    let node = Node::start();
    node.create("/demo/hello", "text/plain").await;
    node.put("/demo").send().await.expect(201);
    // ...and changes nothing about the stream.
    node.head("/demo/hello").send().await.expect(200);
}

#[tokio::test]
async fn create_bucket_with_an_invalid_id_answers_400() {
    let node = Node::start();
    for bucket in ["abc", "Demo", "de.mo", "de!mo", "de@mo", &"a".repeat(65)] {
        node.put(&format!("/{bucket}")).send().await.expect_error(400, "INVALID_BUCKET_ID");
    }
}

#[tokio::test]
async fn buckets_are_implicit_so_a_stream_needs_no_bucket_create() {
    let node = Node::start();
    node.create("/never-created/s", "text/plain").await;
}

// ---------------------------------------------------------------------------
// 201: created
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_stream_answers_201_with_location_content_type_and_next_offset() {
    let node = Node::start();
    let created = node.put("/demo/hello").content_type("text/plain").send().await;
    created
        .expect(201)
        .expect_header("content-type", "text/plain")
        .expect_header("stream-next-offset", &offset(0))
        .expect_no_header("stream-closed")
        .expect_no_header("stream-ttl")
        .expect_no_header("stream-expires-at")
        // ETag is set on reads only.
        .expect_no_header("etag");
    let location = created.must("location");
    assert!(location.ends_with("/demo/hello"), "Location names the stream URL:\n{created:?}");
}

#[tokio::test]
async fn create_stream_without_content_type_makes_an_octet_stream() {
    let node = Node::start();
    node.put("/demo/raw").send().await.expect(201).expect_header("content-type", "application/octet-stream");
    node.head("/demo/raw").send().await.expect(200).expect_header("content-type", "application/octet-stream");
}

#[tokio::test]
async fn create_stream_normalizes_its_content_type() {
    let node = Node::start();
    node.put("/demo/s")
        .content_type("Text/Plain;Charset=UTF-8")
        .send()
        .await
        .expect(201)
        .expect_header("content-type", "text/plain; charset=utf-8");
}

#[tokio::test]
async fn create_stream_with_a_body_makes_it_the_first_entry() {
    let node = Node::start();
    let created = node.put("/demo/s").content_type("text/plain").body("first entry").send().await;
    created.expect(201).expect_header("stream-next-offset", &offset(11));
    let read = node.read_all("/demo/s").await;
    assert_eq!(read.text(), "first entry");
    read.expect_header("stream-next-offset", &offset(11));
}

#[tokio::test]
async fn create_stream_without_a_body_makes_an_empty_stream() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    let read = node.read_all("/demo/s").await;
    read.expect_header("stream-up-to-date", "true").expect_header("stream-next-offset", &offset(0));
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn create_json_stream_stores_the_body_as_message_text() {
    let node = Node::start();
    node.put("/demo/j").content_type("application/json").body(r#"{"msg": "first entry"}"#).send().await.expect(201);
    assert_eq!(node.read_all("/demo/j").await.text(), "{\"msg\":\"first entry\"}\n");
}

#[tokio::test]
async fn create_json_stream_with_an_array_body_stores_one_message_per_element() {
    let node = Node::start();
    node.put("/demo/j")
        .content_type("application/json")
        .body(r#"[{"event":"a"}, {"event":"b"}, [1, 2]]"#)
        .send()
        .await
        .expect(201);
    assert_eq!(node.read_all("/demo/j").await.text(), "{\"event\":\"a\"}\n{\"event\":\"b\"}\n[1,2]\n");
}

#[tokio::test]
async fn create_json_stream_with_an_empty_array_makes_an_empty_stream() {
    // Base protocol §7.1: PUT with `[]` is valid and writes no message.
    let node = Node::start();
    node.put("/demo/j").content_type("application/json").body("[]").send().await.expect(201);
    let read = node.read_all("/demo/j").await;
    assert!(read.body.is_empty(), "{read:?}");
    read.expect_header("stream-next-offset", &offset(0));
}

#[tokio::test]
async fn create_stream_closed_answers_stream_closed_and_refuses_appends() {
    let node = Node::start();
    node.put("/demo/s")
        .content_type("text/plain")
        .closed()
        .body("done")
        .send()
        .await
        .expect(201)
        .expect_header("stream-closed", "true");
    node.post("/demo/s").content_type("text/plain").body("more").send().await.expect_error(409, "STREAM_CLOSED");
    let read = node.read_all("/demo/s").await;
    assert_eq!(read.text(), "done");
    read.expect_header("stream-closed", "true");
}

#[tokio::test]
async fn create_stream_ignores_a_stream_closed_value_other_than_true() {
    // Base protocol §4.1: only `true` (any case) counts.
    let node = Node::start();
    node.put("/demo/a").header("stream-closed", "false").send().await.expect(201).expect_no_header("stream-closed");
    node.put("/demo/b").header("stream-closed", "TRUE").send().await.expect(201).expect_header("stream-closed", "true");
}

#[tokio::test]
async fn create_stream_with_ttl_answers_stream_ttl() {
    let node = Node::start();
    node.put("/demo/ephemeral")
        .header("stream-ttl", "3600")
        .send()
        .await
        .expect(201)
        .expect_header("stream-ttl", "3600");
}

#[tokio::test]
async fn create_stream_with_expires_at_answers_stream_expires_at() {
    let node = Node::start();
    let at = "2099-01-01T00:00:00Z";
    node.put("/demo/s").header("stream-expires-at", at).send().await.expect(201).expect_header("stream-expires-at", at);
}

#[tokio::test]
async fn create_stream_with_stream_seq_seeds_the_stored_value() {
    let node = Node::start();
    node.put("/demo/s").content_type("text/plain").header("stream-seq", "5").send().await.expect(201);
    node.post("/demo/s")
        .content_type("text/plain")
        .header("stream-seq", "5")
        .body("x")
        .send()
        .await
        .expect_error(409, "STREAM_SEQ_CONFLICT")
        .expect_header("stream-last-seq", "5");
    node.post("/demo/s").content_type("text/plain").header("stream-seq", "6").body("x").send().await.expect(204);
}

#[tokio::test]
async fn stream_ids_up_to_the_combined_122_byte_limit_are_accepted() {
    let node = Node::start();
    // 4 + 1 + 117 = 122 bytes.
    node.put(&format!("/abcd/{}", "s".repeat(117))).send().await.expect(201);
    // 64 + 1 + 57 = 122 bytes.
    node.put(&format!("/{}/{}", "b".repeat(64), "s".repeat(57))).send().await.expect(201);
    // A stream ID may be any UTF-8 (percent-encoded in the path) and use reserved subresource names.
    for stream in ["d%C3%ADa", "a.b", "snapshot", "bootstrap", "streams2"] {
        node.put(&format!("/demo/{stream}")).send().await.expect(201);
    }
}

// ---------------------------------------------------------------------------
// 200: exists with the same configuration
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_of_an_existing_stream_with_the_same_config_answers_200() {
    let node = Node::start();
    node.put("/demo/s").content_type("text/plain").header("stream-ttl", "3600").send().await.expect(201);
    node.put("/demo/s")
        .content_type("text/plain")
        .header("stream-ttl", "3600")
        .send()
        .await
        .expect(200)
        .expect_header("content-type", "text/plain")
        .expect_header("stream-next-offset", &offset(0))
        .expect_header("stream-ttl", "3600");
}

#[tokio::test]
async fn create_of_an_existing_stream_compares_normalized_content_types() {
    let node = Node::start();
    node.create("/demo/s", "text/plain; charset=utf-8").await;
    node.put("/demo/s").content_type("text/plain;charset=UTF-8").send().await.expect(200);
}

#[tokio::test]
async fn create_answered_200_ignores_its_body_and_stream_seq() {
    let node = Node::start();
    node.put("/demo/s").content_type("text/plain").body("one").header("stream-seq", "5").send().await.expect(201);
    node.put("/demo/s")
        .content_type("text/plain")
        .body("two")
        .header("stream-seq", "9")
        .send()
        .await
        .expect(200)
        .expect_header("stream-next-offset", &offset(3));
    assert_eq!(node.read_all("/demo/s").await.text(), "one");
    // The stored Stream-Seq is still 5: 6 is accepted.
    node.post("/demo/s").content_type("text/plain").header("stream-seq", "6").body("x").send().await.expect(204);
}

#[tokio::test]
async fn create_of_a_closed_stream_with_stream_closed_answers_200() {
    let node = Node::start();
    node.put("/demo/s").closed().send().await.expect(201);
    node.put("/demo/s").closed().send().await.expect(200).expect_header("stream-closed", "true");
}

// ---------------------------------------------------------------------------
// 409: exists with another configuration
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_of_an_existing_stream_with_another_content_type_answers_409() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    node.put("/demo/s")
        .content_type("application/json")
        .send()
        .await
        .expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
}

#[tokio::test]
async fn create_with_stream_closed_of_an_open_stream_answers_409() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    node.put("/demo/s")
        .content_type("text/plain")
        .closed()
        .send()
        .await
        .expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
    // The 409 closed nothing.
    node.head("/demo/s").send().await.expect(200).expect_no_header("stream-closed");
}

#[tokio::test]
async fn create_without_stream_closed_of_a_closed_stream_answers_409() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    node.close("/demo/s").await;
    node.put("/demo/s").content_type("text/plain").send().await.expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
}

#[tokio::test]
async fn create_of_an_existing_stream_with_another_lifetime_answers_409() {
    let node = Node::start();
    node.put("/demo/ttl").header("stream-ttl", "3600").send().await.expect(201);
    node.put("/demo/ttl").header("stream-ttl", "60").send().await.expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
    node.put("/demo/ttl").send().await.expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");

    node.put("/demo/at").header("stream-expires-at", "2099-01-01T00:00:00Z").send().await.expect(201);
    node.put("/demo/at")
        .header("stream-expires-at", "2098-01-01T00:00:00Z")
        .send()
        .await
        .expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
    node.put("/demo/at").header("stream-ttl", "3600").send().await.expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");

    node.put("/demo/forever").send().await.expect(201);
    node.put("/demo/forever")
        .header("stream-ttl", "3600")
        .send()
        .await
        .expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
}

// ---------------------------------------------------------------------------
// 400: invalid ids, headers, producer headers, JSON
// ---------------------------------------------------------------------------

#[tokio::test]
async fn create_stream_with_an_invalid_bucket_id_answers_400() {
    let node = Node::start();
    for bucket in ["abc", "Demo", "de.mo", &"a".repeat(65)] {
        node.put(&format!("/{bucket}/s")).send().await.expect_error(400, "INVALID_BUCKET_ID");
    }
}

#[tokio::test]
async fn create_stream_with_an_invalid_stream_id_answers_400() {
    let node = Node::start();
    let cases = [
        "%24meta".to_string(), // starts with `$`
        "a..b".to_string(),    // contains `..`
        "..b".to_string(),     // starts with `..`
        "a%00b".to_string(),   // contains NUL
        "a%2Fb".to_string(),   // contains `/` (percent-encoded)
        "streams".to_string(), // reserved
        "s".repeat(118),       // 4 + 1 + 118 > 122 bytes together
        "s".repeat(123),       // longer than 122 bytes alone
    ];
    for stream in cases {
        node.put(&format!("/demo/{stream}")).send().await.expect_error(400, "INVALID_STREAM_ID");
    }
    node.put(&format!("/{}/{}", "b".repeat(64), "s".repeat(58))).send().await.expect_error(400, "INVALID_STREAM_ID");
}

#[tokio::test]
async fn create_stream_with_both_ttl_and_expires_at_answers_400() {
    let node = Node::start();
    node.put("/demo/s")
        .header("stream-ttl", "60")
        .header("stream-expires-at", "2099-01-01T00:00:00Z")
        .send()
        .await
        .expect_error(400, "INVALID_HEADER");
    node.head("/demo/s").send().await.expect_head_error(404);
}

#[tokio::test]
async fn create_stream_with_a_malformed_ttl_answers_400_invalid_header() {
    let node = Node::start();
    for ttl in ["0060", "+3600", "3600.0", "3.6e3", "-1", "abc", ""] {
        node.put("/demo/s").header("stream-ttl", ttl).send().await.expect_error(400, "INVALID_HEADER");
    }
    node.head("/demo/s").send().await.expect_head_error(404);
}

#[tokio::test]
async fn create_stream_with_a_malformed_expires_at_answers_400_invalid_header() {
    let node = Node::start();
    for at in ["tomorrow", "2099-01-01", "1700000000"] {
        node.put("/demo/s").header("stream-expires-at", at).send().await.expect_error(400, "INVALID_HEADER");
    }
}

/// A stream would be born expired: refused, nothing created (issue 17).
#[tokio::test]
async fn create_stream_with_an_expires_at_already_past_answers_400_invalid_header() {
    let node = Node::start();
    for at in ["2001-01-01T00:00:00Z", "1970-01-01T00:00:00+00:00"] {
        node.put("/demo/s").header("stream-expires-at", at).send().await.expect_error(400, "INVALID_HEADER");
    }
    node.head("/demo/s").send().await.expect_head_error(404);
}

#[tokio::test]
async fn create_stream_with_a_malformed_content_type_answers_400() {
    let node = Node::start();
    node.put("/demo/s").content_type("json").send().await.expect_error(400, "INVALID_HEADER");
}

#[tokio::test]
async fn create_stream_with_producer_headers_answers_400() {
    // spec/26 and extensions §5.1: create the stream, then claim an epoch.
    let node = Node::start();
    node.put("/demo/s").producer("p", 0, 0).send().await.expect_error(400, "INVALID_PRODUCER");
    for (name, value) in [("producer-id", "p"), ("producer-epoch", "0"), ("producer-seq", "0")] {
        node.put("/demo/s").header(name, value).send().await.expect_error(400, "INVALID_PRODUCER");
    }
    node.head("/demo/s").send().await.expect_head_error(404);
}

#[tokio::test]
async fn create_json_stream_with_invalid_json_answers_400_and_creates_nothing() {
    let node = Node::start();
    for body in [&b"{not json"[..], b"[1, 2", b"\"\xff\"", b"{} {}"] {
        let answer = node.put("/demo/j").content_type("application/json").body(body.to_vec()).send().await;
        answer.expect(400);
        answer.error_code();
    }
    node.head("/demo/j").send().await.expect_head_error(404);
}

#[tokio::test]
async fn create_json_stream_with_a_message_deeper_than_127_levels_answers_400() {
    let node = Node::start();
    let nested = |depth: usize| format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    node.put("/demo/ok").content_type("application/json").body(nested(127)).send().await.expect(201);
    let answer = node.put("/demo/deep").content_type("application/json").body(nested(128)).send().await;
    answer.expect(400);
    answer.error_code();
}
