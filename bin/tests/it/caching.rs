//! No answer of a node may be stored by a shared cache (extensions §4.3
//! note, spec/44, the 0.8 release notes): every answer carries
//! `Cache-Control: no-store`, SSE `no-cache, no-store`. Relaxing it is the
//! layer in front's decision (a gateway's `--immutable-cache-control` on
//! marked immutable answers, tested with the gateway).

use reqwest::Method;

use crate::support::{Checks, Node, offset};

const S: &str = "/demo/cached";
const TEXT: &str = "text/plain";

#[tokio::test]
async fn every_kind_of_answer_is_no_store() {
    let node = Node::start();
    let mut answers = Vec::new();
    answers.push(("bucket create 201", node.put("/demo").send().await));
    answers.push(("stream create 201", node.put(S).content_type(TEXT).send().await));
    answers.push(("repeat create 200", node.put(S).content_type(TEXT).send().await));
    answers.push(("append 204", node.post(S).content_type(TEXT).body("hello").send().await));
    answers.push(("producer append 200", node.post(S).content_type(TEXT).producer("p", 0, 0).body("!").send().await));
    answers.push(("catch-up read 200", node.get(&format!("{S}?offset=-1")).send().await));
    answers.push(("read from an offset 200", node.get(&format!("{S}?offset={}", offset(2))).send().await));
    answers.push(("read at the tail 200", node.get(&format!("{S}?offset={}", offset(6))).send().await));
    let tag = node.get(&format!("{S}?offset=-1")).send().await.must("etag").to_string();
    answers
        .push(("revalidated read 304", node.get(&format!("{S}?offset=-1")).header("if-none-match", &tag).send().await));
    answers.push((
        "long-poll timeout 204",
        node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=10", offset(6))).send().await,
    ));
    answers.push(("HEAD 200", node.head(S).send().await));
    let published = node.put(&format!("{S}/snapshot/{}", offset(6))).content_type(TEXT).body("state").send().await;
    answers.push(("snapshot publish 204", published));
    answers.push(("snapshot read 200", node.get(&format!("{S}/snapshot/{}", offset(6))).send().await));
    answers.push(("bootstrap 200", node.get(&format!("{S}/bootstrap")).send().await));
    let token = node.incarnation(S).await;
    let chunk = format!("{S}/incarnation/{token}/chunk/{}", offset(0));
    answers.push(("immutable chunk 200", node.get(&chunk).send().await));
    answers.push(("retention 204", node.put(&format!("{S}/retention/{}", offset(2))).send().await));
    answers.push(("missing stream 404", node.get("/demo/missing?offset=-1").send().await));
    answers.push(("bad offset 400", node.get(&format!("{S}?offset=xyz")).send().await));
    answers.push(("conflict 409", node.put(S).content_type("application/json").send().await));
    answers.push(("gone 410", node.get(&format!("{S}?offset={}", offset(0))).send().await));
    answers.push(("beyond the tail 416", node.get(&format!("{S}?offset={}", offset(99))).send().await));
    answers.push(("method 405", node.request(Method::PATCH, S).send().await));
    answers.push(("preflight", node.request(Method::OPTIONS, S).header("origin", "https://app.example").send().await));
    answers.push(("metrics", node.get("/__ursula/metrics").send().await));
    answers.push(("ready", node.get("/__ursula/ready").send().await));
    answers.push(("delete 204", node.delete(S).send().await));
    answers.push(("HEAD 404", node.head(S).send().await));

    let mut checks = Checks::new();
    for (what, answer) in &answers {
        checks.run(what, || {
            // A label that ends with a status names the answer it must be.
            if let Some(status) = what.rsplit(' ').next().and_then(|s| s.parse::<u16>().ok()) {
                answer.expect(status);
            }
            answer.expect_header("cache-control", "no-store");
        });
    }
    checks.finish();
}

#[tokio::test]
async fn an_sse_answer_is_no_cache_and_no_store() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello").await;
    let sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.status.as_u16(), 200, "{:?}", sse.headers);
    let cache = sse.headers.get("cache-control").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert_eq!(cache, "no-cache, no-store");
}
