//! `HEAD /{bucket}/{stream}` (spec/29-head-stream.md, base protocol §5.5,
//! extensions §10): stream metadata and server metadata, never a body.

use std::time::Duration;

use crate::support::{Node, offset};

const S: &str = "/demo/s";

#[tokio::test]
async fn head_of_a_stream_answers_200_with_its_metadata_and_no_body() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.append(S, "text/plain", "hello").await;
    let head = node.head(S).send().await;
    head.expect(200)
        .expect_header("content-type", "text/plain")
        .expect_header("stream-next-offset", &offset(5))
        .expect_header("cache-control", "no-store")
        .expect_header("stream-retained-offset", &offset(0))
        .expect_header("ursula-max-request-bytes", "33554432")
        .expect_no_header("stream-closed")
        .expect_no_header("stream-ttl")
        .expect_no_header("stream-expires-at")
        .expect_no_header("stream-snapshot-offset")
        .expect_no_header("stream-snapshot-digest")
        // A node without a cold backend sends no snapshot limit.
        .expect_no_header("ursula-max-snapshot-bytes");
    assert!(head.body.is_empty(), "{head:?}");
}

#[tokio::test]
async fn head_reports_the_configured_content_type_of_a_json_stream() {
    let node = Node::start();
    node.create(S, "application/json").await;
    node.append(S, "application/json", "[1,2]").await;
    node.head(S).send().await.expect(200).expect_header("content-type", "application/json");
    // While reads carry the wire representation.
    node.read_all(S).await.expect_header("content-type", "application/x-ndjson");
}

#[tokio::test]
async fn head_next_offset_is_where_the_next_append_starts() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.append(S, "text/plain", "abc").await;
    let tail = node.tail(S).await;
    node.post(S)
        .content_type("text/plain")
        .producer("p", 0, 0)
        .body("d")
        .send()
        .await
        .expect(200)
        .expect_header("stream-offset", &tail);
}

#[tokio::test]
async fn head_says_stream_closed_only_once_the_stream_is_closed() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.head(S).send().await.expect(200).expect_no_header("stream-closed");
    node.close(S).await;
    node.head(S).send().await.expect(200).expect_header("stream-closed", "true");
}

#[tokio::test]
async fn head_reports_the_configured_ttl_and_expiry() {
    let node = Node::start();
    node.put("/demo/ttl").header("stream-ttl", "3600").send().await.expect(201);
    node.head("/demo/ttl")
        .send()
        .await
        .expect(200)
        .expect_header("stream-ttl", "3600")
        .expect_no_header("stream-expires-at");
    let at = "2099-01-01T00:00:00Z";
    node.put("/demo/at").header("stream-expires-at", at).send().await.expect(201);
    node.head("/demo/at")
        .send()
        .await
        .expect(200)
        .expect_header("stream-expires-at", at)
        .expect_no_header("stream-ttl");
}

#[tokio::test]
async fn head_carries_ursula_protocol_and_cluster_id() {
    // Extensions §10: on every answer to a HEAD, 404 included.
    let node = Node::start();
    node.create(S, "text/plain").await;
    for (path, status) in [(S, 200), ("/demo/missing", 404)] {
        let head = node.head(path).send().await;
        head.expect(status).expect_header("ursula-protocol", "2");
        let id = head.must("ursula-cluster-id");
        assert!(
            (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "Ursula-Cluster-Id is 1 to 64 of [A-Za-z0-9._-]:\n{head:?}"
        );
    }
    // The id names the deployment: the same on every answer.
    let a = node.head(S).send().await;
    let b = node.head("/demo/missing").send().await;
    assert_eq!(a.header("ursula-cluster-id"), b.header("ursula-cluster-id"));
}

#[tokio::test]
async fn head_of_a_missing_stream_answers_404_without_a_body() {
    let node = Node::start();
    node.head("/demo/missing").send().await.expect_head_error(404);
}

#[tokio::test]
async fn head_of_an_expired_stream_answers_404() {
    let node = Node::start();
    node.put(S).header("stream-ttl", "1").send().await.expect(201);
    // HEAD does not renew the TTL, so polling it cannot keep the stream alive.
    node.pass_time(Duration::from_millis(2500)).await;
    node.head(S).send().await.expect_head_error(404);
}
