//! What the API promises: reopen idempotence, truncate and overwrite,
//! fsync accounting, errors for bad options, paths and requests, close.

use bytes::Bytes;
use ursula_wal::{Fsync, NODE_GROUP, Wal, WalError};

use crate::common::*;

#[test]
fn reopening_five_times_gives_the_same_state_and_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 8192);
    for g in 0..3u32 {
        append(&wal, g, 1, 40);
        set_state(&wal, g, 2, "committed");
    }
    set_state(&wal, NODE_GROUP, 0, "cluster id");
    wait(|d| wal.truncate(1, 30, d)).expect("truncate");
    wait(|d| wal.purge(2, 10, Bytes::from_static(b"p"), d)).expect("purge");
    wal.close().expect("closes");
    let (wal, first) = open(dir.path(), 8192);
    wal.close().expect("closes");
    assert_eq!(first.groups[&1].entries, Some((1, 29)));
    assert_eq!(first.groups[&2].entries, Some((11, 40)));
    assert_eq!(first.groups[&NODE_GROUP].slots[&0], Bytes::from_static(b"cluster id"));
    let files =
        |dir: &std::path::Path| segments(dir).iter().map(|p| std::fs::read(p).expect("read")).collect::<Vec<_>>();
    let bytes = files(dir.path());
    for _ in 0..5 {
        let (wal, again) = open(dir.path(), 8192);
        assert_eq!(again, first);
        assert_entries(&wal, 0, 1, 40);
        assert_entries(&wal, 1, 1, 29);
        assert_entries(&wal, 2, 11, 40);
        wal.close().expect("closes");
        assert_eq!(files(dir.path()), bytes, "an open and close rewrites nothing");
    }
}

#[test]
fn truncate_and_overwrite_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    append(&wal, 5, 1, 60);
    wait(|d| wal.truncate(5, 50, d)).expect("truncate");
    assert_eq!(wal.read(5, 50).expect("reads"), None);
    assert_entries(&wal, 5, 1, 49);
    // An append at an existing index replaces it and what follows, across segments.
    let replaced = vec![(5, Bytes::from_static(b"new five")), (6, Bytes::from_static(b"new six"))];
    wait(|d| wal.append(5, replaced, false, d)).expect("append");
    assert_eq!(wal.read(5, 7).expect("reads"), None);
    // Truncating past the end changes nothing.
    wait(|d| wal.truncate(5, 100, d)).expect("truncate");
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&5].entries, Some((1, 6)));
    assert_eq!(wal.read(5, 5).expect("reads"), Some(Bytes::from_static(b"new five")));
    assert_eq!(wal.read(5, 6).expect("reads"), Some(Bytes::from_static(b"new six")));
    assert_entries(&wal, 5, 1, 4);
    // Truncating everything, then appending again.
    wait(|d| wal.truncate(5, 1, d)).expect("truncate");
    append(&wal, 5, 1, 2);
    wal.close().expect("closes");
    let (wal, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&5].entries, Some((1, 2)));
    assert_entries(&wal, 5, 1, 2);
}

#[test]
fn purge_only_moves_forward_and_drops_stale_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    append(&wal, 1, 1, 10);
    wait(|d| wal.purge(1, 5, Bytes::from_static(b"five"), d)).expect("purge");
    wait(|d| wal.purge(1, 3, Bytes::from_static(b"three"), d)).expect("purge");
    append(&wal, 1, 4, 4);
    assert_eq!(wal.read(1, 4).expect("reads"), None, "at or below the purge point");
    assert_entries(&wal, 1, 6, 10);
    wal.close().expect("closes");
    let (_, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&1].purged, Some((5, Bytes::from_static(b"five"))));
    assert_eq!(rec.groups[&1].entries, Some((6, 10)));
}

#[test]
fn state_is_fsynced_even_with_fsync_never() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 1 << 20);
    append(&wal, 1, 1, 3);
    wait(|d| wal.truncate(1, 3, d)).expect("truncate");
    assert_eq!(wal.stats().fsyncs, 0, "fsync=never appends and truncates do not fsync");
    set_state(&wal, 1, 1, "vote");
    assert_eq!(wal.stats().fsyncs, 1);
    let entries = vec![(3, Bytes::from_static(b"x"))];
    wait(|d| wal.append(1, entries, true, d)).expect("append");
    assert_eq!(wal.stats().fsyncs, 2, "an append asking for sync fsyncs");
    wal.sync().expect("sync");
    assert_eq!(wal.stats().fsyncs, 2, "nothing new to fsync");
}

#[test]
fn fsync_always_syncs_every_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = Wal::open(options(dir.path(), 1 << 20, Fsync::Always)).expect("opens");
    append(&wal, 1, 1, 1);
    append(&wal, 1, 2, 2);
    let stats = wal.stats();
    assert_eq!((stats.fsyncs, stats.batches_written, stats.frames_written), (2, 2, 2));
}

#[test]
fn bad_options_and_paths_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Wal::open(options(dir.path(), 1024, Fsync::Never)).err().expect("refused");
    assert!(matches!(err, WalError::Options(_)) && err.to_string().contains("1024"), "{err}");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").expect("write");
    match Wal::open(options(&file, 4096, Fsync::Never)).err().expect("refused") {
        WalError::Io { path, .. } => assert_eq!(path, file),
        e => panic!("expected Io, got {e}"),
    }
    let (wal, rec) = open(&dir.path().join("nested/dirs"), 4096);
    assert_eq!(rec, ursula_wal::Recovered::default());
    wal.close().expect("closes");
    // Root ignores permissions, so the check only means something for others.
    if !rustix::process::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).expect("mkdir");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        let err = Wal::open(options(&locked, 4096, Fsync::Never)).err().expect("refused");
        assert!(matches!(&err, WalError::Io { path, .. } if path.starts_with(&locked)), "{err}");
    }
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    assert!(matches!(open_err(dir.path(), 4096), WalError::Locked { .. }));
    drop(wal);
    // Dropping the last handle stops the writer and releases the lock.
    let (wal, _) = open(dir.path(), 4096);
    wal.close().expect("closes");
}

#[test]
fn everything_fails_with_closed_after_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let clone = wal.clone();
    append(&wal, 1, 1, 1);
    wal.close().expect("closes");
    assert!(matches!(wait(|d| clone.set_state(1, 1, Bytes::new(), d)), Err(WalError::Closed)));
    assert!(matches!(wait(|d| clone.append(1, vec![(2, Bytes::new())], false, d)), Err(WalError::Closed)));
    assert!(matches!(wait(|d| clone.truncate(1, 1, d)), Err(WalError::Closed)));
    assert!(matches!(wait(|d| clone.purge(1, 1, Bytes::new(), d)), Err(WalError::Closed)));
    assert!(matches!(clone.read(1, 1), Err(WalError::Closed)));
    assert!(matches!(clone.sync(), Err(WalError::Closed)));
    assert!(matches!(wal.close(), Err(WalError::Closed)));
}

#[test]
fn close_drains_everything_queued_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 1..=500u64 {
        let tx = tx.clone();
        wal.append(3, vec![(i, payload(3, i))], false, Box::new(move |r| tx.send(r).expect("send")));
    }
    wal.close().expect("closes");
    drop(tx);
    assert_eq!(rx.iter().filter(Result::is_ok).count(), 500);
    let (wal, rec) = open(dir.path(), 4096);
    assert_eq!(rec.groups[&3].entries, Some((1, 500)));
    assert_entries(&wal, 3, 1, 500);
}

#[test]
fn bad_requests_fail_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let gap = vec![(1, Bytes::from_static(b"a")), (3, Bytes::from_static(b"c"))];
    let err = wait(|d| wal.append(1, gap, false, d)).expect_err("refused");
    assert!(matches!(err, WalError::Invalid(_)) && err.to_string().contains("contiguous"), "{err}");
    assert_eq!(wal.read(1, 1).expect("reads"), None, "nothing of it was written");
    append(&wal, 1, 1, 2);
    assert_entries(&wal, 1, 1, 2);
}

#[test]
fn sync_from_a_callback_is_refused_not_deadlocked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    let inner = wal.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    wal.append(
        1,
        vec![(1, Bytes::from_static(b"x"))],
        false,
        Box::new(move |_| {
            let _ = tx.send((inner.sync(), inner.close()));
        }),
    );
    let (sync, close) = rx.recv().expect("callback ran");
    assert!(matches!(sync, Err(WalError::OnWriterThread("sync"))));
    assert!(matches!(close, Err(WalError::OnWriterThread("close"))));
    wal.close().expect("closes");
}

#[test]
fn a_panicking_callback_does_not_stop_the_writer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wal, _) = open(dir.path(), 4096);
    wal.append(1, vec![(1, Bytes::from_static(b"x"))], false, Box::new(|_| panic!("callback bug")));
    append(&wal, 1, 2, 3);
    assert_entries(&wal, 1, 2, 3);
    wal.close().expect("closes");
}
