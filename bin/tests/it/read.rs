//! `GET /{bucket}/{stream}` (spec/28-read-stream.md, base protocol §5.6-5.8,
//! §6, §8; extensions §9): catch-up, long-poll and SSE reads.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Event, Node, offset, sse_payload};

const S: &str = "/demo/s";
const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const BINARY: &str = "application/octet-stream";

async fn node_with(content_type: &str, body: &str) -> Node {
    let node = Node::start();
    node.create(S, content_type).await;
    if !body.is_empty() {
        node.append(S, content_type, body.to_string()).await;
    }
    node
}

fn next_offset(control: &Value) -> &str {
    control["streamNextOffset"].as_str().unwrap_or_else(|| panic!("control without streamNextOffset: {control}"))
}

// ---------------------------------------------------------------------------
// Catch-up: 200
// ---------------------------------------------------------------------------

#[tokio::test]
async fn catch_up_read_from_the_beginning_returns_all_data_up_to_date() {
    let node = node_with(TEXT, "hello world").await;
    let read = node.get(&format!("{S}?offset=-1")).send().await;
    read.expect(200)
        .expect_header("content-type", TEXT)
        .expect_header("stream-next-offset", &offset(11))
        .expect_header("stream-up-to-date", "true")
        .expect_no_header("stream-closed");
    read.must("etag");
    assert_eq!(read.text(), "hello world");
}

#[tokio::test]
async fn catch_up_read_without_offset_reads_from_the_beginning() {
    let node = node_with(TEXT, "abc").await;
    let read = node.get(S).send().await;
    read.expect(200).expect_header("stream-next-offset", &offset(3));
    assert_eq!(read.text(), "abc");
}

#[tokio::test]
async fn catch_up_read_from_a_returned_offset_resumes_where_the_last_one_ended() {
    let node = node_with(TEXT, "abc").await;
    let first = node.read_all(S).await;
    node.append(S, TEXT, "def").await;
    let next = node.get(&format!("{S}?offset={}", first.must("stream-next-offset"))).send().await;
    next.expect(200).expect_header("stream-next-offset", &offset(6)).expect_header("stream-up-to-date", "true");
    assert_eq!(next.text(), "def");
}

#[tokio::test]
async fn catch_up_read_at_the_tail_answers_200_empty_and_up_to_date() {
    let node = node_with(TEXT, "abc").await;
    let read = node.get(&format!("{S}?offset={}", offset(3))).send().await;
    read.expect(200)
        .expect_header("stream-up-to-date", "true")
        .expect_header("stream-next-offset", &offset(3))
        .expect_no_header("stream-closed");
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn catch_up_read_at_the_tail_of_a_closed_stream_answers_stream_closed() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    let read = node.get(&format!("{S}?offset={}", offset(3))).send().await;
    read.expect(200)
        .expect_header("stream-closed", "true")
        .expect_header("stream-up-to-date", "true")
        .expect_header("stream-next-offset", &offset(3));
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn catch_up_read_of_the_final_data_of_a_closed_stream_carries_stream_closed() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    let read = node.read_all(S).await;
    read.expect_header("stream-closed", "true");
    assert_eq!(read.text(), "abc");
}

#[tokio::test]
async fn catch_up_read_at_offset_now_answers_empty_at_the_tail() {
    // Base protocol §6 `now`, catch-up mode.
    let node = node_with(TEXT, "abc").await;
    let read = node.get(&format!("{S}?offset=now")).send().await;
    read.expect(200)
        .expect_header("stream-next-offset", &offset(3))
        .expect_header("stream-up-to-date", "true")
        .expect_header("cache-control", "no-store")
        .expect_no_header("stream-closed");
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn catch_up_read_at_offset_now_of_a_closed_stream_answers_the_closure_signal() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    let read = node.get(&format!("{S}?offset=now")).send().await;
    read.expect(200)
        .expect_header("stream-closed", "true")
        .expect_header("stream-up-to-date", "true")
        .expect_header("stream-next-offset", &offset(3));
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn catch_up_read_with_max_bytes_is_partial_until_the_tail() {
    let node = node_with(TEXT, "0123456789").await;
    node.close(S).await;
    let mut from = "-1".to_string();
    let mut collected = String::new();
    let mut reads = 0;
    loop {
        let read = node.get(&format!("{S}?offset={from}&max_bytes=4")).send().await;
        read.expect(200);
        assert!(read.body.len() <= 4, "max_bytes bounds the body:\n{read:?}");
        collected.push_str(&read.text());
        from = read.must("stream-next-offset").to_string();
        reads += 1;
        if read.header("stream-up-to-date").is_some() {
            read.expect_header("stream-closed", "true");
            break;
        }
        // A partial read of a closed stream does not say closed.
        read.expect_no_header("stream-closed");
        assert!(reads < 10, "the reads make progress");
    }
    assert_eq!(collected, "0123456789");
    assert_eq!(reads, 3);
}

#[tokio::test]
async fn catch_up_read_ignores_a_max_bytes_that_is_not_a_decimal_integer() {
    let node = node_with(TEXT, "0123456789").await;
    for max_bytes in ["abc", "1e3", "-3", ""] {
        let read = node.get(&format!("{S}?offset=-1&max_bytes={max_bytes}")).send().await;
        read.expect(200).expect_header("stream-up-to-date", "true");
        assert_eq!(read.text(), "0123456789");
    }
}

#[tokio::test]
async fn catch_up_read_max_bytes_on_a_json_stream_counts_ndjson_bytes() {
    let node = node_with(JSON, r#"[{"a":1},{"b":2}]"#).await;
    let full = node.read_all(S).await.text();
    let first = node.get(&format!("{S}?offset=-1&max_bytes=3")).send().await;
    first.expect(200).expect_no_header("stream-up-to-date");
    assert!(first.body.len() <= 3, "{first:?}");
    let rest = node.get(&format!("{S}?offset={}", first.must("stream-next-offset"))).send().await;
    rest.expect(200).expect_header("stream-up-to-date", "true");
    assert_eq!(format!("{}{}", first.text(), rest.text()), full);
}

#[tokio::test]
async fn catch_up_read_accepts_consistency_local_and_leader() {
    let node = node_with(TEXT, "abc").await;
    for consistency in ["local", "leader"] {
        let read = node.get(&format!("{S}?offset=-1&consistency={consistency}")).send().await;
        read.expect(200).expect_header("stream-up-to-date", "true");
        assert_eq!(read.text(), "abc");
    }
}

#[tokio::test]
async fn catch_up_read_ignores_unknown_parameters_and_cursor() {
    // `cursor` is an echo for caches, never a position.
    let node = node_with(TEXT, "abc").await;
    let read = node.get(&format!("{S}?offset=-1&cursor=12345&foo=bar")).send().await;
    read.expect(200);
    assert_eq!(read.text(), "abc");
}

// ---------------------------------------------------------------------------
// Catch-up: 400, 404, 416
// ---------------------------------------------------------------------------

#[tokio::test]
async fn read_with_an_invalid_offset_answers_400_invalid_offset() {
    let node = node_with(TEXT, "abc").await;
    for bad in ["abc", "42", "", "-2", "NOW", "0000000000000000000a", "0,1", "-1&offset=-1"] {
        node.get(&format!("{S}?offset={bad}")).send().await.expect_error(400, "INVALID_OFFSET");
    }
    node.get(&format!("{S}?offset=abc&live=long-poll")).send().await.expect_error(400, "INVALID_OFFSET");
    node.get(&format!("{S}?offset=abc&live=sse")).send().await.expect_error(400, "INVALID_OFFSET");
}

#[tokio::test]
async fn read_with_an_invalid_live_mode_answers_400_invalid_query() {
    let node = node_with(TEXT, "abc").await;
    for live in ["poll", "SSE", "websocket", ""] {
        node.get(&format!("{S}?offset=-1&live={live}")).send().await.expect_error(400, "INVALID_QUERY");
    }
}

#[tokio::test]
async fn read_with_an_invalid_consistency_answers_400_invalid_query() {
    let node = node_with(TEXT, "abc").await;
    node.get(&format!("{S}?offset=-1&consistency=strong")).send().await.expect_error(400, "INVALID_QUERY");
}

#[tokio::test]
async fn read_with_consistency_leader_and_live_answers_400_invalid_query() {
    let node = node_with(TEXT, "abc").await;
    for live in ["long-poll", "sse"] {
        node.get(&format!("{S}?offset=-1&consistency=leader&live={live}"))
            .send()
            .await
            .expect_error(400, "INVALID_QUERY");
    }
}

#[tokio::test]
async fn live_read_without_offset_answers_400() {
    // Base protocol §5.7 and §5.8: `offset` is required on live reads.
    let node = node_with(TEXT, "abc").await;
    for live in ["long-poll", "sse"] {
        let answer = node.get(&format!("{S}?live={live}")).send().await;
        answer.expect(400);
        let code = answer.error_code();
        assert!(code == "INVALID_QUERY" || code == "INVALID_OFFSET", "{answer:?}");
    }
}

#[tokio::test]
async fn read_parameters_removed_in_0_6_0_answer_400() {
    // spec/43 "Removed": record coordinates answer 400 on catch-up, long-poll and SSE reads.
    let node = node_with(JSON, "[1,2]").await;
    for param in ["record=0", "record=now", "tail_records=1", "max_records=1", "record_view=1"] {
        for live in ["", "&live=long-poll&timeout_ms=1", "&live=sse"] {
            let answer = node.get(&format!("{S}?offset=-1&{param}{live}")).send().await;
            answer.expect(400);
            answer.error_code();
        }
    }
}

#[tokio::test]
async fn read_with_incarnation_or_aligned_query_parameters_answers_400_unsupported() {
    // spec/28 400 row: immutable reads carry these in the path instead.
    let node = node_with(TEXT, "abc").await;
    for param in ["incarnation=1", "aligned=true"] {
        node.get(&format!("{S}?offset=-1&{param}")).send().await.expect_error(400, "UNSUPPORTED");
    }
}

#[tokio::test]
async fn read_of_a_missing_stream_answers_404() {
    let node = Node::start();
    for query in ["offset=-1", "offset=-1&live=long-poll&timeout_ms=1", "offset=-1&live=sse"] {
        node.get(&format!("/demo/missing?{query}")).send().await.expect_error(404, "BUCKET_NOT_FOUND");
    }
    node.create("/demo/other", TEXT).await;
    for query in ["offset=-1", "offset=-1&live=long-poll&timeout_ms=1", "offset=-1&live=sse"] {
        node.get(&format!("/demo/missing?{query}")).send().await.expect_error(404, "STREAM_NOT_FOUND");
    }
}

#[tokio::test]
async fn catch_up_read_beyond_the_tail_answers_416_with_the_tail() {
    let node = node_with(TEXT, "abc").await;
    node.get(&format!("{S}?offset={}", offset(4)))
        .send()
        .await
        .expect_error(416, "OFFSET_OUT_OF_RANGE")
        .expect_header("stream-next-offset", &offset(3));
}

// ---------------------------------------------------------------------------
// Long-poll
// ---------------------------------------------------------------------------

#[tokio::test]
async fn long_poll_with_data_available_answers_200_at_once_with_stream_cursor() {
    let node = node_with(TEXT, "abc").await;
    let read = node.get(&format!("{S}?offset=-1&live=long-poll&timeout_ms=60000")).send().await;
    read.expect(200).expect_header("stream-next-offset", &offset(3)).expect_header("stream-up-to-date", "true");
    read.must("stream-cursor");
    assert_eq!(read.text(), "abc");
}

#[tokio::test]
async fn long_poll_times_out_with_204_stream_cursor_and_up_to_date() {
    let node = node_with(TEXT, "abc").await;
    let read = node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=200", offset(3))).send().await;
    read.expect(204)
        .expect_header("stream-next-offset", &offset(3))
        .expect_header("stream-up-to-date", "true")
        .expect_no_header("stream-closed");
    let cursor = read.must("stream-cursor");
    assert!(cursor.parse::<u64>().is_ok(), "a cursor is an interval number: {cursor}");
    assert!(read.body.is_empty(), "{read:?}");
}

#[tokio::test]
async fn long_poll_cursor_echoed_back_gets_a_strictly_greater_cursor() {
    // Base protocol §8.1: cursors never go backwards.
    let node = node_with(TEXT, "abc").await;
    let url = format!("{S}?offset={}&live=long-poll&timeout_ms=1", offset(3));
    let first = node.get(&url).send().await;
    first.expect(204);
    let cursor: u64 = first.must("stream-cursor").parse().expect("numeric cursor");
    let second = node.get(&format!("{url}&cursor={cursor}")).send().await;
    second.expect(204);
    let next: u64 = second.must("stream-cursor").parse().expect("numeric cursor");
    assert!(next > cursor, "cursor {next} after echoing {cursor}");
}

#[tokio::test]
async fn long_poll_returns_data_appended_while_it_waits() {
    let node = node_with(TEXT, "abc").await;
    let poll = node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=30000", offset(3))).send();
    let append = async {
        node.wait_live_readers(1).await;
        node.append(S, TEXT, "def").await;
    };
    let (read, ()) = tokio::join!(poll, append);
    read.expect(200).expect_header("stream-next-offset", &offset(6));
    read.must("stream-cursor");
    assert_eq!(read.text(), "def");
}

#[tokio::test]
async fn long_poll_at_offset_now_waits_for_future_data_only() {
    let node = node_with(TEXT, "abc").await;
    let poll = node.get(&format!("{S}?offset=now&live=long-poll&timeout_ms=20000")).send();
    // An append that lands before the poll resolves `now` is not for it, so
    // keep appending until the poll answers.
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    let appends = async {
        loop {
            tokio::select! {
                _ = &mut done_rx => break,
                () = tokio::time::sleep(Duration::from_millis(200)) => {
                    node.append(S, TEXT, "def").await;
                }
            }
        }
    };
    let poll = async {
        let read = poll.await;
        let _ = done_tx.send(());
        read
    };
    let (read, ()) = tokio::join!(poll, appends);
    read.expect(200);
    let body = read.text();
    assert!(
        !body.is_empty() && body.len() % 3 == 0 && body.matches("def").count() == body.len() / 3,
        "only new data: {read:?}"
    );
}

#[tokio::test]
async fn long_poll_at_offset_now_times_out_with_the_tail() {
    let node = node_with(TEXT, "abc").await;
    node.get(&format!("{S}?offset=now&live=long-poll&timeout_ms=200"))
        .send()
        .await
        .expect(204)
        .expect_header("stream-next-offset", &offset(3))
        .expect_header("stream-up-to-date", "true");
}

#[tokio::test]
async fn long_poll_on_closed_stream_at_tail_answers_204_at_once() {
    // Base protocol §5.7: the server must not wait for the timeout. With a
    // 60 s timeout, an answer within the harness timeout shows it did not.
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    let read = node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=60000", offset(3))).send().await;
    read.expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-up-to-date", "true")
        .expect_header("stream-next-offset", &offset(3));
}

#[tokio::test]
async fn long_poll_at_offset_now_of_a_closed_stream_answers_204_closed_at_once() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    node.get(&format!("{S}?offset=now&live=long-poll&timeout_ms=60000"))
        .send()
        .await
        .expect(204)
        .expect_header("stream-closed", "true")
        .expect_header("stream-up-to-date", "true")
        .expect_header("stream-next-offset", &offset(3));
}

#[tokio::test]
async fn long_poll_waiting_at_the_tail_answers_204_closed_when_the_stream_closes() {
    let node = node_with(TEXT, "abc").await;
    let poll = node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=60000", offset(3))).send();
    let close = async {
        node.wait_live_readers(1).await;
        node.close(S).await;
    };
    let (read, ()) = tokio::join!(poll, close);
    read.expect(204).expect_header("stream-closed", "true").expect_header("stream-next-offset", &offset(3));
}

#[tokio::test]
async fn long_poll_beyond_the_tail_answers_416_with_the_tail() {
    let node = node_with(TEXT, "abc").await;
    node.get(&format!("{S}?offset={}&live=long-poll&timeout_ms=1", offset(9)))
        .send()
        .await
        .expect_error(416, "OFFSET_OUT_OF_RANGE")
        .expect_header("stream-next-offset", &offset(3));
}

// ---------------------------------------------------------------------------
// SSE
// ---------------------------------------------------------------------------

#[tokio::test]
async fn sse_answers_text_event_stream_with_the_stream_data_content_type() {
    let node = node_with(TEXT, "abc").await;
    let sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.status, 200);
    assert_eq!(sse.header("content-type"), Some("text/event-stream"));
    assert_eq!(sse.header("stream-data-content-type"), Some(TEXT));
    assert_eq!(sse.header("stream-sse-data-encoding"), None, "text is not encoded");
}

#[tokio::test]
async fn sse_from_the_beginning_sends_existing_data_then_live_appends() {
    let node = node_with(TEXT, "abc").await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), b"abc");
    assert_eq!(next_offset(&control), offset(3));
    assert_eq!(control["upToDate"], true, "{control}");
    assert!(control["streamCursor"].is_string(), "an open stream's control has a cursor: {control}");

    node.append(S, TEXT, "def").await;
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), b"def");
    assert_eq!(next_offset(&control), offset(6));
    assert_eq!(control["upToDate"], true, "{control}");
}

#[tokio::test]
async fn sse_data_events_are_followed_by_control_events() {
    let node = node_with(TEXT, "abc").await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    let first = sse.next().await.expect("an event");
    assert!(first.is("data"), "{first:?}");
    let second = sse.next().await.expect("an event");
    assert!(second.is("control"), "{second:?}");
}

#[tokio::test]
async fn sse_at_offset_now_sends_only_future_data() {
    let node = node_with(TEXT, "old").await;
    let mut sse = node.sse(&format!("{S}?offset=now&live=sse")).await;
    let (events, control) = sse.until_control().await;
    assert!(sse_payload(&events, false).is_empty(), "no historical data: {events:?}");
    assert_eq!(next_offset(&control), offset(3));
    assert_eq!(control["upToDate"], true, "{control}");

    node.append(S, TEXT, "new").await;
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), b"new");
    assert_eq!(next_offset(&control), offset(6));
}

#[tokio::test]
async fn sse_on_a_json_stream_carries_ndjson_text() {
    let node = node_with(JSON, r#"[{"a":1},{"b":2}]"#).await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.header("stream-data-content-type"), Some("application/x-ndjson"));
    assert_eq!(sse.header("stream-sse-data-encoding"), None);
    let (events, _) = sse.until_control().await;
    assert_eq!(String::from_utf8(sse_payload(&events, false)).expect("utf8"), "{\"a\":1}\n{\"b\":2}\n");
}

#[tokio::test]
async fn sse_text_with_line_breaks_survives_the_event_framing() {
    let node = node_with(TEXT, "line one\nline two\n\nevent: forged\n").await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    let (events, _) = sse.until_control().await;
    assert!(events.iter().all(|e| e.is("data") || e.is("control")), "{events:?}");
    assert_eq!(sse_payload(&events, false), b"line one\nline two\n\nevent: forged\n");
}

#[tokio::test]
async fn sse_base64_for_application_octet_stream_with_stream_sse_data_encoding() {
    let node = Node::start();
    node.create(S, BINARY).await;
    let bytes: Vec<u8> = vec![0x00, 0xff, b'\n', b'\r', 0x80, b'd', b'a', b't', b'a', b':', 0x7f];
    node.append(S, BINARY, bytes.clone()).await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    assert_eq!(sse.header("stream-sse-data-encoding"), Some("base64"));
    assert_eq!(sse.header("stream-data-content-type"), Some(BINARY));
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, true), bytes);
    assert_eq!(next_offset(&control), offset(bytes.len() as u64));
    // Control events stay JSON.
    assert_eq!(control["upToDate"], true, "{control}");

    node.append(S, BINARY, vec![1u8, 2, 3]).await;
    let (events, _) = sse.until_control().await;
    assert_eq!(sse_payload(&events, true), vec![1u8, 2, 3]);
}

#[tokio::test]
async fn sse_max_bytes_bounds_each_data_event() {
    let node = node_with(TEXT, "0123456789").await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse&max_bytes=4")).await;
    let events = sse.until(|e| e.is("control") && e.json()["upToDate"] == true).await;
    let data: Vec<&Event> = events.iter().filter(|e| e.is("data")).collect();
    assert!(data.len() >= 3, "three events of at most 4 bytes: {events:#?}");
    assert!(data.iter().all(|e| e.data.len() <= 4), "{events:#?}");
    assert_eq!(sse_payload(&events, false), b"0123456789");
    // Only the control event at the tail says up to date.
    let controls: Vec<Value> = events.iter().filter(|e| e.is("control")).map(Event::json).collect();
    assert!(controls[..controls.len() - 1].iter().all(|c| c.get("upToDate").is_none()), "{controls:?}");
}

#[tokio::test]
async fn sse_closing_with_stream_closed_when_the_stream_closes() {
    let node = node_with(TEXT, "abc").await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    sse.until_control().await;
    node.post(S).content_type(TEXT).closed().body("end").send().await.expect(204);
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), b"end");
    assert_eq!(control["streamClosed"], true, "{control}");
    assert_eq!(next_offset(&control), offset(6));
    // After the final control event the server closes the response.
    sse.expect_end().await;
}

#[tokio::test]
async fn sse_on_a_closed_stream_at_the_tail_sends_one_closed_control_and_ends() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    for from in [offset(3), "now".to_string()] {
        let mut sse = node.sse(&format!("{S}?offset={from}&live=sse")).await;
        let event = sse.next().await.expect("a control event");
        assert!(event.is("control"), "{event:?}");
        let control = event.json();
        assert_eq!(control["streamClosed"], true, "{control}");
        assert_eq!(control["upToDate"], true, "{control}");
        assert_eq!(next_offset(&control), offset(3));
        sse.expect_end().await;
    }
}

#[tokio::test]
async fn sse_from_the_beginning_of_a_closed_stream_sends_the_data_then_ends() {
    let node = node_with(TEXT, "abc").await;
    node.close(S).await;
    let mut sse = node.sse(&format!("{S}?offset=-1&live=sse")).await;
    let (events, control) = sse.until_control().await;
    assert_eq!(sse_payload(&events, false), b"abc");
    assert_eq!(control["streamClosed"], true, "{control}");
    sse.expect_end().await;
}

#[tokio::test]
async fn sse_beyond_the_tail_ends_with_an_error_event() {
    // spec/21 "an SSE session reports it as an `error` event from its first
    // read"; extensions §11: its data is the error body on one line.
    let node = node_with(TEXT, "abc").await;
    let mut sse = node.sse(&format!("{S}?offset={}&live=sse", offset(9))).await;
    assert_eq!(sse.status, 200, "the 416 of spec/28 is for catch-up and long-poll reads");
    let event = sse.next().await.expect("an error event");
    assert!(event.is("error"), "{event:?}");
    assert_eq!(event.json()["error"]["code"], "OFFSET_OUT_OF_RANGE", "{event:?}");
    sse.expect_end().await;
}
