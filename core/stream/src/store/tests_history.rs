//! History rewrites by a restore's import (extensions §2.4, §5.3; spec/35
//! "Backup and disaster recovery").

use super::tests::{Harness, key};
use super::*;
use crate::command::{AppendStream, DeleteStream, ImportGroup};
use crate::outcome::Inherited;
use crate::producer::{ClosedEpoch, ProducerHeaders};

fn import(target: &mut Harness, source: &StreamStore, digest: u8, history_id: u64) -> Result<Imported, Rejection> {
    let cmd = ImportGroup { store: Box::new(source.clone()), digest: [digest; 32], history_id };
    match target.apply(Command::Import(cmd)) {
        Outcome::Import(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

fn write(epoch: u64, seq: u64, body: &str) -> AppendStream {
    let mut cmd = Harness::append_cmd("s", Some("text/plain"), body);
    cmd.producer = Some(ProducerHeaders { id: "p1".into(), epoch, seq, digest: None });
    cmd
}

fn head(h: &Harness, name: &str) -> StreamInfo {
    h.store.head(&key(name), h.now_ms).expect("exists")
}

/// A source with stream `s` ("abc" by producer p1, epoch 0, seqs 0..=2).
fn source() -> Harness {
    let mut h = Harness::new();
    h.create("s", "text/plain").expect("created");
    for (seq, body) in ["a", "b", "c"].iter().enumerate() {
        h.append(write(0, seq as u64, body)).expect("applies");
    }
    h
}

#[test]
fn an_import_keeps_the_bytes_under_a_new_token_and_names_the_old_one() {
    let src = source();
    let before = head(&src, "s");
    assert_eq!(before.previous, None, "a stream never rewritten names no predecessor");
    let mut dst = Harness::new();
    let done = import(&mut dst, &src.store, 1, 77).expect("imports");
    assert_eq!(done, Imported { already: false, buckets: 1, streams: 1 });
    assert_eq!(dst.read_all("s"), "abc");
    let after = head(&dst, "s");
    assert_ne!(after.incarnation, before.incarnation);
    assert_eq!((after.tail, after.closed), (before.tail, before.closed));
    assert_eq!(after.previous, Some(Inherited { incarnation: before.incarnation, offset: before.tail }));
    // The old token is a mismatch now.
    let mut stale = write(1, 0, "d");
    stale.expect = Some(before.incarnation);
    assert_eq!(dst.append(stale), Err(Rejection::IncarnationMismatch { current: Some(after.incarnation) }));
}

#[test]
fn a_repeat_is_already_applied_and_any_other_import_is_refused() {
    let src = source();
    let mut dst = Harness::new();
    import(&mut dst, &src.store, 1, 77).expect("imports");
    let token = head(&dst, "s").incarnation;
    assert_eq!(import(&mut dst, &src.store, 1, 77), Ok(Imported { already: true, buckets: 1, streams: 1 }));
    assert_eq!(head(&dst, "s").incarnation, token, "no second history");
    assert_eq!(import(&mut dst, &src.store, 2, 78), Err(Rejection::ImportConflict));
    // A group that holds a stream, or only a bucket its streams left, refuses.
    let mut busy = Harness::new();
    busy.create("x", "text/plain").expect("created");
    assert_eq!(import(&mut busy, &src.store, 1, 77), Err(Rejection::ImportConflict));
    busy.apply(Command::Delete(DeleteStream { key: key("x"), expect: None }));
    assert_eq!(import(&mut busy, &src.store, 1, 77), Err(Rejection::ImportConflict));
    // An empty backup imported into an empty group still starts the history once.
    let mut empty = Harness::new();
    assert_eq!(import(&mut empty, &StreamStore::new(5), 3, 9).map(|i| i.already), Ok(false));
    assert_eq!(import(&mut empty, &src.store, 1, 77), Err(Rejection::ImportConflict));
}

#[test]
fn a_rewrite_closes_the_producers_epoch_but_its_repeats_keep_their_receipts() {
    let src = source();
    let mut dst = Harness::new();
    import(&mut dst, &src.store, 1, 77).expect("imports");
    let closed = ClosedEpoch { epoch: 0, seq: 2 };
    assert_eq!(dst.append(write(0, 3, "d")), Err(Rejection::ProducerClosedByHistory { closed }));
    assert_eq!(dst.append(write(0, 9, "d")), Err(Rejection::ProducerClosedByHistory { closed }));
    let repeat = dst.append(write(0, 2, "c")).expect("a repeat of a write that survived");
    assert_eq!(repeat.kind, AppendKind::Duplicate);
    assert!(repeat.receipt.is_some());
    // A later epoch is claimed as usual and writes on.
    let claim = dst.append(write(1, 0, "d")).expect("claim");
    assert_eq!(claim.kind, AppendKind::Applied);
    dst.append(write(1, 1, "e")).expect("next");
    assert!(matches!(dst.append(write(0, 3, "x")), Err(Rejection::ProducerStaleEpoch { current: 1, .. })));
    assert_eq!(dst.read_all("s"), "abcde");
}

#[test]
fn two_rewrites_name_one_predecessor_depending_on_writes_between() {
    let src = source();
    let original = head(&src, "s");
    // Restored twice with no write between: the token before both.
    let mut once = Harness::new();
    import(&mut once, &src.store, 1, 77).expect("imports");
    let mut twice = Harness::new();
    import(&mut twice, &once.store, 2, 88).expect("imports");
    let again = head(&twice, "s");
    assert_eq!(again.previous, Some(Inherited { incarnation: original.incarnation, offset: original.tail }));
    assert_ne!(again.incarnation, head(&once, "s").incarnation);
    // With a write between: the token between the two.
    once.append(Harness::append_cmd("s", Some("text/plain"), "d")).expect("writes");
    let between = head(&once, "s");
    let mut other = Harness::new();
    import(&mut other, &once.store, 3, 99).expect("imports");
    assert_eq!(head(&other, "s").previous, Some(Inherited { incarnation: between.incarnation, offset: between.tail }));
}

#[test]
fn a_recreated_stream_inherits_nothing_and_a_sweep_forgets_its_record() {
    let src = source();
    let mut dst = Harness::new();
    import(&mut dst, &src.store, 1, 77).expect("imports");
    dst.apply(Command::Delete(DeleteStream { key: key("s"), expect: None }));
    dst.create("s", "text/plain").expect("recreated");
    assert_eq!(head(&dst, "s").previous, None);
    dst.append(write(0, 0, "z")).expect("a new producer state, not the closed one");
    assert!(!dst.store.rewrites.is_empty());
    dst.apply(Command::Sweep);
    assert!(dst.store.rewrites.is_empty(), "the record of the deleted incarnation is dropped");
}

fn accept_loss(h: &mut Harness, history_id: u64) -> usize {
    match h.apply(Command::AcceptLoss(crate::command::AcceptLoss { history_id, term: 9 })) {
        Outcome::AcceptLoss { streams } => streams,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn an_accepted_loss_rewrites_every_stream_in_place_and_closes_its_producers() {
    let mut h = source();
    h.create("t", "text/plain").expect("created");
    let (s, t) = (head(&h, "s"), head(&h, "t"));
    assert_eq!(h.store.history_event(), None);
    assert_eq!(accept_loss(&mut h, 41), 2);
    assert_eq!(h.store.history_id(), 41);
    let event = h.store.history_event().expect("recorded");
    assert_eq!((event.term, event.log_index), (9, h.index));
    let after = head(&h, "s");
    assert_ne!(after.incarnation, s.incarnation);
    assert_eq!(after.previous, Some(Inherited { incarnation: s.incarnation, offset: s.tail }));
    assert_eq!(head(&h, "t").previous, Some(Inherited { incarnation: t.incarnation, offset: t.tail }));
    assert_eq!(h.read_all("s"), "abc", "the bytes stay");
    // Epoch 0 of p1 is closed at its last surviving seq; a repeat keeps its receipt.
    let closed = ClosedEpoch { epoch: 0, seq: 2 };
    assert_eq!(h.append(write(0, 3, "d")), Err(Rejection::ProducerClosedByHistory { closed }));
    assert_eq!(h.append(write(0, 2, "c")).expect("a repeat").kind, AppendKind::Duplicate);
    let mut stale = write(1, 0, "d");
    stale.expect = Some(s.incarnation);
    assert_eq!(h.append(stale), Err(Rejection::IncarnationMismatch { current: Some(after.incarnation) }));
    // A second loss with no write between names the token before both.
    assert_eq!(accept_loss(&mut h, 42), 2);
    assert_eq!(head(&h, "s").previous, Some(Inherited { incarnation: s.incarnation, offset: s.tail }));
    assert_ne!(head(&h, "s").incarnation, after.incarnation);
    // The same event again changes nothing.
    let token = head(&h, "s").incarnation;
    let second = h.store.history_event();
    assert_eq!(accept_loss(&mut h, 42), 0);
    assert_eq!(head(&h, "s").incarnation, token);
    assert_eq!(h.store.history_event(), second, "the repeat is not a new event");
    // A group with no stream starts its history all the same.
    let mut empty = Harness::new();
    assert_eq!(accept_loss(&mut empty, 7), 0);
    assert_eq!(empty.store.history_id(), 7);
}
