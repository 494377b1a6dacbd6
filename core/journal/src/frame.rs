//! The journal's frame: a fixed header, then the payload.
//!
//! ```text
//! offset size field
//!  0     2    magic 0x5557 ("WU" little-endian)
//!  2     1    format version (1)
//!  3     1    kind (FrameKind)
//!  4     4    group (u32 LE)
//!  8     8    index (u64 LE): entry index, slot, truncate-from or purge-upto
//! 16     4    payload length (u32 LE)
//! 20     4    crc32 (LE) of bytes 0..20 and the payload
//! 24     ..   payload
//! ```
//! Persisted: never renumber kinds or move fields; a new layout gets a new
//! version.

pub const MAGIC: u16 = 0x5557;
pub const VERSION: u8 = 1;
pub const HEADER: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    Entry = 1,
    State = 2,
    Truncate = 3,
    Purge = 4,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Entry,
            2 => FrameKind::State,
            3 => FrameKind::Truncate,
            4 => FrameKind::Purge,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub kind: FrameKind,
    pub group: u32,
    pub index: u64,
    pub len: u32,
}

/// Appends one frame to `out`.
pub fn encode(out: &mut Vec<u8>, kind: FrameKind, group: u32, index: u64, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    // Payloads are bounded far below 4 GiB by the request limit.
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[start..start + 20]);
    crc.update(payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(payload);
}

/// Why the bytes at a position are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// The header or payload runs past the end of the data.
    Short,
    /// No frame starts here (magic), or its kind is unknown.
    NotAFrame,
    /// A complete frame whose checksum fails.
    Checksum,
    /// A frame of a format version this build does not know.
    Version(u8),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// Parses and verifies the frame at the start of `data`.
pub fn decode(data: &[u8]) -> Result<FrameHead, Bad> {
    if data.len() < HEADER {
        return Err(if data.len() >= 2 && data[..2] != MAGIC.to_le_bytes() { Bad::NotAFrame } else { Bad::Short });
    }
    if data[..2] != MAGIC.to_le_bytes() {
        return Err(Bad::NotAFrame);
    }
    let len = u32_at(data, 16);
    let end = HEADER + len as usize;
    if data.len() < end {
        return Err(Bad::Short);
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&data[..20]);
    crc.update(&data[HEADER..end]);
    if crc.finalize() != u32_at(data, 20) {
        return Err(Bad::Checksum);
    }
    if data[2] != VERSION {
        return Err(Bad::Version(data[2]));
    }
    let kind = FrameKind::from_u8(data[3]).ok_or(Bad::NotAFrame)?;
    let mut index = [0u8; 8];
    index.copy_from_slice(&data[8..16]);
    Ok(FrameHead { kind, group: u32_at(data, 4), index: u64::from_le_bytes(index), len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_damage() {
        let mut buf = Vec::new();
        encode(&mut buf, FrameKind::Entry, 7, 42, b"payload");
        let head = decode(&buf).expect("valid");
        assert_eq!(head, FrameHead { kind: FrameKind::Entry, group: 7, index: 42, len: 7 });
        assert_eq!(decode(&buf[..buf.len() - 1]), Err(Bad::Short));
        assert_eq!(decode(&buf[..10]), Err(Bad::Short));
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x10;
            assert!(decode(&b).is_err(), "flip at {i} went unnoticed");
        }
        assert_eq!(decode(&[0u8; 40]), Err(Bad::NotAFrame));
    }
}
