//! Random sequences of appends, overwrites, truncates, purges, state
//! writes, compaction passes and reopens against a plain in-memory model
//! (a pass changes nothing the model sees).

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use ursula_wal::{Recovered, RecoveredGroup, Wal};

use crate::common::*;

const SEGMENT: u64 = 4096;

#[derive(Debug, Clone)]
enum Op {
    /// Group, entries, how far back from the end the append starts
    /// (0: plain append, more: an implicit truncate), payload size.
    Append(u32, u8, u8, u16),
    Truncate(u32, u8),
    Purge(u32, u8),
    PurgeBackwards(u32),
    State(u32, u8),
    /// A compaction pass with this budget in bytes.
    Compact(u16),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4u32, 1..8u8, prop_oneof![3 => Just(0u8), 1 => 1..4u8], 1..400u16)
            .prop_map(|(g, n, back, size)| Op::Append(g, n, back, size)),
        1 => (0..4u32, 0..10u8).prop_map(|(g, n)| Op::Truncate(g, n)),
        2 => (0..4u32, 0..12u8).prop_map(|(g, n)| Op::Purge(g, n)),
        1 => (0..4u32).prop_map(Op::PurgeBackwards),
        1 => (0..4u32, 0..3u8).prop_map(|(g, s)| Op::State(g, s)),
        2 => (1..3000u16).prop_map(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Default, Debug, Clone)]
struct Model {
    entries: BTreeMap<u64, Bytes>,
    purged: Option<(u64, Bytes)>,
    slots: BTreeMap<u8, Bytes>,
}

impl Model {
    fn lowest(&self) -> u64 {
        self.purged.as_ref().map_or(1, |(u, _)| u + 1)
    }

    fn next(&self) -> u64 {
        self.entries.keys().next_back().map_or(self.lowest(), |last| last + 1)
    }

    fn recovered(&self) -> RecoveredGroup {
        let range = self.entries.keys().next().zip(self.entries.keys().next_back()).map(|(a, b)| (*a, *b));
        RecoveredGroup { slots: self.slots.clone(), purged: self.purged.clone(), entries: range }
    }
}

fn body(g: u32, i: u64, stamp: u64, size: u16) -> Bytes {
    let mut s = format!("{g}:{i}:{stamp}:");
    s.extend(std::iter::repeat_n('x', usize::from(size)));
    Bytes::from(s)
}

fn check_reads(wal: &Wal, model: &BTreeMap<u32, Model>) -> Result<(), TestCaseError> {
    for (g, m) in model {
        for (i, b) in &m.entries {
            prop_assert_eq!(wal.read(*g, *i).expect("reads"), Some(b.clone()), "group {} entry {}", g, i);
        }
        prop_assert_eq!(wal.read(*g, m.next()).expect("reads"), None);
        if let Some((upto, _)) = m.purged {
            prop_assert_eq!(wal.read(*g, upto).expect("reads"), None);
        }
    }
    Ok(())
}

fn check_recovered(rec: &Recovered, model: &BTreeMap<u32, Model>) -> Result<(), TestCaseError> {
    prop_assert!(rec.torn_tail.is_none());
    for (g, m) in model {
        prop_assert_eq!(rec.groups.get(g).cloned().unwrap_or_default(), m.recovered(), "group {}", g);
    }
    for (g, r) in &rec.groups {
        prop_assert!(*r != RecoveredGroup::default(), "empty group {} reported", g);
        prop_assert!(model.contains_key(g), "unknown group {}", g);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn journal_matches_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

/// A case the random test once drew: a compaction run split by a rotation,
/// its head copies' segment reclaimed after a purge, left a CopyEnd that
/// recovery refused as corrupt.
#[test]
fn a_purge_after_compaction_leaves_a_journal_that_opens() {
    use Op::*;
    let ops = vec![
        Append(2, 3, 0, 306),
        State(0, 0),
        Truncate(0, 0),
        Truncate(0, 0),
        Append(0, 5, 0, 205),
        Append(1, 6, 0, 276),
        Append(0, 4, 3, 189),
        Compact(2940),
        Append(0, 7, 0, 126),
        Append(0, 5, 0, 389),
        Purge(0, 8),
        Compact(1930),
        Compact(168),
    ];
    run(ops).expect("matches the model");
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut wal, _) = open(dir.path(), SEGMENT);
    let mut model: BTreeMap<u32, Model> = BTreeMap::new();
    for (stamp, op) in ops.into_iter().enumerate() {
        let stamp = stamp as u64;
        match op {
            Op::Append(g, n, back, size) => {
                let m = model.entry(g).or_default();
                let next = m.next();
                let start = next - u64::from(back).min(next - m.lowest());
                let entries: Vec<_> = (start..start + u64::from(n)).map(|i| (i, body(g, i, stamp, size))).collect();
                m.entries.retain(|i, _| *i < start);
                m.entries.extend(entries.iter().cloned());
                wait(|d| wal.append(g, entries, false, d)).expect("append");
            }
            Op::Truncate(g, back) => {
                let m = model.entry(g).or_default();
                let since = m.next().saturating_sub(u64::from(back));
                m.entries.retain(|i, _| *i < since);
                wait(|d| wal.truncate(g, since, d)).expect("truncate");
            }
            Op::Purge(g, ahead) => {
                let m = model.entry(g).or_default();
                let upto = m.purged.as_ref().map_or(0, |(u, _)| *u) + u64::from(ahead);
                let marker = Bytes::from(format!("purge {upto} at {stamp}"));
                m.entries.retain(|i, _| *i > upto);
                m.purged = Some((upto, marker.clone()));
                wait(|d| wal.purge(g, upto, marker, d)).expect("purge");
            }
            Op::PurgeBackwards(g) => {
                let m = model.entry(g).or_default();
                if let Some(upto) = m.purged.as_ref().and_then(|(u, _)| u.checked_sub(1)) {
                    wait(|d| wal.purge(g, upto, Bytes::from_static(b"ignored"), d)).expect("purge");
                }
            }
            Op::State(g, slot) => {
                let v = Bytes::from(format!("state {stamp}"));
                model.entry(g).or_default().slots.insert(slot, v.clone());
                wait(|d| wal.set_state(g, slot, v, d)).expect("state");
            }
            Op::Compact(budget) => {
                let limits = ursula_wal::CompactLimits {
                    budget: u64::from(budget),
                    lagging_over: SEGMENT / 2,
                    min_age: std::time::Duration::ZERO,
                };
                wal.compact(limits).expect("compacts");
            }
            Op::Reopen => {
                wal.close().expect("closes");
                let (w, rec) = open(dir.path(), SEGMENT);
                wal = w;
                check_recovered(&rec, &model)?;
            }
        }
        check_reads(&wal, &model)?;
        prop_assert_eq!(wal.stats().segments as usize, segments(dir.path()).len());
    }
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), SEGMENT);
    check_recovered(&rec, &model)?;
    check_reads(&wal, &model)?;
    Ok(())
}
