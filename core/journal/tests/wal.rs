//! The journal against real files: torn tails, flipped bits, purge and
//! reclaim, reopen idempotence, truncation, group commit under concurrency,
//! and a model-checked property test.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc;

use bytes::Bytes;
use proptest::prelude::*;
use ursula_wal::{Done, Fsync, Recovered, Wal, WalError, WalOptions};

fn options(dir: &Path, segment_size: u64, fsync: Fsync) -> WalOptions {
    WalOptions { dir: dir.to_path_buf(), fsync, segment_size }
}

fn open(dir: &Path, segment_size: u64) -> (Wal, Recovered) {
    Wal::open(options(dir, segment_size, Fsync::Never)).expect("opens")
}

/// Runs one request and waits for its callback.
fn wait(submit: impl FnOnce(Done)) -> Result<(), WalError> {
    let (tx, rx) = mpsc::channel();
    submit(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv().expect("the callback runs")
}

fn payload(group: u32, index: u64) -> Bytes {
    Bytes::from(format!("group {group} entry {index} ").repeat(3))
}

fn append(wal: &Wal, group: u32, from: u64, to: u64) {
    let entries = (from..=to).map(|i| (i, payload(group, i))).collect();
    wait(|d| wal.append(group, entries, false, d)).expect("append");
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

fn assert_entries(wal: &Wal, group: u32, from: u64, to: u64) {
    for i in from..=to {
        assert_eq!(wal.read(group, i).expect("reads"), Some(payload(group, i)), "group {group} entry {i}");
    }
}

#[test]
fn torn_tail_is_dropped_and_the_wal_keeps_working() {
    for cut in [1usize, 5, 23, 30] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (wal, _) = open(dir.path(), 1 << 20);
        append(&wal, 1, 1, 10);
        wal.close().expect("closes");
        let seg = segments(dir.path()).pop().expect("a segment");
        let len = std::fs::metadata(&seg).expect("meta").len();
        // Entry frames here are 24 + 57 bytes; cutting `cut` bytes tears the last one.
        std::fs::OpenOptions::new().write(true).open(&seg).expect("open").set_len(len - cut as u64).expect("cut");
        let (wal, rec) = open(dir.path(), 1 << 20);
        let torn = rec.torn_tail.expect("torn tail reported");
        assert!(!torn.complete_invalid_frame);
        assert_eq!(rec.groups[&1].entries, Some((1, 9)), "cut {cut}");
        assert_entries(&wal, 1, 1, 9);
        append(&wal, 1, 10, 12);
        wal.close().expect("closes");
        let (wal, rec) = open(dir.path(), 1 << 20);
        assert!(rec.torn_tail.is_none());
        assert_eq!(rec.groups[&1].entries, Some((1, 12)));
        assert_entries(&wal, 1, 1, 12);
    }
}

#[test]
fn zeroed_tail_is_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 3);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let mut raw = std::fs::read(&seg).expect("read");
    raw.extend_from_slice(&[0u8; 100]);
    std::fs::write(&seg, raw).expect("write");
    let (wal, rec) = open(dir.path(), 1 << 20);
    assert_eq!(rec.torn_tail.expect("reported").dropped_bytes, 100);
    assert_entries(&wal, 1, 1, 3);
}

fn flip(path: &Path, at: usize) {
    let mut raw = std::fs::read(path).expect("read");
    raw[at] ^= 0x04;
    std::fs::write(path, raw).expect("write");
}

#[test]
fn flipped_bit_in_the_middle_is_corruption_naming_segment_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 10);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let frame = 24 + payload(1, 1).len();
    // Inside the payload of the fourth frame.
    flip(&seg, 3 * frame + 30);
    match Wal::open(options(dir.path(), 1 << 20, Fsync::Never)) {
        Err(WalError::Corrupt { segment, offset, .. }) => {
            assert_eq!(segment, seg);
            assert_eq!(offset, 3 * frame as u64);
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("a corrupt segment opened"),
    }
    let message = Wal::open(options(dir.path(), 1 << 20, Fsync::Never)).err().expect("refused").to_string();
    assert!(message.contains("segment-") && message.contains("corrupt at byte"), "{message}");
}

#[test]
fn flipped_bit_in_the_last_frame_is_a_complete_invalid_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 5);
    wal.close().expect("closes");
    let seg = segments(dir.path()).pop().expect("a segment");
    let len = std::fs::metadata(&seg).expect("meta").len() as usize;
    flip(&seg, len - 3);
    let (wal, rec) = open(dir.path(), 1 << 20);
    assert!(rec.torn_tail.expect("reported").complete_invalid_frame);
    assert_eq!(rec.groups[&1].entries, Some((1, 4)));
    assert_entries(&wal, 1, 1, 4);
}

#[test]
fn flipped_bit_in_an_older_segment_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    for i in 0..100 {
        append(&wal, 1, i + 1, i + 1);
    }
    wal.close().expect("closes");
    let segs = segments(dir.path());
    assert!(segs.len() >= 2, "{segs:?}");
    let len = std::fs::metadata(&segs[0]).expect("meta").len() as usize;
    flip(&segs[0], len - 3);
    assert!(matches!(Wal::open(options(dir.path(), 4096, Fsync::Never)), Err(WalError::Corrupt { .. })));
}

#[test]
fn purge_deletes_whole_segments_and_keeps_markers_and_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    for g in 0..4u32 {
        wait(|d| wal.set_state(g, 1, Bytes::from(format!("vote {g}")), d)).expect("vote");
    }
    for round in 0..100u64 {
        for g in 0..4u32 {
            append(&wal, g, round + 1, round + 1);
        }
    }
    let before = segments(dir.path()).len();
    assert!(before > 4, "{before} segments");
    for g in 0..4u32 {
        wait(|d| wal.purge(g, 95, Bytes::from(format!("marker {g}")), d)).expect("purge");
    }
    wal.sync().expect("sync");
    let after = segments(dir.path()).len();
    assert!(after < before, "purge freed no segment: {before} -> {after}");
    assert!(wal.stats().reclaimed_segments > 0);
    wal.close().expect("closes");
    for _ in 0..2 {
        let (wal, rec) = open(dir.path(), 4096);
        for g in 0..4u32 {
            let r = &rec.groups[&g];
            assert_eq!(r.entries, Some((96, 100)));
            assert_eq!(r.purged, Some((95, Bytes::from(format!("marker {g}")))));
            assert_eq!(r.slots.get(&1), Some(&Bytes::from(format!("vote {g}"))));
            assert_entries(&wal, g, 96, 100);
            assert_eq!(wal.read(g, 95).expect("reads"), None);
        }
        wal.close().expect("closes");
    }
}

#[test]
fn reopening_five_times_gives_the_same_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 8192);
    for g in 0..3u32 {
        append(&wal, g, 1, 40);
        wait(|d| wal.set_state(g, 2, Bytes::from_static(b"committed"), d)).expect("state");
    }
    wait(|d| wal.truncate(1, 30, d)).expect("truncate");
    wait(|d| wal.purge(2, 10, Bytes::from_static(b"p"), d)).expect("purge");
    wal.close().expect("closes");
    let (wal, first) = open(dir.path(), 8192);
    wal.close().expect("closes");
    for _ in 0..5 {
        let (wal, again) = open(dir.path(), 8192);
        assert_eq!(again, first);
        assert_entries(&wal, 0, 1, 40);
        assert_entries(&wal, 1, 1, 29);
        assert_entries(&wal, 2, 11, 40);
        wal.close().expect("closes");
    }
    assert_eq!(first.groups[&1].entries, Some((1, 29)));
}

#[test]
fn truncate_and_overwrite_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 5, 1, 10);
    wait(|d| wal.truncate(5, 8, d)).expect("truncate");
    assert_eq!(wal.read(5, 8).expect("reads"), None);
    // An append at an existing index replaces it and what follows.
    let replaced = vec![(5, Bytes::from_static(b"new five"))];
    wait(|d| wal.append(5, replaced, false, d)).expect("append");
    assert_eq!(wal.read(5, 6).expect("reads"), None);
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 1 << 20);
    assert_eq!(rec.groups[&5].entries, Some((1, 5)));
    assert_eq!(wal.read(5, 5).expect("reads"), Some(Bytes::from_static(b"new five")));
    assert_entries(&wal, 5, 1, 4);
}

#[test]
fn concurrent_appenders_share_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(options(dir.path(), 1 << 20, Fsync::Always)).expect("opens");
    let per_thread = 50u64;
    std::thread::scope(|s| {
        for t in 0..32u32 {
            let wal = wal.clone();
            s.spawn(move || {
                let group = t % 8;
                for i in 0..per_thread {
                    let (tx, rx) = mpsc::channel();
                    let body = Bytes::from(format!("t{t} i{i}"));
                    wal.set_state(
                        group,
                        (t % 200) as u8,
                        body,
                        Box::new(move |r| {
                            let _ = tx.send(r);
                        }),
                    );
                    rx.recv().expect("callback").expect("written");
                }
            });
        }
    });
    let stats = wal.stats();
    assert!(stats.fsyncs < 32 * per_thread, "one fsync per request: {stats:?}");
    let (tx, rx) = mpsc::channel();
    let mut expected = 0;
    for g in 0..8u32 {
        let entries: Vec<_> = (1..=100).map(|i| (i, payload(g, i))).collect();
        expected += 1;
        let tx = tx.clone();
        wal.append(g, entries, false, Box::new(move |r| tx.send(r).expect("send")));
    }
    for _ in 0..expected {
        rx.recv().expect("callback").expect("written");
    }
    for g in 0..8u32 {
        assert_entries(&wal, g, 1, 100);
    }
}

#[test]
fn state_is_fsynced_even_with_fsync_never() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 3);
    assert_eq!(wal.stats().fsyncs, 0, "fsync=never appends do not fsync");
    wait(|d| wal.set_state(1, 1, Bytes::from_static(b"vote"), d)).expect("state");
    assert_eq!(wal.stats().fsyncs, 1);
}

#[test]
fn bad_options_and_paths_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(Wal::open(options(dir.path(), 1024, Fsync::Never)), Err(WalError::Options(_))));
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").expect("write");
    let err = Wal::open(options(&file, 4096, Fsync::Never)).err().expect("refused");
    assert!(err.to_string().contains("a-file"), "{err}");
    let (wal, _) = open(&dir.path().join("nested/dirs"), 4096);
    wal.close().expect("closes");
    assert!(matches!(wait(|d| wal.set_state(1, 1, Bytes::new(), d)), Err(WalError::Closed)));
}

#[derive(Debug, Clone)]
enum ModelOp {
    Append(u32, u8),
    Truncate(u32, u8),
    Purge(u32, u8),
    State(u32, u8),
    Reopen,
}

fn op() -> impl Strategy<Value = ModelOp> {
    prop_oneof![
        4 => (0..3u32, 1..6u8).prop_map(|(g, n)| ModelOp::Append(g, n)),
        1 => (0..3u32, 0..8u8).prop_map(|(g, n)| ModelOp::Truncate(g, n)),
        1 => (0..3u32, 0..8u8).prop_map(|(g, n)| ModelOp::Purge(g, n)),
        1 => (0..3u32, 0..3u8).prop_map(|(g, s)| ModelOp::State(g, s)),
        1 => Just(ModelOp::Reopen),
    ]
}

#[derive(Default, Debug)]
struct ModelGroup {
    entries: BTreeMap<u64, Bytes>,
    purged: Option<u64>,
    slots: BTreeMap<u8, Bytes>,
    next: u64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn journal_matches_a_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut wal, _) = open(dir.path(), 4096);
        let mut model: BTreeMap<u32, ModelGroup> = BTreeMap::new();
        let mut stamp = 0u64;
        for op in ops {
            stamp += 1;
            match op {
                ModelOp::Append(g, n) => {
                    let m = model.entry(g).or_default();
                    let start = m.next.max(m.purged.map_or(1, |p| p + 1));
                    let entries: Vec<_> = (start..start + u64::from(n)).map(|i| (i, Bytes::from(format!("{g}:{i}:{stamp}")))).collect();
                    for (i, b) in &entries { m.entries.insert(*i, b.clone()); }
                    m.next = start + u64::from(n);
                    wait(|d| wal.append(g, entries, false, d)).expect("append");
                }
                ModelOp::Truncate(g, back) => {
                    let m = model.entry(g).or_default();
                    let since = m.next.saturating_sub(u64::from(back)).max(m.purged.map_or(1, |p| p + 1));
                    m.entries.retain(|i, _| *i < since);
                    m.next = m.next.min(since).max(m.purged.map_or(1, |p| p + 1));
                    wait(|d| wal.truncate(g, since, d)).expect("truncate");
                }
                ModelOp::Purge(g, n) => {
                    let m = model.entry(g).or_default();
                    let upto = m.purged.unwrap_or(0) + u64::from(n);
                    m.entries.retain(|i, _| *i > upto);
                    m.purged = Some(upto);
                    m.next = m.next.max(upto + 1);
                    wait(|d| wal.purge(g, upto, Bytes::from(upto.to_string()), d)).expect("purge");
                }
                ModelOp::State(g, s) => {
                    let v = Bytes::from(format!("s{stamp}"));
                    model.entry(g).or_default().slots.insert(s, v.clone());
                    wait(|d| wal.set_state(g, s, v, d)).expect("state");
                }
                ModelOp::Reopen => {
                    wal.close().expect("closes");
                    let (w, rec) = open(dir.path(), 4096);
                    wal = w;
                    for (g, m) in &model {
                        let r = rec.groups.get(g).cloned().unwrap_or_default();
                        let range = m.entries.keys().next().map(|f| (*f, *m.entries.keys().last().unwrap_or(f)));
                        prop_assert_eq!(r.entries, range);
                        prop_assert_eq!(&r.slots, &m.slots);
                        prop_assert_eq!(r.purged.map(|(u, _)| u), m.purged);
                    }
                }
            }
            for (g, m) in &model {
                for (i, b) in &m.entries {
                    prop_assert_eq!(wal.read(*g, *i).expect("reads"), Some(b.clone()));
                }
            }
        }
    }
}
