use std::path::{Path, PathBuf};
use std::sync::mpsc;

use bytes::Bytes;
use ursula_wal::{Done, Fsync, Recovered, Wal, WalError, WalOptions};

pub fn options(dir: &Path, segment_size: u64, fsync: Fsync) -> WalOptions {
    WalOptions { dir: dir.to_path_buf(), fsync, segment_size, cut_damage_before_valid_frames: false }
}

pub fn open(dir: &Path, segment_size: u64) -> (Wal, Recovered) {
    Wal::open(options(dir, segment_size, Fsync::Never)).expect("opens")
}

pub fn open_err(dir: &Path, segment_size: u64) -> WalError {
    match Wal::open(options(dir, segment_size, Fsync::Never)) {
        Ok(_) => panic!("opened, expected an error"),
        Err(e) => e,
    }
}

/// Runs one request and waits for its callback.
pub fn wait(submit: impl FnOnce(Done)) -> Result<(), WalError> {
    let (tx, rx) = mpsc::channel();
    submit(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv().expect("the callback runs")
}

pub fn payload(group: u32, index: u64) -> Bytes {
    Bytes::from(format!("group {group} entry {index} ").repeat(3))
}

pub fn append(wal: &Wal, group: u32, from: u64, to: u64) {
    let entries = (from..=to).map(|i| (i, payload(group, i))).collect();
    wait(|d| wal.append(group, entries, false, d)).expect("append");
}

pub fn set_state(wal: &Wal, group: u32, slot: u8, value: &str) {
    wait(|d| wal.set_state(group, slot, Bytes::from(value.to_string()), d)).expect("set_state");
}

/// The segment files in `dir`, oldest first.
pub fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

pub fn assert_entries(wal: &Wal, group: u32, from: u64, to: u64) {
    for i in from..=to {
        assert_eq!(wal.read(group, i).expect("reads"), Some(payload(group, i)), "group {group} entry {i}");
    }
}

pub fn flip(path: &Path, at: usize, bit: u8) {
    let mut raw = std::fs::read(path).expect("read");
    raw[at] ^= 1 << bit;
    std::fs::write(path, raw).expect("write");
}

pub fn len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("metadata").len()
}
