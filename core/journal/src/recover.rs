//! Replaying the journal at open: every segment in order, every frame
//! verified. In the newest segment a torn or invalid frame with nothing
//! valid after it is a torn tail: cut off and reported. Anything else that
//! fails to verify is corruption, reported with its segment and offset.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::TornTail;
use crate::error::WalError;
use crate::frame::{self, Bad, FrameKind, HEADER};
use crate::index::{Index, Loc};

pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("segment-{seq:020}.wal"))
}

/// The segment numbers in `dir`, ascending; other files are left alone.
pub fn list_segments(dir: &Path) -> Result<Vec<u64>, WalError> {
    let mut seqs = Vec::new();
    for entry in fs::read_dir(dir).map_err(WalError::io(dir))? {
        let entry = entry.map_err(WalError::io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(seq) =
            name.strip_prefix("segment-").and_then(|n| n.strip_suffix(".wal")).and_then(|n| n.parse().ok())
        {
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    Ok(seqs)
}

/// Whether a verifying frame starts anywhere after `from`.
fn valid_frame_after(data: &[u8], from: usize) -> bool {
    let magic = frame::MAGIC.to_le_bytes();
    (from + 1..data.len().saturating_sub(HEADER - 1))
        .any(|at| data[at..at + 2] == magic && frame::decode(&data[at..]).is_ok())
}

pub struct Replayed {
    pub index: Index,
    /// (segment, length in bytes) of every segment kept, ascending.
    pub segments: Vec<(u64, u64)>,
    pub torn_tail: Option<TornTail>,
}

pub fn replay(dir: &Path) -> Result<Replayed, WalError> {
    let seqs = list_segments(dir)?;
    let mut index = Index::default();
    let mut segments = Vec::with_capacity(seqs.len());
    let mut torn_tail = None;
    for (i, &seq) in seqs.iter().enumerate() {
        let path = segment_path(dir, seq);
        let data = fs::read(&path).map_err(WalError::io(&path))?;
        let newest = i + 1 == seqs.len();
        index.add_segment(seq);
        let mut pos = 0usize;
        while pos < data.len() {
            let head = match frame::decode(&data[pos..]) {
                Ok(head) => head,
                Err(bad) => {
                    let corrupt =
                        |reason: String| WalError::Corrupt { segment: path.clone(), offset: pos as u64, reason };
                    if let Bad::Version(v) = bad {
                        return Err(corrupt(format!("frame of unknown format version {v}")));
                    }
                    if !newest {
                        return Err(corrupt(format!("{bad:?} frame in a segment that later segments follow")));
                    }
                    if valid_frame_after(&data, pos) {
                        return Err(corrupt(format!("{bad:?} frame followed by valid frames")));
                    }
                    let dropped = (data.len() - pos) as u64;
                    tracing::warn!(segment = %path.display(), offset = pos, dropped, "dropping a torn WAL tail");
                    let file = fs::OpenOptions::new().write(true).open(&path).map_err(WalError::io(&path))?;
                    file.set_len(pos as u64).map_err(WalError::io(&path))?;
                    file.sync_all().map_err(WalError::io(&path))?;
                    torn_tail = Some(TornTail {
                        segment: path.clone(),
                        offset: pos as u64,
                        dropped_bytes: dropped,
                        complete_invalid_frame: bad == Bad::Checksum,
                    });
                    break;
                }
            };
            let payload = &data[pos + HEADER..pos + HEADER + head.len as usize];
            match head.kind {
                FrameKind::Entry => {
                    index.append(head.group, head.index, Loc { segment: seq, offset: pos as u64, len: head.len })
                }
                FrameKind::State => {
                    index.set_state(head.group, (head.index & 0xff) as u8, Bytes::copy_from_slice(payload))
                }
                FrameKind::Truncate => index.truncate(head.group, head.index),
                FrameKind::Purge => index.purge(head.group, head.index, Bytes::copy_from_slice(payload)),
            }
            pos += HEADER + head.len as usize;
        }
        segments.push((seq, pos as u64));
    }
    Ok(Replayed { index, segments, torn_tail })
}
