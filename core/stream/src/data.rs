//! A stream's bytes: the appended bodies kept as shared, immutable chunks,
//! so a read hands out slices without copying.

use bytes::Bytes;

use crate::offset::Offset;

/// Where a read may stop.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// Anywhere.
    Byte,
    /// Never inside a UTF-8 sequence (text SSE, base protocol §5.8).
    Utf8,
    /// Only after an LF that ends a JSON message; a message larger than the
    /// limit is returned whole.
    Message,
}

/// The appended bodies with the offset each starts at; one vector, so an
/// idle stream with data costs one allocation.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamData {
    chunks: Vec<(u64, Bytes)>,
    len: u64,
}

impl StreamData {
    pub fn tail(&self) -> Offset {
        Offset(self.len)
    }

    pub fn push(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let start = self.len;
        self.len += bytes.len() as u64;
        if self.chunks.is_empty() {
            // Most streams are small: no spare slots on the first write.
            self.chunks.reserve_exact(1);
        }
        self.chunks.push((start, bytes));
    }

    /// Whether a JSON message ends just before `pos` (or `pos` is the first
    /// readable offset, itself a boundary).
    pub fn is_message_boundary(&self, pos: u64) -> bool {
        pos == self.first() || self.byte_at(pos.wrapping_sub(1)) == Some(b'\n')
    }

    /// The first offset still held.
    pub fn first(&self) -> u64 {
        self.chunks.first().map_or(self.len, |(start, _)| *start)
    }

    /// Index of the chunk holding `pos` (or the last one starting before it).
    fn chunk_index(&self, pos: u64) -> Option<usize> {
        self.chunks.partition_point(|(s, _)| *s <= pos).checked_sub(1)
    }

    /// Drops the bytes below `offset` (retention); offsets do not move.
    pub fn trim_before(&mut self, offset: u64) {
        let keep_from = self.chunk_index(offset).unwrap_or(0);
        self.chunks.drain(..keep_from);
        if let Some((start, first)) = self.chunks.first_mut()
            && *start < offset
        {
            let cut = usize::try_from(offset - *start).unwrap_or(usize::MAX).min(first.len());
            *first = first.slice(cut..);
            *start = offset;
            if first.is_empty() {
                self.chunks.remove(0);
            }
        }
    }

    fn byte_at(&self, pos: u64) -> Option<u8> {
        let (start, chunk) = self.chunks.get(self.chunk_index(pos)?)?;
        chunk.get(usize::try_from(pos - start).ok()?).copied()
    }

    /// The end of a read from `from` of at most `max` bytes, moved to a boundary.
    pub fn read_end(&self, from: u64, max: u64, boundary: Boundary) -> u64 {
        let limit = from.saturating_add(max).min(self.len);
        if limit == self.len {
            return limit;
        }
        match boundary {
            Boundary::Byte => limit,
            Boundary::Utf8 => {
                // Step back over continuation bytes to the start of the sequence
                // that the limit cuts, unless that would leave nothing.
                let mut end = limit;
                while end > from && self.byte_at(end).is_some_and(|b| b & 0xC0 == 0x80) {
                    end -= 1;
                }
                if end > from {
                    return end;
                }
                // The limit cuts the first character: send it whole.
                let mut end = limit;
                while end < self.len && self.byte_at(end).is_some_and(|b| b & 0xC0 == 0x80) {
                    end += 1;
                }
                end
            }
            Boundary::Message => {
                let mut end = limit;
                while end > from && self.byte_at(end - 1) != Some(b'\n') {
                    end -= 1;
                }
                if end > from {
                    return end;
                }
                let mut end = limit;
                while end < self.len && self.byte_at(end - 1) != Some(b'\n') {
                    end += 1;
                }
                end
            }
        }
    }

    /// Zero-copy slices covering `[from, to)`.
    pub fn slice(&self, from: u64, to: u64) -> Vec<Bytes> {
        let mut out = Vec::new();
        if from >= to {
            return out;
        }
        let first = self.chunk_index(from).unwrap_or(0);
        for &(start, ref chunk) in self.chunks.iter().skip(first) {
            if start >= to {
                break;
            }
            let end = start + chunk.len() as u64;
            let lo = usize::try_from(from.saturating_sub(start)).unwrap_or(usize::MAX);
            let hi = usize::try_from(to.min(end) - start).unwrap_or(usize::MAX);
            if lo < hi {
                out.push(chunk.slice(lo..hi));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(parts: &[&str]) -> StreamData {
        let mut d = StreamData::default();
        for p in parts {
            d.push(Bytes::copy_from_slice(p.as_bytes()));
        }
        d
    }

    fn join(chunks: Vec<Bytes>) -> String {
        chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect()
    }

    #[test]
    fn slices_across_chunks() {
        let d = data(&["abc", "defg", "h"]);
        assert_eq!(d.tail(), Offset(8));
        assert_eq!(join(d.slice(0, 8)), "abcdefgh");
        assert_eq!(join(d.slice(2, 5)), "cde");
        assert_eq!(join(d.slice(7, 8)), "h");
        assert!(d.slice(8, 8).is_empty());
    }

    #[test]
    fn trimming_keeps_offsets_and_the_rest_of_the_bytes() {
        let mut d = data(&["abc", "defg", "h"]);
        d.trim_before(5);
        assert_eq!(d.first(), 5);
        assert_eq!(join(d.slice(5, 8)), "fgh");
        assert_eq!(d.tail(), Offset(8));
        d.trim_before(8);
        assert!(d.slice(5, 8).is_empty());
        assert_eq!(d.first(), 8);
    }

    #[test]
    fn message_boundaries() {
        let d = data(&["1\n", "22\n"]);
        assert!(d.is_message_boundary(0) && d.is_message_boundary(2) && d.is_message_boundary(5));
        assert!(!d.is_message_boundary(1) && !d.is_message_boundary(3));
    }

    #[test]
    fn utf8_boundary_never_splits_a_character() {
        let d = data(&["aé", "b"]); // a, 0xC3 0xA9, b
        assert_eq!(d.read_end(0, 2, Boundary::Utf8), 1);
        assert_eq!(d.read_end(0, 3, Boundary::Utf8), 3);
        assert_eq!(d.read_end(1, 1, Boundary::Utf8), 3); // cannot shorten: the whole character
    }

    #[test]
    fn message_boundary_cuts_after_lf_or_extends_to_one() {
        let d = data(&["{\"a\":1}\n", "{\"b\":22}\n"]);
        assert_eq!(d.read_end(0, 12, Boundary::Message), 8);
        assert_eq!(d.read_end(0, 3, Boundary::Message), 8);
        assert_eq!(d.read_end(8, 3, Boundary::Message), 17);
        assert_eq!(d.read_end(0, 100, Boundary::Message), 17);
    }
}
