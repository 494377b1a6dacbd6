//! Error answers (extensions §11, spec/24 "Errors"): every 4xx carries
//! `Content-Type: application/json` and `{"error":{"code","message"}}` with
//! the spec's code; an answer to `HEAD` carries the content type and no body.

use reqwest::Method;

use crate::support::{Answer, Checks, MAX_REQUEST_BYTES, Node, offset};

/// A node with one stream in each state the refusals below need.
async fn node_with_fixtures() -> Node {
    let node = Node::start();
    node.create("/demo/text", "text/plain").await;
    node.append("/demo/text", "text/plain", "abc").await;
    node.put("/demo/closed").closed().send().await.expect(201);
    node.put("/demo/seq").content_type("text/plain").header("stream-seq", "5").send().await.expect(201);
    // Producer p: epoch 0 closed by the claim of epoch 1.
    node.create("/demo/prod", "text/plain").await;
    node.post("/demo/prod").content_type("text/plain").producer("p", 0, 0).body("a").send().await.expect(200);
    node.post("/demo/prod").content_type("text/plain").producer("p", 1, 0).body("a").send().await.expect(200);
    // Producer q: epoch 0 is two epochs behind.
    for epoch in 0..3 {
        node.post("/demo/prod").content_type("text/plain").producer("q", epoch, 0).body("b").send().await.expect(200);
    }
    node
}

#[tokio::test]
async fn every_error_answer_carries_the_json_error_body_with_the_spec_code() {
    let node = node_with_fixtures().await;
    let text = |req: crate::support::Req| req.content_type("text/plain");
    let cases: Vec<(u16, &str, Answer)> = vec![
        (400, "INVALID_BUCKET_ID", node.put("/Demo/s").send().await),
        (400, "INVALID_STREAM_ID", node.put("/demo/%24meta").send().await),
        (400, "INVALID_HEADER", node.put("/demo/new").header("stream-ttl", "0060").send().await),
        (400, "INVALID_QUERY", node.get("/demo/text?offset=-1&live=bogus").send().await),
        (400, "INVALID_OFFSET", node.get("/demo/text?offset=bogus").send().await),
        (400, "INVALID_PRODUCER", text(node.post("/demo/text")).header("producer-id", "p").body("x").send().await),
        (400, "INVALID_PRODUCER", node.put("/demo/new").producer("p", 0, 0).send().await),
        (400, "MISSING_CONTENT_TYPE", node.post("/demo/text").body("x").send().await),
        (400, "EMPTY_APPEND", text(node.post("/demo/text")).send().await),
        (403, "PRODUCER_EPOCH_CLOSED", text(node.post("/demo/prod")).producer("p", 0, 1).body("x").send().await),
        (403, "PRODUCER_EPOCH_STALE", text(node.post("/demo/prod")).producer("q", 0, 1).body("x").send().await),
        (404, "STREAM_NOT_FOUND", node.get("/demo/missing?offset=-1").send().await),
        (404, "STREAM_NOT_FOUND", text(node.post("/demo/missing")).body("x").send().await),
        (404, "STREAM_NOT_FOUND", node.delete("/demo/missing").send().await),
        (404, "NOT_FOUND", node.get("/demo/text/extra").send().await),
        (405, "METHOD_NOT_ALLOWED", node.request(Method::PATCH, "/demo/text").send().await),
        (409, "STREAM_CLOSED", text(node.post("/demo/closed")).body("x").send().await),
        (409, "STREAM_SEQ_CONFLICT", text(node.post("/demo/seq")).header("stream-seq", "4").body("x").send().await),
        (409, "CONTENT_TYPE_MISMATCH", node.post("/demo/text").content_type("text/html").body("x").send().await),
        (409, "STREAM_ALREADY_EXISTS_CONFLICT", node.put("/demo/text").content_type("text/html").send().await),
        (409, "PRODUCER_SEQ_CONFLICT", text(node.post("/demo/prod")).producer("p", 1, 7).body("x").send().await),
        (
            413,
            "REQUEST_TOO_LARGE",
            node.raw(&format!(
                "POST /demo/text HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: {}",
                MAX_REQUEST_BYTES + 1
            ))
            .await,
        ),
        (416, "OFFSET_OUT_OF_RANGE", node.get(&format!("/demo/text?offset={}", offset(99))).send().await),
    ];
    let mut failures = Vec::new();
    for (status, code, answer) in &cases {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answer.expect_error(*status, code);
        }));
        if ok.is_err() {
            failures.push(format!("expected {status} {code}:\n{answer:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} error answers are wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[tokio::test]
async fn head_errors_carry_the_json_content_type_and_no_body() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    node.head("/demo/missing").send().await.expect_head_error(404);
    node.head("/Demo/s").send().await.expect_head_error(400);
    node.head("/demo/%24meta").send().await.expect_head_error(400);
    node.head("/demo/s/extra").send().await.expect_head_error(404);
}

#[tokio::test]
async fn three_segment_paths_answer_404_not_found() {
    // Extensions §1.6: any other path with three or more segments under a bucket.
    let node = Node::start();
    node.create("/demo/hello", "text/plain").await;
    for path in ["/demo/hello/extra", "/demo/a/b", "/demo/a/b/c"] {
        for method in [Method::GET, Method::PUT, Method::POST, Method::DELETE] {
            node.request(method, path).send().await.expect_error(404, "NOT_FOUND");
        }
    }
    // Nothing was created under those paths.
    node.head("/demo/a").send().await.expect_head_error(404);
}

#[tokio::test]
async fn bucket_routes_other_than_put_answer_an_error_body() {
    // There is no bucket metadata read, stream listing or bucket delete (spec/24).
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    for method in [Method::GET, Method::DELETE, Method::POST] {
        let answer = node.request(method, "/demo").send().await;
        assert!(matches!(answer.status.as_u16(), 404 | 405), "{answer:?}");
        answer.error_code();
    }
}

#[tokio::test]
async fn error_messages_do_not_echo_the_request_body() {
    let node = Node::start();
    node.create("/demo/j", "application/json").await;
    let marker = "SECRET-BODY-MARKER-4711";
    let answer =
        node.post("/demo/j").content_type("application/json").body(format!("{{\"{marker}\": nope}}")).send().await;
    answer.expect(400);
    answer.error_code();
    assert!(!answer.text().contains(marker), "the message echoes the body:\n{answer:?}");
}

/// Issue 17: a protocol header or query parameter sent twice makes a
/// request ambiguous (a proxy taking the last would disagree with us on a
/// write key): `400` naming it, and nothing is written.
#[tokio::test]
async fn a_repeated_protocol_header_or_query_parameter_is_refused() {
    let node = Node::start();
    node.create("/demo/dup", "text/plain").await;
    let mut checks = Checks::new();
    for name in ["producer-seq", "stream-seq", "content-type", "producer-epoch", "stream-closed"] {
        let (first, second) = match name {
            "content-type" => ("text/plain", "application/json"),
            "stream-closed" => ("true", "false"),
            _ => ("1", "2"),
        };
        let mut req = node.post("/demo/dup").header("producer-id", "p");
        if name != "producer-epoch" {
            req = req.header("producer-epoch", "0");
        }
        if name != "producer-seq" {
            req = req.header("producer-seq", "0");
        }
        if name != "content-type" {
            req = req.content_type("text/plain");
        }
        let answer = req.header(name, first).header(name, second).body("x").send().await;
        checks.run(name, || {
            answer.expect_error(400, "INVALID_HEADER");
            let message = answer.json()["error"]["message"].as_str().unwrap_or_default().to_string();
            assert!(message.contains(name), "the message names {name}: {message}");
        });
    }
    for query in [
        "offset=-1&offset=-1",
        "offset=-1&live=long-poll&live=sse",
        "offset=-1&consistency=leader&live=sse&consistency=local",
        "offset=-1&max_bytes=1&max_bytes=2",
    ] {
        let answer = node.get(&format!("/demo/dup?{query}")).send().await;
        checks.run(query, || {
            assert_eq!(answer.status.as_u16(), 400, "{answer:?}");
            let code = answer.error_code();
            assert!(code == "INVALID_QUERY" || code == "INVALID_OFFSET", "{answer:?}");
        });
    }
    checks.finish();
    assert_eq!(node.tail("/demo/dup").await, offset(0), "nothing was written");
}

/// Issue 17, finding 6: `405` names what the path takes (RFC 9110
/// §15.5.6); an unknown operational path is `404` whatever the method.
#[tokio::test]
async fn a_405_carries_allow_and_unknown_operational_paths_are_404() {
    let node = Node::start();
    node.create("/demo/s", "text/plain").await;
    let cases = [
        ("/demo/s", "GET, HEAD, PUT, POST, DELETE, OPTIONS"),
        ("/demo", "PUT, OPTIONS"),
        ("/demo/s/bootstrap", "GET, OPTIONS"),
        ("/__ursula/metrics", "GET, HEAD"),
    ];
    for (path, allow) in cases {
        node.request(Method::PATCH, path)
            .send()
            .await
            .expect_error(405, "METHOD_NOT_ALLOWED")
            .expect_header("allow", allow);
    }
    node.post("/__ursula/purge/demo").send().await.expect_error(404, "NOT_FOUND");
    node.get("/__ursula/nothing").send().await.expect_error(404, "NOT_FOUND");
}

/// Issue 17, finding 6: `%` that is no escape is malformed (`/demo/%` and
/// `/demo/%25` must not name one stream); HTTP/1.1 needs `Host`; a
/// `Content-Type` has a length bound.
#[tokio::test]
async fn malformed_escapes_a_missing_host_and_a_huge_content_type_answer_400() {
    let node = Node::start();
    for path in ["/demo/%", "/demo/a%2", "/demo/%zz"] {
        node.put(path).content_type("text/plain").send().await.expect_error(400, "INVALID_REQUEST");
    }
    node.put("/demo/%25").content_type("text/plain").send().await.expect(201);
    node.get("/demo/%25?offset=-1").send().await.expect(200);

    let addr = node.base().trim_start_matches("http://").to_string();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.expect("connecting");
    use tokio::io::AsyncWriteExt;
    tcp.write_all(b"GET /demo/%25?offset=-1 HTTP/1.1\r\nConnection: close\r\n\r\n").await.expect("writing");
    let (status, _, body) = crate::support::read_raw_response(&mut tcp).await;
    assert_eq!(status.as_u16(), 400, "{}", String::from_utf8_lossy(&body));

    let long = format!("text/plain; x={}", "a".repeat(300));
    node.put("/demo/long").content_type(&long).send().await.expect_error(400, "INVALID_HEADER");
    node.head("/demo/long").send().await.expect_head_error(404);
}

/// Issue 17, finding 6: a request body is stored as sent, so one with a
/// `Content-Encoding` (stored compressed before) is refused with `415`.
#[tokio::test]
async fn a_compressed_request_body_is_refused_not_stored_compressed() {
    let node = Node::start();
    node.create("/demo/gz", "text/plain").await;
    let answer =
        node.post("/demo/gz").content_type("text/plain").header("content-encoding", "gzip").body("x").send().await;
    answer.expect_error(415, "INVALID_REQUEST").expect_header("accept-encoding", "identity");
    node.post("/demo/gz")
        .content_type("text/plain")
        .header("content-encoding", "identity")
        .body("x")
        .send()
        .await
        .expect(204);
    assert_eq!(node.read_all("/demo/gz").await.text(), "x");
}

/// Issue 17, finding 6: a snapshot route's `INVALID_OFFSET` names only the
/// offsets that route takes (no `-1`, no `now`).
#[tokio::test]
async fn a_snapshot_routes_invalid_offset_names_only_what_it_takes() {
    let node = Node::start();
    node.create("/demo/snap", "text/plain").await;
    for path in ["/demo/snap/snapshot/now", "/demo/snap/snapshot/-1", "/demo/snap/retention/-1"] {
        let method = if path.contains("retention") { Method::PUT } else { Method::GET };
        let answer = node.request(method, path).send().await;
        answer.expect_error(400, "INVALID_OFFSET");
        let message = answer.json()["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(!message.contains("-1") && !message.contains("now"), "{path}: {message}");
    }
}
