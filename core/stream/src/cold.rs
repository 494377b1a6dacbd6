//! The cold tier as the state machine sees it: references to byte ranges
//! that live in objects of the shared cold store (spec/39, "Storage
//! layout"). The shell uploads a stream's oldest hot bytes, then commits
//! `CommitCold` through the log; applying it swaps those hot chunks for a
//! `ColdSpan`. A read below the hot start becomes a plan of `ColdSlice`s
//! that the shell fetches (and checks against the span's digest) outside
//! the group's state.

use crate::boundary::Boundary;
use crate::ids::StreamKey;
use crate::incarnation::Incarnation;
use crate::offset::Offset;

/// Bytes `[start, start + len)` of a stream, stored at `object_offset` of
/// the cold object `object`. Spans start and end where appends did, so a
/// span's edges are message boundaries of a JSON stream.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ColdSpan {
    pub start: u64,
    pub len: u64,
    pub object: String,
    pub object_offset: u64,
    /// BLAKE3 of the span's bytes as uploaded, so a damaged object is an
    /// error on the read, never wrong bytes.
    pub digest: [u8; 32],
}

impl ColdSpan {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// Part of a read that lives in the cold tier: the whole `span` is fetched
/// and checked, and `[from, to)` of the stream is taken from it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ColdSlice {
    pub span: ColdSpan,
    pub from: u64,
    pub to: u64,
}

/// How the shell finishes a read that ended inside the cold tier: cut the
/// fetched bytes at `boundary`, wanting at most `limit` (an absolute
/// offset), as `StreamData::read_end` would on hot bytes.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdCut {
    pub limit: u64,
    pub boundary: Boundary,
}

/// One stream's range of an uploaded object.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ColdPiece {
    pub key: StreamKey,
    pub incarnation: Incarnation,
    /// Must be the stream's hot start when the command applies.
    pub start: Offset,
    pub len: u64,
    pub object_offset: u64,
    pub digest: [u8; 32],
}

/// Publishes the ranges an upload stored in `object` (one or several
/// streams' slices packed together).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CommitCold {
    pub object: String,
    pub pieces: Vec<ColdPiece>,
}

/// A span rewritten into another object: the same bytes (the same start,
/// length and digest), now at `object_offset` of the compacted object.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ColdMove {
    pub start: u64,
    pub len: u64,
    pub digest: [u8; 32],
    /// The object the span is in now: it moves only if it still is.
    pub from: String,
    pub object_offset: u64,
}

/// Publishes a compaction of one stream's spans into `object` (spec/07
/// `storage.cold.compaction_enabled`): each span that still is where the
/// compaction read it moves; its bytes, edges and digest stay as they were,
/// and the objects it leaves go to garbage collection once unreferenced.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CompactCold {
    pub key: StreamKey,
    pub incarnation: Incarnation,
    pub object: String,
    pub moves: Vec<ColdMove>,
}

/// Where to cut `bytes` (a fetched read starting at a boundary) so it
/// ends at `boundary` within `want` bytes, or, when that leaves nothing,
/// at the first boundary after it (or the end of what was fetched).
pub fn cut(bytes: &[u8], want: usize, boundary: Boundary) -> usize {
    let want = want.min(bytes.len());
    if want == bytes.len() || boundary == Boundary::Byte {
        return want;
    }
    let is_cut = |end: usize| match boundary {
        Boundary::Byte => true,
        Boundary::Utf8 => bytes.get(end).is_none_or(|b| b & 0xC0 != 0x80),
        Boundary::Message => end > 0 && bytes[end - 1] == b'\n',
    };
    if let Some(end) = (1..=want).rev().find(|e| is_cut(*e)) {
        return end;
    }
    (want + 1..=bytes.len()).find(|e| is_cut(*e)).unwrap_or(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_like_hot_reads_do() {
        assert_eq!(cut(b"{\"a\":1}\n{\"b\":22}\n", 12, Boundary::Message), 8);
        assert_eq!(cut(b"{\"a\":1}\n{\"b\":22}\n", 3, Boundary::Message), 8);
        assert_eq!(cut(b"{\"a\":1}\n{\"b\":22}\n", 100, Boundary::Message), 17);
        assert_eq!(cut("aéb".as_bytes(), 2, Boundary::Utf8), 1);
        assert_eq!(cut("éb".as_bytes(), 1, Boundary::Utf8), 2);
        assert_eq!(cut(b"abcdef", 4, Boundary::Byte), 4);
        assert_eq!(cut(b"abc", 2, Boundary::Message), 3);
    }
}
