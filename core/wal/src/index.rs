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
    /// Entry frames in the segment, live or not.
    pub entries: u64,
}

impl SegInfo {
    /// The segment holds entries that are no longer live (purged,
    /// truncated, overwritten or copied forward).
    pub fn dirty(&self) -> bool {
        self.live < self.entries
    }
}

/// One compaction pass (spec/35 "Deleted data"): the groups whose whole
/// live run is copied into the newest segment, so the older segments they
/// kept can go, and the groups too large to copy, which their snapshot
/// frees instead.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CompactionPlan {
    /// (group, first index, where each entry of its run sits now).
    pub copy: Vec<(u32, u64, Vec<Loc>)>,
    pub lagging: Vec<u32>,
    /// Segments kept on disk only for the lagging groups.
    pub pinned_segments: u64,
}

#[derive(Debug, Default)]
pub struct Index {
    pub groups: BTreeMap<u32, GroupIndex>,
    /// Every segment on disk, ascending.
    pub segments: BTreeMap<u64, SegInfo>,
    /// Copied entries waiting for their group's CopyEnd.
    copies: BTreeMap<u32, Vec<(u64, Loc)>>,
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
        self.segments.entry(loc.segment).or_default().entries += 1;
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

    /// A Copy frame: held until its group's CopyEnd. One that does not
    /// continue the group's pending copies starts a new run: those were a
    /// run a crash cut short before its CopyEnd (dead bytes, kept in the
    /// segment when the torn tail after them was cut).
    pub fn copied(&mut self, group: u32, index: u64, loc: Loc) {
        self.segments.entry(loc.segment).or_default().entries += 1;
        let pending = self.copies.entry(group).or_default();
        if pending.last().is_some_and(|(last, _)| last.checked_add(1) != Some(index)) {
            pending.clear();
        }
        pending.push((index, loc));
    }

    /// A CopyEnd frame: the group's run becomes the copies of
    /// `first..=last` before it. Err when the copies are not that run.
    ///
    /// `in_oldest`: the CopyEnd is in the oldest segment left. Builds before
    /// the writer kept a run within one segment could split it at a
    /// rotation; once the group was purged past the head copies, their
    /// segment held nothing live and was reclaimed. There the run starts at
    /// its first copy present (none present: the whole run was dead).
    pub fn copy_end(&mut self, group: u32, first: u64, last: u64, in_oldest: bool) -> Result<(), String> {
        let mut copies = self.copies.remove(&group).unwrap_or_default();
        // Pending copies below `first`: a run cut short that this one continued.
        copies.retain(|(index, _)| *index >= first);
        let first = match copies.first() {
            Some((start, _)) if in_oldest && *start > first => *start,
            None if in_oldest => return Ok(()),
            _ => first,
        };
        let contiguous = copies.iter().enumerate().all(|(k, (index, _))| first.checked_add(k as u64) == Some(*index));
        if !contiguous || copies.last().map(|(i, _)| *i) != Some(last) {
            return Err(format!(
                "the copy of group {group} ends at {first}..={last} but holds {} other entries",
                copies.len()
            ));
        }
        let g = self.groups.entry(group).or_default();
        if g.purged.as_ref().is_some_and(|(upto, _)| first <= *upto) {
            return Err(format!("the copy of group {group} starts at {first}, at or below its purge point"));
        }
        for l in g.locs.drain(..) {
            Self::release(&mut self.segments, l);
        }
        g.base = first;
        for (_, loc) in copies {
            g.locs.push_back(loc);
            self.segments.entry(loc.segment).or_default().live += 1;
        }
        Ok(())
    }

    /// Copies whose CopyEnd never came (a cut tail): dead bytes.
    pub fn drop_unfinished_copies(&mut self) {
        self.copies.clear();
    }

    pub fn set_state(&mut self, group: u32, slot: u8, value: Bytes) {
        self.groups.entry(group).or_default().slots.insert(slot, value);
    }

    /// The oldest segments that can go: no live entry in them, and a later
    /// segment holds a checkpoint (so their slots and purge records are
    /// carried forward). Only a prefix, never the newest segment.
    pub fn dead_prefix(&self) -> Vec<u64> {
        let Some(checkpoint) = self.newest_checkpoint() else { return Vec::new() };
        self.segments.iter().take_while(|(seq, s)| **seq < checkpoint && s.live == 0).map(|(seq, _)| *seq).collect()
    }

    pub fn remove_segment(&mut self, segment: u64) {
        self.segments.remove(&segment);
    }

    /// The newest segment that opens with a checkpoint: every segment
    /// before it matters only for the live entries it holds.
    fn newest_checkpoint(&self) -> Option<u64> {
        self.segments.iter().rev().find(|(_, s)| s.checkpointed).map(|(seq, _)| *seq)
    }

    /// Segments before the newest checkpoint that hold dead entries.
    pub fn dirty_segments(&self) -> impl Iterator<Item = u64> + '_ {
        let checkpoint = self.newest_checkpoint().unwrap_or(0);
        self.segments.range(..checkpoint).filter(|(_, s)| s.dirty()).map(|(seq, _)| *seq)
    }

    /// Plans a pass that frees the segments up to the newest dirty one
    /// `due` accepts: every group with an entry there has its whole run
    /// copied (`budget` bytes in all, at least one group), unless its run
    /// is over `lagging_over` bytes; such a group is reported lagging and
    /// no segment from its first one on is freed by this pass.
    pub fn plan_compaction(&self, budget: u64, lagging_over: u64, due: impl Fn(u64) -> bool) -> CompactionPlan {
        let mut plan = CompactionPlan::default();
        let Some(upto) = self.dirty_segments().filter(|seq| due(*seq)).last() else { return plan };
        // (first segment, group, run bytes up to just past `lagging_over`)
        let mut holders: Vec<(u64, u32, u64)> = self
            .groups
            .iter()
            .filter_map(|(group, g)| {
                let front = g.locs.front()?.segment;
                let mut bytes = 0u64;
                for l in &g.locs {
                    bytes += u64::from(l.len);
                    if bytes > lagging_over {
                        break;
                    }
                }
                (front <= upto).then_some((front, *group, bytes))
            })
            .collect();
        holders.sort_unstable();
        let blocked = holders.iter().find(|(_, _, bytes)| *bytes > lagging_over).map(|(front, _, _)| *front);
        let mut spent = 0u64;
        for (front, group, bytes) in holders {
            if bytes > lagging_over {
                plan.lagging.push(group);
                continue;
            }
            if blocked.is_some_and(|b| front >= b) || (spent > 0 && spent + bytes > budget) {
                continue;
            }
            spent += bytes;
            let g = &self.groups[&group];
            plan.copy.push((group, g.base, g.locs.iter().copied().collect()));
        }
        if let Some(b) = blocked {
            plan.pinned_segments = self.segments.range(b..=upto).count() as u64;
        }
        plan
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

    fn sized(segment: u64, offset: u64, len: u32) -> Loc {
        Loc { segment, offset, len }
    }

    /// Segments 1-3 sealed, 4 opens with a checkpoint; group 1 is busy and
    /// purged, groups 2 and 3 are quiet with a few entries in segment 1.
    fn journal() -> Index {
        let mut ix = Index::default();
        for s in 1..=4 {
            ix.add_segment(s);
        }
        ix.mark_checkpoint(4);
        ix.append(2, 7, sized(1, 0, 10));
        ix.append(2, 8, sized(2, 0, 10));
        ix.append(3, 1, sized(1, 20, 5));
        for (i, s) in [(1, 1), (2, 1), (3, 2), (4, 3)] {
            ix.append(1, i, sized(s, 100 + i, 100));
        }
        ix.purge(1, 4, Bytes::new());
        ix
    }

    #[test]
    fn a_dirty_segment_is_freed_by_copying_the_quiet_groups_whole_runs() {
        let ix = journal();
        assert_eq!(ix.dirty_segments().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(ix.dead_prefix().is_empty(), "groups 2 and 3 keep segment 1");
        let plan = ix.plan_compaction(1 << 20, 1 << 20, |_| true);
        assert_eq!(
            plan.copy,
            vec![(2, 7, vec![sized(1, 0, 10), sized(2, 0, 10)]), (3, 1, vec![sized(1, 20, 5)])],
            "group 2's entry in segment 2 goes too: its run is copied whole"
        );
        assert!(plan.lagging.is_empty());
        assert_eq!(plan.pinned_segments, 0);
    }

    #[test]
    fn nothing_is_copied_before_a_dirty_segment_is_due_or_without_a_dirty_one() {
        let ix = journal();
        assert_eq!(ix.plan_compaction(1 << 20, 1 << 20, |_| false), CompactionPlan::default());
        // Only segment 1 due: the same groups hold it.
        assert_eq!(ix.plan_compaction(1 << 20, 1 << 20, |s| s == 1).copy.len(), 2);
        let mut clean = Index::default();
        clean.add_segment(1);
        clean.add_segment(2);
        clean.mark_checkpoint(2);
        clean.append(5, 1, sized(1, 0, 10));
        assert_eq!(clean.plan_compaction(1 << 20, 1 << 20, |_| true), CompactionPlan::default());
    }

    #[test]
    fn a_group_too_large_to_copy_is_lagging_and_pins_the_segments_from_its_first() {
        let ix = journal();
        // Group 2 holds 20 bytes, group 3 five: over 8, group 2 lags.
        let plan = ix.plan_compaction(1 << 20, 8, |_| true);
        assert_eq!(plan.lagging, vec![2]);
        assert!(plan.copy.is_empty(), "group 3 starts in segment 1 too, which group 2 keeps");
        assert_eq!(plan.pinned_segments, 3, "segments 1 to 3");
    }

    #[test]
    fn the_budget_bounds_a_pass_but_the_first_group_always_goes() {
        let ix = journal();
        let plan = ix.plan_compaction(1, 1 << 20, |_| true);
        assert_eq!(plan.copy.len(), 1, "{plan:?}");
        assert_eq!(plan.copy[0].0, 2);
    }

    #[test]
    fn a_copy_replaces_the_run_only_at_its_end_and_must_be_the_whole_run() {
        let mut ix = journal();
        ix.add_segment(5);
        ix.copied(2, 7, sized(5, 0, 10));
        assert_eq!(ix.groups[&2].get(7), Some(sized(1, 0, 10)), "not before its end");
        ix.copied(2, 8, sized(5, 40, 10));
        ix.copy_end(2, 7, 8, false).expect("the whole run");
        assert_eq!(ix.groups[&2].get(7), Some(sized(5, 0, 10)));
        assert_eq!(ix.groups[&2].range(), Some((7, 8)));
        assert_eq!((ix.segments[&5].live, ix.segments[&2].live), (2, 0));
        // A copy with a gap, or with nothing, is refused and changes nothing.
        ix.copied(3, 1, sized(5, 80, 5));
        ix.copied(3, 3, sized(5, 90, 5));
        assert!(ix.copy_end(3, 1, 3, false).is_err());
        assert!(ix.copy_end(3, 1, 1, false).is_err(), "its copies were taken by the refused end");
        assert_eq!(ix.groups[&3].get(1), Some(sized(1, 20, 5)));
        // Below the purge point: refused.
        ix.copied(1, 4, sized(5, 99, 100));
        assert!(ix.copy_end(1, 4, 4, false).is_err());
    }

    #[test]
    fn in_the_oldest_segment_a_run_whose_head_was_reclaimed_starts_at_its_first_copy() {
        let mut ix = journal();
        ix.add_segment(5);
        // The run 6..=8 lost its head copy 6 with a reclaimed segment.
        ix.copied(2, 7, sized(5, 0, 10));
        ix.copied(2, 8, sized(5, 40, 10));
        assert!(ix.copy_end(2, 6, 8, false).is_err(), "anywhere else it is corrupt");
        ix.copied(2, 7, sized(5, 0, 10));
        ix.copied(2, 8, sized(5, 40, 10));
        ix.copy_end(2, 6, 8, true).expect("the copies present");
        assert_eq!(ix.groups[&2].range(), Some((7, 8)));
        assert_eq!(ix.groups[&2].get(7), Some(sized(5, 0, 10)));
        // A run all of whose copies went changes nothing.
        ix.copy_end(3, 1, 2, true).expect("nothing to apply");
        assert_eq!(ix.groups[&3].get(1), Some(sized(1, 20, 5)));
        // A copy after a gap starts a new run (the one before it was cut
        // short): elsewhere than in the oldest segment, one missing its head.
        ix.copied(3, 2, sized(5, 80, 5));
        ix.copied(3, 4, sized(5, 90, 5));
        assert!(ix.copy_end(3, 1, 4, false).is_err());
        ix.copied(3, 2, sized(5, 80, 5));
        ix.copied(3, 4, sized(5, 90, 5));
        ix.copy_end(3, 4, 4, false).expect("the run after the gap");
        assert_eq!(ix.groups[&3].range(), Some((4, 4)));
    }
}
