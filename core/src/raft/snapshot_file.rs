//! A group's latest Raft snapshot on disk: one file per group, replaced
//! atomically (write, fsync, rename, fsync the directory), checksummed so a
//! damaged file is refused rather than loaded.
//!
//! Layout (persisted): `USNP` magic, crc32 (LE) of the body, body length
//! (u64 LE), then the body (`codec::encode_snapshot`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"USNP";
const HEADER: usize = 4 + 4 + 8;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotFileError {
    #[error("snapshot file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("snapshot file {path} is damaged: {reason}")]
    Damaged { path: PathBuf, reason: &'static str },
}

pub fn path(dir: &Path, group: u32) -> PathBuf {
    dir.join(format!("group-{group:05}.snap"))
}

pub fn write(dir: &Path, group: u32, body: &[u8]) -> Result<(), SnapshotFileError> {
    let target = path(dir, group);
    let tmp = dir.join(format!("group-{group:05}.snap.tmp"));
    let io = |source| SnapshotFileError::Io { path: target.clone(), source };
    let mut file = fs::File::create(&tmp).map_err(io)?;
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    header.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.write_all(&header).map_err(io)?;
    file.write_all(body).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    fs::rename(&tmp, &target).map_err(io)?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

/// The body of the group's snapshot, if it has one.
pub fn read(dir: &Path, group: u32) -> Result<Option<Vec<u8>>, SnapshotFileError> {
    let path = path(dir, group);
    let raw = match fs::read(&path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(SnapshotFileError::Io { path, source }),
    };
    let damaged = |reason| SnapshotFileError::Damaged { path: path.clone(), reason };
    if raw.len() < HEADER || &raw[..4] != MAGIC {
        return Err(damaged("no snapshot header"));
    }
    let crc = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
    let mut len = [0u8; 8];
    len.copy_from_slice(&raw[8..16]);
    let body = &raw[HEADER..];
    if u64::from_le_bytes(len) != body.len() as u64 {
        return Err(damaged("length does not match"));
    }
    if crc32fast::hash(body) != crc {
        return Err(damaged("checksum does not match"));
    }
    Ok(Some(body.to_vec()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(super::read(dir.path(), 3).expect("reads").is_none());
        super::write(dir.path(), 3, b"state").expect("writes");
        assert_eq!(super::read(dir.path(), 3).expect("reads").as_deref(), Some(&b"state"[..]));
        let p = super::path(dir.path(), 3);
        let mut raw = std::fs::read(&p).expect("file");
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(&p, raw).expect("write");
        assert!(super::read(dir.path(), 3).is_err());
    }
}
