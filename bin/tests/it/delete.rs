//! `DELETE /{bucket}/{stream}` (spec/33-delete-stream.md, base protocol
//! §5.4), and what a deleted or expired stream answers afterwards.

use std::time::Duration;

use crate::support::{Node, offset};

const S: &str = "/demo/s";

#[tokio::test]
async fn delete_of_a_stream_answers_204_without_a_body() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.append(S, "text/plain", "abc").await;
    let answer = node.delete(S).send().await;
    answer.expect(204);
    assert!(answer.body.is_empty(), "{answer:?}");
}

#[tokio::test]
async fn delete_of_a_missing_stream_answers_404() {
    let node = Node::start();
    node.delete("/demo/missing").send().await.expect_error(404, "BUCKET_NOT_FOUND");
    node.create("/demo/other", "text/plain").await;
    node.delete("/demo/missing").send().await.expect_error(404, "STREAM_NOT_FOUND");
}

#[tokio::test]
async fn deleted_stream_answers_404_to_every_operation() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.append(S, "text/plain", "abc").await;
    node.delete(S).send().await.expect(204);
    node.get(&format!("{S}?offset=-1")).send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.head(S).send().await.expect_head_error(404);
    node.post(S).content_type("text/plain").body("x").send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.post(S).closed().send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.delete(S).send().await.expect_error(404, "STREAM_NOT_FOUND");
}

#[tokio::test]
async fn delete_leaves_other_streams_alone() {
    let node = Node::start();
    node.create("/demo/one", "text/plain").await;
    node.create("/demo/two", "text/plain").await;
    node.create("/other/one", "text/plain").await;
    node.delete("/demo/one").send().await.expect(204);
    node.head("/demo/two").send().await.expect(200);
    node.head("/other/one").send().await.expect(200);
}

#[tokio::test]
async fn create_after_delete_makes_a_new_empty_stream_without_old_state() {
    let node = Node::start();
    node.create(S, "text/plain").await;
    node.post(S).content_type("text/plain").header("stream-seq", "9").body("abc").send().await.expect(204);
    node.post(S).content_type("text/plain").producer("p", 4, 0).body("d").send().await.expect(200);
    node.close(S).await;
    node.delete(S).send().await.expect(204);

    // Another content type is fine: it is a new stream.
    node.put(S)
        .content_type("application/json")
        .send()
        .await
        .expect(201)
        .expect_header("stream-next-offset", &offset(0));
    let read = node.read_all(S).await;
    assert!(read.body.is_empty(), "{read:?}");
    read.expect_no_header("stream-closed");
    // No stored Stream-Seq...
    node.post(S).content_type("application/json").header("stream-seq", "1").body("1").send().await.expect(204);
    // ...and no producer state: epoch 0 claims again instead of being stale.
    node.post(S).content_type("application/json").producer("p", 0, 0).body("2").send().await.expect(200);
}

#[tokio::test]
async fn long_poll_waiting_on_a_stream_ends_when_it_is_deleted() {
    // Base protocol §5.4: in-flight reads may terminate with a 404.
    let node = Node::start();
    node.create(S, "text/plain").await;
    let poll = node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=60000", offset(0))).send();
    let delete = async {
        node.wait_live_readers(1).await;
        node.delete(S).send().await.expect(204);
    };
    let (read, ()) = tokio::join!(poll, delete);
    // The poll was waiting when the stream went: it ends with the stream.
    read.expect_error(404, "STREAM_NOT_FOUND");
}

#[tokio::test]
async fn expired_stream_answers_404_to_delete_and_every_other_operation() {
    let node = Node::start();
    for path in [S, "/demo/t"] {
        node.put(path).content_type("text/plain").header("stream-ttl", "1").send().await.expect(201);
    }
    node.pass_time(Duration::from_millis(2500)).await;
    node.delete(S).send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.get("/demo/t?offset=-1").send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.post("/demo/t").content_type("text/plain").body("x").send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.head("/demo/t").send().await.expect_head_error(404);
    // An expired stream's URL can be created again.
    node.create("/demo/t", "text/plain").await;
}
