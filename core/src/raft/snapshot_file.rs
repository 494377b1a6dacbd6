//! A group's latest Raft snapshot on disk: one file per group, replaced
//! atomically (write, fsync, rename, fsync the directory), checksummed so a
//! damaged file is refused rather than loaded.
//!
//! Layout (persisted): `USNP` magic, crc32 (LE) of the body, body length
//! (u64 LE), then the body (`codec::encode_snapshot`).

use std::fs;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use crc32fast::Hasher;
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
    write_with(dir, group, |w| w.write_all(body)).map(drop)
}

/// Writes the group's snapshot file with `body` writing the body, streamed
/// through a checksum into the file: a snapshot need not be whole in memory
/// (without a cold tier it holds every byte of its streams). The length of
/// the body written.
pub fn write_with(
    dir: &Path,
    group: u32,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<u64, SnapshotFileError> {
    let target = path(dir, group);
    let tmp = dir.join(format!("group-{group:05}.snap.tmp"));
    let io = |source| SnapshotFileError::Io { path: target.clone(), source };
    let mut file = fs::File::create(&tmp).map_err(io)?;
    // The header, once the body's checksum and length are known.
    file.write_all(&[0; HEADER]).map_err(io)?;
    let mut out = Checksummed { inner: BufWriter::with_capacity(BUFFER, file), crc: Hasher::new(), len: 0 };
    body(&mut out).map_err(io)?;
    let Checksummed { inner, crc, len } = out;
    let mut file = inner.into_inner().map_err(|e| io(e.into_error()))?;
    let crc = crc.finalize();
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&len.to_le_bytes());
    file.seek(SeekFrom::Start(0)).and_then(|_| file.write_all(&header)).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    fs::rename(&tmp, &target).map_err(io)?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(len)
}

/// Small writes (a stream's metadata) are gathered; a large one (a chunk of
/// bytes) goes straight to the file.
const BUFFER: usize = 256 * 1024;

/// A writer that checksums and counts what passes through it.
struct Checksummed<W> {
    inner: W,
    crc: Hasher,
    len: u64,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
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
    // The body moved to the front of the buffer it was read into, not copied to another.
    let mut raw = raw;
    raw.drain(..HEADER);
    Ok(Some(raw))
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(super::read(dir.path(), 3).expect("reads").is_none());
        super::write(dir.path(), 3, b"state").expect("writes");
        assert_eq!(super::read(dir.path(), 3).expect("reads").as_deref(), Some(&b"state"[..]));
        // Streamed in pieces, large and small: the same file as written whole.
        let body: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let streamed = super::write_with(dir.path(), 4, |w| {
            w.write_all(&body[..10])?;
            w.write_all(&body[10..600_000])?;
            w.write_all(&body[600_000..])
        });
        assert_eq!(streamed.expect("writes"), body.len() as u64);
        assert_eq!(super::read(dir.path(), 4).expect("reads"), Some(body.clone()));
        super::write(dir.path(), 5, &body).expect("writes");
        assert_eq!(std::fs::read(super::path(dir.path(), 4)).ok(), std::fs::read(super::path(dir.path(), 5)).ok());
        let p = super::path(dir.path(), 3);
        let mut raw = std::fs::read(&p).expect("file");
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(&p, raw).expect("write");
        assert!(super::read(dir.path(), 3).is_err());
    }
}
