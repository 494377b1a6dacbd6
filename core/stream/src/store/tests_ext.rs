//! Scenario tests of the extensions in the store (spec/42), by section.

use bytes::Bytes;

use super::append::{MAX_PRODUCERS, PRODUCER_EVICTABLE_IDLE_MS, PRODUCER_IDLE_FORGET_MS};
use super::tests::{Harness, ct, key};
use super::*;
use crate::boundary::Boundary;
use crate::command::{AdvanceRetention, CreateStream, DeleteStream, PublishSnapshot};
use crate::lifetime::Lifetime;
use crate::offset::ReadFrom;
use crate::producer::ProducerHeaders;
use crate::snapshot::SnapshotDigest;

impl Harness {
    fn publish(&mut self, name: &str, offset: u64, body: &str) -> Result<SnapshotOk, Rejection> {
        let content_type = ct("application/octet-stream");
        let digest = SnapshotDigest::of(&content_type, body.as_bytes());
        let cmd = PublishSnapshot {
            key: key(name),
            offset: Offset(offset),
            content_type,
            body: Bytes::copy_from_slice(body.as_bytes()),
            digest,
            expect: None,
            cold: None,
        };
        match self.apply(Command::PublishSnapshot(cmd)) {
            Outcome::PublishSnapshot(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn retain(&mut self, name: &str, offset: u64, expect: Option<Incarnation>) -> Result<StreamInfo, Rejection> {
        let cmd = AdvanceRetention { key: key(name), offset: Offset(offset), expect };
        match self.apply(Command::AdvanceRetention(cmd)) {
            Outcome::AdvanceRetention(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn read_from(&self, name: &str, from: ReadFrom) -> Result<crate::outcome::ReadView, Rejection> {
        let q = ReadQuery { from, max_bytes: u64::MAX, boundary: Boundary::Byte, whole_json_messages: false };
        self.store.read(&key(name), q, self.now_ms)
    }

    fn produce(
        &mut self,
        name: &str,
        id: &str,
        epoch: u64,
        seq: u64,
        expect: Option<Incarnation>,
    ) -> Result<crate::outcome::AppendOk, Rejection> {
        let mut cmd = Harness::append_cmd(name, Some("text/plain"), "x");
        cmd.producer = Some(ProducerHeaders { id: id.into(), epoch, seq, digest: None });
        cmd.expect = expect;
        self.append(cmd)
    }
}

// --- §2.2 publish snapshot ---

#[test]
fn snapshot_publish_is_idempotent_and_refuses_other_or_older_content() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "abcdef", Lifetime::Forever, false).expect("created");
    let first = h.publish("s", 4, "snap").expect("published");
    assert_eq!(h.publish("s", 4, "snap").map(|ok| ok.snapshot), Ok(first.snapshot), "a repeat is idempotent");
    let conflict = Err(Rejection::SnapshotConflict { latest: first.snapshot });
    assert_eq!(h.publish("s", 4, "other"), conflict, "other content at the same offset");
    assert_eq!(h.publish("s", 2, "older"), conflict, "a stale publish");
    assert_eq!(h.publish("s", 7, "beyond"), Err(Rejection::SnapshotBeyondTail));
    let newer = h.publish("s", 6, "newer").expect("a later offset replaces it");
    assert_eq!(h.store.head(&key("s"), h.now_ms).map(|i| i.snapshot), Ok(Some(newer.snapshot)));
    assert_eq!(h.publish("missing", 0, "x"), Err(Rejection::StreamNotFound));
}

#[test]
fn json_snapshots_and_retention_need_message_boundaries() {
    let mut h = Harness::new();
    h.create_with("j", "application/json", "[1, 22, 333]", Lifetime::Forever, false).expect("created");
    // Stored text: "1\n22\n333\n" — boundaries at 0, 2, 5, 9.
    assert_eq!(h.publish("j", 3, "x"), Err(Rejection::NotJsonBoundary));
    h.publish("j", 5, "x").expect("a boundary");
    assert_eq!(h.retain("j", 1, None), Err(Rejection::NotJsonBoundary));
    h.retain("j", 2, None).expect("a boundary below the snapshot");
}

// --- §2.2 retention effect ---

#[test]
fn retention_is_monotonic_exact_and_never_past_the_snapshot() {
    let mut h = Harness::new();
    h.create_with("r", "text/plain", "0123456789", Lifetime::Forever, false).expect("created");
    assert_eq!(h.retain("r", 3, None), Err(Rejection::InvalidRetention), "no snapshot yet");
    assert_eq!(h.retain("r", 0, None).map(|i| i.retained), Ok(Offset(0)), "at the start: nothing to do");
    h.publish("r", 6, "snap").expect("published");
    assert_eq!(h.retain("r", 7, None), Err(Rejection::InvalidRetention), "newer than the snapshot");
    assert_eq!(h.retain("r", 11, None), Err(Rejection::InvalidRetention), "beyond the tail");
    assert_eq!(h.retain("r", 4, None).map(|i| i.retained), Ok(Offset(4)), "exact");
    assert_eq!(h.retain("r", 2, None).map(|i| i.retained), Ok(Offset(4)), "never backwards");
    let incarnation = h.store.head(&key("r"), h.now_ms).expect("live").incarnation;
    let gone = Err(Rejection::StreamGone { retained: Offset(4), incarnation });
    assert_eq!(h.read_from("r", ReadFrom::Start).map(|v| v.next), gone.clone(), "offset=-1 once trimmed");
    assert_eq!(h.read_from("r", ReadFrom::At(Offset(3))).map(|v| v.next), gone, "below the retained offset");
    let rest = h.read_from("r", ReadFrom::At(Offset(4))).expect("readable");
    let text: String = rest.chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    assert_eq!(text, "456789");
    assert_eq!(h.publish("r", 3, "x"), Err(Rejection::StreamGone { retained: Offset(4), incarnation }));
}

// --- §2.4 incarnations ---

#[test]
fn the_incarnation_precondition_guards_every_write() {
    let mut h = Harness::new();
    let token = h.create("s", "text/plain").expect("created").info.incarnation;
    let other = Incarnation::parse("4503599627370497").expect("valid token");
    let mismatch = Err(Rejection::IncarnationMismatch { current: Some(token) });
    let mut append = Harness::append_cmd("s", Some("text/plain"), "x");
    append.expect = Some(other);
    assert_eq!(h.append(append.clone()).map(|_| ()), mismatch);
    assert_eq!(h.read_all("s"), "", "a refused write applies nothing");
    append.expect = Some(token);
    h.append(append).expect("the right token applies");
    assert_eq!(h.retain("s", 0, Some(other)).map(|_| ()), mismatch);
    let delete = |expect| Command::Delete(DeleteStream { key: key("s"), expect });
    assert_eq!(h.apply(delete(Some(other))), Outcome::Delete(mismatch.map(|()| None)));
    assert_eq!(h.apply(delete(Some(token))), Outcome::Delete(Ok(None)));
    assert_eq!(h.apply(delete(Some(token))), Outcome::Delete(Err(Rejection::StreamNotFound)), "404 before 412");
}

#[test]
fn a_create_with_a_token_never_creates_and_a_recreate_gets_a_new_token() {
    let mut h = Harness::new();
    let create = |h: &mut Harness, expect| {
        let cmd = CreateStream {
            key: key("c"),
            content_type: ct("text/plain"),
            lifetime: Lifetime::Forever,
            closed: false,
            stream_seq: None,
            body: crate::command::Body::Empty,
            expect,
        };
        match h.apply(Command::Create(cmd)) {
            Outcome::Create(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    };
    let any = Incarnation::parse("4503599627370497").expect("valid token");
    assert_eq!(create(&mut h, Some(any)), Err(Rejection::IncarnationMismatch { current: None }));
    let first = create(&mut h, None).expect("created").info.incarnation;
    assert!(!create(&mut h, Some(first)).expect("an existing stream").created);
    h.apply(Command::Delete(DeleteStream { key: key("c"), expect: None }));
    let second = create(&mut h, None).expect("recreated").info.incarnation;
    assert_ne!(first, second);
}

// --- §3 bootstrap ---

#[test]
fn bootstrap_starts_at_the_snapshot_and_caps_json_parts_at_message_boundaries() {
    let mut h = Harness::new();
    h.create_with("j", "application/json", "[1, 22, 333, 4444]", Lifetime::Forever, false).expect("created");
    let none = h.store.bootstrap(&key("j"), 100, h.now_ms).expect("bootstrap");
    assert_eq!((none.snapshot.is_none(), none.start, none.next), (true, Offset(0), Offset(14)));
    h.publish("j", 2, "s").expect("published");
    let capped = h.store.bootstrap(&key("j"), 4, h.now_ms).expect("bootstrap");
    assert_eq!((capped.start, capped.next), (Offset(2), Offset(5)), "whole messages within the cap");
    let one = h.store.bootstrap(&key("j"), 1, h.now_ms).expect("bootstrap");
    assert_eq!(one.next, Offset(5), "at least one message");
    h.create_with("b", "text/plain", "0123456789", Lifetime::Forever, false).expect("created");
    let partial = h.store.bootstrap(&key("b"), 4, h.now_ms).expect("bootstrap");
    assert_eq!((partial.next, partial.updates.len()), (Offset(0), 0), "non-JSON over the cap: snapshot part only");
}

// --- §5.3, §5.4 producers: forgetting, the epoch floor and the cap ---

#[test]
fn idle_producers_are_forgotten_and_raise_the_epoch_floor() {
    let mut h = Harness::new();
    let token = h.create("s", "text/plain").expect("created").info.incarnation;
    h.produce("s", "old", 5, 0, None).expect("claim");
    h.now_ms += PRODUCER_IDLE_FORGET_MS;
    // The write that tidies forgets `old`; with the token, `old` at epoch 5 is expired.
    assert_eq!(h.produce("s", "old", 5, 1, Some(token)).map(|_| ()), Err(Rejection::ProducerExpired { floor: 5 }));
    assert_eq!(h.produce("s", "old", 3, 0, Some(token)).map(|_| ()), Err(Rejection::ProducerExpired { floor: 5 }));
    let claim = h.produce("s", "old", 6, 0, Some(token)).expect("a claim above the floor");
    assert_eq!(claim.producer.and_then(|p| p.closed_epoch), None);
    // Without the token a forgotten producer is new, at any epoch.
    h.now_ms += PRODUCER_IDLE_FORGET_MS;
    h.produce("s", "other", 0, 0, None).expect("tidies `old` away");
    h.produce("s", "old", 1, 0, None).expect("new again without the token");
    assert_eq!(
        h.produce("s", "old", 1, 1, Some(token)).map(|_| ()),
        Err(Rejection::ProducerExpired { floor: 6 }),
        "state opened below the floor"
    );
    let lift = h.produce("s", "old", 7, 0, Some(token)).expect("a claim above the floor lifts it");
    assert_eq!(lift.producer.and_then(|p| p.closed_epoch), None, "and reports no closure");
    h.produce("s", "old", 7, 1, Some(token)).expect("now as good as opened above the floor");
}

#[test]
fn the_producer_cap_evicts_only_producers_idle_for_an_hour() {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    for i in 0..MAX_PRODUCERS {
        h.produce("s", &format!("p{i}"), 0, 0, None).expect("claim");
    }
    assert_eq!(h.produce("s", "late", 0, 0, None).map(|_| ()), Err(Rejection::ProducerLimit));
    h.now_ms += PRODUCER_EVICTABLE_IDLE_MS;
    h.produce("s", "p1", 0, 1, None).expect("p1 stays busy");
    h.produce("s", "late", 0, 0, None).expect("evicts the least recently seen idle producer");
    let stream = h.store.live(&key("s"), h.now_ms).expect("live");
    assert_eq!(stream.producers().len(), MAX_PRODUCERS);
    assert!(!stream.producers().contains_key("p0") && stream.producers().contains_key("p1"));
    assert_eq!(stream.epoch_floor(), Some(0));
}

/// spec/35 "Tenant offboarding": a purge removes every stream of its
/// bucket, keeps the bucket's usage counters, and fences the bucket for
/// good; other buckets are untouched; a second purge removes nothing.
#[test]
fn a_purge_removes_the_buckets_streams_and_fences_it_for_good() {
    let mut h = Harness::new();
    h.create_with("a", "text/plain", "one", Lifetime::Forever, false).expect("a");
    h.create_with("b", "text/plain", "two", Lifetime::Forever, false).expect("b");
    let other = StreamKey::parse("other", "c").expect("key");
    let create_other = |key: StreamKey| {
        Command::Create(CreateStream {
            key,
            content_type: ct("text/plain"),
            lifetime: Lifetime::Forever,
            closed: false,
            stream_seq: None,
            body: crate::command::Body::Bytes(Bytes::from_static(b"kept")),
            expect: None,
        })
    };
    assert!(matches!(h.apply(create_other(other.clone())), Outcome::Create(Ok(_))));
    let usage_before = h.store.usage_report(h.now_ms);

    let purge = || Command::PurgeBucket(crate::command::PurgeBucket { bucket: key("a").bucket });
    assert_eq!(h.apply(purge()), Outcome::PurgeBucket { removed: 2 });
    assert!(h.store.erased(&key("a").bucket) && !h.store.knows_bucket(&key("a").bucket));
    assert!(h.store.live(&key("a"), h.now_ms).is_none());
    // Creates and appends in it answer BUCKET_ERASED, now and after a second purge.
    assert_eq!(h.create("a", "text/plain"), Err(Rejection::BucketErased));
    assert_eq!(h.append(Harness::append_cmd("b", None, "x")), Err(Rejection::BucketErased));
    assert_eq!(h.apply(purge()), Outcome::PurgeBucket { removed: 0 });
    assert_eq!(h.create("new", "text/plain"), Err(Rejection::BucketErased));
    // The other bucket is as it was; the purged bucket's counters stay.
    let view = h
        .store
        .read(
            &other,
            ReadQuery {
                from: ReadFrom::Start,
                max_bytes: u64::MAX,
                boundary: Boundary::Byte,
                whole_json_messages: false,
            },
            h.now_ms,
        )
        .expect("the other bucket reads");
    assert_eq!(view.chunks.concat(), b"kept");
    let usage_after = h.store.usage_report(h.now_ms);
    let committed = |u: &std::collections::BTreeMap<crate::ids::BucketId, crate::usage::BucketUsage>| {
        u.get(&key("a").bucket).map(|l| (l.committed_append_bytes, l.committed_records))
    };
    assert_eq!(committed(&usage_after), committed(&usage_before), "committed counters survive the purge");
    assert_eq!(usage_after.get(&key("a").bucket).map(|l| l.stream_count), Some(0));
    assert!(h.store.buckets().any(|b| *b == key("a").bucket), "GC still knows where its objects were");
}
