//! Buckets and stream ids (extensions §1, spec/13-streams.md,
//! spec/14-buckets.md): the id rules of §1.1 on every route, implicit
//! buckets (§1.2), and `404 NOT_FOUND` for paths of three or more segments
//! that name no stream subresource (§1.6).

use reqwest::Method;

use crate::support::{Node, offset};

const TEXT: &str = "text/plain";

/// Every method a stream route defines, with what each sends.
async fn every_method(node: &Node, path: &str) -> Vec<crate::support::Answer> {
    vec![
        node.put(path).content_type(TEXT).send().await,
        node.post(path).content_type(TEXT).body("x").send().await,
        node.get(&format!("{path}?offset=-1")).send().await,
        node.head(path).send().await,
        node.delete(path).send().await,
    ]
}

/// §1.1: `bucket_id` MUST match `^[a-z0-9_-]{4,64}$`, on the bucket route
/// and on every stream route under it.
#[tokio::test]
async fn ext_1_1_bucket_ids_match_the_pattern_on_every_route() {
    let node = Node::start();
    for bucket in ["abcd", "a_b-", "0000", "-_-_", &"z".repeat(64)] {
        node.put(&format!("/{bucket}")).send().await.expect(201);
        node.create(&format!("/{bucket}/s"), TEXT).await;
    }
    let invalid = ["abc", "Demo", "DEMO", "de.mo", "de~mo", "de%20mo", "d%C3%A9mo", &"a".repeat(65)];
    for bucket in invalid {
        node.put(&format!("/{bucket}")).send().await.expect_error(400, "INVALID_BUCKET_ID");
        let path = format!("/{bucket}/s");
        for answer in every_method(&node, &path).await {
            if answer.what.starts_with("HEAD") {
                answer.expect_head_error(400);
            } else {
                answer.expect_error(400, "INVALID_BUCKET_ID");
            }
        }
        node.get(&format!("{path}/bootstrap")).send().await.expect_error(400, "INVALID_BUCKET_ID");
        node.put(&format!("{path}/snapshot/{}", offset(0))).send().await.expect_error(400, "INVALID_BUCKET_ID");
    }
}

/// §1.1: a stream id is any UTF-8 string of at most 122 bytes, and the
/// combined `{bucket_id}/{stream_id}` key (the `/` counts) at most 122 bytes.
#[tokio::test]
async fn ext_1_1_stream_ids_are_utf8_within_122_bytes_combined() {
    let node = Node::start();
    // 4 + 1 + 117 and 64 + 1 + 57 bytes: exactly 122.
    let long_bucket = "b".repeat(64);
    for path in [format!("/abcd/{}", "s".repeat(117)), format!("/{long_bucket}/{}", "s".repeat(57))] {
        node.create(&path, TEXT).await;
        node.append(&path, TEXT, "x").await;
        assert_eq!(node.read_all(&path).await.text(), "x");
    }
    // The limit counts bytes, not characters: "é" is two bytes.
    let e = "%C3%A9";
    node.create(&format!("/{long_bucket}/{}x", e.repeat(28)), TEXT).await;
    node.put(&format!("/{long_bucket}/{}", e.repeat(29))).send().await.expect_error(400, "INVALID_STREAM_ID");
    for path in [format!("/abcd/{}", "s".repeat(118)), format!("/{long_bucket}/{}", "s".repeat(58))] {
        for answer in every_method(&node, &path).await {
            if answer.what.starts_with("HEAD") {
                answer.expect_head_error(400);
            } else {
                answer.expect_error(400, "INVALID_STREAM_ID");
            }
        }
    }
    // Spaces, punctuation and non-ASCII are stream ids like any other.
    for stream in ["hello%20world", "a.b", "a$", "%F0%9F%A6%80", "x%3Fy", "%23frag"] {
        let path = format!("/demo/{stream}");
        node.create(&path, TEXT).await;
        node.append(&path, TEXT, stream).await;
        assert_eq!(node.read_all(&path).await.text(), stream, "{path}");
    }
}

/// §1.1: a stream id MUST NOT contain `/`, `\0` or `..`, MUST NOT start
/// with `$`, and `streams` is reserved.
#[tokio::test]
async fn ext_1_1_stream_ids_refuse_slash_nul_dot_dot_dollar_and_streams() {
    let node = Node::start();
    for stream in ["a%2Fb", "%2F", "a%00b", "%00", "a..b", "..x", "x..", "%24meta", "$meta", "$", "streams"] {
        let path = format!("/demo/{stream}");
        for answer in every_method(&node, &path).await {
            if answer.what.starts_with("HEAD") {
                answer.expect_head_error(400);
            } else {
                answer.expect_error(400, "INVALID_STREAM_ID");
            }
        }
    }
    // A bare `..` would be removed by a URL parser; send it as it is.
    node.raw("PUT /demo/.. HTTP/1.1\r\nContent-Length: 0").await.expect_error(400, "INVALID_STREAM_ID");
    node.raw("PUT /demo/%2E%2E HTTP/1.1\r\nContent-Length: 0").await.expect_error(400, "INVALID_STREAM_ID");
    // `.` and `$` elsewhere than first are fine, as are names that merely contain `streams`.
    for stream in ["a.b", "a$b", "streams2", "my-streams", "Streams"] {
        node.create(&format!("/demo/{stream}"), TEXT).await;
    }
}

/// §1.6: the reserved subresource names remain valid stream ids, apart
/// from `$transaction` (the `$` rule of §1.1).
#[tokio::test]
async fn ext_1_6_reserved_subresource_names_are_valid_stream_ids() {
    let node = Node::start();
    for stream in ["append-batch", "attrs", "bootstrap", "incarnation", "retention", "snapshot"] {
        let path = format!("/demo/{stream}");
        node.create(&path, TEXT).await;
        node.append(&path, TEXT, stream).await;
        assert_eq!(node.read_all(&path).await.text(), stream);
        node.head(&path).send().await.expect(200);
    }
    node.put("/demo/$transaction").send().await.expect_error(400, "INVALID_STREAM_ID");
}

/// §1.2: buckets are implicit. `PUT /{bucket_id}` validates the id and
/// changes no state; a stream create needs no bucket create.
#[tokio::test]
async fn ext_1_2_buckets_are_implicit_and_put_bucket_only_validates() {
    let node = Node::start();
    node.create("/never-made/s", TEXT).await;
    node.append("/never-made/s", TEXT, "abc").await;
    // A bucket create of a bucket that holds streams changes nothing.
    node.put("/never-made").send().await.expect(201).expect_no_header("stream-incarnation");
    assert_eq!(node.read_all("/never-made/s").await.text(), "abc");
    // And a bucket create makes no stream.
    node.put("/fresh").send().await.expect(201);
    node.head("/fresh/s").send().await.expect_head_error(404);
}

/// §1.6: any other path with three or more segments under a bucket answers
/// `404 Not Found` (`NOT_FOUND`, no such route) to every method, and
/// creates nothing.
#[tokio::test]
async fn ext_1_6_three_or_more_segment_paths_answer_404_not_found() {
    let node = Node::start();
    node.create("/demo/s", TEXT).await;
    let token = node.incarnation("/demo/s").await;
    let paths = [
        "/demo/s/extra".to_string(),
        "/demo/a/b".to_string(),
        "/demo/a/b/c".to_string(),
        "/demo/s/retention".to_string(),
        "/demo/s/bootstrap/x".to_string(),
        format!("/demo/s/snapshot/{}/x", offset(0)),
        format!("/demo/s/retention/{}/x", offset(0)),
        format!("/demo/s/incarnation/{token}"),
        format!("/demo/s/incarnation/{token}/chunk"),
        format!("/demo/s/incarnation/{token}/other/{}", offset(0)),
        format!("/demo/s/incarnation/{token}/chunk/{}/x", offset(0)),
        "/demo/s/streams".to_string(),
        "/demo/s/$transaction".to_string(),
    ];
    for path in &paths {
        for method in [Method::GET, Method::PUT, Method::POST, Method::DELETE] {
            node.request(method, path).content_type(TEXT).body("x").send().await.expect_error(404, "NOT_FOUND");
        }
        node.head(path).send().await.expect_head_error(404);
    }
    // Nothing was created and the stream is untouched.
    node.head("/demo/a").send().await.expect_head_error(404);
    assert_eq!(node.tail("/demo/s").await, offset(0));
}

/// §1.6: paths under `/__ursula/` are operational endpoints, not buckets,
/// although `__ursula` is a valid bucket id.
#[tokio::test]
async fn ext_1_6_paths_under_ursula_are_not_buckets() {
    let node = Node::start();
    node.get("/__ursula/ready").send().await.expect(200);
    // Not a stream `ready` in a bucket `__ursula`.
    node.put("/__ursula/ready").send().await.expect_error(405, "METHOD_NOT_ALLOWED");
    node.head("/__ursula/ready").send().await.expect(200);
}

/// §11 and §1.1: a path segment that is not UTF-8 once percent-decoded is
/// "an undecodable path", which §11 names as an `INVALID_REQUEST` (a
/// malformed request a route rejects before its handler); spec/44 says the
/// same of the immutable resources' segments.
#[tokio::test]
async fn ext_11_a_stream_segment_that_is_not_utf8_answers_400_invalid_request() {
    let node = Node::start();
    node.put("/demo/%FF").send().await.expect_error(400, "INVALID_REQUEST");
    node.get("/demo/a%C3?offset=-1").send().await.expect_error(400, "INVALID_REQUEST");
}
