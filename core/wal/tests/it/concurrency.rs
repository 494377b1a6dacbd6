//! Group commit: concurrent appenders across groups share writes and
//! fsyncs; readers never fail while purges delete segments under them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use bytes::Bytes;
use ursula_wal::{Fsync, Wal};

use crate::common::*;

#[test]
fn thirty_two_appenders_on_eight_groups_share_fsyncs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(options(dir.path(), 64 << 10, Fsync::Always)).expect("opens");
    let per_thread = 40u64;
    let batch = 2u64;
    // Threads of one group take contiguous index ranges in queue order.
    let next: Vec<Mutex<u64>> = (0..8).map(|_| Mutex::new(1)).collect();
    std::thread::scope(|s| {
        for t in 0..32u32 {
            let wal = wal.clone();
            let next = &next;
            s.spawn(move || {
                let group = t % 8;
                for _ in 0..per_thread {
                    let (tx, rx) = mpsc::channel();
                    {
                        let mut n = next[group as usize].lock().expect("lock");
                        let entries = (*n..*n + batch).map(|i| (i, payload(group, i))).collect();
                        *n += batch;
                        wal.append(group, entries, false, Box::new(move |r| tx.send(r).expect("send")));
                    }
                    rx.recv().expect("callback").expect("written");
                }
            });
        }
    });
    let appends = 32 * per_thread;
    let per_group = 4 * per_thread * batch;
    let stats = wal.stats();
    eprintln!("{appends} appends: {stats:?}");
    assert!(stats.fsyncs < appends, "no fsync sharing: {stats:?}");
    assert!(stats.batches_written < appends, "no group commit: {stats:?}");
    for g in 0..8u32 {
        assert_entries(&wal, g, 1, per_group);
    }
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 64 << 10);
    for g in 0..8u32 {
        assert_eq!(rec.groups[&g].entries, Some((1, per_group)));
        assert_entries(&wal, g, 1, per_group);
    }
}

#[test]
fn reads_racing_purge_and_reclaim_never_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for r in 0..2u64 {
            let wal = wal.clone();
            let stop = &stop;
            s.spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    i = (i + 7) % 2000 + 1;
                    if let Some(b) = wal.read(1, i).expect("a read never fails") {
                        assert_eq!(b, payload(1, i));
                    }
                }
            });
        }
        for i in 1..=2000u64 {
            append(&wal, 1, i, i);
            if i % 50 == 0 {
                wait(|d| wal.purge(1, i - 10, Bytes::new(), d)).expect("purge");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(wal.stats().reclaimed_segments > 10);
    assert_entries(&wal, 1, 1991, 2000);
}
