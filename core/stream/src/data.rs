//! A stream's bytes: the appended bodies kept as shared, immutable chunks,
//! so a read hands out slices without copying.

use bytes::Bytes;

use crate::boundary::Boundary;
use crate::cold::{ColdCut, ColdSlice, ColdSpan};
use crate::offset::Offset;

/// The appended bodies with the offset each starts at; one vector, so an
/// idle stream with data costs one allocation. Below the hot chunks, the
/// ranges flushed to the cold tier, contiguous up to the hot start.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamData {
    chunks: Vec<(u64, Bytes)>,
    len: u64,
    cold: Vec<ColdSpan>,
    /// When the oldest hot byte arrived (ms), 0 without hot bytes; after a
    /// partial flush, the time of that flush (a lower bound of the age).
    hot_since_ms: u64,
}

/// What a read takes from each tier: cold slices first (fetched by the
/// shell), then hot bytes `[hot_from, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadPlan {
    pub cold: Vec<ColdSlice>,
    /// Set when the read ends inside the cold tier at a boundary only the
    /// fetched bytes can tell.
    pub cut: Option<ColdCut>,
    pub hot_from: u64,
    pub end: u64,
    /// The cold spans the reader takes next (the rest of the one the read
    /// ended in, then those after it), as many bytes as the read took from
    /// the tier: what a sequential catch-up reads next, for the shell to
    /// fetch ahead.
    pub ahead: Vec<ColdSpan>,
}

impl StreamData {
    /// A fork's own data: nothing held, the next append at `offset`.
    pub fn starting_at(offset: Offset) -> StreamData {
        StreamData { len: offset.bytes(), ..StreamData::default() }
    }

    /// The hot chunk (one append) that starts at `pos`.
    pub fn chunk_at(&self, pos: u64) -> Option<&Bytes> {
        let i = self.chunks.binary_search_by_key(&pos, |(start, _)| *start).ok()?;
        self.chunks.get(i).map(|(_, chunk)| chunk)
    }

    pub fn tail(&self) -> Offset {
        Offset(self.len)
    }

    pub fn push(&mut self, bytes: Bytes, now_ms: u64) {
        if bytes.is_empty() {
            return;
        }
        if self.chunks.is_empty() {
            self.hot_since_ms = now_ms;
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
    /// readable offset, itself a boundary); `None` inside a cold span,
    /// whose bytes the state machine does not hold.
    pub fn is_message_boundary(&self, pos: u64) -> Option<bool> {
        if pos == self.first() || self.is_cold_edge(pos) {
            return Some(true);
        }
        if pos < self.hot_start() {
            return None;
        }
        Some(self.byte_at(pos.wrapping_sub(1)) == Some(b'\n'))
    }

    /// The first offset still held.
    pub fn first(&self) -> u64 {
        self.cold.first().map_or_else(|| self.hot_start(), |s| s.start)
    }

    /// Where the bytes held in memory begin.
    pub fn hot_start(&self) -> u64 {
        self.chunks.first().map_or(self.len, |(start, _)| *start)
    }

    /// Bytes held in memory.
    pub fn hot_bytes(&self) -> u64 {
        self.len - self.hot_start()
    }

    /// The ranges in the cold tier, oldest first.
    pub fn cold_spans(&self) -> &[ColdSpan] {
        &self.cold
    }

    /// Whether `pos` starts or ends a cold span (an append's edge).
    fn is_cold_edge(&self, pos: u64) -> bool {
        !self.cold.is_empty() && (pos == self.hot_start() || self.cold.iter().any(|s| s.start == pos))
    }

    /// The oldest hot chunks, whole, adding up to at least `at_least` bytes
    /// (or all of them), for an upload to the cold tier.
    pub fn oldest_hot(&self, at_least: u64) -> Vec<(u64, Bytes)> {
        let mut out = Vec::new();
        let mut taken = 0;
        for (start, chunk) in &self.chunks {
            if taken >= at_least {
                break;
            }
            taken += chunk.len() as u64;
            out.push((*start, chunk.clone()));
        }
        out
    }

    /// When the oldest hot byte arrived, if any is held.
    pub fn hot_since_ms(&self) -> Option<u64> {
        (!self.chunks.is_empty()).then_some(self.hot_since_ms)
    }

    /// Moves the hot bytes `[start, start + len)` to the cold `span`, if
    /// they are still the oldest hot bytes and end where an append did.
    pub fn freeze(&mut self, span: ColdSpan, now_ms: u64) -> bool {
        let end = span.end();
        let edge = end == self.len || self.chunks.iter().any(|(s, _)| *s == end);
        if span.start != self.hot_start() || end > self.len || span.len == 0 || !edge {
            return false;
        }
        let keep_from = self.chunks.partition_point(|(s, _)| *s < end);
        self.chunks.drain(..keep_from);
        self.cold.push(span);
        self.hot_since_ms = if self.chunks.is_empty() { 0 } else { now_ms.max(self.hot_since_ms) };
        true
    }

    /// Points the span that starts at `m.start` at `object`, if it still
    /// is the span the compaction read (same length, digest and object).
    pub fn move_span(&mut self, m: &crate::cold::ColdMove, object: &str) -> bool {
        let Ok(i) = self.cold.binary_search_by_key(&m.start, |s| s.start) else { return false };
        let span = &mut self.cold[i];
        if span.len != m.len || span.digest != m.digest || span.object != m.from {
            return false;
        }
        span.object = object.to_owned();
        span.object_offset = m.object_offset;
        true
    }

    /// The cold slices covering `[from, to)`.
    fn cold_slices(&self, from: u64, to: u64) -> Vec<ColdSlice> {
        self.cold
            .iter()
            .filter(|s| s.start < to && s.end() > from)
            .map(|s| ColdSlice { span: s.clone(), from: from.max(s.start), to: to.min(s.end()) })
            .collect()
    }

    /// The spans a reader of `slices` takes next (the rest of the last one
    /// when the read ended inside it, then those after it), adding up to
    /// at least as many bytes as `slices` take (or all of them).
    fn spans_after(&self, slices: &[ColdSlice]) -> Vec<ColdSpan> {
        let Some(last) = slices.last() else { return Vec::new() };
        let want: u64 = slices.iter().map(|s| s.to - s.from).sum();
        // A read that ended inside a span takes the rest of it next.
        let first = match last.to < last.span.end() {
            true => self.cold.partition_point(|s| s.start < last.span.start),
            false => self.cold.partition_point(|s| s.start < last.span.end()),
        };
        let mut taken = 0;
        self.cold[first..]
            .iter()
            .take_while(|s| {
                let more = taken < want;
                taken += s.len;
                more
            })
            .cloned()
            .collect()
    }

    /// A plan of the cold slices `[from, to)` and the hot bytes `[hot_from, end)`.
    fn plan(&self, from: u64, to: u64, cut: Option<ColdCut>, end: u64) -> ReadPlan {
        let cold = self.cold_slices(from, to);
        let ahead = self.spans_after(&cold);
        ReadPlan { cold, cut, hot_from: to, end, ahead }
    }

    /// Which bytes a read from `from` of at most `max` takes from each tier.
    pub fn read_plan(&self, from: u64, max: u64, boundary: Boundary) -> ReadPlan {
        let hot_start = self.hot_start();
        if from >= hot_start {
            let end = self.read_end(from, max, boundary);
            return ReadPlan { cold: Vec::new(), cut: None, hot_from: from, end, ahead: Vec::new() };
        }
        let limit = from.saturating_add(max);
        if limit < hot_start {
            if boundary == Boundary::Byte || self.is_cold_edge(limit) {
                return self.plan(from, limit, None, limit);
            }
            // Fetch to the end of the span the limit falls in; the shell cuts.
            let end = self.cold.iter().find(|s| s.start < limit && limit < s.end()).map_or(limit, ColdSpan::end);
            return self.plan(from, end, Some(ColdCut { limit, boundary }), end);
        }
        // Every cold byte from `from`, then what fits of the hot ones; the
        // hot start is an append's edge, so stopping there is allowed.
        let end = self.cut_end(hot_start, limit - hot_start, boundary, false);
        self.plan(from, hot_start, None, end)
    }

    /// Index of the chunk holding `pos` (or the last one starting before it).
    fn chunk_index(&self, pos: u64) -> Option<usize> {
        self.chunks.partition_point(|(s, _)| *s <= pos).checked_sub(1)
    }

    /// Drops the bytes below `offset` (retention); offsets do not move. A
    /// cold span it cuts is kept whole (its digest covers all of it); reads
    /// never reach below the retained offset.
    pub fn trim_before(&mut self, offset: u64) {
        self.cold.retain(|s| s.end() > offset);
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
        self.cut_end(from, max, boundary, true)
    }

    /// As `read_end`; without `extend`, a limit that cuts the first
    /// character or message ends the read at `from` instead.
    fn cut_end(&self, from: u64, max: u64, boundary: Boundary, extend: bool) -> u64 {
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
                if end > from || !extend {
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
                if end > from || !extend {
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
            d.push(Bytes::copy_from_slice(p.as_bytes()), 0);
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
        let b = |pos| d.is_message_boundary(pos) == Some(true);
        assert!(b(0) && b(2) && b(5));
        assert!(!b(1) && !b(3));
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

    fn span(start: u64, len: u64) -> ColdSpan {
        ColdSpan { start, len, object: "o".into(), object_offset: 0, digest: [0; 32] }
    }

    #[test]
    fn freezing_moves_the_oldest_whole_appends_to_the_cold_tier() {
        let mut d = data(&["1\n", "22\n", "333\n"]);
        assert!(!d.freeze(span(2, 3), 0), "only the oldest hot bytes");
        assert!(!d.freeze(span(0, 3), 0), "only whole appends");
        assert!(d.freeze(span(0, 5), 0));
        assert_eq!((d.hot_start(), d.hot_bytes(), d.first()), (5, 4, 0));
        assert_eq!(d.is_message_boundary(2), None, "inside a cold span");
        assert_eq!(d.is_message_boundary(5), Some(true));
        assert_eq!(d.oldest_hot(1).len(), 1);
    }

    #[test]
    fn a_cold_read_names_the_spans_a_sequential_reader_takes_next() {
        let mut d = data(&["aaaa", "bbbb", "cccc", "dddd", "eeee", "ff"]);
        for start in [0, 4, 8, 12, 16] {
            assert!(d.freeze(span(start, 4), 0));
        }
        let ahead =
            |from, max| d.read_plan(from, max, Boundary::Byte).ahead.iter().map(|s| s.start).collect::<Vec<_>>();
        // As many bytes as the read took from the tier, at least one span.
        assert_eq!(ahead(0, 8), vec![8, 12]);
        assert_eq!(ahead(0, 2), vec![0], "a read ending inside a span: the rest of it first");
        assert_eq!(ahead(2, 4), vec![4]);
        assert_eq!(ahead(2, 10), vec![12, 16]);
        assert_eq!(ahead(0, 4), vec![4]);
        // Up to the last span, and nothing once the read reaches the hot bytes.
        assert_eq!(ahead(8, 8), vec![16]);
        assert_eq!(ahead(12, 100), Vec::<u64>::new());
        assert_eq!(ahead(20, 2), Vec::<u64>::new());
    }

    #[test]
    fn a_read_plan_takes_cold_slices_then_hot_bytes() {
        let mut d = data(&["{\"a\":1}\n", "{\"b\":2}\n", "{\"c\":3}\n"]);
        assert!(d.freeze(span(0, 8), 0));
        assert!(d.freeze(ColdSpan { start: 8, len: 8, object: "p".into(), object_offset: 100, digest: [1; 32] }, 0));
        // From inside cold, through the hot start: every cold byte, then hot.
        let plan = d.read_plan(3, 100, Boundary::Message);
        assert_eq!(plan.cold.iter().map(|c| (c.from, c.to)).collect::<Vec<_>>(), vec![(3, 8), (8, 16)]);
        assert_eq!((plan.hot_from, plan.end, plan.cut), (16, 24, None));
        // Ending inside a cold span: fetch the span, the shell cuts.
        let plan = d.read_plan(0, 10, Boundary::Message);
        assert_eq!(plan.end, 16);
        assert_eq!(plan.cut, Some(ColdCut { limit: 10, boundary: Boundary::Message }));
        // Bytes end anywhere; a span edge needs no cut.
        assert_eq!(d.read_plan(0, 10, Boundary::Byte).end, 10);
        assert_eq!(d.read_plan(0, 8, Boundary::Message).cut, None);
        // Just past the hot start, a message that does not fit stays out.
        let plan = d.read_plan(8, 9, Boundary::Message);
        assert_eq!((plan.hot_from, plan.end), (16, 16));
        // Hot-only reads are as before.
        assert_eq!(d.read_plan(16, 3, Boundary::Message).end, 24);
        d.trim_before(9);
        assert_eq!(d.cold_spans().len(), 1, "a span below the retained offset goes; a cut one stays whole");
    }
}
