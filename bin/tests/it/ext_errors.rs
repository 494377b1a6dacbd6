//! Error bodies of the extensions' refusals (extensions §11): every `4xx`
//! and `5xx` row of §2-§5 and spec/30, 31, 32 and 44 carries `Content-Type:
//! application/json` and `{"error":{"code","message"}}` with the code of
//! the §11 table, keeps its typed headers beside the body, names no
//! internal address, and an answer to `HEAD` carries the content type and
//! no body. The base protocol's rows are in `errors`.
//!
//! Rows checked in their own modules instead: `429 PRODUCER_LIMIT` (needs
//! 4,096 producers: ext_write_keys), and the rows where this node answers
//! another status or code than §11 names, so that they fail on their own:
//! `405 UNSUPPORTED` for the removed latest-snapshot path (ext_snapshots)
//! and `400 INVALID_REQUEST` for an undecodable path (ext_ids,
//! ext_immutable).

use reqwest::Method;

use crate::support::{Answer, Checks, MAX_REQUEST_BYTES, Node, blake3_hex, offset};

const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const FOREIGN: &str = "4503599627370496";

/// A typed header an answer must carry beside its body.
type Typed = Option<(&'static str, String)>;
/// One refusal: its status, its code, a typed header, and the answer.
type Row = (u16, &'static str, Typed, Answer);

/// Streams in the states the refusals need: `/demo/t` (text, `hello
/// world`, snapshot at 6, retained from 6), `/demo/j` (JSON, two
/// messages), and `/demo/p` with producer `p` at epoch 2 (epoch 1 closed by
/// its claim, epoch 0 stale).
async fn node_with_fixtures() -> (Node, String) {
    let node = Node::start();
    node.create("/demo/t", TEXT).await;
    node.append("/demo/t", TEXT, "hello world").await;
    node.publish("/demo/t", &offset(6), TEXT, "hello").await;
    node.retain("/demo/t", &offset(6)).await;
    node.create("/demo/j", JSON).await;
    node.append("/demo/j", JSON, "[1, 2]").await;
    node.create("/demo/p", TEXT).await;
    for epoch in 0..3 {
        node.post("/demo/p").content_type(TEXT).producer("p", epoch, 0).body("x").send().await.expect(200);
    }
    let token = node.incarnation("/demo/t").await;
    (node, token)
}

/// §11: each refusal's status and code, with its typed headers (a `413`
/// names its limit, a producer refusal carries `Producer-Outcome`, a `412`
/// the current token, a `416` its `Content-Range`), and a message that
/// names no node address.
#[tokio::test]
async fn ext_11_every_extension_refusal_carries_the_json_error_body() {
    let (node, t) = node_with_fixtures().await;
    let text = |req: crate::support::Req| req.content_type(TEXT);
    let snap = |at: u64| format!("/demo/t/snapshot/{}", offset(at));
    let chunk = |token: &str, at: u64| format!("/demo/t/incarnation/{token}/chunk/{}", offset(at));
    let isnap = |token: &str, at: u64| format!("/demo/t/incarnation/{token}/snapshot/{}", offset(at));
    let rows: Vec<Row> = vec![
        // 400
        (400, "INVALID_HEADER", None, node.get(&snap(6)).incarnation("nope").send().await),
        (400, "INVALID_HEADER", None, node.get("/demo/t/bootstrap").incarnation("1").send().await),
        (
            400,
            "INVALID_HEADER",
            None,
            text(node.post("/demo/p")).producer("p", 2, 1).header("producer-digest", "XY").body("x").send().await,
        ),
        (400, "INVALID_OFFSET", None, node.put("/demo/t/snapshot/latest").send().await),
        (400, "INVALID_OFFSET", None, node.get("/demo/t/snapshot/12").send().await),
        (400, "INVALID_OFFSET", None, node.put("/demo/t/retention/-1").send().await),
        (400, "INVALID_QUERY", None, node.get("/demo/t/bootstrap?live=sse").send().await),
        (400, "INVALID_QUERY", None, node.get("/demo/t?offset=now&consistency=leader&live=sse").send().await),
        (400, "QUERY_NOT_ACCEPTED", None, node.get(&format!("{}?a=1", chunk(&t, 6))).send().await),
        (400, "QUERY_NOT_ACCEPTED", None, node.get(&format!("{}?a=1", isnap(&t, 6))).send().await),
        (400, "INVALID_RESOURCE", None, node.get(&chunk("abc", 6)).send().await),
        (400, "INVALID_RESOURCE", None, node.get(&format!("/demo/t/incarnation/{t}/snapshot/6")).send().await),
        (400, "UNSUPPORTED", None, node.get(&format!("{}?incarnation={t}", snap(6))).send().await),
        (400, "UNSUPPORTED", None, node.get("/demo/t?offset=-1&aligned=true").send().await),
        (
            400,
            "PRODUCER_DIGEST_MISMATCH",
            None,
            text(node.post("/demo/p"))
                .producer("p", 2, 1)
                .header("producer-digest", blake3_hex(b"y"))
                .body("x")
                .send()
                .await,
        ),
        (400, "NOT_JSON_BOUNDARY", None, node.put(&format!("/demo/j/snapshot/{}", offset(1))).send().await),
        (400, "NOT_JSON_BOUNDARY", None, node.put(&format!("/demo/j/retention/{}", offset(1))).send().await),
        (400, "INVALID_RETENTION", None, node.put(&format!("/demo/t/retention/{}", offset(9))).send().await),
        (400, "INVALID_RETENTION", None, node.put(&format!("/demo/j/retention/{}", offset(2))).send().await),
        (400, "INVALID_BUCKET_ID", None, node.get("/Demo/t/bootstrap").send().await),
        (400, "INVALID_STREAM_ID", None, node.get(&format!("/demo/%24t/snapshot/{}", offset(0))).send().await),
        // 403
        (
            403,
            "PRODUCER_EPOCH_CLOSED",
            Some(("producer-outcome", "epoch-closed;by=claim".into())),
            text(node.post("/demo/p")).producer("p", 1, 1).body("x").send().await,
        ),
        (
            403,
            "PRODUCER_EPOCH_STALE",
            Some(("producer-outcome", "stale-epoch".into())),
            text(node.post("/demo/p")).producer("p", 0, 1).body("x").send().await,
        ),
        (
            403,
            "PRODUCER_KEY_CONFLICT",
            Some(("producer-outcome", "key-conflict".into())),
            text(node.post("/demo/p"))
                .producer("p", 2, 0)
                .header("producer-digest", blake3_hex(b"x"))
                .body("x")
                .send()
                .await,
        ),
        // 404
        (404, "STREAM_NOT_FOUND", None, node.get("/demo/missing/bootstrap").send().await),
        (404, "STREAM_NOT_FOUND", None, node.put(&format!("/demo/missing/snapshot/{}", offset(0))).send().await),
        (404, "STREAM_NOT_FOUND", None, node.put(&format!("/demo/missing/retention/{}", offset(0))).send().await),
        (
            404,
            "STREAM_NOT_FOUND",
            None,
            node.get(&format!("/demo/missing/incarnation/{t}/chunk/{}", offset(0))).send().await,
        ),
        (404, "SNAPSHOT_NOT_FOUND", Some(("stream-incarnation", t.clone())), node.get(&snap(7)).send().await),
        (404, "SNAPSHOT_NOT_FOUND", Some(("stream-incarnation", t.clone())), node.get(&isnap(&t, 7)).send().await),
        (404, "NOT_FOUND", None, node.get("/demo/t/snapshot/x/y").send().await),
        (404, "NOT_FOUND", None, node.get(&format!("/demo/t/incarnation/{t}/other/{}", offset(6))).send().await),
        // 405
        (405, "METHOD_NOT_ALLOWED", None, node.request(Method::POST, &chunk(&t, 6)).send().await),
        (405, "METHOD_NOT_ALLOWED", None, node.get(&format!("/demo/t/retention/{}", offset(6))).send().await),
        (405, "METHOD_NOT_ALLOWED", None, node.delete(&snap(6)).send().await),
        // 409
        (
            409,
            "SNAPSHOT_CONFLICT",
            Some(("stream-snapshot-offset", offset(6))),
            text(node.put(&snap(6))).body("other").send().await,
        ),
        (409, "SNAPSHOT_CONFLICT", None, text(node.put(&snap(99))).body("beyond").send().await),
        (
            409,
            "PRODUCER_SEQ_CONFLICT",
            Some(("producer-expected-seq", "0".into())),
            text(node.post("/demo/p")).producer("new", 0, 5).body("x").send().await,
        ),
        // 410
        (
            410,
            "STREAM_GONE",
            Some(("stream-next-offset", offset(6))),
            node.get(&format!("/demo/t?offset={}", offset(2))).send().await,
        ),
        (410, "STREAM_GONE", Some(("stream-incarnation", t.clone())), node.get(&chunk(&t, 2)).send().await),
        (410, "STREAM_GONE", None, text(node.put(&snap(2))).body("old").send().await),
        // 412
        (
            412,
            "INCARNATION_MISMATCH",
            Some(("stream-incarnation", t.clone())),
            node.get("/demo/t/bootstrap").incarnation(FOREIGN).send().await,
        ),
        (
            412,
            "INCARNATION_MISMATCH",
            Some(("stream-incarnation", t.clone())),
            node.put(&format!("/demo/t/retention/{}", offset(6))).incarnation(FOREIGN).send().await,
        ),
        (
            412,
            "INCARNATION_MISMATCH",
            Some(("stream-incarnation", t.clone())),
            node.get(&chunk(FOREIGN, 6)).send().await,
        ),
        (412, "INCARNATION_MISMATCH", None, node.put("/demo/new").incarnation(FOREIGN).send().await),
        // 413
        (
            413,
            "REQUEST_TOO_LARGE",
            Some(("ursula-max-request-bytes", "33554432".into())),
            node.raw(&format!("PUT {} HTTP/1.1\r\nContent-Length: {}", snap(11), MAX_REQUEST_BYTES + 1)).await,
        ),
        // 416
        (416, "OFFSET_OUT_OF_RANGE", Some(("stream-incarnation", t.clone())), node.get(&chunk(&t, 50)).send().await),
        (
            416,
            "RANGE_NOT_SATISFIABLE",
            Some(("content-range", "bytes */5".into())),
            node.get(&snap(6)).header("range", "bytes=5-").send().await,
        ),
        (
            416,
            "RANGE_NOT_SATISFIABLE",
            Some(("content-range", "bytes */5".into())),
            node.get(&isnap(&t, 6)).header("range", "bytes=9-").send().await,
        ),
        // 501
        (501, "NO_COLD_STORE", None, node.post(&format!("{}/parts", snap(6))).body("part").send().await),
        (501, "NO_COLD_STORE", None, node.delete("/demo/t/snapshot/parts").send().await),
        (
            501,
            "NO_COLD_STORE",
            None,
            node.put(&snap(11)).header("stream-snapshot-parts", "1").body("id\n").send().await,
        ),
    ];
    let port = node.base().rsplit(':').next().unwrap_or_default().to_string();
    let mut checks = Checks::new();
    for (status, code, header, answer) in &rows {
        checks.run(format!("{status} {code} ({})", answer.what), || {
            answer.expect_error(*status, code);
            if let Some((name, value)) = header {
                answer.expect_header(name, value);
            }
            let message = answer.json()["error"]["message"].as_str().unwrap_or_default().to_string();
            assert!(
                !message.contains("127.0.0.1") && !message.contains(&port),
                "the message names the node:\n{answer:?}"
            );
        });
    }
    checks.finish();
}

/// §11: "An answer to `HEAD` carries the `Content-Type` and no body", for
/// the refusals of the extension routes that define `HEAD`.
#[tokio::test]
async fn ext_11_head_errors_carry_the_content_type_and_no_body() {
    let (node, t) = node_with_fixtures().await;
    let rows: Vec<(u16, Answer)> = vec![
        (400, node.head("/demo/t").incarnation("nope").send().await),
        (412, node.head("/demo/t").incarnation(FOREIGN).send().await),
        (404, node.head("/demo/missing").send().await),
        (404, node.head("/demo/t/extra").send().await),
        (400, node.head("/demo/t/snapshot/nope").send().await),
        (404, node.head(&format!("/demo/t/snapshot/{}", offset(7))).send().await),
        (412, node.head(&format!("/demo/t/snapshot/{}", offset(6))).incarnation(FOREIGN).send().await),
        (416, node.head(&format!("/demo/t/snapshot/{}", offset(6))).header("range", "bytes=5-").send().await),
        (400, node.head(&format!("/demo/t/incarnation/{t}/chunk/{}?q", offset(6))).send().await),
        (400, node.head(&format!("/demo/t/incarnation/x/chunk/{}", offset(6))).send().await),
        (404, node.head(&format!("/demo/missing/incarnation/{t}/chunk/{}", offset(0))).send().await),
        (410, node.head(&format!("/demo/t/incarnation/{t}/chunk/{}", offset(0))).send().await),
        (412, node.head(&format!("/demo/t/incarnation/{FOREIGN}/chunk/{}", offset(6))).send().await),
        (416, node.head(&format!("/demo/t/incarnation/{t}/chunk/{}", offset(50))).send().await),
        (404, node.head(&format!("/demo/t/incarnation/{t}/snapshot/{}", offset(7))).send().await),
        (412, node.head(&format!("/demo/t/incarnation/{FOREIGN}/snapshot/{}", offset(6))).send().await),
        (405, node.head(&format!("/demo/t/retention/{}", offset(6))).send().await),
        (405, node.head("/demo/t/bootstrap").send().await),
    ];
    let mut checks = Checks::new();
    for (status, answer) in &rows {
        checks.run(format!("{status} ({})", answer.what), || {
            answer.expect_head_error(*status);
        });
    }
    checks.finish();
}

/// §11: a live SSE read that ends in error sends an `error` event whose
/// `data` is the error body on one line.
#[tokio::test]
async fn ext_11_an_sse_read_that_ends_in_error_sends_the_body_as_an_error_event() {
    let node = Node::start();
    node.create("/demo/s", TEXT).await;
    let mut sse = node.sse("/demo/s?offset=-1&live=sse").await;
    sse.until_control().await;
    node.delete("/demo/s").send().await.expect(204);
    let events = sse.until(|e| e.is("error")).await;
    let error = events.last().map(|e| e.json()).unwrap_or_default();
    assert!(!events.last().is_some_and(|e| e.data.contains('\n')), "one line: {events:#?}");
    assert_eq!(error["error"]["code"], "STREAM_NOT_FOUND", "{error}");
    assert!(error["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{error}");
    sse.expect_end().await;
}

/// A stream name of `bucket` whose group differs from `other`'s for every
/// group count the suites run with, so a bucket's existence is decided
/// across groups.
fn name_in_another_group(bucket: &str, other: &str) -> String {
    use ursula_stream::StreamKey;
    use ursula_stream::routing::group_of;
    let key = |s: &str| StreamKey::parse(bucket, s).expect("a valid key");
    (0..)
        .map(|i| format!("a{i}"))
        .find(|s| [4, 32].iter().all(|&n| group_of(&key(s), n) != group_of(&key(other), n)))
        .expect("a name in another group")
}

/// §11: a stream in a bucket nothing ever created answers `404
/// BUCKET_NOT_FOUND` on every stream route; once a stream was created in
/// the bucket (in any group), its missing streams answer
/// `STREAM_NOT_FOUND`, and still do after that stream is deleted.
#[tokio::test]
async fn ext_11_a_bucket_nothing_created_answers_404_bucket_not_found() {
    let node = Node::start();
    let other = format!("/fresh/{}", name_in_another_group("fresh", "s"));
    let codes = |expected: &'static str| {
        let node = &node;
        async move {
            let mut checks = Checks::new();
            let answers = [
                ("GET", node.get("/fresh/s?offset=-1").send().await),
                ("GET long-poll", node.get("/fresh/s?offset=-1&live=long-poll&timeout_ms=1").send().await),
                ("POST", node.post("/fresh/s").content_type(TEXT).body("x").send().await),
                ("DELETE", node.delete("/fresh/s").send().await),
                ("bootstrap", node.get("/fresh/s/bootstrap").send().await),
                ("snapshot read", node.get(&format!("/fresh/s/snapshot/{}", offset(0))).send().await),
                ("snapshot publish", node.put(&format!("/fresh/s/snapshot/{}", offset(0))).body("x").send().await),
            ];
            for (label, answer) in &answers {
                checks.run(label, || {
                    answer.expect_error(404, expected);
                });
            }
            checks.finish();
            node.head("/fresh/s").send().await.expect_head_error(404);
        }
    };
    codes("BUCKET_NOT_FOUND").await;
    node.create(&other, TEXT).await;
    codes("STREAM_NOT_FOUND").await;
    node.delete(&other).send().await.expect(204);
    codes("STREAM_NOT_FOUND").await;
    // Another bucket is untouched.
    node.get("/unused/s?offset=-1").send().await.expect_error(404, "BUCKET_NOT_FOUND");
}
