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

const LARGE: usize = 64 * 1024;

fn open_with_helper(dir: &std::path::Path) -> Wal {
    Wal::open_inline_with_helper(options(dir, 1 << 20, Fsync::Never), LARGE).expect("opens").0
}

fn large_payload(group: u32, index: u64) -> Bytes {
    Bytes::from(format!("large {group}/{index} ").repeat(LARGE / 8))
}

/// The thread each append's callback ran on, by name.
type Seen = Arc<Mutex<Vec<(u64, Option<String>)>>>;

fn note_thread(seen: &Seen, index: u64) -> ursula_wal::Done {
    let seen = seen.clone();
    Box::new(move |r| {
        assert!(r.is_ok(), "append {index}: {r:?}");
        seen.lock().expect("not poisoned").push((index, std::thread::current().name().map(str::to_string)));
    })
}

/// A large write is not made on the caller's thread; small ones are, once
/// the helper has nothing left; every write lands, in order, and survives
/// a reopen.
#[test]
fn a_large_write_goes_to_the_helper_and_small_ones_stay_on_the_caller() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_with_helper(dir.path());
    let seen: Seen = Arc::default();
    wal.append(3, vec![(1, payload(3, 1))], false, note_thread(&seen, 1));
    assert_eq!(seen.lock().unwrap().len(), 1, "a small write is done when the call returns");
    wal.append(3, vec![(2, large_payload(3, 2))], false, note_thread(&seen, 2));
    // Queued behind the large one: written by the helper too, after it.
    wal.append(3, vec![(3, payload(3, 3))], false, note_thread(&seen, 3));
    wal.sync().expect("sync waits for the helper's writes");
    let order: Vec<u64> = seen.lock().unwrap().iter().map(|(i, _)| *i).collect();
    assert_eq!(order, vec![1, 2, 3], "callbacks in the order of the writes");
    let here = std::thread::current().name().map(str::to_string);
    assert_eq!(seen.lock().unwrap()[0].1, here);
    assert_eq!(seen.lock().unwrap()[1].1.as_deref(), Some("ursula-wal-large"));
    // Once the helper is done (it lets go a moment after its last
    // callback), small writes are the caller's again.
    let mut last = 3;
    while last < 200 {
        last += 1;
        wal.append(3, vec![(last, payload(3, last))], false, note_thread(&seen, last));
        if seen.lock().unwrap().last().map(|(i, t)| (*i, t.clone())) == Some((last, here.clone())) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(last < 200, "small writes never came back to the caller's thread");
    assert_eq!(wal.read(3, 2).expect("reads"), Some(large_payload(3, 2)));
    wal.close().expect("closes");
    let (reopened, recovered) = Wal::open(options(dir.path(), 1 << 20, Fsync::Never)).expect("reopens");
    assert_eq!(recovered.groups[&3].entries, Some((1, last)));
    assert_eq!(reopened.read(3, 2).expect("reads"), Some(large_payload(3, 2)));
    assert_entries(&reopened, 3, 3, last);
}

/// Threads mixing large and small writes: every callback comes, each
/// group's in order, and everything reads back; a close right after the
/// last hand-off drains it, and a drop releases the directory.
#[test]
fn mixed_large_and_small_writes_from_many_threads_all_land_in_order() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_with_helper(dir.path());
    let per_thread = 60u64;
    let body = |group: u32, i: u64| if i.is_multiple_of(5) { large_payload(group, i) } else { payload(group, i) };
    std::thread::scope(|s| {
        for group in 0..4u32 {
            let wal = wal.clone();
            s.spawn(move || {
                let seen: Seen = Arc::default();
                for i in 1..=per_thread {
                    wal.append(group, vec![(i, body(group, i))], false, note_thread(&seen, i));
                }
                wal.sync().expect("sync");
                let order: Vec<u64> = seen.lock().unwrap().iter().map(|(i, _)| *i).collect();
                assert_eq!(order, (1..=per_thread).collect::<Vec<_>>(), "group {group}");
            });
        }
    });
    let seen: Seen = Arc::default();
    wal.append(9, vec![(1, large_payload(9, 1))], false, note_thread(&seen, 1));
    wal.close().expect("closes");
    assert_eq!(seen.lock().unwrap().len(), 1, "close drained the hand-off");
    drop(wal);
    let (reopened, recovered) = Wal::open(options(dir.path(), 1 << 20, Fsync::Never)).expect("reopens");
    for group in 0..4u32 {
        assert_eq!(recovered.groups[&group].entries, Some((1, per_thread)));
        for i in 1..=per_thread {
            assert_eq!(reopened.read(group, i).expect("reads"), Some(body(group, i)), "group {group} entry {i}");
        }
    }
    assert_eq!(reopened.read(9, 1).expect("reads"), Some(large_payload(9, 1)));
}

/// A dropped journal with a large write just handed off writes it first.
#[test]
fn a_dropped_journal_writes_what_it_handed_off() {
    let dir = tempfile::tempdir().expect("dir");
    let wal = open_with_helper(dir.path());
    wal.append(1, vec![(1, large_payload(1, 1))], false, Box::new(|r| assert!(r.is_ok())));
    wal.append(1, vec![(2, payload(1, 2))], false, Box::new(|r| assert!(r.is_ok())));
    drop(wal);
    let (reopened, recovered) = Wal::open(options(dir.path(), 1 << 20, Fsync::Never)).expect("reopens after a drop");
    assert_eq!(recovered.groups[&1].entries, Some((1, 2)));
    assert_eq!(reopened.read(1, 1).expect("reads"), Some(large_payload(1, 1)));
}
