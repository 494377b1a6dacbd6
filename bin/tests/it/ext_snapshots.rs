//! Snapshots (extensions §2.2, §2.4, §2.5, §8; spec/19-snapshots.md,
//! spec/30-publish-snapshot.md, spec/31-read-snapshot.md): publish with
//! its digest and idempotency, the `409`, `400`, `404`, `410` and `413`
//! rows, reads with one byte range, `ETag` and `304`, snapshot metadata on
//! `HEAD`, and upload in parts, which a node without a cold backend answers
//! `501 NO_COLD_STORE`.
//!
//! Not covered on this single node: the `503 JSON_BOUNDARY_UNVERIFIED` row
//! (every byte is in memory, so a boundary is always verified), the `502`
//! rows (no cold tier) and the `307`/`503` cluster answers.

use reqwest::Method;

use crate::support::{Checks, MAX_REQUEST_BYTES, Node, offset, snapshot_digest};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const OCTETS: &str = "application/octet-stream";
const BODY: &str = "0123456789";

fn snap(at: u64) -> String {
    format!("{S}/snapshot/{}", offset(at))
}

/// A text stream holding `hello world` (11 bytes).
async fn node_with_text() -> Node {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    node
}

/// A text stream of 11 bytes with `BODY` published as `text/plain` at 5.
async fn node_with_snapshot() -> Node {
    let node = node_with_text().await;
    node.publish(S, &offset(5), TEXT, BODY).await;
    node
}

// ---------------------------------------------------------------------------
// Publish (§2.2, spec/30)
// ---------------------------------------------------------------------------

/// §2.2 and spec/30 `204`: the answer carries `Stream-Snapshot-Offset`,
/// `Stream-Snapshot-Digest` and `Stream-Incarnation`, and no body. The
/// digest is the lowercase hex BLAKE3 of the content type's length (u64
/// little-endian), the content type and the body (§4.4 note).
#[tokio::test]
async fn ext_2_2_publish_answers_204_with_the_digest_of_content_type_and_body() {
    let node = node_with_text().await;
    let token = node.incarnation(S).await;
    let answer = node.put(&snap(5)).content_type(TEXT).body(BODY).send().await;
    answer
        .expect(204)
        .expect_header("stream-snapshot-offset", &offset(5))
        .expect_header("stream-snapshot-digest", &snapshot_digest(TEXT, BODY.as_bytes()))
        .expect_header("stream-incarnation", &token);
    assert!(answer.body.is_empty(), "{answer:?}");
    // The digest covers the content type: the same body under another type differs.
    assert_ne!(snapshot_digest(TEXT, BODY.as_bytes()), snapshot_digest(OCTETS, BODY.as_bytes()));
    let digest = answer.must("stream-snapshot-digest");
    assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
}

/// §2.2: `Content-Type` defaults to `application/octet-stream`, which the
/// digest covers and reads return.
#[tokio::test]
async fn ext_2_2_publish_without_content_type_stores_application_octet_stream() {
    let node = node_with_text().await;
    node.put(&snap(5))
        .body(BODY)
        .send()
        .await
        .expect(204)
        .expect_header("stream-snapshot-digest", &snapshot_digest(OCTETS, BODY.as_bytes()));
    let read = node.get(&snap(5)).send().await;
    read.expect(200).expect_header("content-type", OCTETS);
    assert_eq!(read.text(), BODY);
}

/// §2.2: a snapshot may be empty and may sit at the stream's first offset
/// or at its tail; its content type is its own, not the stream's.
#[tokio::test]
async fn ext_2_2_publish_at_the_first_offset_and_at_the_tail_with_any_content_type() {
    let node = node_with_text().await;
    node.publish(S, &offset(0), "application/x-empty", "")
        .await
        .expect_header("stream-snapshot-digest", &snapshot_digest("application/x-empty", b""));
    node.get(&snap(0)).send().await.expect(200).expect_header("content-type", "application/x-empty");
    node.publish(S, &offset(11), "application/vnd.example+cbor", vec![0xa1u8, 0x00, 0xff]).await;
    let read = node.get(&snap(11)).send().await;
    read.expect(200).expect_header("content-type", "application/vnd.example+cbor");
    assert_eq!(read.body.as_ref(), [0xa1, 0x00, 0xff]);
}

/// §2.2 "Idempotency": repeating a publish at the same offset with the same
/// content type and body succeeds with the same digest while that snapshot
/// is the latest.
#[tokio::test]
async fn ext_2_2_repeating_a_publish_answers_204_with_the_same_digest() {
    let node = node_with_text().await;
    let first = node.publish(S, &offset(5), TEXT, BODY).await.must("stream-snapshot-digest").to_string();
    for _ in 0..3 {
        node.publish(S, &offset(5), TEXT, BODY)
            .await
            .expect_header("stream-snapshot-digest", &first)
            .expect_header("stream-snapshot-offset", &offset(5));
    }
    node.head(S).send().await.expect(200).expect_header("stream-snapshot-digest", &first);
}

/// §2.2 "Idempotency" and spec/30 `409`: other content at an already
/// published offset, or a publish below the latest snapshot's offset,
/// answers `409 SNAPSHOT_CONFLICT` naming the latest snapshot's
/// `Stream-Snapshot-Offset` and `Stream-Snapshot-Digest`, and publishes
/// nothing.
#[tokio::test]
async fn ext_2_2_other_content_or_a_stale_offset_answers_409_naming_the_latest() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    let mut checks = Checks::new();
    let cases = [
        ("another body at the same offset", node.put(&snap(5)).content_type(TEXT).body("other").send().await),
        ("another content type at the same offset", node.put(&snap(5)).content_type(OCTETS).body(BODY).send().await),
        ("the same content below the latest", node.put(&snap(4)).content_type(TEXT).body(BODY).send().await),
        ("another snapshot below the latest", node.put(&snap(0)).content_type(TEXT).body("x").send().await),
    ];
    for (label, answer) in cases {
        checks.run(label, || {
            answer
                .expect_error(409, "SNAPSHOT_CONFLICT")
                .expect_header("stream-snapshot-offset", &offset(5))
                .expect_header("stream-snapshot-digest", &digest);
        });
    }
    checks.finish();
    // A later publish supersedes; the superseded one then conflicts as stale.
    node.publish(S, &offset(8), TEXT, "later").await;
    let later = snapshot_digest(TEXT, b"later");
    node.put(&snap(5))
        .content_type(TEXT)
        .body(BODY)
        .send()
        .await
        .expect_error(409, "SNAPSHOT_CONFLICT")
        .expect_header("stream-snapshot-offset", &offset(8))
        .expect_header("stream-snapshot-digest", &later);
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_header("stream-snapshot-offset", &offset(8))
        .expect_header("stream-snapshot-digest", &later);
}

/// §2.2 `409`: an offset beyond the current tail is refused with a `409`
/// that names no snapshot, with or without a snapshot published.
#[tokio::test]
async fn ext_2_2_an_offset_beyond_the_tail_answers_409_without_snapshot_headers() {
    let node = node_with_text().await;
    for _ in 0..2 {
        node.put(&snap(12))
            .content_type(TEXT)
            .body(BODY)
            .send()
            .await
            .expect_error(409, "SNAPSHOT_CONFLICT")
            .expect_no_header("stream-snapshot-offset")
            .expect_no_header("stream-snapshot-digest");
        node.publish(S, &offset(3), TEXT, "abc").await;
    }
    node.head(S).send().await.expect(200).expect_header("stream-snapshot-offset", &offset(3));
}

/// §2.1, §2.2 `400` and spec/30: on a JSON stream the offset must be a
/// message boundary (`NOT_JSON_BOUNDARY` otherwise); a non-JSON stream
/// accepts any committed offset.
#[tokio::test]
async fn ext_2_2_a_json_offset_inside_a_message_answers_400_not_json_boundary() {
    let node = Node::start();
    node.create("/demo/j", JSON).await;
    // Stored as `{"a":1}\n` (8 bytes) and `[1,2]\n` (6 bytes).
    node.append("/demo/j", JSON, r#"[{"a": 1}, [1, 2]]"#).await;
    for inside in [1, 4, 7, 9, 13] {
        node.put(&format!("/demo/j/snapshot/{}", offset(inside)))
            .content_type(JSON)
            .body("{}")
            .send()
            .await
            .expect_error(400, "NOT_JSON_BOUNDARY")
            .expect_no_header("stream-snapshot-offset");
    }
    node.head("/demo/j").send().await.expect(200).expect_no_header("stream-snapshot-offset");
    for boundary in [0, 8, 14] {
        node.publish("/demo/j", &offset(boundary), JSON, "{}").await;
    }
    // Any offset of a non-JSON stream, even inside an append.
    let node = node_with_text().await;
    node.publish(S, &offset(1), OCTETS, "x").await;
    node.publish(S, &offset(7), OCTETS, "x").await;
}

/// §2.2 `400`: an offset that is not one the server issues is invalid.
#[tokio::test]
async fn ext_2_2_an_invalid_offset_answers_400_invalid_offset() {
    let node = node_with_text().await;
    for bad in ["abc", "-1", "now", "5", "0000000000000000005", "000000000000000000005", "0000000000000000000x"] {
        node.put(&format!("{S}/snapshot/{bad}"))
            .content_type(TEXT)
            .body(BODY)
            .send()
            .await
            .expect_error(400, "INVALID_OFFSET");
        node.get(&format!("{S}/snapshot/{bad}")).send().await.expect_error(400, "INVALID_OFFSET");
    }
    node.head(S).send().await.expect(200).expect_no_header("stream-snapshot-offset");
}

/// spec/30 `400`: an invalid content type is refused and publishes nothing.
#[tokio::test]
async fn spec_30_a_malformed_content_type_answers_400() {
    let node = node_with_text().await;
    for bad in ["not a mime type", "text/", "/plain"] {
        node.put(&snap(5)).content_type(bad).body(BODY).send().await.expect_error(400, "INVALID_HEADER");
    }
    node.head(S).send().await.expect(200).expect_no_header("stream-snapshot-offset");
}

/// §2.2 `404` and spec/30: a publish to a stream that does not exist.
#[tokio::test]
async fn ext_2_2_publish_to_a_missing_stream_answers_404() {
    let node = Node::start();
    node.put(&snap(0)).body(BODY).send().await.expect_error(404, "BUCKET_NOT_FOUND");
    node.head(S).send().await.expect_head_error(404);
    node.create("/demo/other", TEXT).await;
    node.put(&snap(0)).body(BODY).send().await.expect_error(404, "STREAM_NOT_FOUND");
}

/// §2.2 `410` and spec/30: an offset older than the earliest retained
/// offset answers `410 Gone` (a single-request publish checks retention
/// before the latest snapshot).
#[tokio::test]
async fn ext_2_2_an_offset_below_retention_answers_410() {
    let node = node_with_snapshot().await;
    node.retain(S, &offset(5)).await;
    let token = node.incarnation(S).await;
    for below in [0, 4] {
        node.put(&snap(below))
            .content_type(TEXT)
            .body(BODY)
            .send()
            .await
            .expect_error(410, "STREAM_GONE")
            .expect_header("stream-incarnation", &token);
    }
    // At the retained offset the latest snapshot decides.
    node.publish(S, &offset(5), TEXT, BODY).await;
}

/// §2.2 `413` and §10: a body above 32 MiB answers `413 REQUEST_TOO_LARGE`
/// naming `Ursula-Max-Request-Bytes`, decided from `Content-Length`.
#[tokio::test]
async fn ext_2_2_a_body_above_the_request_limit_answers_413() {
    let node = node_with_text().await;
    let answer = node
        .raw(&format!(
            "PUT {} HTTP/1.1\r\nContent-Type: application/octet-stream\r\nContent-Length: {}",
            snap(5),
            MAX_REQUEST_BYTES + 1
        ))
        .await;
    answer.expect_error(413, "REQUEST_TOO_LARGE").expect_header("ursula-max-request-bytes", "33554432");
    node.head(S).send().await.expect(200).expect_no_header("stream-snapshot-offset");
}

/// §2.2 "Retention Effect": publishing does not change the earliest
/// retained offset; all history stays readable.
#[tokio::test]
async fn ext_2_2_publishing_leaves_history_readable() {
    let node = node_with_snapshot().await;
    node.head(S).send().await.expect(200).expect_header("stream-retained-offset", &offset(0));
    assert_eq!(node.read_all(S).await.text(), "hello world");
    // §2.2 "Concurrency": appends go on, and do not change the snapshot.
    node.append(S, TEXT, "!").await;
    assert_eq!(node.get(&snap(5)).send().await.expect(200).text(), BODY);
}

/// §8: snapshot offsets in path segments are URL-decoded.
#[tokio::test]
async fn ext_8_snapshot_offsets_in_the_path_are_percent_decoded() {
    let node = node_with_text().await;
    let encoded: String = offset(5).bytes().map(|b| format!("%{b:02X}")).collect();
    node.put(&format!("{S}/snapshot/{encoded}")).content_type(TEXT).body(BODY).send().await.expect(204);
    assert_eq!(node.get(&format!("{S}/snapshot/{encoded}")).send().await.expect(200).text(), BODY);
    node.head(S).send().await.expect(200).expect_header("stream-snapshot-offset", &offset(5));
}

// ---------------------------------------------------------------------------
// HEAD metadata (§2.4)
// ---------------------------------------------------------------------------

/// §2.4: `HEAD` carries `Stream-Snapshot-Offset` and `-Digest` when a
/// snapshot is visible (absent otherwise), and `Stream-Retained-Offset`
/// always, the stream's first offset before any retention advance.
#[tokio::test]
async fn ext_2_4_head_reports_the_latest_snapshot_and_the_retained_offset() {
    let node = node_with_text().await;
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_no_header("stream-snapshot-offset")
        .expect_no_header("stream-snapshot-digest")
        .expect_header("stream-retained-offset", &offset(0));
    node.publish(S, &offset(5), TEXT, BODY).await;
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_header("stream-snapshot-offset", &offset(5))
        .expect_header("stream-snapshot-digest", &snapshot_digest(TEXT, BODY.as_bytes()))
        .expect_header("stream-retained-offset", &offset(0));
    // A new snapshot replaces the visible one immediately.
    node.publish(S, &offset(11), OCTETS, "all").await;
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_header("stream-snapshot-offset", &offset(11))
        .expect_header("stream-snapshot-digest", &snapshot_digest(OCTETS, b"all"));
}

// ---------------------------------------------------------------------------
// Read (§2.5, spec/31)
// ---------------------------------------------------------------------------

/// §2.5 and spec/31 `200`: the stored content type and body, with
/// `Stream-Snapshot-Offset`, `Stream-Snapshot-Digest`, `Stream-Next-Offset`
/// (the snapshot offset), `Stream-Incarnation`, `Accept-Ranges: bytes`,
/// `Content-Length` and `ETag` (the digest in quotes); `Stream-Up-To-Date`
/// only when the snapshot offset is the stream's tail.
#[tokio::test]
async fn ext_2_5_read_answers_200_with_the_snapshot_headers() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    let token = node.incarnation(S).await;
    let read = node.get(&snap(5)).send().await;
    read.expect(200)
        .expect_header("content-type", TEXT)
        .expect_header("content-length", "10")
        .expect_header("stream-snapshot-offset", &offset(5))
        .expect_header("stream-snapshot-digest", &digest)
        .expect_header("stream-next-offset", &offset(5))
        .expect_header("stream-incarnation", &token)
        .expect_header("accept-ranges", "bytes")
        .expect_header("etag", &format!("\"{digest}\""))
        .expect_no_header("stream-up-to-date")
        .expect_no_header("content-encoding")
        .expect_no_header("stream-immutable");
    assert_eq!(read.text(), BODY);

    // At the tail: Stream-Up-To-Date, until an append follows the snapshot.
    node.publish(S, &offset(11), TEXT, "at the tail").await;
    node.get(&snap(11)).send().await.expect(200).expect_header("stream-up-to-date", "true");
    node.append(S, TEXT, "!").await;
    node.get(&snap(11)).send().await.expect(200).expect_no_header("stream-up-to-date");
}

/// §2.5: snapshot answers are never compressed, even for a client that
/// accepts gzip (spec/31 note).
#[tokio::test]
async fn ext_2_5_read_is_not_compressed() {
    let node = node_with_text().await;
    node.publish(S, &offset(5), JSON, format!("[{}]", "1,".repeat(500) + "1")).await;
    node.get(&snap(5)).header("accept-encoding", "gzip").send().await.expect(200).expect_no_header("content-encoding");
}

/// §2.5 "Byte Ranges": one range answers `206` with only those bytes and
/// `Content-Range: bytes first-last/total`, and the same snapshot headers
/// as the whole body (the digest covers the whole snapshot).
#[tokio::test]
async fn ext_2_5_a_single_range_answers_206_with_content_range() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    let token = node.incarnation(S).await;
    for (range, body, content_range) in [
        ("bytes=0-3", "0123", "bytes 0-3/10"),
        ("bytes=2-", "23456789", "bytes 2-9/10"),
        ("bytes=-3", "789", "bytes 7-9/10"),
        ("bytes=5-100", "56789", "bytes 5-9/10"),
        ("bytes=9-9", "9", "bytes 9-9/10"),
        ("bytes=-50", BODY, "bytes 0-9/10"),
    ] {
        let read = node.get(&snap(5)).header("range", range).send().await;
        read.expect(206)
            .expect_header("content-range", content_range)
            .expect_header("content-type", TEXT)
            .expect_header("stream-snapshot-offset", &offset(5))
            .expect_header("stream-snapshot-digest", &digest)
            .expect_header("stream-next-offset", &offset(5))
            .expect_header("stream-incarnation", &token)
            .expect_header("accept-ranges", "bytes")
            .expect_header("etag", &format!("\"{digest}\""));
        assert_eq!(read.text(), body, "{range}");
    }
}

/// §2.5 "Byte Ranges": a range that starts at or past the end answers `416
/// RANGE_NOT_SATISFIABLE` with `Content-Range: bytes */total` and the
/// stream's `Stream-Incarnation`.
#[tokio::test]
async fn ext_2_5_a_range_past_the_end_answers_416_with_content_range() {
    let node = node_with_snapshot().await;
    let token = node.incarnation(S).await;
    for range in ["bytes=10-", "bytes=10-20", "bytes=99-"] {
        node.get(&snap(5))
            .header("range", range)
            .send()
            .await
            .expect_error(416, "RANGE_NOT_SATISFIABLE")
            .expect_header("content-range", "bytes */10")
            .expect_header("stream-incarnation", &token)
            .expect_header("accept-ranges", "bytes");
    }
    // Every range of an empty snapshot starts at its end.
    node.publish(S, &offset(11), OCTETS, "").await;
    node.get(&snap(11))
        .header("range", "bytes=0-")
        .send()
        .await
        .expect_error(416, "RANGE_NOT_SATISFIABLE")
        .expect_header("content-range", "bytes */0");
}

/// §2.5 "Byte Ranges": several ranges, a range that does not parse, or
/// `If-Range` get the whole snapshot as `200`.
#[tokio::test]
async fn ext_2_5_several_ranges_unparseable_ranges_and_if_range_answer_200_whole() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    for (range, if_range) in [
        ("bytes=0-1,5-6", None),
        ("bytes=a-b", None),
        ("bytes=5-1", None),
        ("items=0-1", None),
        ("bytes 0-1", None),
        ("bytes=0-3", Some(format!("\"{digest}\""))),
    ] {
        let mut req = node.get(&snap(5)).header("range", range);
        if let Some(tag) = &if_range {
            req = req.header("if-range", tag);
        }
        let read = req.send().await;
        read.expect(200).expect_no_header("content-range").expect_header("accept-ranges", "bytes");
        assert_eq!(read.text(), BODY, "{range} {if_range:?}");
    }
}

/// §2.5 `304`: `If-None-Match` naming the `ETag` (compared weakly) answers
/// `304` with the same headers and no body, and ignores any byte range,
/// even one that cannot be satisfied.
#[tokio::test]
async fn ext_2_5_if_none_match_answers_304_and_ignores_the_range() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    let tag = format!("\"{digest}\"");
    let token = node.incarnation(S).await;
    for (if_none_match, range) in [
        (tag.clone(), None),
        (format!("W/{tag}"), None),
        (format!("\"other\", {tag}"), None),
        ("*".to_string(), None),
        (tag.clone(), Some("bytes=0-3")),
        (tag.clone(), Some("bytes=50-")),
    ] {
        let mut req = node.get(&snap(5)).header("if-none-match", &if_none_match);
        if let Some(range) = range {
            req = req.header("range", range);
        }
        let answer = req.send().await;
        answer
            .expect(304)
            .expect_header("etag", &tag)
            .expect_header("stream-snapshot-offset", &offset(5))
            .expect_header("stream-snapshot-digest", &digest)
            .expect_header("stream-next-offset", &offset(5))
            .expect_header("stream-incarnation", &token)
            .expect_no_header("content-range");
        assert!(answer.body.is_empty(), "{answer:?}");
    }
    node.get(&snap(5)).header("if-none-match", "\"other\"").send().await.expect(200);
}

/// §2.5 "Byte Ranges": `404` and `410` first, then `416` for a range that
/// cannot be satisfied, then `412`, then `304`; a matching `If-None-Match`
/// ignores the range, so it answers `412` or `304`, never `416`.
#[tokio::test]
async fn ext_2_5_precedence_is_404_416_412_304() {
    let node = node_with_snapshot().await;
    let (current, foreign) = (node.incarnation(S).await, "4503599627370496");
    let tag = format!("\"{}\"", snapshot_digest(TEXT, BODY.as_bytes()));
    let path = snap(5);
    // A wrong token and a range past the end: 416.
    node.get(&path)
        .incarnation(foreign)
        .header("range", "bytes=10-")
        .send()
        .await
        .expect_error(416, "RANGE_NOT_SATISFIABLE")
        .expect_header("stream-incarnation", &current);
    // A wrong token and a satisfiable range: 412.
    node.get(&path)
        .incarnation(foreign)
        .header("range", "bytes=0-1")
        .send()
        .await
        .expect_error(412, "INCARNATION_MISMATCH")
        .expect_header("stream-incarnation", &current);
    // A wrong token and a matching If-None-Match, with any range: 412.
    for range in ["bytes=0-1", "bytes=10-"] {
        node.get(&path)
            .incarnation(foreign)
            .header("if-none-match", &tag)
            .header("range", range)
            .send()
            .await
            .expect_error(412, "INCARNATION_MISMATCH");
    }
    // The right token and a matching If-None-Match: 304.
    node.get(&path).incarnation(&current).header("if-none-match", &tag).send().await.expect(304);
    // Not the latest snapshot, whatever else: 404.
    node.get(&snap(4))
        .incarnation(foreign)
        .header("range", "bytes=10-")
        .header("if-none-match", &tag)
        .send()
        .await
        .expect_error(404, "SNAPSHOT_NOT_FOUND")
        .expect_header("stream-incarnation", &current);
}

/// §2.5 `404` and spec/31: no snapshot at the offset, or one that a later
/// publish superseded, answers `404 SNAPSHOT_NOT_FOUND` with the stream's
/// `Stream-Incarnation`; a missing stream answers `404 STREAM_NOT_FOUND`.
#[tokio::test]
async fn ext_2_5_a_snapshot_that_is_not_the_latest_answers_404() {
    let node = node_with_text().await;
    let token = node.incarnation(S).await;
    node.get(&snap(5)).send().await.expect_error(404, "SNAPSHOT_NOT_FOUND").expect_header("stream-incarnation", &token);
    node.publish(S, &offset(5), TEXT, BODY).await;
    node.publish(S, &offset(8), TEXT, "newer").await;
    for at in [5, 0, 11] {
        node.get(&snap(at))
            .send()
            .await
            .expect_error(404, "SNAPSHOT_NOT_FOUND")
            .expect_header("stream-incarnation", &token);
    }
    node.head(&snap(5)).send().await.expect_head_error(404);
    node.get(&format!("/demo/missing/snapshot/{}", offset(0)))
        .send()
        .await
        .expect_error(404, "STREAM_NOT_FOUND")
        .expect_no_header("stream-incarnation");
}

/// §2.5 and spec/31: `HEAD` of a snapshot answers the headers of the `200`
/// and no body.
#[tokio::test]
async fn ext_2_5_head_of_a_snapshot_answers_its_headers_without_a_body() {
    let node = node_with_snapshot().await;
    let digest = snapshot_digest(TEXT, BODY.as_bytes());
    let head = node.head(&snap(5)).send().await;
    head.expect(200)
        .expect_header("content-type", TEXT)
        .expect_header("stream-snapshot-offset", &offset(5))
        .expect_header("stream-snapshot-digest", &digest)
        .expect_header("stream-next-offset", &offset(5))
        .expect_header("etag", &format!("\"{digest}\""))
        .expect_header("accept-ranges", "bytes");
    assert!(head.body.is_empty(), "{head:?}");
}

/// spec/31 `400`: the snapshot route refuses the `incarnation` (and
/// `aligned`) query parameters that immutable reads carry in the path.
#[tokio::test]
async fn spec_31_the_incarnation_query_parameter_answers_400_unsupported() {
    let node = node_with_snapshot().await;
    let token = node.incarnation(S).await;
    for query in [format!("incarnation={token}"), "aligned=true".to_string()] {
        node.get(&format!("{}?{query}", snap(5))).send().await.expect_error(400, "UNSUPPORTED");
    }
}

/// §11 (`405 UNSUPPORTED`, "the removed latest-snapshot path"): `GET
/// {stream}/snapshot` no longer redirects to the latest snapshot. And
/// `DELETE` of a snapshot is no method of the route (`405`).
#[tokio::test]
async fn ext_11_the_removed_latest_snapshot_path_answers_405_unsupported() {
    let node = node_with_snapshot().await;
    node.get(&format!("{S}/snapshot")).send().await.expect_error(405, "UNSUPPORTED");
    node.delete(&snap(5)).send().await.expect_error(405, "METHOD_NOT_ALLOWED");
    node.request(Method::POST, &snap(5)).body("x").send().await.expect_error(405, "METHOD_NOT_ALLOWED");
    node.head(S).send().await.expect(200).expect_header("stream-snapshot-offset", &offset(5));
}

// ---------------------------------------------------------------------------
// Upload in parts (§2.2): not without a cold backend
// ---------------------------------------------------------------------------

/// §2.2 "Upload in Parts" note and spec/30 `501`: without a cold backend a
/// part, a commit and a discard answer `501 NO_COLD_STORE` and apply
/// nothing, and `HEAD` sends no `Ursula-Max-Snapshot-Bytes` (§10).
#[tokio::test]
async fn ext_2_2_upload_in_parts_answers_501_no_cold_store() {
    let node = node_with_text().await;
    node.post(&format!("{}/parts", snap(5))).body("part one").send().await.expect_error(501, "NO_COLD_STORE");
    node.delete(&format!("{S}/snapshot/parts")).send().await.expect_error(501, "NO_COLD_STORE");
    node.put(&snap(5))
        .content_type(OCTETS)
        .header("stream-snapshot-parts", "1")
        .header("stream-snapshot-digest", snapshot_digest(OCTETS, b"part one"))
        .body("part-id\n")
        .send()
        .await
        .expect_error(501, "NO_COLD_STORE");
    node.head(S)
        .send()
        .await
        .expect(200)
        .expect_no_header("ursula-max-snapshot-bytes")
        .expect_no_header("stream-snapshot-offset");
}
