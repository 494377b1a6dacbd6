//! The WAL frame decoder (`ursula_wal::frame::decode`) and recovery
//! (`ursula_wal::Wal::open`, which replays `recover.rs`).
//!
//! Input: the first byte picks the form of the rest.
//! - high bit clear: raw segment files. The rest, split at `--SEG--\n`, is
//!   the content of up to four consecutive segments, the first numbered
//!   `1 + (byte & 15)`. Real segments written by the WAL are the seeds.
//! - high bit set: a structured journal (`arbitrary`): frames with valid
//!   checksums, so recovery's semantics (overwrites, truncates, purges,
//!   checkpoints) are reached, then optional damage (a cut, a flipped byte,
//!   trailing garbage).
//!
//! Properties: the decoder either refuses with the right reason or returns
//! a frame that re-encodes to exactly the bytes it came from. Recovery never
//! panics; it refuses (`Corrupt`) exactly when a model of the documented
//! rules does (damage in the newest segment that valid frames follow is
//! refused or cut, as the input picks the owner's option); otherwise it
//! keeps exactly the valid prefix of the newest segment (cut on disk,
//! reported, and recorded until settled when the cut may lose
//! acknowledged entries), every entry it reports reads back as
//! the last frame that wrote it, and a second open finds the same state
//! and no torn tail (when a forged Checkpoint frame does not carry the
//! slots and purge records it must: the same entries of every group whose
//! purge record survived).

#![no_main]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use bytes::Bytes;
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use ursula_wal::frame::{self, Bad, FrameKind, HEADER, MAGIC, VERSION};
use ursula_wal::{Damage as Found, Fsync, Recovered, RecoveredGroup, Wal, WalError, WalOptions};

const SEPARATOR: &[u8] = b"--SEG--\n";
const MAX_SEGMENTS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    for start in 0..rest.len().min(64) {
        decoder(&rest[start..]);
    }
    let segments = if mode & 0x80 == 0 {
        let first = 1 + u64::from(mode & 15);
        split(rest).into_iter().enumerate().map(|(i, s)| (first + i as u64, s.to_vec())).collect()
    } else {
        match Journal::arbitrary_take_rest(Unstructured::new(rest)) {
            Ok(j) => j.render(),
            Err(_) => return,
        }
    };
    recovery(&segments);
});

fn split(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while out.len() + 1 < MAX_SEGMENTS {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                out.push(&rest[..at]);
                rest = &rest[at + SEPARATOR.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

// ---- the decoder ----

fn decoder(data: &[u8]) {
    let magic = MAGIC.to_le_bytes();
    match frame::decode(data) {
        Ok(f) => {
            assert!(f.size() <= data.len());
            let mut again = Vec::new();
            frame::encode(&mut again, f.kind, f.group, f.index, f.payload);
            assert_eq!(again, &data[..f.size()], "a decoded frame re-encodes to its bytes");
            for cut in [0, 1, 2, 3, HEADER - 1, f.size() - 1] {
                if cut < f.size() {
                    assert_eq!(frame::decode(&data[..cut]).err(), Some(Bad::Short), "a frame cut at {cut}");
                }
            }
        }
        Err(bad) => {
            match bad {
                Bad::Short => {
                    let declared = data.get(16..20).map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize);
                    assert!(
                        data.len() < HEADER || declared.is_some_and(|len| HEADER + len > data.len()),
                        "short with {} bytes",
                        data.len()
                    );
                    assert!(data.iter().zip(magic).all(|(a, b)| *a == b), "short, yet not the magic");
                }
                Bad::NotAFrame => assert!(data.iter().zip(magic).any(|(a, b)| *a != b)),
                Bad::Version(v) => assert!(data[..2] == magic && data[2] == v && v != VERSION),
                Bad::Checksum => assert!(data.len() >= HEADER && data[2] == VERSION),
                Bad::Kind(k) => assert!(data[3] == k && !(1..=5).contains(&k)),
            }
            assert_eq!(bad.may_be_torn(), matches!(bad, Bad::Short | Bad::NotAFrame | Bad::Checksum));
            assert!(!bad.to_string().is_empty());
        }
    }
}

// ---- a structured journal ----

#[derive(Arbitrary, Debug)]
struct Journal {
    /// The first segment's number.
    first: u8,
    segments: Vec<SegmentSpec>,
}

#[derive(Arbitrary, Debug)]
struct SegmentSpec {
    frames: Vec<FrameSpec>,
    damage: Option<Damage>,
}

#[derive(Arbitrary, Debug)]
struct FrameSpec {
    /// 1..=5 are the kinds; anything else is an unknown kind (resealed).
    kind: u8,
    group: Num,
    /// For a Checkpoint, `Num::Small(0)` means "this segment's own number".
    index: Num,
    payload: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
enum Num {
    Small(u8),
    Any(u64),
    Max,
}

#[derive(Arbitrary, Debug)]
enum Damage {
    /// Keep only this many bytes (modulo the length).
    Cut(u16),
    /// XOR one byte (position modulo the length).
    Flip(u16, u8),
    Garbage(Vec<u8>),
}

impl Journal {
    fn render(&self) -> Vec<(u64, Vec<u8>)> {
        let first = 1 + u64::from(self.first);
        self.segments
            .iter()
            .take(MAX_SEGMENTS)
            .enumerate()
            .map(|(i, s)| {
                let seq = first + i as u64;
                (seq, s.render(seq))
            })
            .collect()
    }
}

impl SegmentSpec {
    fn render(&self, seq: u64) -> Vec<u8> {
        let mut buf = Vec::new();
        for f in &self.frames {
            let group = match f.group {
                Num::Small(g) => u32::from(g % 4),
                Num::Any(g) => g as u32,
                Num::Max => u32::MAX,
            };
            let index = match f.index {
                Num::Small(0) if f.kind == 5 => seq,
                Num::Small(i) => u64::from(i),
                Num::Any(i) => i,
                Num::Max => u64::MAX,
            };
            let start = buf.len();
            let kind = match f.kind {
                1 => FrameKind::Entry,
                2 => FrameKind::State,
                3 => FrameKind::Truncate,
                4 => FrameKind::Purge,
                5 => FrameKind::Checkpoint,
                6 => FrameKind::Copy,
                7 => FrameKind::CopyEnd,
                _ => FrameKind::Entry,
            };
            frame::encode(&mut buf, kind, group, index, &f.payload);
            if !(1..=7).contains(&f.kind) {
                // An unknown kind with a valid checksum.
                buf[start + 3] = f.kind;
                let mut crc = crc32fast::Hasher::new();
                crc.update(&buf[start..start + 20]);
                crc.update(&buf[start + HEADER..]);
                let sum = crc.finalize().to_le_bytes();
                buf[start + 20..start + HEADER].copy_from_slice(&sum);
            }
        }
        match &self.damage {
            None => {}
            Some(Damage::Cut(n)) => {
                let keep = usize::from(*n) % (buf.len() + 1);
                buf.truncate(keep);
            }
            Some(Damage::Flip(at, x)) if !buf.is_empty() => {
                let at = usize::from(*at) % buf.len();
                buf[at] ^= x;
            }
            Some(Damage::Flip(..)) => {}
            Some(Damage::Garbage(g)) => buf.extend_from_slice(g),
        }
        buf
    }
}

// ---- the model of recovery ----

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Group {
    slots: BTreeMap<u8, Vec<u8>>,
    purged: Option<(u64, Vec<u8>)>,
    entries: BTreeMap<u64, Vec<u8>>,
}

#[derive(Debug, Default)]
struct Model {
    groups: BTreeMap<u32, Group>,
    /// (offset, bytes dropped, what was found there)
    torn: Option<(u64, u64, Found)>,
    /// The newest segment's length after the cut.
    newest_len: u64,
    /// Every Checkpoint frame kept the WAL's contract: the State and Purge
    /// frames before it in its segment carry every group's slots and purge
    /// record. The writer may then delete older segments without live
    /// entries, so only such journals must reopen to the same slots.
    checkpoints_complete: bool,
    /// The (group, slot)s the current segment's State frames set so far,
    /// and the last purge record of each group its Purge frames carry.
    carried_slots: BTreeSet<(u32, u8)>,
    carried_purges: BTreeMap<u32, (u64, Vec<u8>)>,
    /// Copy frames waiting for their group's CopyEnd.
    copies: BTreeMap<u32, Vec<(u64, Vec<u8>)>>,
}

/// What recovery must find, per the documented rules; `None`: corruption.
fn model(segments: &[(u64, Vec<u8>)], cut_damage_before_valid_frames: bool) -> Option<Model> {
    let mut m = Model { checkpoints_complete: true, ..Model::default() };
    for (i, (seq, data)) in segments.iter().enumerate() {
        let newest = i + 1 == segments.len();
        m.carried_slots.clear();
        m.carried_purges.clear();
        let mut pos = 0;
        while pos < data.len() {
            match frame::decode(&data[pos..]) {
                Ok(f) => {
                    m.apply(*seq, i == 0, &f)?;
                    pos += f.size();
                }
                Err(bad) => {
                    // The frames that verify after it, each looked for where the one before ended.
                    let mut later = Vec::new();
                    let mut at = pos + 1;
                    while at < data.len() {
                        match frame::decode(&data[at..]) {
                            Ok(f) => {
                                later.push(f.kind);
                                at += f.size();
                            }
                            Err(_) => at += 1,
                        }
                    }
                    let later_frame = !later.is_empty();
                    let entries_only =
                        later.iter().all(|k| matches!(k, FrameKind::Entry | FrameKind::Copy | FrameKind::CopyEnd));
                    if !bad.may_be_torn()
                        || !newest
                        || (later_frame && !cut_damage_before_valid_frames)
                        || !entries_only
                    {
                        return None;
                    }
                    let damage = match bad {
                        _ if later_frame => Found::InvalidBeforeValid,
                        Bad::Short => Found::CutShort,
                        _ => Found::Invalid,
                    };
                    m.torn = Some((pos as u64, (data.len() - pos) as u64, damage));
                    break;
                }
            }
        }
        if newest {
            m.newest_len = pos as u64;
        }
    }
    // A copy whose end never came changes nothing.
    m.copies.clear();
    Some(m)
}

impl Model {
    fn apply(&mut self, seq: u64, oldest: bool, f: &frame::Frame<'_>) -> Option<()> {
        match f.kind {
            FrameKind::Entry => {
                let g = self.groups.entry(f.group).or_default();
                if g.purged.as_ref().is_some_and(|(upto, _)| f.index <= *upto) {
                    return Some(());
                }
                let first = g.entries.keys().next().copied();
                let last = g.entries.keys().next_back().copied();
                match (first, last) {
                    (Some(first), Some(last)) if f.index >= first && f.index <= last.saturating_add(1) => {
                        g.entries.retain(|i, _| *i < f.index);
                    }
                    _ => g.entries.clear(),
                }
                g.entries.insert(f.index, f.payload.to_vec());
            }
            FrameKind::State => {
                let slot = u8::try_from(f.index).ok()?;
                self.carried_slots.insert((f.group, slot));
                self.groups.entry(f.group).or_default().slots.insert(slot, f.payload.to_vec());
            }
            FrameKind::Truncate => {
                if let Some(g) = self.groups.get_mut(&f.group) {
                    g.entries.retain(|i, _| *i < f.index);
                }
            }
            FrameKind::Purge => {
                self.carried_purges.insert(f.group, (f.index, f.payload.to_vec()));
                let g = self.groups.entry(f.group).or_default();
                if g.purged.as_ref().is_some_and(|(upto, _)| *upto > f.index) {
                    return Some(());
                }
                g.entries.retain(|i, _| *i > f.index);
                g.purged = Some((f.index, f.payload.to_vec()));
            }
            FrameKind::Copy => {
                // A copy that does not continue the pending ones starts a new
                // run (those were cut short by a crash before their end).
                let pending = self.copies.entry(f.group).or_default();
                if pending.last().is_some_and(|(last, _)| last.checked_add(1) != Some(f.index)) {
                    pending.clear();
                }
                pending.push((f.index, f.payload.to_vec()));
            }
            FrameKind::CopyEnd => {
                // The group's run becomes exactly the copies first..=last.
                let last = u64::from_le_bytes(<[u8; 8]>::try_from(f.payload).ok()?);
                // In the oldest segment the run's head may have gone with a
                // reclaimed segment: it starts at its first copy there, and
                // with no copy there it changes nothing.
                let mut copies = self.copies.remove(&f.group).unwrap_or_default();
                copies.retain(|(i, _)| *i >= f.index);
                let first = match copies.first() {
                    Some((start, _)) if oldest && *start > f.index => *start,
                    None if oldest => return Some(()),
                    _ => f.index,
                };
                let whole = !copies.is_empty()
                    && copies.iter().enumerate().all(|(k, (i, _))| first.checked_add(k as u64) == Some(*i))
                    && copies.last().map(|(i, _)| *i) == Some(last);
                let g = self.groups.entry(f.group).or_default();
                if !whole || g.purged.as_ref().is_some_and(|(upto, _)| first <= *upto) {
                    return None;
                }
                g.entries = copies.into_iter().collect();
            }
            FrameKind::Checkpoint => {
                if f.index != seq {
                    return None;
                }
                let carried = self.groups.iter().all(|(id, g)| {
                    g.slots.keys().all(|slot| self.carried_slots.contains(&(*id, *slot)))
                        && (g.purged.is_none() || self.carried_purges.get(id) == g.purged.as_ref())
                });
                self.checkpoints_complete &= carried;
            }
        }
        Some(())
    }

    fn recovered_groups(&self) -> BTreeMap<u32, RecoveredGroup> {
        self.groups
            .iter()
            .map(|(id, g)| {
                let entries =
                    g.entries.keys().next().map(|first| (*first, *g.entries.keys().next_back().unwrap_or(first)));
                let group = RecoveredGroup {
                    slots: g.slots.iter().map(|(s, v)| (*s, Bytes::copy_from_slice(v))).collect(),
                    purged: g.purged.as_ref().map(|(u, m)| (*u, Bytes::copy_from_slice(m))),
                    entries,
                };
                (*id, group)
            })
            .filter(|(_, g)| *g != RecoveredGroup::default())
            .collect()
    }
}

// ---- recovery through the public API ----

fn options(dir: &Path, cut_damage_before_valid_frames: bool) -> WalOptions {
    WalOptions { dir: dir.to_path_buf(), fsync: Fsync::Never, segment_size: 1 << 20, cut_damage_before_valid_frames }
}

fn tempdir() -> tempfile::TempDir {
    // Recovery fsyncs a cut tail: on tmpfs that costs nothing.
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new().prefix("ursula-fuzz-wal").tempdir_in(shm)
    {
        return dir;
    }
    tempfile::Builder::new().prefix("ursula-fuzz-wal").tempdir().expect("a temporary directory")
}

fn recovery(segments: &[(u64, Vec<u8>)]) {
    let dir = tempdir();
    for (seq, data) in segments {
        std::fs::write(dir.path().join(format!("segment-{seq:020}.wal")), data).expect("write a segment");
    }
    // Both owners: one that refuses damage before valid frames, one that
    // cuts it (the input decides which).
    let cut = segments.iter().map(|(seq, _)| *seq).sum::<u64>() % 2 == 1;
    let expected = model(segments, cut);
    let (wal, recovered) = match (Wal::open(options(dir.path(), cut)), &expected) {
        (Ok(opened), Some(_)) => opened,
        (Err(WalError::Corrupt { .. }), None) => return,
        (Ok((_, r)), None) => panic!("recovery accepted a journal the rules refuse: {r:?}"),
        (Err(e), Some(m)) => panic!("recovery refused a journal the rules accept ({m:?}): {e}"),
        (Err(e), None) => panic!("recovery refused a corrupt journal with another error: {e}"),
    };
    let m = expected.expect("checked above");
    assert_eq!(recovered.groups, m.recovered_groups(), "recovered state");
    let newest = segments.last().map(|(seq, _)| *seq);
    match (&recovered.torn_tail, m.torn) {
        (None, None) => {}
        (Some(t), Some((offset, dropped, damage))) => {
            assert_eq!((t.offset, t.dropped_bytes, t.damage), (offset, dropped, damage));
            assert_eq!(Some(t.segment.as_path()), newest.map(|s| segment_path(dir.path(), s)).as_deref());
        }
        (got, want) => panic!("torn tail {got:?}, the rules say {want:?}"),
    }
    if let Some(seq) = newest {
        let len = std::fs::metadata(segment_path(dir.path(), seq)).expect("the newest segment").len();
        assert_eq!(len, m.newest_len, "the newest segment is cut at the end of its valid prefix");
    }
    for (id, g) in &m.groups {
        for (index, payload) in &g.entries {
            let got = wal.read(*id, *index).expect("an entry reads back");
            assert_eq!(got.as_deref(), Some(&payload[..]), "entry {index} of group {id}");
        }
        if let Some(before) = g.entries.keys().next().and_then(|first| first.checked_sub(1)) {
            assert_eq!(wal.read(*id, before).expect("reads"), None);
        }
    }
    wal.close().expect("closes");
    drop(wal);
    // Recovery is idempotent: a second open finds the same and cuts nothing
    // (the same entries, and the same slots and purge records unless a
    // checkpoint broke its contract and the writer reclaimed what it lacked).
    let lost = m.torn.is_some_and(|(_, _, damage)| damage.may_lose_acknowledged());
    assert_eq!(recovered.unsettled_damage.is_some(), lost, "a cut that may lose acknowledged entries is recorded");
    let (again, second) = Wal::open(options(dir.path(), cut)).expect("reopens");
    assert_eq!(second.torn_tail, None, "a second open cuts nothing");
    assert_eq!(second.unsettled_damage, recovered.unsettled_damage, "the cut stays reported until settled");
    if m.checkpoints_complete {
        assert_eq!(second.groups, recovered.groups, "a second open");
    } else {
        let entries = |r: &Recovered| -> BTreeMap<u32, (u64, u64)> {
            r.groups.iter().filter_map(|(id, g)| Some((*id, g.entries?))).collect()
        };
        // A group keeps exactly its entries unless a purge record of it lived
        // in a segment the forged checkpoint let the writer reclaim: that
        // record decided which of its later frames were dead (a later purge
        // record may restore the same record without restoring that).
        let reclaimed_purges: BTreeSet<u32> = segments
            .iter()
            .filter(|(seq, _)| !segment_path(dir.path(), *seq).exists())
            .flat_map(|(_, data)| purged_groups(data))
            .collect();
        let (first, again_found) = (entries(&recovered), entries(&second));
        for id in first.keys().chain(again_found.keys()) {
            if !reclaimed_purges.contains(id) {
                assert_eq!(again_found.get(id), first.get(id), "a second open keeps the entries of group {id}");
            }
        }
    }
    again.close().expect("closes");
}

/// The groups a Purge frame of this segment's valid prefix names.
fn purged_groups(data: &[u8]) -> Vec<u32> {
    let mut groups = Vec::new();
    let mut pos = 0;
    while let Ok(f) = frame::decode(&data[pos..]) {
        if f.kind == FrameKind::Purge {
            groups.push(f.group);
        }
        pos += f.size();
    }
    groups
}

fn segment_path(dir: &Path, seq: u64) -> std::path::PathBuf {
    dir.join(format!("segment-{seq:020}.wal"))
}
