//! What the journal holds, in memory: per group its state slots, purge
//! record and where each live entry sits; per segment how many live
//! entries it still holds, which decides when it can be deleted.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

/// Where an entry's frame sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub segment: u64,
    /// Offset of the frame (its header) in the segment.
    pub offset: u64,
    pub len: u32,
}

#[derive(Debug, Default)]
pub struct GroupIndex {
    /// Index of `locs[0]`.
    base: u64,
    /// Entries are contiguous per group, so a run with a base index.
    locs: VecDeque<Loc>,
    pub slots: BTreeMap<u8, Bytes>,
    pub purged: Option<(u64, Bytes)>,
}

impl GroupIndex {
    pub fn range(&self) -> Option<(u64, u64)> {
        (!self.locs.is_empty()).then(|| (self.base, self.base + self.locs.len() as u64 - 1))
    }

    pub fn get(&self, index: u64) -> Option<Loc> {
        index.checked_sub(self.base).and_then(|i| self.locs.get(usize::try_from(i).ok()?)).copied()
    }
}

#[derive(Debug, Default)]
pub struct Index {
    pub groups: BTreeMap<u32, GroupIndex>,
    /// Live entries per segment; every segment on disk has a key.
    pub live: BTreeMap<u64, u64>,
}

impl Index {
    fn release(live: &mut BTreeMap<u64, u64>, loc: Loc) {
        if let Some(n) = live.get_mut(&loc.segment) {
            *n = n.saturating_sub(1);
        }
    }

    pub fn add_segment(&mut self, segment: u64) {
        self.live.entry(segment).or_insert(0);
    }

    /// An entry frame; one at an existing index replaces it and all after it.
    pub fn append(&mut self, group: u32, index: u64, loc: Loc) {
        let g = self.groups.entry(group).or_default();
        if g.purged.as_ref().is_some_and(|(upto, _)| index <= *upto) {
            return;
        }
        let len = g.locs.len() as u64;
        if g.locs.is_empty() || index < g.base || index > g.base + len {
            // A fresh run (first entry, or one that is not contiguous with the old run).
            for l in g.locs.drain(..) {
                Self::release(&mut self.live, l);
            }
            g.base = index;
        } else {
            let keep = (index - g.base) as usize;
            for l in g.locs.drain(keep..) {
                Self::release(&mut self.live, l);
            }
        }
        g.locs.push_back(loc);
        *self.live.entry(loc.segment).or_insert(0) += 1;
    }

    pub fn truncate(&mut self, group: u32, since: u64) {
        let g = self.groups.entry(group).or_default();
        if g.locs.is_empty() || since >= g.base + g.locs.len() as u64 {
            return;
        }
        let keep = since.saturating_sub(g.base) as usize;
        for l in g.locs.drain(keep..) {
            Self::release(&mut self.live, l);
        }
    }

    pub fn purge(&mut self, group: u32, upto: u64, marker: Bytes) {
        let g = self.groups.entry(group).or_default();
        if g.purged.as_ref().is_some_and(|(u, _)| *u > upto) {
            return;
        }
        while !g.locs.is_empty() && g.base <= upto {
            if let Some(l) = g.locs.pop_front() {
                Self::release(&mut self.live, l);
            }
            g.base += 1;
        }
        g.purged = Some((upto, marker));
    }

    pub fn set_state(&mut self, group: u32, slot: u8, value: Bytes) {
        self.groups.entry(group).or_default().slots.insert(slot, value);
    }

    /// Oldest segments, before `active`, that hold no live entry.
    pub fn dead_prefix(&self, active: u64) -> Vec<u64> {
        self.live.iter().take_while(|(seg, live)| **seg < active && **live == 0).map(|(seg, _)| *seg).collect()
    }
}
