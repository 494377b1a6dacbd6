//! How JSON streams read back: NDJSON by default (base protocol §7.1,
//! extensions §9.4) or JSON arrays with `--json-reads array`; gzip of JSON
//! reads of at least 256 bytes, weak ETags, and `If-None-Match` (spec/28).

use serde_json::{Value, json};

use crate::support::{Node, offset, sse_payload};

const S: &str = "/demo/j";
const JSON: &str = "application/json";

/// A JSON stream whose NDJSON read is well over 256 bytes.
async fn node_with_large_json(args: &[&str]) -> Node {
    let node = Node::start_with(args);
    node.create(S, JSON).await;
    let messages: Vec<Value> = (0..20).map(|i| json!({"event": "click", "n": i, "pad": "xxxxxxxx"})).collect();
    node.append(S, JSON, Value::Array(messages).to_string()).await;
    node
}

// ---------------------------------------------------------------------------
// NDJSON (default) and arrays
// ---------------------------------------------------------------------------

#[tokio::test]
async fn json_stream_reads_as_ndjson_by_default() {
    let node = Node::start();
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"a":1},{"b":2}]"#).await;
    let read = node.read_all(S).await;
    read.expect_header("content-type", "application/x-ndjson");
    assert_eq!(read.text(), "{\"a\":1}\n{\"b\":2}\n");
    // An empty read is an empty body.
    let tail = node.get(&format!("{S}?offset={}", read.must("stream-next-offset"))).send().await;
    tail.expect(200);
    assert!(tail.body.is_empty(), "{tail:?}");
}

#[tokio::test]
async fn json_reads_array_answers_a_json_array_of_the_messages() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"a":1},{"b":2}]"#).await;
    node.append(S, JSON, r#""three""#).await;
    let read = node.read_all(S).await;
    read.expect_header("content-type", "application/json").expect_header("stream-up-to-date", "true");
    assert_eq!(read.json(), json!([{"a":1},{"b":2},"three"]));
    // HEAD still reports the configured content type.
    node.head(S).send().await.expect(200).expect_header("content-type", JSON);
    // A read at the tail is an empty array.
    let tail = node.get(&format!("{S}?offset={}", read.must("stream-next-offset"))).send().await;
    tail.expect(200);
    assert_eq!(tail.json(), json!([]));
}

#[tokio::test]
async fn json_reads_array_keeps_message_text_byte_for_byte() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create(S, JSON).await;
    node.append(S, JSON, r#"{ "b" : 1.50e3, "a" : 1 }"#).await;
    assert_eq!(node.read_all(S).await.text(), r#"[{"b":1.50e3,"a":1}]"#);
}

#[tokio::test]
async fn json_reads_array_with_max_bytes_answers_whole_messages() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"a":1},{"b":2},{"c":3}]"#).await;
    let mut from = "-1".to_string();
    let mut messages = Vec::new();
    for _ in 0..10 {
        let read = node.get(&format!("{S}?offset={from}&max_bytes=10")).send().await;
        read.expect(200);
        let Value::Array(batch) = read.json() else { panic!("not an array:\n{read:?}") };
        messages.extend(batch);
        from = read.must("stream-next-offset").to_string();
        if read.header("stream-up-to-date").is_some() {
            break;
        }
    }
    assert_eq!(Value::Array(messages), json!([{"a":1},{"b":2},{"c":3}]));
}

#[tokio::test]
async fn non_json_streams_read_the_same_in_both_modes() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create("/demo/t", "text/plain").await;
    node.append("/demo/t", "text/plain", "a\nb\n").await;
    let read = node.read_all("/demo/t").await;
    read.expect_header("content-type", "text/plain");
    assert_eq!(read.text(), "a\nb\n");
}

#[test]
fn json_reads_with_an_unknown_mode_refuse_to_start() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ursula"))
        .args(["server", "--listen", "127.0.0.1:0", "--json-reads", "xml"])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("running ursula");
    assert!(!output.status.success(), "ursula started with --json-reads xml");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("json_reads") || stderr.contains("json-reads"), "the error names the setting: {stderr}");
}

#[tokio::test]
async fn sse_on_a_json_stream_in_array_mode_sends_arrays() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create(S, JSON).await;
    node.append(S, JSON, r#"[{"a":1},{"b":2}]"#).await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.header("stream-data-content-type"), Some(JSON));
    let (events, _) = sse.until_control().await;
    let payload: Value = serde_json::from_slice(&sse_payload(&events, false)).expect("a JSON array");
    assert_eq!(payload, json!([{"a":1},{"b":2}]));
}

// ---------------------------------------------------------------------------
// gzip and ETags
// ---------------------------------------------------------------------------

#[tokio::test]
async fn json_read_of_at_least_256_bytes_is_gzipped_for_clients_that_accept_it() {
    for args in [&[][..], &["--json-reads", "array"][..]] {
        let node = node_with_large_json(args).await;
        let plain = node.read_all(S).await;
        assert!(plain.body.len() >= 256, "{plain:?}");
        plain.expect_no_header("content-encoding");

        let zipped = node.get(&format!("{S}?offset=-1")).header("accept-encoding", "gzip").send().await;
        zipped.expect(200).expect_header("content-encoding", "gzip");
        assert!(
            zipped.header("vary").is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
            "{zipped:?}"
        );
        let mut unzipped = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&zipped.body[..]), &mut unzipped)
            .expect("a gzip body");
        assert_eq!(unzipped, plain.body, "gzip of the identity body");
        // The same representation either way: same offsets and tag.
        assert_eq!(zipped.header("etag"), plain.header("etag"));
        assert_eq!(zipped.header("stream-next-offset"), plain.header("stream-next-offset"));
    }
}

#[tokio::test]
async fn json_read_that_may_be_gzipped_has_a_weak_etag() {
    let node = node_with_large_json(&[]).await;
    for accept in ["gzip", "identity"] {
        let read = node.get(&format!("{S}?offset=-1")).header("accept-encoding", accept).send().await;
        read.expect(200);
        let tag = read.must("etag");
        assert!(tag.starts_with("W/\""), "a weak tag: {tag}");
    }
}

#[tokio::test]
async fn small_json_reads_and_non_json_reads_are_not_gzipped_and_have_strong_etags() {
    let node = Node::start();
    node.create(S, JSON).await;
    node.append(S, JSON, r#"{"a":1}"#).await;
    node.create("/demo/bin", "application/octet-stream").await;
    node.append("/demo/bin", "application/octet-stream", vec![b'{'; 4096]).await;
    for path in [S, "/demo/bin"] {
        let read = node.get(&format!("{path}?offset=-1")).header("accept-encoding", "gzip").send().await;
        read.expect(200).expect_no_header("content-encoding");
        let tag = read.must("etag");
        assert!(tag.starts_with('"'), "a strong tag: {read:?}");
    }
}

#[tokio::test]
async fn gzip_is_not_used_when_the_client_refuses_it() {
    let node = node_with_large_json(&[]).await;
    for accept in ["br", "gzip;q=0", "identity"] {
        node.get(&format!("{S}?offset=-1"))
            .header("accept-encoding", accept)
            .send()
            .await
            .expect(200)
            .expect_no_header("content-encoding");
    }
}

#[tokio::test]
async fn if_none_match_with_the_etag_answers_304_without_a_body() {
    let node = Node::start();
    node.create("/demo/t", "text/plain").await;
    node.append("/demo/t", "text/plain", "abc").await;
    let large = node_with_large_json(&[]).await;
    for (node, path) in [(&node, "/demo/t"), (&large, S)] {
        let read = node.read_all(path).await;
        let tag = read.must("etag").to_string();
        let again = node.get(&format!("{path}?offset=-1")).header("if-none-match", &tag).send().await;
        again.expect(304);
        assert!(again.body.is_empty(), "{again:?}");
        again.expect_header("etag", &tag);
        // Compared weakly: with or without the W/ prefix.
        let other_form = match tag.strip_prefix("W/") {
            Some(strong) => strong.to_string(),
            None => format!("W/{tag}"),
        };
        node.get(&format!("{path}?offset=-1")).header("if-none-match", &other_form).send().await.expect(304);
        // In a list of tags too.
        node.get(&format!("{path}?offset=-1"))
            .header("if-none-match", format!("\"nope\", {tag}"))
            .send()
            .await
            .expect(304);
        // Another tag does not match.
        node.get(&format!("{path}?offset=-1")).header("if-none-match", "\"nope\"").send().await.expect(200);
    }
}

#[tokio::test]
async fn etag_changes_when_the_stream_closes() {
    // Base protocol §8.1: the tag must vary with closure, so a 304 never hides EOF.
    let node = Node::start();
    node.create("/demo/t", "text/plain").await;
    node.append("/demo/t", "text/plain", "abc").await;
    let at_tail = format!("/demo/t?offset={}", offset(3));
    let open_tag = node.get(&at_tail).send().await.must("etag").to_string();
    let whole_tag = node.read_all("/demo/t").await.must("etag").to_string();
    node.close("/demo/t").await;
    let closed = node.get(&at_tail).header("if-none-match", &open_tag).send().await;
    closed.expect(200).expect_header("stream-closed", "true");
    assert_ne!(closed.must("etag"), open_tag);
    let whole = node.get("/demo/t?offset=-1").header("if-none-match", &whole_tag).send().await;
    whole.expect(200).expect_header("stream-closed", "true");
}
