//! `Wal::open_inline`: the writer runs on the caller's thread, so a request
//! is written and its callback has run when the call returns.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ursula_wal::{Fsync, Wal, WalError};

use crate::common::{assert_entries, options, payload};

fn open_inline(dir: &std::path::Path) -> Wal {
    Wal::open_inline(options(dir, 4096, Fsync::Never)).expect("opens").0
}

#[test]
fn an_inline_write_is_done_when_the_call_returns_and_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_inline(dir.path());
    let seen: Arc<Mutex<Vec<Result<(), String>>>> = Arc::default();
    for i in 1..=50 {
        let record = seen.clone();
        wal.append(
            7,
            vec![(i, payload(7, i))],
            false,
            Box::new(move |r| record.lock().unwrap().push(r.map_err(|e| e.to_string()))),
        );
        assert_eq!(seen.lock().unwrap().len() as u64, i, "append {i}'s callback ran before it returned");
    }
    assert!(seen.lock().unwrap().iter().all(Result::is_ok));
    assert!(Wal::open(options(dir.path(), 4096, Fsync::Never)).is_err(), "the directory stays locked while open");
    wal.close().expect("closes");
    assert!(matches!(wal.sync(), Err(WalError::Closed)));
    let (reopened, recovered) = Wal::open(options(dir.path(), 4096, Fsync::Never)).expect("reopens");
    assert_eq!(recovered.groups[&7].entries, Some((1, 50)));
    assert_entries(&reopened, 7, 1, 50);
}

#[test]
fn a_callback_may_queue_more_and_a_dropped_inline_wal_releases_its_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_inline(dir.path());
    let inner = wal.clone();
    let chained = Arc::new(Mutex::new(None));
    let result = chained.clone();
    wal.append(
        1,
        vec![(1, payload(1, 1))],
        false,
        Box::new(move |_| {
            // From inside the writer: waiting would wait for itself, queueing is fine.
            assert!(matches!(inner.sync(), Err(WalError::OnWriterThread(_))));
            inner.set_state(
                1,
                0,
                Bytes::from_static(b"vote"),
                Box::new(move |r| *result.lock().unwrap() = Some(r.is_ok())),
            );
        }),
    );
    assert_eq!(*chained.lock().unwrap(), Some(true), "the queued request was written in the same turn");
    drop(wal);
    let (_reopened, recovered) = Wal::open(options(dir.path(), 4096, Fsync::Never)).expect("reopens after a drop");
    assert_eq!(recovered.groups[&1].entries, Some((1, 1)));
    assert_eq!(recovered.groups[&1].slots.get(&0).map(|v| v.as_ref()), Some(&b"vote"[..]));
}

/// Threads writing at once: whoever holds the writer takes the others'
/// requests, and none is left in the queue when the holder lets go (each
/// callback must come; a stranded request would time out here).
#[test]
fn concurrent_inline_writers_leave_no_request_behind() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_inline(dir.path());
    let per_thread = 500u64;
    std::thread::scope(|s| {
        for group in 0..8u32 {
            let wal = wal.clone();
            s.spawn(move || {
                for i in 1..=per_thread {
                    let (tx, rx) = std::sync::mpsc::channel();
                    wal.append(group, vec![(i, payload(group, i))], false, Box::new(move |r| drop(tx.send(r))));
                    let written = rx.recv_timeout(std::time::Duration::from_secs(10));
                    assert!(matches!(written, Ok(Ok(()))), "group {group} append {i}: {written:?}");
                }
            });
        }
    });
    for group in 0..8u32 {
        assert_entries(&wal, group, 1, per_thread);
    }
}
