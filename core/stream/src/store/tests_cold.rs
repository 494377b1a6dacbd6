//! `CommitCold` and `CompactCold`: a compaction moves each span it read
//! into its object only while the span is still there as it was; bytes,
//! edges and digests stay, so reads and JSON boundaries see no change.

use super::tests::{Harness, key};
use super::*;
use crate::DeleteStream;
use crate::cold::{ColdMove, ColdPiece, CommitCold, CompactCold};

/// A JSON stream of three appends, each flushed to an object of its own
/// (`p0`, `p1`, `p2`), as three small flushes leave it.
fn three_flushed_spans(h: &mut Harness) -> Incarnation {
    h.create("s", "application/json").expect("created");
    for body in ["[1]", "[22]", "[333]"] {
        h.append(Harness::append_cmd("s", Some("application/json"), body)).expect("appended");
    }
    let incarnation = h.store.stored(&key("s")).expect("stored").incarnation;
    let mut start = 0;
    for (i, len) in [2u64, 3, 4].into_iter().enumerate() {
        let piece = ColdPiece {
            key: key("s"),
            incarnation,
            start: Offset(start),
            len,
            object_offset: 10 * i as u64,
            digest: [i as u8; 32],
        };
        let commit = CommitCold { object: format!("p{i}"), pieces: vec![piece] };
        assert_eq!(h.apply(Command::CommitCold(commit)), Outcome::CommitCold { frozen: 1 });
        start += len;
    }
    incarnation
}

fn spans(h: &Harness) -> Vec<(u64, String, u64)> {
    let stream = h.store.stored(&key("s")).expect("stored");
    stream.data.cold_spans().iter().map(|s| (s.start, s.object.clone(), s.object_offset)).collect()
}

/// The move of span `i` of `three_flushed_spans` to `at` of a compacted object.
fn move_of(i: usize, at: u64) -> ColdMove {
    let (start, len) = [(0, 2), (2, 3), (5, 4)][i];
    ColdMove { start, len, digest: [i as u8; 32], from: format!("p{i}"), object_offset: at }
}

fn compact(h: &mut Harness, incarnation: Incarnation, moves: Vec<ColdMove>) -> Outcome {
    h.apply(Command::CompactCold(CompactCold { key: key("s"), incarnation, object: "c".into(), moves }))
}

#[test]
fn a_compaction_moves_every_span_it_read_and_keeps_edges_and_bytes() {
    let mut h = Harness::new();
    let incarnation = three_flushed_spans(&mut h);
    let boundaries_before: Vec<_> =
        (0..=9).map(|p| h.store.stored(&key("s")).expect("s").data.is_message_boundary(p)).collect();
    let moves = vec![move_of(0, 8), move_of(1, 10), move_of(2, 13)];
    assert_eq!(compact(&mut h, incarnation, moves), Outcome::CompactCold { moved: 3 });
    assert_eq!(spans(&h), vec![(0, "c".into(), 8), (2, "c".into(), 10), (5, "c".into(), 13)]);
    let data = &h.store.stored(&key("s")).expect("s").data;
    let boundaries_after: Vec<_> = (0..=9).map(|p| data.is_message_boundary(p)).collect();
    assert_eq!(boundaries_before, boundaries_after, "the spans' edges stay message boundaries");
    assert_eq!(h.store.cold_objects(), ["c".to_string()].into_iter().collect(), "the packs are unreferenced");
}

#[test]
fn a_span_that_changed_since_the_compaction_read_it_stays() {
    let mut h = Harness::new();
    let incarnation = three_flushed_spans(&mut h);
    let mut other_digest = move_of(1, 10);
    other_digest.digest = [9; 32];
    let mut other_object = move_of(2, 13);
    other_object.from = "p7".into();
    let mut other_len = move_of(0, 8);
    other_len.len = 3;
    let no_span_there = ColdMove { start: 1, ..move_of(0, 8) };
    let moves = vec![other_len, other_digest, other_object, no_span_there];
    assert_eq!(compact(&mut h, incarnation, moves), Outcome::CompactCold { moved: 0 });
    assert_eq!(spans(&h), vec![(0, "p0".into(), 0), (2, "p1".into(), 10), (5, "p2".into(), 20)]);
    // One still as read among stale ones: that one moves.
    assert_eq!(compact(&mut h, incarnation, vec![move_of(1, 10), move_of(0, 99)]), Outcome::CompactCold { moved: 2 });
    assert_eq!(compact(&mut h, incarnation, vec![move_of(1, 10)]), Outcome::CompactCold { moved: 0 }, "moved already");
}

#[test]
fn a_compaction_of_a_replaced_or_deleted_stream_moves_nothing() {
    let mut h = Harness::new();
    let incarnation = three_flushed_spans(&mut h);
    let all = || vec![move_of(0, 0), move_of(1, 2), move_of(2, 5)];
    let other = Incarnation::from_value(incarnation.value() ^ 1).expect("a token");
    assert_eq!(compact(&mut h, other, all()), Outcome::CompactCold { moved: 0 }, "another incarnation");
    assert_eq!(h.apply(Command::Delete(DeleteStream { key: key("s"), expect: None })), Outcome::Delete(Ok(None)));
    assert_eq!(compact(&mut h, incarnation, all()), Outcome::CompactCold { moved: 0 }, "deleted");
}
