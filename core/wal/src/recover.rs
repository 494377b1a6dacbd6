//! Replaying the journal at open: every segment in order, every frame
//! verified. In the newest segment a torn or invalid frame with nothing
//! valid after it is a torn tail (an interrupted write): the file is cut
//! there and the cut reported. With valid frames after it, it is cut the
//! same way only when the journal's owner can fetch what it lost again
//! (`cut_damage_before_valid_frames`) and those frames are entries: a
//! power loss that tore an unsynced batch leaves only unsynced frames after
//! the hole, and a state record (a synced vote) after it means damage to
//! synced frames, which no cut may undo. Anything else that fails to verify
//! is corruption, reported with its segment and offset; nothing is
//! skipped.
//!
//! A cut that may take acknowledged entries (anything but a frame cut
//! short) is first recorded in `damaged-tail`, durably, and the file stays
//! until the owner settles it: a crash right after the cut still reports
//! the cut at the next open, where the cut file alone would look whole.

use std::fs;
use std::path::Path;

use bytes::Bytes;

use crate::error::WalError;
use crate::frame::{self, Bad, Frame, FrameKind};
use crate::index::{Index, Loc};
use crate::segment;
use crate::segment::sync_dir;
use crate::{Damage, TornTail};

pub struct Replayed {
    pub index: Index,
    /// The newest segment and its length after any cut; None when the
    /// directory holds no segment yet.
    pub newest: Option<(u64, u64)>,
    pub torn_tail: Option<TornTail>,
    /// The content of `damaged-tail`, if present.
    pub unsettled_damage: Option<String>,
    /// Frames replayed.
    pub records: u64,
}

/// The kinds of the frames that verify after `from` (each found where one
/// starts: after a frame that verified, the next is looked for at its end).
fn valid_frames_after(data: &[u8], from: usize) -> Vec<FrameKind> {
    let magic = frame::MAGIC.to_le_bytes();
    let mut kinds = Vec::new();
    let mut at = from + 1;
    while at + frame::HEADER <= data.len() {
        if data[at..at + 2] == magic
            && let Ok(f) = frame::decode(&data[at..])
        {
            kinds.push(f.kind);
            at += f.size();
        } else {
            at += 1;
        }
    }
    kinds
}

/// Whether dropping frames of this kind may undo what a peer cannot give
/// back: a vote or other state slot (a replica whose vote went back could
/// help a deposed leader commit), a purge or truncate record, a checkpoint.
/// Entries and compaction copies come back from the group's leader.
fn only_entries(kinds: &[FrameKind]) -> bool {
    kinds.iter().all(|k| matches!(k, FrameKind::Entry | FrameKind::Copy | FrameKind::CopyEnd))
}

/// The record of an unsettled cut, beside the segments.
const DAMAGE_FILE: &str = "damaged-tail";

pub fn replay(dir: &Path, cut_damage_before_valid_frames: bool) -> Result<Replayed, WalError> {
    let seqs = segment::list(dir)?;
    let mut index = Index::default();
    let mut torn_tail = None;
    let mut newest = None;
    let mut records = 0;
    for (i, &seq) in seqs.iter().enumerate() {
        let place = Place { is_oldest: i == 0, is_newest: i + 1 == seqs.len(), cut_damage_before_valid_frames };
        let (len, torn) = replay_segment(dir, seq, place, &mut index, &mut records)?;
        torn_tail = torn;
        newest = Some((seq, len));
    }
    index.drop_unfinished_copies();
    let unsettled_damage = read_damage(dir)?;
    Ok(Replayed { index, newest, torn_tail, unsettled_damage, records })
}

/// Where a segment stands in the journal, and what the owner allows.
#[derive(Clone, Copy)]
struct Place {
    is_oldest: bool,
    is_newest: bool,
    cut_damage_before_valid_frames: bool,
}

fn read_damage(dir: &Path) -> Result<Option<String>, WalError> {
    let path = dir.join(DAMAGE_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WalError::Io { path, source: e }),
    }
}

/// Records a cut durably before it is made.
fn record_damage(dir: &Path, what: &str) -> Result<(), WalError> {
    segment::write_file_durably(dir, DAMAGE_FILE, format!("{what}\n").as_bytes())
        .map_err(WalError::io(dir.join(DAMAGE_FILE)))
}

pub fn settle_damage(dir: &Path) -> Result<(), WalError> {
    let path = dir.join(DAMAGE_FILE);
    match fs::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WalError::Io { path, source: e }),
    }
}

/// Replays one segment into `index`; returns its (possibly cut) length.
fn replay_segment(
    dir: &Path,
    seq: u64,
    place: Place,
    index: &mut Index,
    records: &mut u64,
) -> Result<(u64, Option<TornTail>), WalError> {
    let Place { is_oldest, is_newest, cut_damage_before_valid_frames } = place;
    let path = segment::segment_path(dir, seq);
    let data = fs::read(&path).map_err(WalError::io(&path))?;
    index.add_segment(seq);
    let mut pos = 0usize;
    while pos < data.len() {
        let corrupt = |reason: String| WalError::Corrupt { segment: path.clone(), offset: pos as u64, reason };
        let f = match frame::decode(&data[pos..]) {
            Ok(f) => f,
            Err(bad) if !bad.may_be_torn() => return Err(corrupt(bad.to_string())),
            Err(bad) if !is_newest => {
                return Err(corrupt(format!("{bad}, in a segment that newer segments follow")));
            }
            Err(bad) => {
                let after = valid_frames_after(&data, pos);
                let damage = match bad {
                    _ if !after.is_empty() => Damage::InvalidBeforeValid,
                    Bad::Short => Damage::CutShort,
                    _ => Damage::Invalid,
                };
                if damage == Damage::InvalidBeforeValid && !cut_damage_before_valid_frames {
                    return Err(corrupt(format!("{bad}, and valid frames follow it")));
                }
                if !only_entries(&after) {
                    return Err(corrupt(format!("{bad}, and valid frames follow it, state records among them")));
                }
                let torn = cut_tail(dir, &path, pos, data.len(), (bad, damage))?;
                index.grow(seq, pos as u64);
                return Ok((pos as u64, Some(torn)));
            }
        };
        apply(index, seq, is_oldest, pos as u64, &f).map_err(corrupt)?;
        *records += 1;
        pos += f.size();
    }
    index.grow(seq, pos as u64);
    Ok((pos as u64, None))
}

/// Applies one verified frame; Err(reason) when its content makes no sense.
fn apply(index: &mut Index, seq: u64, is_oldest: bool, offset: u64, f: &Frame<'_>) -> Result<(), String> {
    match f.kind {
        FrameKind::Entry => {
            let len = u32::try_from(f.payload.len()).map_err(|_| "entry larger than 4 GiB".to_string())?;
            index.append(f.group, f.index, Loc { segment: seq, offset, len });
        }
        FrameKind::State => {
            let slot = u8::try_from(f.index).map_err(|_| format!("state frame for slot {} (max 255)", f.index))?;
            index.set_state(f.group, slot, Bytes::copy_from_slice(f.payload));
        }
        FrameKind::Copy => {
            let len = u32::try_from(f.payload.len()).map_err(|_| "entry larger than 4 GiB".to_string())?;
            index.copied(f.group, f.index, Loc { segment: seq, offset, len });
        }
        FrameKind::CopyEnd => {
            let last = <[u8; 8]>::try_from(f.payload).map_err(|_| "a copy end without its last index".to_string())?;
            index.copy_end(f.group, f.index, u64::from_le_bytes(last), is_oldest)?;
        }
        FrameKind::Truncate => index.truncate(f.group, f.index),
        FrameKind::Purge => index.purge(f.group, f.index, Bytes::copy_from_slice(f.payload)),
        FrameKind::Checkpoint => {
            if f.index != seq {
                return Err(format!("checkpoint of segment {} found in segment {seq} (renamed file?)", f.index));
            }
            index.mark_checkpoint(seq);
        }
    }
    Ok(())
}

/// Cuts the newest segment at `pos`, the start of a torn frame, after
/// recording a cut that may lose acknowledged entries.
fn cut_tail(
    dir: &Path,
    path: &Path,
    pos: usize,
    len: usize,
    (bad, damage): (Bad, Damage),
) -> Result<TornTail, WalError> {
    let dropped = (len - pos) as u64;
    tracing::warn!(
        segment = %path.display(),
        offset = pos,
        dropped_bytes = dropped,
        reason = %bad,
        ?damage,
        "WAL: dropping a torn tail of the newest segment"
    );
    if damage.may_lose_acknowledged() {
        let followed = if damage == Damage::InvalidBeforeValid { ", valid frames after it dropped too" } else { "" };
        record_damage(dir, &format!("{}: {bad} at byte {pos}{followed}; {dropped} bytes cut", path.display()))?;
    }
    let file = fs::OpenOptions::new().write(true).open(path).map_err(WalError::io(path))?;
    file.set_len(pos as u64).map_err(WalError::io(path))?;
    file.sync_all().map_err(WalError::io(path))?;
    Ok(TornTail { segment: path.to_path_buf(), offset: pos as u64, dropped_bytes: dropped, damage })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_segment(dir: &Path, seq: u64, frames: &[(FrameKind, u32, u64, &[u8])]) -> Vec<u8> {
        let mut buf = Vec::new();
        for (k, g, i, p) in frames {
            frame::encode(&mut buf, *k, *g, *i, p);
        }
        fs::write(segment::segment_path(dir, seq), &buf).expect("write");
        buf
    }

    #[test]
    fn replays_every_kind() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_segment(
            dir.path(),
            3,
            &[
                (FrameKind::State, 9, 4, b"vote"),
                (FrameKind::Purge, 9, 2, b"marker"),
                (FrameKind::Checkpoint, 0, 3, b""),
                (FrameKind::Entry, 9, 3, b"three"),
                (FrameKind::Entry, 9, 4, b"four"),
                (FrameKind::Entry, 9, 5, b"five"),
                (FrameKind::Truncate, 9, 5, b""),
            ],
        );
        let r = replay(dir.path(), false).expect("replays");
        let g = &r.index.groups[&9];
        assert_eq!(g.range(), Some((3, 4)));
        assert_eq!(g.slots[&4], Bytes::from_static(b"vote"));
        assert_eq!(g.purged, Some((2, Bytes::from_static(b"marker"))));
        assert!(r.index.segments[&3].checkpointed);
        assert!(r.torn_tail.is_none());
    }

    #[test]
    fn nonsense_in_a_verified_frame_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_segment(dir.path(), 1, &[(FrameKind::Checkpoint, 0, 7, b"")]);
        let err = replay(dir.path(), false).err().expect("refused");
        assert!(err.to_string().contains("checkpoint of segment 7"), "{err}");
        write_segment(dir.path(), 1, &[(FrameKind::State, 0, 256, b"")]);
        let err = replay(dir.path(), false).err().expect("refused");
        assert!(err.to_string().contains("slot 256"), "{err}");
    }

    #[test]
    fn a_header_cut_short_at_every_byte_is_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let full = write_segment(dir.path(), 1, &[(FrameKind::Entry, 1, 1, b"one"), (FrameKind::Entry, 1, 2, b"two")]);
        let first = frame::HEADER + 3;
        for cut in first + 1..full.len() {
            fs::write(segment::segment_path(dir.path(), 1), &full[..cut]).expect("write");
            let r = replay(dir.path(), false).expect("replays");
            let torn = r.torn_tail.expect("torn");
            assert_eq!((torn.offset, torn.dropped_bytes), (first as u64, (cut - first) as u64));
            assert_eq!(r.index.groups[&1].range(), Some((1, 1)));
            assert_eq!(r.newest, Some((1, first as u64)));
        }
    }
}
