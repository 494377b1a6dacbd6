//! Segment files on disk: naming, listing, the directory lock and
//! directory fsync.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::WalError;

/// The lock file that keeps a second process (or a second `Wal` in this
/// one) from writing the same journal.
pub const LOCK_FILE: &str = "wal.lock";

pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("segment-{seq:020}.wal"))
}

fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("segment-")?.strip_suffix(".wal")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment numbers in `dir`, ascending; other files are left alone.
pub fn list(dir: &Path) -> Result<Vec<u64>, WalError> {
    let mut seqs = Vec::new();
    for entry in fs::read_dir(dir).map_err(WalError::io(dir))? {
        let entry = entry.map_err(WalError::io(dir))?;
        if let Some(seq) = entry.file_name().to_str().and_then(parse_name) {
            seqs.push(seq);
        }
    }
    seqs.sort_unstable();
    Ok(seqs)
}

/// Bytes in the segment files of `dir` (0 when it does not exist): whether
/// a directory holds a journal, for checks made before it is opened.
pub fn journal_bytes(dir: &Path) -> Result<u64, WalError> {
    if !dir.exists() {
        return Ok(0);
    }
    list(dir)?.into_iter().try_fold(0, |sum, seq| {
        let path = segment_path(dir, seq);
        Ok(sum + fs::metadata(&path).map_err(WalError::io(&path))?.len())
    })
}

/// Replaces `dir/name` with `contents` durably: written to a temporary file
/// and synced, renamed over, the directory synced. A crash leaves the old
/// file or the new one, never a part.
pub fn write_file_durably(dir: &Path, name: &str, contents: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&tmp)?;
    std::io::Write::write_all(&mut file, contents)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}

/// Makes file creations and deletions in `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(WalError::io(dir))
}

/// Takes an exclusive `flock` on the directory's lock file; released when
/// the returned file is dropped (or the process dies).
pub fn lock(dir: &Path) -> Result<File, WalError> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(WalError::io(&path))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(WalError::Locked { dir: dir.to_path_buf(), lock: path }),
        Err(e) => Err(WalError::Io { path, source: e.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        let p = segment_path(Path::new("/d"), 42);
        assert_eq!(p, Path::new("/d/segment-00000000000000000042.wal"));
        let name = p.file_name().and_then(|n| n.to_str()).expect("utf-8");
        assert_eq!(parse_name(name), Some(42));
        assert_eq!(parse_name("segment-42.wal"), None);
        assert_eq!(parse_name("segment-0000000000000000004x.wal"), None);
        assert_eq!(parse_name("wal.lock"), None);
    }

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock(dir.path()).expect("locks");
        assert!(matches!(lock(dir.path()), Err(WalError::Locked { .. })));
        drop(first);
        lock(dir.path()).expect("locks again");
    }
}
