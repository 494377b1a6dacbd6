//! `ursula-wal`: the node's write-ahead journal, shared by its Raft groups.
//! One segmented, append-only journal on disk; every frame checksummed and
//! versioned. Payloads are opaque: the Raft log store encodes its entries.
//!
//! Thread model: one writer thread owns the active segment; callers queue
//! requests and get a callback once their frames are written (and fsynced
//! when asked or configured). Requests are applied in the order they are
//! queued. `read` may run on any thread; an entry is readable once its
//! append's callback ran.
//!
//! Module map:
//! - `frame`: the frame layout, encoding and verification.
//! - `index`: what the journal holds, in memory.
//! - `recover`: replaying segments at open; torn tails and corruption.
//! - `writer`: the writer thread: group commit, rotation, reclaim.
//! - `error`: `WalError`.

mod error;
mod frame;
mod index;
mod recover;
mod writer;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
pub use error::WalError;
use index::Index;
use recover::segment_path;
use writer::{Op, Writer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Acknowledge from the page cache: a process crash loses nothing.
    Never,
    /// Acknowledge after `fsync`, shared by every request of a batch.
    Always,
}

#[derive(Debug, Clone)]
pub struct WalOptions {
    pub dir: PathBuf,
    pub fsync: Fsync,
    pub segment_size: u64,
}

pub const MIN_SEGMENT_SIZE: u64 = 4096;

/// The group number reserved for node-level state (e.g. the cluster id).
pub const NODE_GROUP: u32 = u32::MAX;

/// Runs on the writer thread once a request is written (or failed).
pub type Done = Box<dyn FnOnce(Result<(), WalError>) + Send + 'static>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    pub groups: BTreeMap<u32, RecoveredGroup>,
    /// Set when the newest segment ended in a torn or invalid frame that was dropped.
    pub torn_tail: Option<TornTail>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveredGroup {
    pub slots: BTreeMap<u8, Bytes>,
    /// (upto, marker) of the group's latest purge.
    pub purged: Option<(u64, Bytes)>,
    /// First and last live index, inclusive; read them with `Wal::read`.
    pub entries: Option<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub segment: PathBuf,
    pub offset: u64,
    pub dropped_bytes: u64,
    /// A whole frame failed its checksum (rather than being cut short).
    pub complete_invalid_frame: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub bytes_on_disk: u64,
    pub segments: u64,
    pub frames_written: u64,
    pub batches_written: u64,
    pub fsyncs: u64,
    pub rotations: u64,
    pub reclaimed_segments: u64,
}

#[derive(Default)]
struct Counters {
    bytes_on_disk: AtomicU64,
    segments: AtomicU64,
    frames_written: AtomicU64,
    batches_written: AtomicU64,
    fsyncs: AtomicU64,
    rotations: AtomicU64,
    reclaimed_segments: AtomicU64,
}

struct Shared {
    dir: PathBuf,
    index: Mutex<Index>,
    /// Read handles by segment, opened on first read.
    readers: Mutex<BTreeMap<u64, Arc<File>>>,
    stats: Counters,
}

impl Shared {
    fn lock_index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_readers(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<File>>> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Cheap to clone; every clone is the same journal.
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tx: Mutex<Option<Sender<Op>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Wal {
    /// Creates `dir` if missing, replays every segment and starts the writer.
    pub fn open(options: WalOptions) -> Result<(Wal, Recovered), WalError> {
        if options.segment_size < MIN_SEGMENT_SIZE {
            return Err(WalError::Options(format!(
                "segment_size {} is below the minimum of {MIN_SEGMENT_SIZE} bytes",
                options.segment_size
            )));
        }
        let dir = options.dir.clone();
        std::fs::create_dir_all(&dir).map_err(WalError::io(&dir))?;
        let replayed = recover::replay(&dir)?;
        let (active, len) = match replayed.segments.last() {
            Some(&(seq, len)) => (seq, len),
            None => (1, 0),
        };
        let path = segment_path(&dir, active);
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(WalError::io(&path))?;
        let mut index = replayed.index;
        index.add_segment(active);
        let recovered = Recovered {
            groups: index
                .groups
                .iter()
                .map(|(g, gi)| {
                    (*g, RecoveredGroup { slots: gi.slots.clone(), purged: gi.purged.clone(), entries: gi.range() })
                })
                .collect(),
            torn_tail: replayed.torn_tail,
        };
        let stats = Counters::default();
        let on_disk: u64 = replayed.segments.iter().map(|(_, l)| l).sum();
        stats.bytes_on_disk.store(on_disk, Ordering::Relaxed);
        stats.segments.store(index.live.len() as u64, Ordering::Relaxed);
        let shared = Arc::new(Shared { dir, index: Mutex::new(index), readers: Mutex::new(BTreeMap::new()), stats });
        let (tx, rx) = mpsc::channel();
        let writer = Writer {
            shared: shared.clone(),
            rx,
            fsync_always: options.fsync == Fsync::Always,
            segment_size: options.segment_size,
            active,
            file,
            len,
            broken: None,
        };
        let thread = std::thread::Builder::new()
            .name("ursula-wal".into())
            .spawn(move || writer.run())
            .map_err(WalError::io(&options.dir))?;
        let inner = Inner { shared, tx: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)) };
        Ok((Wal { inner: Arc::new(inner) }, recovered))
    }

    fn send(&self, op: Op) {
        let tx = self.inner.tx.lock().unwrap_or_else(|p| p.into_inner());
        let refused = match tx.as_ref() {
            Some(tx) => tx.send(op).err().map(|e| e.0),
            None => Some(op),
        };
        drop(tx);
        if let Some(op) = refused {
            let done = match op {
                Op::Append { done, .. }
                | Op::State { done, .. }
                | Op::Truncate { done, .. }
                | Op::Purge { done, .. }
                | Op::Sync { done }
                | Op::Close { done } => done,
            };
            done(Err(WalError::Closed));
        }
    }

    /// Appends entries `(index, payload)` of `group`. An index that already
    /// exists replaces that entry and every later one. `done` runs once the
    /// frames are written, after fsync when `sync` or `Fsync::Always`.
    pub fn append(&self, group: u32, entries: Vec<(u64, Bytes)>, sync: bool, done: Done) {
        self.send(Op::Append { group, entries, sync, done });
    }

    /// Sets a durable state slot; always fsynced before `done` runs.
    pub fn set_state(&self, group: u32, slot: u8, value: Bytes, done: Done) {
        self.send(Op::State { group, slot, value, done });
    }

    /// Removes the group's entries with index >= `since`.
    pub fn truncate(&self, group: u32, since: u64, done: Done) {
        self.send(Op::Truncate { group, since, done });
    }

    /// Removes the group's entries with index <= `upto`, keeping `marker`
    /// as its purge record. A purge never moves back.
    pub fn purge(&self, group: u32, upto: u64, marker: Bytes, done: Done) {
        self.send(Op::Purge { group, upto, marker, done });
    }

    /// Reads one entry back from disk; `Ok(None)` when it is not live.
    pub fn read(&self, group: u32, index: u64) -> Result<Option<Bytes>, WalError> {
        let shared = &self.inner.shared;
        let Some(loc) = shared.lock_index().groups.get(&group).and_then(|g| g.get(index)) else {
            return Ok(None);
        };
        let path = segment_path(&shared.dir, loc.segment);
        let file = {
            let mut readers = shared.lock_readers();
            match readers.get(&loc.segment) {
                Some(f) => f.clone(),
                None => {
                    let f = Arc::new(File::open(&path).map_err(WalError::io(&path))?);
                    readers.insert(loc.segment, f.clone());
                    f
                }
            }
        };
        let mut buf = vec![0u8; frame::HEADER + loc.len as usize];
        file.read_exact_at(&mut buf, loc.offset).map_err(WalError::io(&path))?;
        match frame::decode(&buf) {
            Ok(head) if head.kind == frame::FrameKind::Entry && head.group == group && head.index == index => {
                Ok(Some(Bytes::from(buf).slice(frame::HEADER..)))
            }
            other => Err(WalError::Corrupt {
                segment: path,
                offset: loc.offset,
                reason: format!("entry {index} of group {group} reads back as {other:?}"),
            }),
        }
    }

    fn wait(&self, make: impl FnOnce(Done) -> Op) -> Result<(), WalError> {
        let (tx, rx) = mpsc::channel();
        self.send(make(Box::new(move |r| {
            let _ = tx.send(r);
        })));
        rx.recv().unwrap_or(Err(WalError::Closed))
    }

    /// Writes and fsyncs everything queued before it.
    pub fn sync(&self) -> Result<(), WalError> {
        self.wait(|done| Op::Sync { done })
    }

    /// Drains the queue, fsyncs and stops the writer; later calls fail with `Closed`.
    pub fn close(&self) -> Result<(), WalError> {
        let result = self.wait(|done| Op::Close { done });
        self.inner.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = self.inner.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
        match result {
            Err(WalError::Closed) => Ok(()),
            other => other,
        }
    }

    pub fn stats(&self) -> WalStats {
        let c = &self.inner.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WalStats {
            bytes_on_disk: get(&c.bytes_on_disk),
            segments: get(&c.segments),
            frames_written: get(&c.frames_written),
            batches_written: get(&c.batches_written),
            fsyncs: get(&c.fsyncs),
            rotations: get(&c.rotations),
            reclaimed_segments: get(&c.reclaimed_segments),
        }
    }
}
