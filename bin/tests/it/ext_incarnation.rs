//! Stream incarnations (extensions §2.4, spec/18 "Guarding against a
//! recreated stream"): the `Stream-Incarnation` token on every answer the
//! spec lists, its change on delete and recreate, and the request
//! precondition with its `412`, its `400` and its evaluation order.
//!
//! Not covered on this single node: `Stream-Previous-Incarnation` and
//! `Stream-Inherited-Offset` (no history rewrites without a restore), and a
//! write accepted before a recreate but applied after it (no gap between
//! accepting and applying to drive).

use std::time::{Duration, Instant};

use crate::support::{Answer, Checks, Node, Req, Sse, offset};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";

/// Malformed `Stream-Incarnation` values: not a token the server could have
/// issued (tokens are canonical decimals in [2^52, 2^53)).
const MALFORMED: [&str; 7] =
    ["", "abc", "0", "1", "04503599627370496", "9007199254740992", "4503599627370496 4503599627370497"];

/// Builds one request of a route, afresh for every value tried.
type MakeReq<'a> = Box<dyn Fn() -> Req + 'a>;

fn expect_token(answer: &Answer, status: u16, token: &str) {
    answer.expect(status).expect_header("stream-incarnation", token);
}

/// A node whose stream `S` holds `hello` and went through one delete and
/// recreate: returns the node, the retired token and the current one.
async fn recreated() -> (Node, String, String) {
    let node = Node::start();
    node.create(S, TEXT).await;
    let (old, new) = node.recreate(S, TEXT).await;
    node.append(S, TEXT, "hello").await;
    (node, old, new)
}

/// §2.4 "`Stream-Incarnation` on responses": create (201 and 200), append
/// and close, every read (catch-up, the long-poll 204, the SSE response),
/// HEAD, bootstrap, snapshot publish and read, retention, and the
/// resources of §4, all with the same token.
#[tokio::test]
async fn ext_2_4_stream_incarnation_is_on_every_successful_answer_that_addresses_a_stream() {
    let node = Node::start();
    let created = node.create(S, TEXT).await;
    let token = created.must("stream-incarnation").to_string();
    let mut checks = Checks::new();
    let mut row = |label: &str, answer: Answer, status: u16| {
        checks.run(label, || expect_token(&answer, status, &token));
    };
    row("create 200", node.put(S).content_type(TEXT).send().await, 200);
    row("append 204", node.post(S).content_type(TEXT).body("hello").send().await, 204);
    row("producer append 200", node.post(S).content_type(TEXT).producer("p", 0, 0).body(" w").send().await, 200);
    row("producer repeat 204", node.post(S).content_type(TEXT).producer("p", 0, 0).body(" w").send().await, 204);
    let tail = node.tail(S).await;
    row("catch-up read 200", node.get(&format!("{S}?offset=-1")).send().await, 200);
    row("catch-up read at the tail 200", node.get(&format!("{S}?offset={tail}")).send().await, 200);
    row("catch-up read offset=now 200", node.get(&format!("{S}?offset=now")).send().await, 200);
    row("long-poll 200", node.get(&format!("{S}?offset=-1&live=long-poll")).send().await, 200);
    row("long-poll 204", node.get(&format!("{S}?offset={tail}&live=long-poll&timeout_ms=10")).send().await, 204);
    row("HEAD 200", node.head(S).send().await, 200);
    let at = offset(5);
    row(
        "snapshot publish 204",
        node.put(&format!("{S}/snapshot/{at}")).content_type(TEXT).body("hello").send().await,
        204,
    );
    row(
        "snapshot publish repeat 204",
        node.put(&format!("{S}/snapshot/{at}")).content_type(TEXT).body("hello").send().await,
        204,
    );
    row("snapshot read 200", node.get(&format!("{S}/snapshot/{at}")).send().await, 200);
    row("snapshot read 206", node.get(&format!("{S}/snapshot/{at}")).header("range", "bytes=0-1").send().await, 206);
    row("snapshot HEAD 200", node.head(&format!("{S}/snapshot/{at}")).send().await, 200);
    row("retention 204", node.put(&format!("{S}/retention/{at}")).send().await, 204);
    row("bootstrap 200", node.get(&format!("{S}/bootstrap")).send().await, 200);
    row("chunk 200", node.get(&format!("{S}/incarnation/{token}/chunk/{at}")).send().await, 200);
    row("chunk HEAD 200", node.head(&format!("{S}/incarnation/{token}/chunk/{at}")).send().await, 200);
    row("immutable snapshot 200", node.get(&format!("{S}/incarnation/{token}/snapshot/{at}")).send().await, 200);
    row("close 204", node.post(S).closed().send().await, 204);
    row("close repeat 204", node.post(S).closed().send().await, 204);
    let sse = node.sse(&format!("{S}?offset={}&live=sse", offset(7))).await;
    checks.run("SSE 200", || {
        assert_eq!(sse.status.as_u16(), 200, "SSE status");
        assert_eq!(sse.header("stream-incarnation"), Some(token.as_str()), "SSE Stream-Incarnation");
    });
    checks.finish();
}

/// §2.4: the token MUST also name the answering stream on every `410` and
/// `416` of a read and on the `404` of a snapshot read when the stream
/// exists; it is absent when the stream does not exist.
#[tokio::test]
async fn ext_2_4_stream_incarnation_is_on_410_416_and_the_snapshot_404_and_absent_for_a_missing_stream() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "hello world").await;
    let token = node.incarnation(S).await;
    node.publish(S, &offset(5), TEXT, "hello").await;
    node.retain(S, &offset(5)).await;
    let mut checks = Checks::new();
    let mut row = |label: &str, answer: Answer, status: u16, code: &str| {
        checks.run(label, || {
            answer.expect_error(status, code).expect_header("stream-incarnation", &token);
        });
    };
    let below = offset(2);
    let beyond = offset(99);
    row("catch-up 410", node.get(&format!("{S}?offset={below}")).send().await, 410, "STREAM_GONE");
    row("catch-up offset=-1 410", node.get(&format!("{S}?offset=-1")).send().await, 410, "STREAM_GONE");
    row("long-poll 410", node.get(&format!("{S}?offset={below}&live=long-poll")).send().await, 410, "STREAM_GONE");
    row("SSE 410", node.get(&format!("{S}?offset={below}&live=sse")).send().await, 410, "STREAM_GONE");
    row("catch-up 416", node.get(&format!("{S}?offset={beyond}")).send().await, 416, "OFFSET_OUT_OF_RANGE");
    row(
        "long-poll 416",
        node.get(&format!("{S}?offset={beyond}&live=long-poll")).send().await,
        416,
        "OFFSET_OUT_OF_RANGE",
    );
    row(
        "snapshot range 416",
        node.get(&format!("{S}/snapshot/{}", offset(5))).header("range", "bytes=5-").send().await,
        416,
        "RANGE_NOT_SATISFIABLE",
    );
    row("snapshot 404", node.get(&format!("{S}/snapshot/{}", offset(4))).send().await, 404, "SNAPSHOT_NOT_FOUND");
    row("chunk 410", node.get(&format!("{S}/incarnation/{token}/chunk/{below}")).send().await, 410, "STREAM_GONE");
    row(
        "chunk 416",
        node.get(&format!("{S}/incarnation/{token}/chunk/{beyond}")).send().await,
        416,
        "OFFSET_OUT_OF_RANGE",
    );
    row(
        "immutable snapshot 404",
        node.get(&format!("{S}/incarnation/{token}/snapshot/{}", offset(4))).send().await,
        404,
        "SNAPSHOT_NOT_FOUND",
    );
    let missing = "/demo/missing";
    for (label, answer) in [
        ("GET", node.get(&format!("{missing}?offset=-1")).send().await),
        ("POST", node.post(missing).content_type(TEXT).body("x").send().await),
        ("HEAD", node.head(missing).send().await),
        ("DELETE", node.delete(missing).send().await),
        ("snapshot read", node.get(&format!("{missing}/snapshot/{}", offset(0))).send().await),
        ("bootstrap", node.get(&format!("{missing}/bootstrap")).send().await),
        ("chunk", node.get(&format!("{missing}/incarnation/{token}/chunk/{}", offset(0))).send().await),
    ] {
        checks.run(format!("missing stream {label} 404"), || {
            answer.expect(404).expect_no_header("stream-incarnation");
        });
    }
    checks.finish();
}

/// §2.4: the token MUST change when the stream is deleted and recreated
/// (including by TTL expiry and a later create), and MUST NOT change
/// otherwise: not by appends, closing, snapshots, retention or a repeated
/// create.
#[tokio::test]
async fn ext_2_4_stream_incarnation_changes_on_recreate_and_only_then() {
    let node = Node::start();
    let first = node.create(S, TEXT).await.must("stream-incarnation").to_string();
    node.append(S, TEXT, "hello").await;
    node.publish(S, &offset(5), "application/octet-stream", "snap").await;
    node.retain(S, &offset(5)).await;
    node.put(S).content_type(TEXT).send().await.expect(200).expect_header("stream-incarnation", &first);
    node.close(S).await;
    assert_eq!(node.incarnation(S).await, first, "nothing but a recreate changes the token");

    node.delete(S).send().await.expect(204);
    let second = node.create(S, TEXT).await.must("stream-incarnation").to_string();
    node.delete(S).send().await.expect(204);
    let third = node.create(S, TEXT).await.must("stream-incarnation").to_string();
    assert!(first != second && second != third && first != third, "every recreate: {first} {second} {third}");

    // A stream that expired and was created again is another incarnation.
    let ttl = "/demo/ttl";
    node.put(ttl).header("stream-ttl", "1").send().await.expect(201);
    let before = node.incarnation(ttl).await;
    node.pass_time(Duration::from_millis(2500)).await;
    let after = node.put(ttl).header("stream-ttl", "1").send().await;
    after.expect(201);
    assert_ne!(after.must("stream-incarnation"), before, "a create after expiry is a new incarnation");
}

/// §2.4 "Present": a matching token lets every request that addresses a
/// stream behave as without it.
#[tokio::test]
async fn ext_2_4_a_matching_precondition_changes_nothing() {
    let (node, _old, token) = recreated().await;
    let t = token.as_str();
    node.put(S).content_type(TEXT).incarnation(t).send().await.expect(200);
    node.post(S).content_type(TEXT).incarnation(t).body(" world").send().await.expect(204);
    node.post(S).content_type(TEXT).incarnation(t).producer("p", 0, 0).body("!").send().await.expect(200);
    node.post(S).content_type(TEXT).incarnation(t).producer("p", 0, 0).body("!").send().await.expect(204);
    let read = node.get(&format!("{S}?offset=-1")).incarnation(t).send().await;
    assert_eq!(read.expect(200).text(), "hello world!");
    node.get(&format!("{S}?offset=-1&live=long-poll")).incarnation(t).send().await.expect(200);
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.status.as_u16(), 200);
    sse.until_control().await;
    node.head(S).incarnation(t).send().await.expect(200);
    let at = offset(5);
    node.put(&format!("{S}/snapshot/{at}")).incarnation(t).body("snap").send().await.expect(204);
    node.get(&format!("{S}/snapshot/{at}")).incarnation(t).send().await.expect(200);
    node.put(&format!("{S}/retention/{at}")).incarnation(t).send().await.expect(204);
    node.get(&format!("{S}/bootstrap")).incarnation(t).send().await.expect(200);
    node.post(S).closed().incarnation(t).send().await.expect(204);
    node.delete(S).incarnation(t).send().await.expect(204);
    node.head(S).send().await.expect_head_error(404);
}

/// §2.4 "Mismatch": `412 Precondition Failed` with `INCARNATION_MISMATCH`
/// and the current `Stream-Incarnation`, on create, append (with and
/// without producer headers), close, catch-up, long-poll and SSE reads,
/// HEAD, DELETE, snapshot publish and read, retention and bootstrap; a
/// refused write applies nothing and a refused read returns no data.
#[tokio::test]
async fn ext_2_4_a_retired_token_answers_412_with_the_current_token_and_applies_nothing() {
    let (node, old, new) = recreated().await;
    let o = old.as_str();
    let mut checks = Checks::new();
    let mut row = |label: &str, answer: Answer| {
        checks.run(label, || {
            if answer.what.starts_with("HEAD") {
                answer.expect_head_error(412);
            } else {
                answer.expect_error(412, "INCARNATION_MISMATCH");
            }
            answer.expect_header("stream-incarnation", &new);
            assert!(!answer.text().contains("hello"), "a refused read returns no data:\n{answer:?}");
        });
    };
    let at = offset(5);
    row("create", node.put(S).content_type(TEXT).incarnation(o).send().await);
    row("append", node.post(S).content_type(TEXT).incarnation(o).body("x").send().await);
    row("producer append", node.post(S).content_type(TEXT).incarnation(o).producer("p", 0, 0).body("x").send().await);
    row("close", node.post(S).closed().incarnation(o).send().await);
    row("catch-up read", node.get(&format!("{S}?offset=-1")).incarnation(o).send().await);
    row("long-poll", node.get(&format!("{S}?offset=-1&live=long-poll")).incarnation(o).send().await);
    row("long-poll at the tail", node.get(&format!("{S}?offset=now&live=long-poll")).incarnation(o).send().await);
    row("SSE", node.get(&format!("{S}?offset=-1&live=sse")).incarnation(o).send().await);
    row("HEAD", node.head(S).incarnation(o).send().await);
    row("DELETE", node.delete(S).incarnation(o).send().await);
    row("snapshot publish", node.put(&format!("{S}/snapshot/{}", offset(3))).incarnation(o).body("x").send().await);
    node.publish(S, &at, TEXT, "hello").await;
    row("snapshot read", node.get(&format!("{S}/snapshot/{at}")).incarnation(o).send().await);
    row("snapshot HEAD", node.head(&format!("{S}/snapshot/{at}")).incarnation(o).send().await);
    row("retention", node.put(&format!("{S}/retention/{at}")).incarnation(o).send().await);
    row("bootstrap", node.get(&format!("{S}/bootstrap")).incarnation(o).send().await);
    checks.finish();

    // Nothing applied: the data, the open state, the snapshot, the retained
    // offset and the stream itself are as before.
    let head = node.head(S).send().await;
    head.expect(200)
        .expect_header("stream-next-offset", &offset(5))
        .expect_header("stream-incarnation", &new)
        .expect_header("stream-snapshot-offset", &at)
        .expect_header("stream-retained-offset", &offset(0))
        .expect_no_header("stream-closed");
    assert_eq!(node.read_all(S).await.text(), "hello");
    // The producer claim that was refused opened no state: a claim applies now.
    node.post(S).content_type(TEXT).producer("p", 0, 0).body("!").send().await.expect(200);
}

/// §2.4 "Evaluation": a `PUT` with the header for a stream that does not
/// exist answers `412` and creates nothing; there is no current token to
/// carry.
#[tokio::test]
async fn ext_2_4_a_put_with_a_token_for_a_missing_stream_answers_412_and_creates_nothing() {
    let node = Node::start();
    node.create(S, TEXT).await;
    let old = node.incarnation(S).await;
    node.delete(S).send().await.expect(204);
    for token in [old.as_str(), "4503599627370496"] {
        node.put(S)
            .content_type(TEXT)
            .incarnation(token)
            .send()
            .await
            .expect_error(412, "INCARNATION_MISMATCH")
            .expect_no_header("stream-incarnation");
        node.head(S).send().await.expect_head_error(404);
    }
}

/// §2.4 "Malformed": a value that is not a token the server could have
/// issued, or more than one value, answers `400 Bad Request` on every route
/// that takes the precondition, and applies nothing.
#[tokio::test]
async fn ext_2_4_a_malformed_or_repeated_token_answers_400() {
    let (node, _old, token) = recreated().await;
    node.publish(S, &offset(5), TEXT, "hello").await;
    let at = offset(5);
    let routes: Vec<(&str, MakeReq<'_>)> = vec![
        ("create", Box::new(|| node.put(S).content_type(TEXT))),
        ("append", Box::new(|| node.post(S).content_type(TEXT).body("x"))),
        ("producer append", Box::new(|| node.post(S).content_type(TEXT).producer("p", 0, 0).body("x"))),
        ("close", Box::new(|| node.post(S).closed())),
        ("catch-up read", Box::new(|| node.get(&format!("{S}?offset=-1")))),
        ("long-poll", Box::new(|| node.get(&format!("{S}?offset=-1&live=long-poll")))),
        ("SSE", Box::new(|| node.get(&format!("{S}?offset=-1&live=sse")))),
        ("HEAD", Box::new(|| node.head(S))),
        ("DELETE", Box::new(|| node.delete(S))),
        ("snapshot publish", Box::new(|| node.put(&format!("{S}/snapshot/{}", offset(3))).body("x"))),
        ("snapshot read", Box::new(|| node.get(&format!("{S}/snapshot/{at}")))),
        ("retention", Box::new(|| node.put(&format!("{S}/retention/{at}")))),
        ("bootstrap", Box::new(|| node.get(&format!("{S}/bootstrap")))),
    ];
    let mut checks = Checks::new();
    for (label, req) in &routes {
        let head = *label == "HEAD";
        for value in MALFORMED {
            let answer = req().incarnation(value).send().await;
            checks.run(format!("{label} with {value:?}"), || {
                if head {
                    answer.expect_head_error(400);
                } else {
                    answer.expect_error(400, "INVALID_HEADER");
                }
            });
        }
        // The current token twice is more than one value.
        let answer = req().incarnation(&token).incarnation(&token).send().await;
        checks.run(format!("{label} with the token twice"), || {
            if head {
                answer.expect_head_error(400);
            } else {
                answer.expect_error(400, "INVALID_HEADER");
            }
        });
        let answer = req().incarnation(&format!("{token}, {token}")).send().await;
        checks.run(format!("{label} with a list of two tokens"), || {
            if head {
                answer.expect_head_error(400);
            } else {
                answer.expect_error(400, "INVALID_HEADER");
            }
        });
    }
    checks.finish();
    let head = node.head(S).send().await;
    head.expect(200)
        .expect_header("stream-next-offset", &offset(5))
        .expect_header("stream-retained-offset", &offset(0))
        .expect_header("stream-snapshot-offset", &offset(5))
        .expect_no_header("stream-closed");
}

/// §2.4 "Evaluation" (RFC 9110 §13.2): a request that would answer `404`,
/// or a read that would answer `410` or `416`, without the header still
/// does; so does any other refusal (`400`, `409`): only a request that
/// would otherwise succeed is answered `412`. The `410` and `416` name the
/// current token.
#[tokio::test]
async fn ext_2_4_404_410_416_and_other_refusals_come_before_412() {
    let (node, old, new) = recreated().await;
    let o = old.as_str();
    node.publish(S, &offset(3), TEXT, "hel").await;
    node.retain(S, &offset(3)).await;
    let mut checks = Checks::new();
    let mut row = |label: &str, answer: Answer, status: u16, code: &str, token: Option<&str>| {
        checks.run(label, || {
            answer.expect_error(status, code);
            assert_eq!(answer.header("stream-incarnation"), token, "Stream-Incarnation:\n{answer:?}");
        });
    };
    let missing = "/demo/missing";
    let zero = offset(0);
    row(
        "GET missing",
        node.get(&format!("{missing}?offset=-1")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "long-poll missing",
        node.get(&format!("{missing}?offset=-1&live=long-poll")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "SSE missing",
        node.get(&format!("{missing}?offset=-1&live=sse")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "POST missing",
        node.post(missing).content_type(TEXT).incarnation(o).body("x").send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row("DELETE missing", node.delete(missing).incarnation(o).send().await, 404, "STREAM_NOT_FOUND", None);
    row(
        "snapshot publish missing",
        node.put(&format!("{missing}/snapshot/{zero}")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "snapshot read missing",
        node.get(&format!("{missing}/snapshot/{zero}")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "retention missing",
        node.put(&format!("{missing}/retention/{zero}")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    row(
        "bootstrap missing",
        node.get(&format!("{missing}/bootstrap")).incarnation(o).send().await,
        404,
        "STREAM_NOT_FOUND",
        None,
    );
    let n = Some(new.as_str());
    row(
        "snapshot not the latest",
        node.get(&format!("{S}/snapshot/{}", offset(2))).incarnation(o).send().await,
        404,
        "SNAPSHOT_NOT_FOUND",
        n,
    );
    row(
        "catch-up below retention",
        node.get(&format!("{S}?offset={zero}")).incarnation(o).send().await,
        410,
        "STREAM_GONE",
        n,
    );
    row(
        "catch-up offset=-1 trimmed",
        node.get(&format!("{S}?offset=-1")).incarnation(o).send().await,
        410,
        "STREAM_GONE",
        n,
    );
    row(
        "long-poll below retention",
        node.get(&format!("{S}?offset={zero}&live=long-poll")).incarnation(o).send().await,
        410,
        "STREAM_GONE",
        n,
    );
    let beyond = offset(50);
    row(
        "catch-up beyond the tail",
        node.get(&format!("{S}?offset={beyond}")).incarnation(o).send().await,
        416,
        "OFFSET_OUT_OF_RANGE",
        n,
    );
    row(
        "long-poll beyond the tail",
        node.get(&format!("{S}?offset={beyond}&live=long-poll")).incarnation(o).send().await,
        416,
        "OFFSET_OUT_OF_RANGE",
        n,
    );
    row(
        "snapshot range past the end",
        node.get(&format!("{S}/snapshot/{}", offset(3))).header("range", "bytes=3-").incarnation(o).send().await,
        416,
        "RANGE_NOT_SATISFIABLE",
        n,
    );
    // Refusals of the request itself come first too.
    let conflict = node.put(S).content_type("application/json").incarnation(o).send().await;
    checks.run("create with another configuration", || {
        conflict.expect_error(409, "STREAM_ALREADY_EXISTS_CONFLICT");
    });
    let empty = node.post(S).content_type(TEXT).incarnation(o).send().await;
    checks.run("empty append", || {
        empty.expect_error(400, "EMPTY_APPEND");
    });
    let other = node.put(&format!("{S}/snapshot/{}", offset(3))).incarnation(o).body("x").send().await;
    checks.run("other content at the snapshot's offset", || {
        other.expect_error(409, "SNAPSHOT_CONFLICT");
    });
    let past = node.put(&format!("{S}/retention/{}", offset(5))).incarnation(o).send().await;
    checks.run("retention past the snapshot", || {
        past.expect_error(400, "INVALID_RETENTION");
    });
    node.close(S).await;
    let closed = node.post(S).content_type(TEXT).incarnation(o).body("x").send().await;
    checks.run("append to a closed stream", || {
        closed.expect_error(409, "STREAM_CLOSED");
    });
    checks.finish();
}

/// §2.4 "Present": a live long-poll opened with the token ends when the
/// stream it was opened against is deleted and recreated: it answers `404`
/// or `412` (with the new token) instead of waiting out its timeout.
#[tokio::test]
async fn ext_2_4_a_long_poll_opened_with_the_token_ends_when_the_stream_is_recreated() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "abc").await;
    let token = node.incarnation(S).await;
    let started = Instant::now();
    let poll =
        node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=25000", offset(3))).incarnation(&token).send();
    let replace = async {
        node.wait_live_readers(1).await;
        node.delete(S).send().await.expect(204);
        let created = node.create(S, TEXT).await;
        node.append(S, TEXT, "abcdef").await;
        created.must("stream-incarnation").to_string()
    };
    let (answer, new) = tokio::join!(poll, replace);
    assert!(started.elapsed() < Duration::from_secs(15), "the long-poll ended with the stream:\n{answer:?}");
    match answer.status.as_u16() {
        404 => {
            answer.expect_error(404, "STREAM_NOT_FOUND");
        }
        _ => {
            answer.expect_error(412, "INCARNATION_MISMATCH").expect_header("stream-incarnation", &new);
        }
    }
}

/// §2.4 "Present": an SSE read opened with the token ends with an `error`
/// event (§11: the error body on one line) when the stream it was opened
/// against is deleted and recreated, and sends nothing of the new stream.
#[tokio::test]
async fn ext_2_4_an_sse_read_opened_with_the_token_ends_with_an_error_event_when_the_stream_is_recreated() {
    let node = Node::start();
    node.create(S, TEXT).await;
    node.append(S, TEXT, "abc").await;
    let token = node.incarnation(S).await;
    let mut sse = Sse::open(node.get(&format!("{S}?offset=-1&live=sse")).incarnation(&token)).await;
    assert_eq!(sse.status.as_u16(), 200);
    sse.until_control().await;
    node.delete(S).send().await.expect(204);
    node.create(S, TEXT).await;
    node.append(S, TEXT, "NEW DATA").await;
    let events = sse.until(|e| e.is("error")).await;
    assert!(events.iter().all(|e| !e.data.contains("NEW DATA")), "no data of the new stream: {events:#?}");
    let error = events.last().map(|e| e.json()).unwrap_or_default();
    let code = error["error"]["code"].as_str().unwrap_or_default().to_string();
    assert!(
        code == "INCARNATION_MISMATCH" || code == "STREAM_NOT_FOUND",
        "the error event names the replacement: {error}"
    );
    assert!(error["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{error}");
    sse.expect_end().await;
}
