//! The journal's frame: a fixed 24-byte header, then the payload.
//!
//! ```text
//! offset size field
//!  0     2    magic 0x5557 (u16 LE, the bytes "WU")
//!  2     1    format version (1)
//!  3     1    kind (FrameKind)
//!  4     4    group (u32 LE)
//!  8     8    index (u64 LE): meaning depends on the kind, see FrameKind
//! 16     4    payload length (u32 LE)
//! 20     4    crc32 (LE, crc32fast/IEEE) of bytes 0..20, then the payload
//! 24     ..   payload
//! ```
//!
//! Persisted: never renumber kinds or move fields; a new layout gets a new
//! version byte. A build refuses (never truncates) frames of a version it
//! does not know, so a downgrade cannot cut a newer journal.

use std::fmt;

pub const MAGIC: u16 = 0x5557;
pub const VERSION: u8 = 1;
pub const HEADER: usize = 24;
/// Bytes covered by the checksum before the payload.
const CHECKED: usize = 20;

/// What a frame records. Persisted: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// index = entry index, payload = the entry.
    Entry = 1,
    /// index = slot (0..=255), payload = the slot's value.
    State = 2,
    /// index = first removed index (`since`), empty payload.
    Truncate = 3,
    /// index = last removed index (`upto`), payload = the purge marker.
    Purge = 4,
    /// index = the segment's own sequence number, empty payload. Ends the
    /// checkpoint at the start of a segment: the State and Purge frames
    /// before it carry every group's slots and purge record, so older
    /// segments matter only for their entries.
    Checkpoint = 5,
    /// index = entry index, payload = the entry: a live entry copied
    /// forward by compaction. It takes effect only at its group's CopyEnd,
    /// so a copy cut short by a crash leaves the run where it was.
    Copy = 6,
    /// index = the first index of the copied run, payload = its last index
    /// (u64 LE): the group's whole run is now the Copy frames before it.
    CopyEnd = 7,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Entry,
            2 => FrameKind::State,
            3 => FrameKind::Truncate,
            4 => FrameKind::Purge,
            5 => FrameKind::Checkpoint,
            6 => FrameKind::Copy,
            7 => FrameKind::CopyEnd,
            _ => return None,
        })
    }
}

/// A verified frame borrowed from the buffer it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub kind: FrameKind,
    pub group: u32,
    pub index: u64,
    pub payload: &'a [u8],
}

impl Frame<'_> {
    /// Header plus payload.
    pub fn size(&self) -> usize {
        HEADER + self.payload.len()
    }
}

/// Largest payload a frame can carry (its length field is a u32).
pub const MAX_PAYLOAD: usize = u32::MAX as usize;

/// Appends one frame to `out`. The caller checks `payload.len() <= MAX_PAYLOAD`.
pub fn encode(out: &mut Vec<u8>, kind: FrameKind, group: u32, index: u64, payload: &[u8]) {
    let start = out.len();
    out.reserve(HEADER + payload.len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[start..start + CHECKED]);
    crc.update(payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(payload);
}

/// Why the bytes at a position are not a valid frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bad {
    /// The header or the declared payload runs past the end of the data.
    Short,
    /// No frame magic here (zero fill, garbage).
    NotAFrame,
    /// A complete frame whose checksum fails.
    Checksum,
    /// The magic matches but the format version is not one this build knows.
    Version(u8),
    /// A verified frame of a kind this build does not know.
    Kind(u8),
}

impl Bad {
    /// Whether this can be the residue of an interrupted write (as opposed
    /// to a frame this build must refuse to interpret).
    pub fn may_be_torn(self) -> bool {
        matches!(self, Bad::Short | Bad::NotAFrame | Bad::Checksum)
    }
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::Short => write!(f, "frame cut short (header or payload runs past the end of the file)"),
            Bad::NotAFrame => write!(f, "no frame magic"),
            Bad::Checksum => write!(f, "checksum mismatch"),
            Bad::Version(v) => write!(f, "unknown frame format version {v} (this build reads version {VERSION})"),
            Bad::Kind(k) => write!(f, "unknown frame kind {k}"),
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Parses and verifies the frame at the start of `data`.
pub fn decode(data: &[u8]) -> Result<Frame<'_>, Bad> {
    let magic = MAGIC.to_le_bytes();
    if data.len() < 2 {
        return Err(if data.first().is_some_and(|b| *b != magic[0]) { Bad::NotAFrame } else { Bad::Short });
    }
    if data[..2] != magic {
        return Err(Bad::NotAFrame);
    }
    match data.get(2) {
        None => return Err(Bad::Short),
        Some(&v) if v != VERSION => return Err(Bad::Version(v)),
        Some(_) => {}
    }
    if data.len() < HEADER {
        return Err(Bad::Short);
    }
    let len = u32_at(data, 16) as usize;
    let Some(payload) = data.get(HEADER..HEADER.saturating_add(len)) else {
        return Err(Bad::Short);
    };
    let mut crc = crc32fast::Hasher::new();
    crc.update(&data[..CHECKED]);
    crc.update(payload);
    if crc.finalize() != u32_at(data, CHECKED) {
        return Err(Bad::Checksum);
    }
    let kind = FrameKind::from_u8(data[3]).ok_or(Bad::Kind(data[3]))?;
    Ok(Frame { kind, group: u32_at(data, 4), index: u64_at(data, 8), payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        encode(&mut buf, kind, 7, 42, payload);
        buf
    }

    #[test]
    fn round_trip() {
        let buf = frame(FrameKind::Entry, b"payload");
        assert_eq!(buf.len(), HEADER + 7);
        let f = decode(&buf).expect("valid");
        assert_eq!(f, Frame { kind: FrameKind::Entry, group: 7, index: 42, payload: b"payload" });
        let empty = frame(FrameKind::Truncate, b"");
        assert_eq!(decode(&empty).expect("valid").payload, b"");
    }

    #[test]
    fn every_cut_is_short() {
        let buf = frame(FrameKind::State, b"payload");
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut]), Err(Bad::Short), "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_bit_is_noticed() {
        let buf = frame(FrameKind::Purge, b"payload");
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut b = buf.clone();
                b[i] ^= 1 << bit;
                assert!(decode(&b).is_err(), "flip of bit {bit} at {i} went unnoticed");
            }
        }
    }

    #[test]
    fn zeros_version_and_kind() {
        assert_eq!(decode(&[0u8; 40]), Err(Bad::NotAFrame));
        assert_eq!(decode(&[0u8]), Err(Bad::NotAFrame));
        let mut b = frame(FrameKind::Entry, b"x");
        b[2] = 2;
        assert_eq!(decode(&b), Err(Bad::Version(2)));
        assert!(!Bad::Version(2).may_be_torn());
        let mut b = Vec::new();
        encode(&mut b, FrameKind::Entry, 1, 1, b"x");
        b[3] = 99;
        // Re-seal so only the kind is wrong.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&b[..CHECKED]);
        crc.update(&b[HEADER..]);
        b[CHECKED..HEADER].copy_from_slice(&crc.finalize().to_le_bytes());
        assert_eq!(decode(&b), Err(Bad::Kind(99)));
    }

    #[test]
    fn trailing_bytes_are_not_part_of_the_frame() {
        let mut buf = frame(FrameKind::Entry, b"abc");
        buf.extend_from_slice(&[0xff; 10]);
        assert_eq!(decode(&buf).expect("valid").size(), HEADER + 3);
    }
}
