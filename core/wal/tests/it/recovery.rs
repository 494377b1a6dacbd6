//! Torn tails are dropped and reported; anything else that fails to
//! verify refuses the open, naming the segment and the frame's offset,
//! unless the owner lets damage before valid frames in the newest segment
//! be cut. A cut that may lose acknowledged entries stays reported until
//! the owner settles it.

use ursula_wal::frame::HEADER;
use ursula_wal::{Damage, Fsync, Wal, WalError};

use crate::common::*;

/// Offset of entry `index` of group 1 in a first segment holding entries 1.. of group 1.
fn offset_of(index: u64) -> u64 {
    (1..index).map(|i| (HEADER + payload(1, i).len()) as u64).sum()
}

#[test]
fn torn_tail_at_every_kind_of_cut_is_dropped_and_the_wal_keeps_working() {
    let tenth = offset_of(10);
    let frame = (HEADER + payload(1, 10).len()) as u64;
    // Bytes of the last frame left behind: inside the magic, inside the
    // header, the whole header, inside the payload, all but one byte.
    for kept in [1, 2, 3, 13, HEADER as u64, HEADER as u64 + 5, frame - 1] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, _) = open(dir.path(), 1 << 20);
        append(&wal, 1, 1, 10);
        wal.close().expect("closes");
        let seg = segments(dir.path()).pop().expect("a segment");
        assert_eq!(len(&seg), tenth + frame);
        std::fs::OpenOptions::new().write(true).open(&seg).expect("open").set_len(tenth + kept).expect("cut");

        let (wal, rec) = open(dir.path(), 1 << 20);
        let torn = rec.torn_tail.expect("torn tail reported");
        assert_eq!((torn.segment.as_path(), torn.offset, torn.dropped_bytes), (seg.as_path(), tenth, kept));
        assert_eq!(torn.damage, Damage::CutShort, "kept {kept}");
        assert_eq!(rec.unsettled_damage, None, "a frame cut short was never acknowledged");
        assert_eq!(len(&seg), tenth, "the file is cut at the torn frame");
        assert_eq!(rec.groups[&1].entries, Some((1, 9)), "kept {kept}");
        assert_entries(&wal, 1, 1, 9);
        assert_eq!(wal.read(1, 10).expect("reads"), None);

        append(&wal, 1, 10, 12);
        wal.close().expect("closes");
        let (wal, rec) = open(dir.path(), 1 << 20);
        assert!(rec.torn_tail.is_none());
        assert_eq!(rec.groups[&1].entries, Some((1, 12)));
        assert_entries(&wal, 1, 1, 12);
        wal.close().expect("closes");
    }
}

#[test]
fn zero_filled_tail_is_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 3);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let clean = len(&seg);
    let mut raw = std::fs::read(&seg).expect("read");
    raw.extend_from_slice(&[0u8; 100]);
    std::fs::write(&seg, raw).expect("write");
    let (wal, rec) = open(dir.path(), 1 << 20);
    let torn = rec.torn_tail.expect("reported");
    assert_eq!((torn.offset, torn.dropped_bytes, torn.damage), (clean, 100, Damage::Invalid));
    assert!(rec.unsettled_damage.is_some(), "zeros where a frame starts may hide an acknowledged one");
    assert_entries(&wal, 1, 1, 3);
}

#[test]
fn flipped_bit_in_the_middle_is_corruption_naming_segment_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 10);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let clean = std::fs::read(&seg).expect("read");
    let fourth = offset_of(4);
    // In the payload, the checksum, the length and the magic of the fourth frame.
    for at in [fourth + 30, fourth + 21, fourth + 17, fourth] {
        std::fs::write(&seg, &clean).expect("restore");
        flip(&seg, at as usize, 3);
        match open_err(dir.path(), 1 << 20) {
            WalError::Corrupt { segment, offset, reason } => {
                assert_eq!((segment.as_path(), offset), (seg.as_path(), fourth), "flip at {at}: {reason}");
                assert!(reason.contains("valid frames follow"), "{reason}");
            }
            e => panic!("expected corruption, got {e}"),
        }
        assert_eq!(std::fs::read(&seg).expect("read").len(), clean.len(), "a refused open changes nothing");
    }
    let message = open_err(dir.path(), 1 << 20).to_string();
    let name = seg.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(message.contains(name) && message.contains(&format!("corrupt at byte {fourth}")), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");
}

#[test]
fn flipped_bit_in_the_last_frame_is_a_complete_invalid_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 5);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let size = len(&seg) as usize;
    flip(&seg, size - 3, 0);
    let (wal, rec) = open(dir.path(), 1 << 20);
    let torn = rec.torn_tail.expect("reported");
    assert_eq!(torn.damage, Damage::Invalid);
    assert_eq!((torn.offset, torn.dropped_bytes), (offset_of(5), size as u64 - offset_of(5)));
    assert_eq!(rec.groups[&1].entries, Some((1, 4)));
    assert_entries(&wal, 1, 1, 4);
    let cut = rec.unsettled_damage.expect("the cut is recorded");
    assert!(cut.contains("checksum mismatch") && cut.contains(&format!("at byte {}", offset_of(5))), "{cut}");
    wal.close().expect("closes");

    // Until the owner settles it, every open reports the cut again (as
    // after a crash right after it), though the file now looks whole.
    let (wal, rec) = open(dir.path(), 1 << 20);
    assert_eq!((rec.torn_tail, rec.unsettled_damage), (None, Some(cut)));
    wal.settle_damage().expect("settles");
    wal.close().expect("closes");
    let (_wal, rec) = open(dir.path(), 1 << 20);
    assert_eq!(rec.unsettled_damage, None, "settled");
}

/// A batch a power loss tore out of order (a later page on disk, an
/// earlier one not) leaves a hole that valid frames follow. A journal that
/// may cut such damage (a voter with peers) drops the hole and every frame
/// after it, records the cut, and keeps working; one that may not refuses.
#[test]
fn a_hole_before_valid_frames_is_cut_when_the_owner_allows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 10);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let mut raw = std::fs::read(&seg).expect("read");
    let (fourth, sixth) = (offset_of(4) as usize, offset_of(6) as usize);
    raw[fourth..sixth].fill(0);
    std::fs::write(&seg, &raw).expect("write");
    assert!(matches!(open_err(dir.path(), 1 << 20), WalError::Corrupt { .. }), "refused without the option");
    assert_eq!(std::fs::read(&seg).expect("read"), raw, "a refused open changes nothing");

    let allowing = || {
        let mut options = options(dir.path(), 1 << 20, Fsync::Always);
        options.cut_damage_before_valid_frames = true;
        Wal::open(options).expect("opens")
    };
    let (wal, rec) = allowing();
    let torn = rec.torn_tail.expect("cut");
    assert_eq!(
        (torn.offset, torn.dropped_bytes, torn.damage),
        (fourth as u64, (raw.len() - fourth) as u64, Damage::InvalidBeforeValid)
    );
    let cut = rec.unsettled_damage.expect("recorded");
    assert!(cut.contains("valid frames after it dropped too"), "{cut}");
    assert_eq!(rec.groups[&1].entries, Some((1, 3)));
    assert_eq!(len(&seg), fourth as u64);
    assert_entries(&wal, 1, 1, 3);
    // The group's entries come back (from a leader) and the journal goes on.
    append(&wal, 1, 4, 12);
    wal.settle_damage().expect("settles");
    wal.close().expect("closes");
    let (wal, rec) = allowing();
    assert_eq!((rec.torn_tail, rec.unsettled_damage), (None, None));
    assert_entries(&wal, 1, 1, 12);
}

/// Appends single entries until the journal has at least three segments.
fn three_segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let (wal, _) = open(dir, 4096);
    for i in 1..=150 {
        append(&wal, 1, i, i);
    }
    wal.close().expect("closes");
    let segs = segments(dir);
    assert!(segs.len() >= 3, "{segs:?}");
    segs
}

#[test]
fn damage_in_an_older_segment_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let segs = three_segments(dir.path());
    let clean = std::fs::read(&segs[0]).expect("read");
    // Its very last frame, which in the newest segment would be a torn tail.
    flip(&segs[0], clean.len() - 3, 5);
    match open_err(dir.path(), 4096) {
        WalError::Corrupt { segment, reason, .. } => {
            assert_eq!(segment, segs[0]);
            assert!(reason.contains("newer segments follow"), "{reason}");
        }
        e => panic!("expected corruption, got {e}"),
    }
    // A cut older segment is no torn tail either.
    std::fs::write(&segs[0], &clean[..clean.len() - 7]).expect("cut");
    assert!(matches!(open_err(dir.path(), 4096), WalError::Corrupt { segment, .. } if segment == segs[0]));
    std::fs::write(&segs[0], &clean).expect("restore");
    let (wal, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&1].entries, Some((1, 150)));
    assert_entries(&wal, 1, 1, 150);
}

#[test]
fn an_unknown_version_is_refused_never_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 3);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let last = offset_of(3) as usize;
    let mut raw = std::fs::read(&seg).expect("read");
    raw[last + 2] = 2;
    std::fs::write(&seg, &raw).expect("write");
    match open_err(dir.path(), 1 << 20) {
        WalError::Corrupt { offset, reason, .. } => {
            assert_eq!(offset, last as u64);
            assert!(reason.contains("unknown frame format version 2"), "{reason}");
        }
        e => panic!("expected corruption, got {e}"),
    }
    assert_eq!(std::fs::read(&seg).expect("read"), raw, "the journal is left as found");
}

/// Damage that a vote (a state frame, always synced) follows is damage to
/// synced frames, not an unsynced batch torn by a power loss: no cut may
/// take the vote back, so the open is refused even where cuts are allowed.
#[test]
fn a_hole_that_a_state_frame_follows_is_never_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 10);
    set_state(&wal, 1, 0, "vote term 7");
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let mut raw = std::fs::read(&seg).expect("read");
    raw[offset_of(4) as usize..offset_of(6) as usize].fill(0);
    std::fs::write(&seg, &raw).expect("write");
    let mut options = options(dir.path(), 1 << 20, Fsync::Always);
    options.cut_damage_before_valid_frames = true;
    match Wal::open(options) {
        Err(WalError::Corrupt { offset, reason, .. }) => {
            assert_eq!(offset, offset_of(4));
            assert!(reason.contains("state records among them"), "{reason}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("a cut would have taken the vote back"),
    }
    assert_eq!(std::fs::read(&seg).expect("read"), raw, "a refused open changes nothing");
    assert!(!dir.path().join("damaged-tail").exists(), "nothing recorded for a refused open");
}
