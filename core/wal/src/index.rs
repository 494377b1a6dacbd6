//! What the journal holds, in memory: per group its state slots, purge
//! record and where each live entry sits; per segment how many live
//! entries it still holds and whether it opens with a checkpoint, which
//! together decide when older segments can be deleted.
//!
//! Replay and the writer drive the same methods, so what a reopen rebuilds
//! is what the running journal had.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

/// Where an entry's frame sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub segment: u64,
    /// Offset of the frame (its header) in the segment.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
}

#[derive(Debug, Default)]
pub struct GroupIndex {
    /// Index of `locs[0]`.
    base: u64,
    /// Entries are contiguous per group: a run from `base`, not a map.
    locs: VecDeque<Loc>,
    pub slots: BTreeMap<u8, Bytes>,
    pub purged: Option<(u64, Bytes)>,
}

impl GroupIndex {
    pub fn range(&self) -> Option<(u64, u64)> {
        let len = self.locs.len() as u64;
        let last = self.base.checked_add(len.checked_sub(1)?)?;
        Some((self.base, last))
    }

    pub fn get(&self, index: u64) -> Option<Loc> {
        let i = usize::try_from(index.checked_sub(self.base)?).ok()?;
        self.locs.get(i).copied()
    }

    /// Index one past the last live entry: past `u64::MAX` when an entry
    /// sits there (a damaged journal may hold one), so it is wider.
    fn end(&self) -> u128 {
        u128::from(self.base) + self.locs.len() as u128
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SegInfo {
    /// Live entries in the segment.
    pub live: u64,
    /// The segment holds a complete checkpoint.
    pub checkpointed: bool,
    /// Bytes in the file.
    pub bytes: u64,
}

#[derive(Debug, Default)]
pub struct Index {
    pub groups: BTreeMap<u32, GroupIndex>,
    /// Every segment on disk, ascending.
    pub segments: BTreeMap<u64, SegInfo>,
}

impl Index {
    fn release(segments: &mut BTreeMap<u64, SegInfo>, loc: Loc) {
        if let Some(s) = segments.get_mut(&loc.segment) {
            s.live = s.live.saturating_sub(1);
        }
    }

    pub fn add_segment(&mut self, segment: u64) {
        self.segments.entry(segment).or_default();
    }

    pub fn grow(&mut self, segment: u64, bytes: u64) {
        self.segments.entry(segment).or_default().bytes += bytes;
    }

    pub fn mark_checkpoint(&mut self, segment: u64) {
        self.segments.entry(segment).or_default().checkpointed = true;
    }

    pub fn bytes_on_disk(&self) -> u64 {
        self.segments.values().map(|s| s.bytes).sum()
    }

    /// An entry frame. One at an existing index replaces it and all after
    /// it; one that does not continue the live run starts a new run (the
    /// old run is dropped); one at or below the purge point is ignored.
    pub fn append(&mut self, group: u32, index: u64, loc: Loc) {
        let g = self.groups.entry(group).or_default();
        if g.purged.as_ref().is_some_and(|(upto, _)| index <= *upto) {
            return;
        }
        if g.locs.is_empty() || index < g.base || u128::from(index) > g.end() {
            for l in g.locs.drain(..) {
                Self::release(&mut self.segments, l);
            }
            g.base = index;
        } else {
            // index - base <= locs.len(), which fits in usize.
            let keep = usize::try_from(index - g.base).unwrap_or(usize::MAX);
            for l in g.locs.drain(keep.min(g.locs.len())..) {
                Self::release(&mut self.segments, l);
            }
        }
        g.locs.push_back(loc);
        self.segments.entry(loc.segment).or_default().live += 1;
    }

    /// Removes the group's entries with index >= `since`.
    pub fn truncate(&mut self, group: u32, since: u64) {
        let Some(g) = self.groups.get_mut(&group) else { return };
        if g.locs.is_empty() || u128::from(since) >= g.end() {
            return;
        }
        let keep = usize::try_from(since.saturating_sub(g.base)).unwrap_or(usize::MAX).min(g.locs.len());
        for l in g.locs.drain(keep..) {
            Self::release(&mut self.segments, l);
        }
    }

    /// Removes the group's entries with index <= `upto`; a purge behind
    /// the current one is ignored.
    pub fn purge(&mut self, group: u32, upto: u64, marker: Bytes) {
        let g = self.groups.entry(group).or_default();
        if g.purged.as_ref().is_some_and(|(u, _)| *u > upto) {
            return;
        }
        while g.base <= upto {
            let Some(l) = g.locs.pop_front() else { break };
            Self::release(&mut self.segments, l);
            // An entry at `u64::MAX` was the last there can be.
            match g.base.checked_add(1) {
                Some(next) => g.base = next,
                None => break,
            }
        }
        if g.locs.is_empty() {
            g.base = upto.saturating_add(1);
        }
        g.purged = Some((upto, marker));
    }

    pub fn set_state(&mut self, group: u32, slot: u8, value: Bytes) {
        self.groups.entry(group).or_default().slots.insert(slot, value);
    }

    /// The oldest segments that can go: no live entry in them, and a later
    /// segment holds a checkpoint (so their slots and purge records are
    /// carried forward). Only a prefix, never the newest segment.
    pub fn dead_prefix(&self) -> Vec<u64> {
        let Some(checkpoint) = self.segments.iter().rev().find(|(_, s)| s.checkpointed).map(|(seq, _)| *seq) else {
            return Vec::new();
        };
        self.segments.iter().take_while(|(seq, s)| **seq < checkpoint && s.live == 0).map(|(seq, _)| *seq).collect()
    }

    pub fn remove_segment(&mut self, segment: u64) {
        self.segments.remove(&segment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(segment: u64, offset: u64) -> Loc {
        Loc { segment, offset, len: 1 }
    }

    #[test]
    fn overwrite_truncate_purge() {
        let mut ix = Index::default();
        for i in 1..=10 {
            ix.append(1, i, loc(1, i));
        }
        ix.append(1, 6, loc(2, 100));
        let g = &ix.groups[&1];
        assert_eq!(g.range(), Some((1, 6)));
        assert_eq!(g.get(6), Some(loc(2, 100)));
        assert_eq!(ix.segments[&1].live, 5);
        ix.truncate(1, 3);
        assert_eq!(ix.groups[&1].range(), Some((1, 2)));
        ix.purge(1, 1, Bytes::from_static(b"m"));
        assert_eq!(ix.groups[&1].range(), Some((2, 2)));
        ix.purge(1, 0, Bytes::from_static(b"older"));
        assert_eq!(ix.groups[&1].purged, Some((1, Bytes::from_static(b"m"))));
        // Beyond the last entry: the next run starts after the purge point.
        ix.purge(1, 20, Bytes::new());
        assert_eq!(ix.groups[&1].range(), None);
        ix.append(1, 15, loc(2, 200));
        assert_eq!(ix.groups[&1].range(), None, "at or below the purge point");
        ix.append(1, 21, loc(2, 300));
        assert_eq!(ix.groups[&1].range(), Some((21, 21)));
        assert_eq!(ix.segments[&1].live, 0);
        assert_eq!(ix.segments[&2].live, 1);
    }

    #[test]
    fn an_entry_at_the_last_index_is_kept_truncated_and_purged_like_any_other() {
        // Found by the `wal_frame` fuzz target (fuzz/regressions/wal_frame).
        let mut idx = Index::default();
        idx.append(1, u64::MAX - 1, loc(1, 0));
        idx.append(1, u64::MAX, loc(1, 10));
        assert_eq!(idx.groups[&1].range(), Some((u64::MAX - 1, u64::MAX)));
        assert_eq!(idx.groups[&1].get(u64::MAX), Some(loc(1, 10)));
        idx.truncate(1, u64::MAX);
        assert_eq!(idx.groups[&1].range(), Some((u64::MAX - 1, u64::MAX - 1)), "the entry at MAX goes");
        idx.append(1, u64::MAX, loc(1, 20));
        idx.purge(1, u64::MAX, Bytes::from_static(b"p"));
        assert_eq!(idx.groups[&1].range(), None);
        assert_eq!(idx.segments[&1].live, 0);
        idx.append(1, 5, loc(1, 30));
        assert_eq!(idx.groups[&1].range(), None, "at or below the purge point: ignored");
    }

    #[test]
    fn only_a_dead_prefix_before_a_checkpoint_goes() {
        let mut ix = Index::default();
        for s in 1..=4 {
            ix.add_segment(s);
        }
        ix.append(1, 1, loc(2, 0));
        assert!(ix.dead_prefix().is_empty(), "no checkpoint yet");
        ix.mark_checkpoint(4);
        assert_eq!(ix.dead_prefix(), vec![1]);
        ix.purge(1, 1, Bytes::new());
        assert_eq!(ix.dead_prefix(), vec![1, 2, 3]);
    }
}
