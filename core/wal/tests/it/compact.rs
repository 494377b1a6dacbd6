//! Compaction (spec/35 "Deleted data"): a quiet group's few live entries
//! must not keep every later segment on disk. A pass copies such groups'
//! whole runs into the newest segment, the old segments go, and what the
//! journal reads back, before and after a reopen, is unchanged.

use std::time::Duration;

use bytes::Bytes;
use ursula_wal::{CompactLimits, Wal};

use crate::common::*;

const SEGMENT: u64 = 4096;

fn purge(wal: &Wal, group: u32, upto: u64) {
    wait(|d| wal.purge(group, upto, Bytes::from_static(b"m"), d)).expect("purge");
}

fn now_limits() -> CompactLimits {
    CompactLimits::for_segment_size(SEGMENT, Duration::ZERO)
}

/// Group 1 writes three entries and goes quiet; group 2 writes and purges
/// many segments' worth behind it.
fn quiet_group_behind_a_busy_one(wal: &Wal) {
    append(wal, 1, 1, 3);
    for i in 1..=600 {
        append(wal, 2, i, i);
    }
    purge(wal, 2, 600);
}

#[test]
fn a_quiet_group_keeps_every_segment_until_a_pass_copies_it_forward() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    quiet_group_behind_a_busy_one(&wal);
    let kept = segments(dir.path()).len();
    assert!(kept > 5, "group 1's three entries keep {kept} segments");
    assert!(wal.stats().dirty_segments as usize >= kept - 1, "{:?}", wal.stats());

    wal.compact(now_limits()).expect("compacts");
    let left = segments(dir.path()).len();
    assert!(left <= 2, "{kept} -> {left} segments");
    let stats = wal.stats();
    assert_eq!(stats.rewritten_bytes, 3 * payload(1, 1).len() as u64, "{stats:?}");
    assert!(stats.reclaimed_segments as usize >= kept - 2 && stats.reclaimed_bytes > 0, "{stats:?}");
    assert_eq!(stats.lagging_groups, 0);
    assert_entries(&wal, 1, 1, 3);
    assert_eq!(wal.read(2, 600).expect("reads"), None);
    // New entries follow the copied run.
    append(&wal, 1, 4, 5);
    wal.close().expect("closes");

    for _ in 0..2 {
        let (wal, rec) = open(dir.path(), SEGMENT);
        assert_eq!(rec.groups[&1].entries, Some((1, 5)));
        assert_entries(&wal, 1, 1, 5);
        assert_eq!(rec.groups[&2].entries, None);
        assert!(wal.stats().recovery_records > 0 && wal.stats().recovery_live_entries == 5, "{:?}", wal.stats());
        wal.close().expect("closes");
    }
}

#[test]
fn nothing_is_copied_before_the_dirty_segments_are_old_enough() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    quiet_group_behind_a_busy_one(&wal);
    // A first pass takes the segments' age from their files: just written.
    let kept = segments(dir.path()).len();
    wal.compact(CompactLimits::for_segment_size(SEGMENT, Duration::from_secs(3600))).expect("compacts");
    assert_eq!(segments(dir.path()).len(), kept);
    assert_eq!(wal.stats().rewritten_bytes, 0);
    wal.close().expect("closes");
}

#[test]
fn a_group_too_large_to_copy_is_reported_lagging_until_it_purges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    // Group 1 keeps about two segments of live entries: over a quarter of one.
    for i in 1..=120 {
        append(&wal, 1, i, i);
    }
    for i in 1..=200 {
        append(&wal, 2, i, i);
    }
    purge(&wal, 2, 200);
    let kept = segments(dir.path());
    wal.compact(now_limits()).expect("compacts");
    let stats = wal.stats();
    assert_eq!(wal.lagging_groups(), vec![1]);
    assert_eq!((stats.lagging_groups, stats.rewritten_bytes), (1, 0), "{stats:?}");
    assert!(stats.pinned_segments > 0, "{stats:?}");
    assert!(segments(dir.path()).starts_with(&kept[..1]), "nothing freed while group 1 lags");
    // Its snapshot purges its log: the next pass finds nothing lagging.
    purge(&wal, 1, 118);
    wal.compact(now_limits()).expect("compacts");
    assert!(wal.lagging_groups().is_empty());
    assert!(segments(dir.path()).len() <= 2, "{:?}", segments(dir.path()));
    assert_entries(&wal, 1, 119, 120);
    wal.close().expect("closes");
}

#[test]
fn a_dirty_active_segment_is_sealed_and_freed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 2);
    append(&wal, 2, 1, 50);
    purge(&wal, 2, 50);
    let first = segments(dir.path());
    assert_eq!(first.len(), 1, "everything in one segment");
    wal.compact(CompactLimits::for_segment_size(1 << 20, Duration::ZERO)).expect("compacts");
    let after = segments(dir.path());
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, first, "the purged entries' segment is gone");
    assert_entries(&wal, 1, 1, 2);
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 1 << 20);
    assert_eq!(rec.groups[&1].entries, Some((1, 2)));
    assert_eq!(rec.groups[&2].purged.as_ref().map(|p| p.0), Some(50));
    wal.close().expect("closes");
}

#[test]
fn appends_queued_around_a_pass_are_kept_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open_inline(options(dir.path(), SEGMENT, ursula_wal::Fsync::Never)).expect("opens");
    quiet_group_behind_a_busy_one(&wal);
    // Inline: each call writes before it returns; interleave appends of the
    // quiet group with passes.
    for i in 4..=20 {
        append(&wal, 1, i, i);
        wal.compact(now_limits()).expect("compacts");
    }
    assert_entries(&wal, 1, 1, 20);
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), SEGMENT);
    assert_eq!(rec.groups[&1].entries, Some((1, 20)));
    assert_entries(&wal, 1, 1, 20);
    wal.close().expect("closes");
}

/// A crash that cuts the newest segment inside a copy (before its
/// CopyEnd) leaves the group's run where it was: the copies do not count.
#[test]
fn a_copy_cut_short_by_a_crash_leaves_the_run_in_the_old_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    quiet_group_behind_a_busy_one(&wal);
    wal.sync().expect("syncs");
    for path in segments(dir.path()) {
        std::fs::copy(&path, before.path().join(path.file_name().expect("name"))).expect("copy");
    }
    wal.compact(now_limits()).expect("compacts");
    assert!(wal.stats().rewritten_bytes > 0);
    wal.close().expect("closes");
    // The pass's frames end the newest segment: cut into its CopyEnd.
    let newest = segments(dir.path()).pop().expect("a segment");
    let data = std::fs::read(&newest).expect("read");
    std::fs::write(before.path().join(newest.file_name().expect("name")), &data[..data.len() - 4]).expect("write");
    let (wal, rec) = open(before.path(), SEGMENT);
    assert!(rec.torn_tail.is_some(), "the cut copy end is a torn tail");
    assert_eq!(rec.groups[&1].entries, Some((1, 3)));
    assert_entries(&wal, 1, 1, 3);
    // The next pass copies again, whole.
    wal.compact(now_limits()).expect("compacts");
    assert_entries(&wal, 1, 1, 3);
    wal.close().expect("closes");
    let (wal, rec) = open(before.path(), SEGMENT);
    assert_eq!(rec.groups[&1].entries, Some((1, 3)));
    assert_entries(&wal, 1, 1, 3);
    wal.close().expect("closes");
}

/// Builds before `Writer::compact` kept a run in one segment could split one
/// at a rotation; a purge past the head copies then let their segment go.
/// Such a journal opens, its run starting at the first copy left.
#[test]
fn a_run_split_by_an_older_build_opens_once_its_head_segment_is_gone() {
    use ursula_wal::frame::{FrameKind, encode};
    let dir = tempfile::tempdir().expect("tempdir");
    let segment = |seq: u64| dir.path().join(format!("segment-{seq:020}.wal"));
    let mut tail = Vec::new();
    encode(&mut tail, FrameKind::Checkpoint, 0, 3, &[]);
    encode(&mut tail, FrameKind::Copy, 1, 6, b"six");
    encode(&mut tail, FrameKind::Copy, 1, 7, b"seven");
    encode(&mut tail, FrameKind::CopyEnd, 1, 5, &7u64.to_le_bytes());
    encode(&mut tail, FrameKind::Purge, 1, 5, b"m");
    encode(&mut tail, FrameKind::Entry, 1, 8, b"eight");
    std::fs::write(segment(3), &tail).expect("write");
    let (wal, rec) = open(dir.path(), SEGMENT);
    assert_eq!(rec.groups[&1].entries, Some((6, 8)));
    for (index, body) in [(6, &b"six"[..]), (7, b"seven"), (8, b"eight")] {
        assert_eq!(wal.read(1, index).expect("reads").as_deref(), Some(body));
    }
    wal.close().expect("closes");
    // Behind an older segment the same run is missing copies: corrupt.
    for path in segments(dir.path()) {
        std::fs::remove_file(path).expect("remove");
    }
    let mut head = Vec::new();
    encode(&mut head, FrameKind::Checkpoint, 0, 2, &[]);
    std::fs::write(segment(2), &head).expect("write");
    std::fs::write(segment(3), &tail).expect("write");
    assert!(matches!(open_err(dir.path(), SEGMENT), ursula_wal::WalError::Corrupt { .. }));
}

/// A run a crash cut short leaves complete Copy frames before the cut; a
/// later run of the same group in a segment kept on disk opens as itself.
#[test]
fn copies_of_a_run_cut_short_do_not_spoil_a_later_run_of_the_group() {
    use ursula_wal::frame::{FrameKind, encode};
    for (later_first, expected) in [(5u64, (5u64, 6u64)), (7, (7, 7))] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut journal = Vec::new();
        encode(&mut journal, FrameKind::Checkpoint, 0, 1, &[]);
        for i in 1..=6 {
            encode(&mut journal, FrameKind::Entry, 1, i, b"old");
        }
        // The cut run: copies of 5 and 6, no CopyEnd.
        encode(&mut journal, FrameKind::Copy, 1, 5, b"stale");
        encode(&mut journal, FrameKind::Copy, 1, 6, b"stale");
        encode(&mut journal, FrameKind::Entry, 2, 1, b"other group");
        if later_first == 7 {
            encode(&mut journal, FrameKind::Entry, 1, 7, b"seven");
            encode(&mut journal, FrameKind::Purge, 1, 6, b"m");
        }
        for i in later_first..=expected.1 {
            encode(&mut journal, FrameKind::Copy, 1, i, format!("copy {i}").as_bytes());
        }
        encode(&mut journal, FrameKind::CopyEnd, 1, later_first, &expected.1.to_le_bytes());
        std::fs::write(dir.path().join(format!("segment-{:020}.wal", 1)), &journal).expect("write");
        let (wal, rec) = open(dir.path(), SEGMENT);
        assert_eq!(rec.groups[&1].entries, Some(expected));
        for i in expected.0..=expected.1 {
            assert_eq!(wal.read(1, i).expect("reads").as_deref(), Some(format!("copy {i}").as_bytes()));
        }
        wal.close().expect("closes");
    }
}

/// Reclaim deletes segments only once the checkpoint that carries their
/// slots and purge records is on disk, whatever the fsync policy.
#[test]
fn segments_are_deleted_only_after_their_replacement_is_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    append(&wal, 1, 1, 200);
    assert!(segments(dir.path()).len() > 2, "the entries span segments");
    let fsyncs = wal.stats().fsyncs;
    purge(&wal, 1, 200);
    assert!(wal.stats().reclaimed_segments > 0, "the purge freed segments");
    assert!(wal.stats().fsyncs > fsyncs, "an fsync came before the deletes (policy Never)");
    wal.close().expect("closes");
}

/// Under `Never` too, a segment is synced before the next one exists: a
/// power loss may then cut only the newest segment's tail, which recovery
/// cuts, never a sealed segment's, which it would refuse.
#[test]
fn a_rotation_syncs_the_sealed_segment_whatever_the_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), SEGMENT);
    let (fsyncs, rotations) = (wal.stats().fsyncs, wal.stats().rotations);
    append(&wal, 1, 1, 200);
    let rotated = wal.stats().rotations - rotations;
    assert!(rotated >= 2, "the entries span segments");
    assert!(wal.stats().fsyncs - fsyncs >= rotated, "one fsync per sealed segment at least (policy Never)");
    wal.close().expect("closes");
}
