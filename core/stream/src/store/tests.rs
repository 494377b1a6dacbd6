//! Scenario tests of the store, grouped by the spec section they check.

use bytes::Bytes;

use super::*;
use crate::boundary::Boundary;
use crate::command::{AppendStream, Body, CreateStream, DeleteStream, RenewStream};
use crate::lifetime::Lifetime;
use crate::offset::{Offset, ReadFrom};
use crate::outcome::AppendKind;
use crate::producer::ProducerHeaders;

pub(super) fn key(name: &str) -> StreamKey {
    StreamKey::parse("test", name).expect("valid key")
}

pub(super) fn ct(s: &str) -> ContentType {
    ContentType::parse(s).expect("valid content type")
}

pub(super) struct Harness {
    pub(super) store: StreamStore,
    pub(super) now_ms: u64,
    pub(super) index: u64,
}

impl Harness {
    pub(super) fn new() -> Harness {
        Harness { store: StreamStore::new(42), now_ms: 1_000_000, index: 0 }
    }

    pub(super) fn apply(&mut self, command: Command) -> Outcome {
        self.index += 1;
        self.store.apply(command, ApplyCtx { now_ms: self.now_ms, log_index: self.index })
    }

    pub(super) fn create_with(
        &mut self,
        name: &str,
        content_type: &str,
        body: &str,
        lifetime: Lifetime,
        closed: bool,
    ) -> Result<CreateOk, Rejection> {
        let content_type = ct(content_type);
        let body = Body::prepare(Some(&content_type), Bytes::copy_from_slice(body.as_bytes()));
        match self.apply(Command::Create(CreateStream {
            key: key(name),
            content_type,
            lifetime,
            closed,
            stream_seq: None,
            body,
            expect: None,
        })) {
            Outcome::Create(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    pub(super) fn create(&mut self, name: &str, content_type: &str) -> Result<CreateOk, Rejection> {
        self.create_with(name, content_type, "", Lifetime::Forever, false)
    }

    pub(super) fn append_cmd(name: &str, content_type: Option<&str>, body: &str) -> AppendStream {
        let content_type = content_type.map(ct);
        AppendStream {
            key: key(name),
            body: Body::prepare(content_type.as_ref(), Bytes::copy_from_slice(body.as_bytes())),
            content_type,
            close: false,
            stream_seq: None,
            producer: None,
            expect: None,
        }
    }

    pub(super) fn append(&mut self, cmd: AppendStream) -> Result<AppendOk, Rejection> {
        match self.apply(Command::Append(cmd)) {
            Outcome::Append(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    pub(super) fn read_all(&self, name: &str) -> String {
        let view = self
            .store
            .read(
                &key(name),
                ReadQuery {
                    from: ReadFrom::Start,
                    max_bytes: u64::MAX,
                    boundary: Boundary::Byte,
                    whole_json_messages: false,
                },
                self.now_ms,
            )
            .expect("readable");
        view.chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect()
    }
}

fn producer(epoch: u64, seq: u64) -> Option<ProducerHeaders> {
    Some(ProducerHeaders { id: "p1".into(), epoch, seq, digest: None })
}

// --- base protocol §5.1: create ---

#[test]
fn create_is_idempotent_only_when_configuration_matches() {
    let mut h = Harness::new();
    assert!(h.create("a", "text/plain").expect("created").created);
    assert!(!h.create("a", "text/plain").expect("exists").created);
    assert_eq!(h.create("a", "application/json"), Err(Rejection::StreamExistsConflict));
    assert_eq!(
        h.create_with("a", "text/plain", "", Lifetime::Ttl { secs: 5 }, false),
        Err(Rejection::StreamExistsConflict)
    );
    assert_eq!(h.create_with("a", "text/plain", "", Lifetime::Forever, true), Err(Rejection::StreamExistsConflict));
}

/// A create whose absolute expiry is not after the time it applies at is
/// refused (the stream would be born expired); a later one is taken.
#[test]
fn create_refuses_an_expiry_that_has_passed() {
    let mut h = Harness::new();
    let now = h.now_ms;
    for at_ms in [0, now - 1, now] {
        let refused = h.create_with("e", "text/plain", "x", Lifetime::ExpiresAt { at_ms }, false);
        assert_eq!(refused, Err(Rejection::ExpiryNotInFuture), "expires at {at_ms}, now {now}");
    }
    let append = h.append(Harness::append_cmd("e", Some("text/plain"), "y"));
    assert_eq!(append.map(|_| ()), Err(Rejection::StreamNotFound), "nothing was created");
    let later = h.create_with("e", "text/plain", "x", Lifetime::ExpiresAt { at_ms: now + 1 }, false);
    assert!(later.expect("a future expiry").created);
}

#[test]
fn create_compares_closure_status() {
    let mut h = Harness::new();
    h.create_with("c", "text/plain", "done", Lifetime::Forever, true).expect("created closed");
    assert!(!h.create_with("c", "text/plain", "", Lifetime::Forever, true).expect("same").created);
    assert_eq!(h.create("c", "text/plain"), Err(Rejection::StreamExistsConflict));
    assert_eq!(h.read_all("c"), "done");
}

#[test]
fn create_of_json_stream_flattens_and_accepts_an_empty_array() {
    let mut h = Harness::new();
    let ok = h.create_with("j", "application/json", "[{\"a\": 1}, [2, 3]]", Lifetime::Forever, false).expect("created");
    assert_eq!(ok.info.tail, Offset(14));
    assert_eq!(h.read_all("j"), "{\"a\":1}\n[2,3]\n");
    assert_eq!(
        h.create_with("k", "application/json", "[]", Lifetime::Forever, false).map(|c| c.info.tail),
        Ok(Offset(0))
    );
    assert!(matches!(
        h.create_with("m", "application/json", "{", Lifetime::Forever, false),
        Err(Rejection::InvalidJson(_))
    ));
    assert!(h.store.live(&key("m"), h.now_ms).is_none(), "a refused create creates nothing");
}

// --- base protocol §5.2: append ---

#[test]
fn append_refusals_follow_the_precedence_of_the_base_protocol() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let table: Vec<(AppendStream, Rejection)> = vec![
        (Harness::append_cmd("missing", Some("text/plain"), "x"), Rejection::StreamNotFound),
        (Harness::append_cmd("s", Some("text/plain"), ""), Rejection::EmptyAppend),
        (Harness::append_cmd("s", None, "x"), Rejection::MissingContentType),
        (Harness::append_cmd("s", Some("text/html"), "x"), Rejection::ContentTypeMismatch),
    ];
    for (cmd, expected) in table {
        assert_eq!(h.append(cmd.clone()), Err(expected), "{cmd:?}");
    }
    assert_eq!(h.read_all("s"), "");
}

#[test]
fn appends_are_contiguous_and_return_the_new_tail() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let a = h.append(Harness::append_cmd("s", Some("text/plain"), "hello ")).expect("a");
    let b = h.append(Harness::append_cmd("s", Some("Text/Plain"), "world")).expect("b");
    assert_eq!(a.receipt.map(|r| (r.start, r.next)), Some((Offset(0), Offset(6))));
    assert_eq!(b.receipt.map(|r| (r.start, r.next)), Some((Offset(6), Offset(11))));
    assert_eq!(h.read_all("s"), "hello world");
}

#[test]
fn json_append_rejects_empty_arrays_and_invalid_json_atomically() {
    let mut h = Harness::new();
    h.create("j", "application/json").expect("created");
    assert_eq!(h.append(Harness::append_cmd("j", Some("application/json"), "[]")), Err(Rejection::EmptyJsonArray));
    assert!(matches!(
        h.append(Harness::append_cmd("j", Some("application/json"), "[1, 2,]")),
        Err(Rejection::InvalidJson(_))
    ));
    h.append(Harness::append_cmd("j", Some("application/json"), "[1, {\"b\" : true}]")).expect("ok");
    assert_eq!(h.read_all("j"), "1\n{\"b\":true}\n");
}

// --- base protocol §4.1 and §5.3: closure ---

#[test]
fn closed_streams_refuse_appends_and_close_idempotently() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let mut close = Harness::append_cmd("s", Some("text/plain"), "end");
    close.close = true;
    let closed = h.append(close.clone()).expect("closed");
    assert!(closed.info.closed);
    assert_eq!(h.append(close), Err(Rejection::StreamClosed { tail: Offset(3) }));
    // Closed comes before content-type mismatch.
    assert_eq!(
        h.append(Harness::append_cmd("s", Some("text/html"), "x")),
        Err(Rejection::StreamClosed { tail: Offset(3) })
    );
    let mut close_only = Harness::append_cmd("s", None, "");
    close_only.close = true;
    assert_eq!(h.append(close_only).map(|ok| ok.kind), Ok(AppendKind::AlreadyClosed));
}

// --- spec/18: Stream-Seq ---

#[test]
fn stream_seq_is_a_bytewise_compare_and_set() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let with_seq = |seq: &str| {
        let mut cmd = Harness::append_cmd("s", Some("text/plain"), "x");
        cmd.stream_seq = StreamSeq::parse(seq.as_bytes()).expect("short");
        cmd
    };
    h.append(with_seq("0002")).expect("first");
    let last = StreamSeq::parse(b"0002").expect("short").expect("printable");
    assert_eq!(h.append(with_seq("0002")), Err(Rejection::StreamSeqConflict { last: last.clone(), tail: Offset(1) }));
    assert_eq!(h.append(with_seq("0001")), Err(Rejection::StreamSeqConflict { last, tail: Offset(1) }));
    h.append(Harness::append_cmd("s", Some("text/plain"), "y")).expect("unchecked append");
    h.append(with_seq("0010")).expect("greater");
    assert_eq!(h.read_all("s"), "xyx");
}

// --- base protocol §5.2.1: idempotent producers ---

#[test]
fn producer_retries_are_deduplicated_with_their_receipt() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let write = |epoch, seq, body: &str| {
        let mut cmd = Harness::append_cmd("s", Some("text/plain"), body);
        cmd.producer = producer(epoch, seq);
        cmd
    };
    let first = h.append(write(0, 0, "a")).expect("a");
    assert_eq!(first.kind, AppendKind::Applied);
    let repeat = h.append(write(0, 0, "a")).expect("repeat");
    assert_eq!(repeat.kind, AppendKind::Duplicate);
    assert_eq!(repeat.receipt, first.receipt);
    h.append(write(0, 1, "b")).expect("b");
    let older = h.append(write(0, 0, "a")).expect("older repeat");
    assert_eq!((older.kind, older.receipt), (AppendKind::Duplicate, None));
    assert_eq!(h.append(write(0, 5, "c")), Err(Rejection::ProducerSeqGap { expected: 2, received: 5 }));
    assert_eq!(h.append(write(1, 1, "c")), Err(Rejection::ProducerEpochNotClaimed));
    let claim = h.append(write(1, 0, "c")).expect("claim");
    assert_eq!(claim.producer.and_then(|p| p.closed_epoch).map(|c| (c.epoch, c.seq)), Some((0, 1)));
    assert!(matches!(h.append(write(0, 2, "d")), Err(Rejection::ProducerStaleEpoch { current: 1, .. })));
    assert_eq!(h.read_all("s"), "abc");
}

/// `group_state_gauges` (spec/35 "Memory"): what the group holds.
#[test]
fn state_gauges_count_streams_buckets_producers_and_hot_bytes() {
    let mut h = Harness::new();
    assert_eq!(h.store.gauges(), StateGauges::default());
    h.create("s", "text/plain").expect("created");
    h.create("t", "text/plain").expect("created");
    let mut write = Harness::append_cmd("s", Some("text/plain"), "hello");
    write.producer = producer(0, 0);
    h.append(write).expect("appended");
    h.append(Harness::append_cmd("t", Some("text/plain"), "abc")).expect("appended");
    let g = h.store.gauges();
    assert_eq!((g.streams, g.buckets, g.producers, g.soft_deleted_streams), (2, 1, 1, 0), "{g:?}");
    assert_eq!(g.hot_bytes, 8);
}

#[test]
fn a_producer_repeat_of_the_closing_write_succeeds_on_a_closed_stream() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    let mut last = Harness::append_cmd("s", Some("text/plain"), "z");
    last.producer = producer(0, 0);
    last.close = true;
    h.append(last.clone()).expect("closing write");
    let repeat = h.append(last).expect("repeat");
    assert_eq!(repeat.kind, AppendKind::Duplicate);
    assert!(repeat.receipt.is_some_and(|r| r.closed));
    let mut other = Harness::append_cmd("s", Some("text/plain"), "y");
    other.producer = producer(0, 1);
    assert_eq!(h.append(other), Err(Rejection::StreamClosed { tail: Offset(1) }));
}

// --- spec/13: lifetime ---

#[test]
fn ttl_streams_expire_and_writes_renew_them() {
    let mut h = Harness::new();
    h.create_with("t", "text/plain", "", Lifetime::Ttl { secs: 10 }, false).expect("created");
    h.now_ms += 9_000;
    h.append(Harness::append_cmd("t", Some("text/plain"), "x")).expect("renews");
    h.now_ms += 9_000;
    assert!(h.store.head(&key("t"), h.now_ms).is_ok());
    h.now_ms += 1_000;
    assert_eq!(h.store.head(&key("t"), h.now_ms), Err(Rejection::StreamNotFound));
    assert!(h.create("t", "text/html").expect("expired name is free").created);
}

#[test]
fn reads_ask_for_renewal_once_a_quarter_window_passed() {
    let mut h = Harness::new();
    h.create_with("t", "text/plain", "", Lifetime::Ttl { secs: 8 }, false).expect("created");
    let q = ReadQuery { from: ReadFrom::Start, max_bytes: 10, boundary: Boundary::Byte, whole_json_messages: false };
    assert!(!h.store.read(&key("t"), q, h.now_ms + 1_000).expect("read").wants_renewal);
    h.now_ms += 2_000;
    let view = h.store.read(&key("t"), q, h.now_ms).expect("read");
    assert!(view.wants_renewal);
    h.apply(Command::Renew(RenewStream { key: key("t"), incarnation: view.info.incarnation }));
    assert!(!h.store.read(&key("t"), q, h.now_ms).expect("read").wants_renewal);
}

#[test]
fn expires_at_is_fixed_and_sweep_removes_expired_streams() {
    let mut h = Harness::new();
    let at_ms = h.now_ms + 5_000;
    h.create_with("e", "text/plain", "", Lifetime::ExpiresAt { at_ms }, false).expect("created");
    h.append(Harness::append_cmd("e", Some("text/plain"), "x")).expect("append");
    h.now_ms = at_ms;
    assert_eq!(h.apply(Command::Sweep), Outcome::Sweep { removed: 1, released: vec![] });
    assert!(h.store.is_empty());
}

/// A bucket is known once a stream was created in it, and stays known when
/// its streams are deleted or expire (`BUCKET_NOT_FOUND` is for the others).
#[test]
fn a_bucket_stays_known_after_its_streams_leave() {
    let mut h = Harness::new();
    let bucket = key("d").bucket;
    assert!(!h.store.knows_bucket(&bucket), "no stream was ever created in it");
    h.create("d", "text/plain").expect("created");
    let at_ms = h.now_ms + 5_000;
    h.create_with("e", "text/plain", "", Lifetime::ExpiresAt { at_ms }, false).expect("created");
    assert_eq!(h.apply(Command::Delete(DeleteStream { key: key("d"), expect: None })), Outcome::Delete(Ok(None)));
    h.now_ms = at_ms;
    assert_eq!(h.apply(Command::Sweep), Outcome::Sweep { removed: 1, released: vec![] });
    assert!(h.store.is_empty(), "no stream is left");
    assert!(h.store.knows_bucket(&bucket), "the bucket held streams");
}

// --- base protocol §5.4 and incarnations ---

#[test]
fn delete_then_recreate_is_a_new_incarnation() {
    let mut h = Harness::new();
    let first = h.create("d", "text/plain").expect("created").info.incarnation;
    assert_eq!(h.apply(Command::Delete(DeleteStream { key: key("d"), expect: None })), Outcome::Delete(Ok(None)));
    assert_eq!(
        h.apply(Command::Delete(DeleteStream { key: key("d"), expect: None })),
        Outcome::Delete(Err(Rejection::StreamNotFound))
    );
    let second = h.create("d", "text/plain").expect("recreated").info.incarnation;
    assert_ne!(first, second);
}

// --- base protocol §5.6: reads ---

#[test]
fn reads_start_at_sentinels_and_refuse_offsets_beyond_the_tail() {
    let mut h = Harness::new();
    h.create_with("r", "text/plain", "abcdef", Lifetime::Forever, false).expect("created");
    let read = |from, max| {
        h.store.read(
            &key("r"),
            ReadQuery { from, max_bytes: max, boundary: Boundary::Byte, whole_json_messages: false },
            h.now_ms,
        )
    };
    let all = read(ReadFrom::Start, 100).expect("all");
    assert!(all.up_to_date && all.next == Offset(6));
    let part = read(ReadFrom::At(Offset(2)), 3).expect("part");
    assert!(!part.up_to_date && part.next == Offset(5));
    let tail = read(ReadFrom::Tail, 100).expect("tail");
    assert!(tail.is_empty() && tail.up_to_date);
    assert_eq!(
        read(ReadFrom::At(Offset(7)), 1),
        Err(Rejection::OffsetBeyondTail { tail: Offset(6), incarnation: all.info.incarnation })
    );
}

// --- spec/35: committed usage ---

/// Committed creates and appends count their bytes, records and write units
/// (at least one each); a deduplicated retry and a repeated create count
/// nothing; deleting a stream keeps the counters and drops the gauges.
#[test]
fn committed_usage_counts_what_applied_once() {
    let mut h = Harness::new();
    let bucket = key("s").bucket;
    let usage = |h: &Harness| h.store.usage_report(h.now_ms).get(&bucket).copied().unwrap_or_default();
    h.create_with("s", "text/plain", "abc", Lifetime::Forever, false).expect("created");
    h.create_with("s", "text/plain", "", Lifetime::Forever, false).expect("a repeat create");
    let after_create = usage(&h);
    assert_eq!(
        (after_create.committed_append_bytes, after_create.committed_records, after_create.committed_write_units),
        (3, 1, 1)
    );
    let mut write = Harness::append_cmd("s", Some("text/plain"), &"x".repeat(20_000));
    write.producer = producer(0, 0);
    h.append(write.clone()).expect("an append");
    let retry = h.append(write).expect("a retry");
    assert_eq!(retry.kind, AppendKind::Duplicate);
    h.create_with("j", "application/json", r#"[{"a":1},{"b":2}]"#, Lifetime::Forever, false).expect("created");
    let u = usage(&h);
    assert_eq!(u.committed_append_bytes, 3 + 20_000 + 16, "{u:?}");
    assert_eq!(u.committed_records, 1 + 1 + 2);
    assert_eq!(u.committed_write_units, 1 + 2 + 1, "ceil(20000 / 10240) = 2");
    assert_eq!((u.stream_count, u.retained_bytes), (2, 3 + 20_000 + 16));
    assert_eq!(h.apply(Command::Delete(DeleteStream { key: key("s"), expect: None })), Outcome::Delete(Ok(None)));
    let gone = usage(&h);
    assert_eq!(gone.committed_append_bytes, u.committed_append_bytes, "counters survive deletion");
    assert_eq!((gone.stream_count, gone.retained_bytes), (1, 16));
    assert_eq!(h.store.write_unit_bytes(), crate::usage::WRITE_UNIT_BYTES);
}
