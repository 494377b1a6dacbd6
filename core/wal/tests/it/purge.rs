//! Purge by whole segments: rotation checkpoints every group's slots and
//! purge record, so old segments go once their entries are dead, and
//! nothing but entries is ever lost with them.

use std::path::Path;

use bytes::Bytes;

use crate::common::*;

fn purge(wal: &ursula_wal::Wal, group: u32, upto: u64, marker: &str) {
    wait(|d| wal.purge(group, upto, Bytes::from(marker.to_string()), d)).expect("purge");
}

fn disk_bytes(dir: &Path) -> u64 {
    segments(dir).iter().map(|p| len(p)).sum()
}

#[test]
fn purge_deletes_whole_segments_and_keeps_markers_and_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let groups = 16u32;
    for g in 0..groups {
        set_state(&wal, g, 1, &format!("vote {g}"));
    }
    for i in 1..=100u64 {
        for g in 0..groups {
            append(&wal, g, i, i);
        }
    }
    let before = segments(dir.path());
    assert!(before.len() > 20, "{} segments", before.len());
    // The low half purge everything; the high half keep 91..=100.
    for g in 0..groups {
        let upto = if g < groups / 2 { 100 } else { 90 };
        purge(&wal, g, upto, &format!("first {g}"));
    }
    let after_first = segments(dir.path());
    assert!(after_first.len() < before.len() / 2, "{} -> {} segments", before.len(), after_first.len());
    let first_purges_in = after_first.last().expect("active").clone();

    // The high half go on; purging again frees the segment that held the
    // low half's only purge frames.
    for i in 101..=200u64 {
        for g in groups / 2..groups {
            append(&wal, g, i, i);
        }
    }
    for g in groups / 2..groups {
        purge(&wal, g, 195, &format!("second {g}"));
    }
    let left = segments(dir.path());
    assert!(!left.contains(&first_purges_in), "{first_purges_in:?} still on disk");
    assert!(left.len() <= 3, "{left:?}");
    let stats = wal.stats();
    assert!(stats.reclaimed_segments as usize >= before.len() - 3, "{stats:?}");
    assert_eq!(stats.segments as usize, left.len());
    assert_eq!(stats.bytes_on_disk, disk_bytes(dir.path()));
    wal.close().expect("closes");

    for _ in 0..2 {
        let (wal, rec) = open(dir.path(), 4096);
        for g in 0..groups {
            let r = &rec.groups[&g];
            assert_eq!(r.slots.get(&1), Some(&Bytes::from(format!("vote {g}"))), "group {g}");
            if g < groups / 2 {
                assert_eq!(r.purged, Some((100, Bytes::from(format!("first {g}")))));
                assert_eq!(r.entries, None);
                assert_eq!(wal.read(g, 100).expect("reads"), None);
            } else {
                assert_eq!(r.purged, Some((195, Bytes::from(format!("second {g}")))));
                assert_eq!(r.entries, Some((196, 200)));
                assert_entries(&wal, g, 196, 200);
                assert_eq!(wal.read(g, 195).expect("reads"), None);
            }
        }
        assert_eq!(wal.stats().bytes_on_disk, disk_bytes(dir.path()));
        wal.close().expect("closes");
    }
}

#[test]
fn a_live_entry_pins_its_segment_and_all_newer_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    append(&wal, 7, 1, 1);
    for i in 1..=200u64 {
        append(&wal, 1, i, i);
    }
    purge(&wal, 1, 200, "all");
    let pinned = segments(dir.path()).len();
    assert!(pinned > 3, "group 7's entry 1 keeps the prefix: {pinned}");
    purge(&wal, 7, 1, "now");
    assert_eq!(segments(dir.path()).len(), 1, "only the active segment is left");
    wal.close().expect("closes");
    let (_, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&7].purged, Some((1, Bytes::from_static(b"now"))));
    assert_eq!(rec.groups[&1].purged, Some((200, Bytes::from_static(b"all"))));
}

#[test]
fn a_checkpoint_larger_than_a_segment_does_not_rotate_forever() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    for g in 0..200u32 {
        set_state(&wal, g, 0, &format!("a state value of group {g}"));
    }
    for i in 1..=50u64 {
        append(&wal, 1, i, i);
    }
    let stats = wal.stats();
    // About 15 KiB of frames: a handful of segments, each at most half checkpoint.
    assert!(stats.rotations <= 8, "{stats:?}");
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups.len(), 200);
    assert_entries(&wal, 1, 1, 50);
}

#[test]
fn a_torn_checkpoint_keeps_the_older_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    for g in 0..20u32 {
        set_state(&wal, g, 3, &format!("slot of {g}"));
        purge(&wal, g, 5, &format!("marker {g}"));
    }
    let mut i = 6;
    while segments(dir.path()).len() < 2 {
        append(&wal, 0, i, i);
        i += 1;
    }
    wal.close().expect("closes");
    let segs = segments(dir.path());
    // A crash in the middle of the new segment's checkpoint.
    std::fs::OpenOptions::new().write(true).open(&segs[1]).expect("open").set_len(100).expect("cut");
    let (wal, rec) = open(dir.path(), 4096);
    assert!(rec.torn_tail.is_some());
    // Everything is purged, yet the first segment must stay: the second
    // holds no complete checkpoint of its slots and purge records.
    purge(&wal, 0, 1000, "all");
    assert_eq!(segments(dir.path()), segs);
    wal.close().expect("closes");
    let check = |rec: &ursula_wal::Recovered| {
        for g in 1..20u32 {
            assert_eq!(rec.groups[&g].slots[&3], Bytes::from(format!("slot of {g}")));
            assert_eq!(rec.groups[&g].purged, Some((5, Bytes::from(format!("marker {g}")))));
        }
    };
    let (wal, rec) = open(dir.path(), 4096);
    check(&rec);
    // The next rotation writes a whole checkpoint; then the old ones go.
    for i in 1001..1100 {
        append(&wal, 0, i, i);
    }
    purge(&wal, 0, 1099, "again");
    assert!(!segments(dir.path()).contains(&segs[0]));
    wal.close().expect("closes");
    let (_, rec) = open(dir.path(), 4096);
    check(&rec);
}
