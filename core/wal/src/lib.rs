//! `ursula-wal`: the node's write-ahead journal, shared by all its Raft
//! groups (multi-Raft). One segmented, append-only journal on disk; every
//! frame checksummed and versioned (layout in [`frame`]). It knows nothing
//! of Raft: payloads are opaque, the log store encodes its own entries.
//!
//! Thread model: one writer thread owns the active segment. Callers queue
//! requests over a channel and get a [`Done`] callback, run on the writer
//! thread, once their frames are written (and fsynced when asked or
//! configured). The writer takes every request waiting at once (group
//! commit), so concurrent groups share one write and one fsync. Requests
//! are applied, and their callbacks run, in the order they were queued.
//! `read` runs on the caller's thread (positioned reads through the
//! in-memory index); an entry is readable once its append's callback ran.
//! Callbacks must be quick and must not block on the journal (`sync` and
//! `close` refuse to run on the writer thread).
//!
//! On disk: `segment-{seq:020}.wal` files in the directory,
//! `wal.lock`, an `flock` that keeps a second writer out, and
//! `damaged-tail` while a cut that may have lost acknowledged entries is
//! not yet settled by the journal's owner.
//!
//! Segments go oldest first once no live entry is left in them. A group
//! that went quiet would keep its few entries, and with them every later
//! segment, forever: `compact` copies such groups' whole runs into the
//! newest segment once the old segments held dead entries long enough
//! (spec/35 "Deleted data"), and names the groups too large to copy, which
//! their snapshot and purge free instead.
//!
//! Module map:
//! - `frame`: the frame layout, encoding and verification.
//! - `segment`: segment files, the directory lock, directory fsync.
//! - `index`: what the journal holds, in memory.
//! - `recover`: replaying segments at open; torn tails and corruption.
//! - `writer`: the writer thread: group commit, rotation, compaction, reclaim.
//! - `inline`: the writer run on the callers' threads (simulation, `Fsync::Never`).
//! - `error`: [`WalError`].

mod error;
pub mod frame;
mod index;
mod inline;
mod recover;
mod segment;
mod writer;

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::{JoinHandle, ThreadId};

use bytes::Bytes;
pub use error::WalError;
use index::{Index, Loc};
use inline::InlineWriter;
use segment::segment_path;
pub use segment::{LOCK_FILE, journal_bytes, write_file_durably};
use writer::{Op, Writer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Acknowledge once written to the file (page cache): a process crash
    /// loses nothing, a power loss may lose the latest writes. State slots
    /// are fsynced regardless.
    Never,
    /// Acknowledge after `fsync`, one shared by every request of a batch.
    Always,
}

#[derive(Debug, Clone)]
pub struct WalOptions {
    pub dir: PathBuf,
    pub fsync: Fsync,
    /// A new segment starts once the active one reaches this many bytes
    /// (a larger frame is still written whole). At least [`MIN_SEGMENT_SIZE`].
    pub segment_size: u64,
    /// Damage in the newest segment that valid frames follow (a batch a
    /// power loss tore out of order, or a bad sector) is cut there with
    /// everything after it instead of refusing the open: for a journal
    /// whose owner can fetch what it lost from elsewhere (a voter with
    /// peers, spec/35), and which gates on [`Recovered::unsettled_damage`].
    pub cut_damage_before_valid_frames: bool,
}

pub const MIN_SEGMENT_SIZE: u64 = 4096;

/// The bounds of one compaction pass (`Wal::compact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactLimits {
    /// Entry bytes one pass copies at most (a group's run is copied whole,
    /// so the first group may take more).
    pub budget: u64,
    /// A group whose live run is larger is not copied but reported lagging.
    pub lagging_over: u64,
    /// How long a segment holds dead entries before it is sealed and freed.
    pub min_age: std::time::Duration,
}

impl CompactLimits {
    /// spec/35's pace: an eighth of a segment per pass; a group keeping
    /// more than a quarter of one is left to its snapshot.
    pub fn for_segment_size(segment_size: u64, min_age: std::time::Duration) -> CompactLimits {
        CompactLimits { budget: (segment_size / 8).max(1), lagging_over: segment_size / 4, min_age }
    }
}

/// The group number reserved for node-level state (e.g. the cluster id).
pub const NODE_GROUP: u32 = u32::MAX;

/// Runs on the writer thread once a request is written (or failed).
pub type Done = Box<dyn FnOnce(Result<(), WalError>) + Send + 'static>;

/// What `open` found on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    pub groups: BTreeMap<u32, RecoveredGroup>,
    /// Set when the newest segment ended in a torn or invalid frame that was dropped.
    pub torn_tail: Option<TornTail>,
    /// A cut that may have dropped acknowledged entries (this open's, or
    /// one of an earlier open that stopped before its owner settled it),
    /// described. It stays reported at every open until
    /// [`Wal::settle_damage`]: the owner records what it must (spec/35:
    /// the recovery gates) and only then settles, so a crash in between
    /// cannot forget the cut.
    pub unsettled_damage: Option<String>,
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
    /// Where the dropped frame started; the file now ends here.
    pub offset: u64,
    pub dropped_bytes: u64,
    pub damage: Damage,
}

/// What was found where a frame should have verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// The last frame runs past the end of the file: a write cut short,
    /// never acknowledged.
    CutShort,
    /// A frame that fails verification (checksum, zeros or garbage where
    /// a frame starts), nothing valid after it.
    Invalid,
    /// As `Invalid`, with valid frames after it that were dropped too
    /// (only with [`WalOptions::cut_damage_before_valid_frames`]).
    InvalidBeforeValid,
}

impl Damage {
    /// Whether the cut may have taken entries that were acknowledged: a
    /// complete frame that fails verification looks the same as media
    /// corruption of an acknowledged write (spec/35).
    pub fn may_lose_acknowledged(self) -> bool {
        self != Damage::CutShort
    }
}

/// Counters since `open` (gauges for bytes and segments).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Bytes in the segment files.
    pub bytes_on_disk: u64,
    /// Segment files on disk.
    pub segments: u64,
    /// Frames written (entries, states, truncates, purges, checkpoints).
    pub frames_written: u64,
    /// Batches that wrote at least one frame (one `write_all` each, two at a rotation).
    pub batches_written: u64,
    /// Fsync rounds: one per synced batch, plus one per rotation with `Fsync::Always`.
    pub fsyncs: u64,
    pub rotations: u64,
    pub reclaimed_segments: u64,
    /// Bytes of the segments deleted.
    pub reclaimed_bytes: u64,
    /// Time spent deleting segments.
    pub reclaim_ns: u64,
    /// Reclaims that stopped on a failed delete.
    pub reclaim_failures: u64,
    /// Live entry bytes compaction copied forward.
    pub rewritten_bytes: u64,
    /// Segments holding dead entries (gauge).
    pub dirty_segments: u64,
    /// Groups the latest compaction pass found too large to copy (gauge).
    pub lagging_groups: u64,
    /// Segments kept only for those groups (gauge).
    pub pinned_segments: u64,
    /// What opening the journal replayed.
    pub recovery_ns: u64,
    pub recovery_records: u64,
    pub recovery_bytes: u64,
    pub recovery_live_entries: u64,
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
    reclaimed_bytes: AtomicU64,
    reclaim_ns: AtomicU64,
    reclaim_failures: AtomicU64,
    rewritten_bytes: AtomicU64,
    pinned_segments: AtomicU64,
    recovery_ns: AtomicU64,
    recovery_records: AtomicU64,
    recovery_bytes: AtomicU64,
    recovery_live_entries: AtomicU64,
}

/// What the writer thread and readers share.
struct Shared {
    dir: PathBuf,
    index: Mutex<Index>,
    /// Read handles by segment, opened on first read.
    readers: Mutex<HashMap<u64, Arc<File>>>,
    stats: Counters,
    /// The groups the latest compaction pass found too large to copy.
    lagging: Mutex<Vec<u32>>,
    closed: AtomicBool,
}

impl Shared {
    // A poisoned lock only means a panic elsewhere; the index stays consistent
    // because every update is applied whole under the lock.
    fn lock_index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_readers(&self) -> MutexGuard<'_, HashMap<u64, Arc<File>>> {
        self.readers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The read handle of a segment; None once the segment is gone.
    fn reader(&self, segment: u64) -> Result<Option<Arc<File>>, WalError> {
        let mut readers = self.lock_readers();
        if let Some(f) = readers.get(&segment) {
            return Ok(Some(f.clone()));
        }
        let path = segment_path(&self.dir, segment);
        let file = match File::open(&path) {
            Ok(f) => Arc::new(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WalError::Io { path, source: e }),
        };
        // Cache it only while the segment is live, so a deleted one is not held open.
        if self.lock_index().segments.contains_key(&segment) {
            readers.insert(segment, file.clone());
        }
        Ok(Some(file))
    }

    fn locate(&self, group: u32, index: u64) -> Option<Loc> {
        self.lock_index().groups.get(&group).and_then(|g| g.get(index))
    }

    fn publish_lagging(&self, groups: Vec<u32>, pinned_segments: u64) {
        self.stats.pinned_segments.store(pinned_segments, Ordering::Relaxed);
        *self.lagging.lock().unwrap_or_else(|p| p.into_inner()) = groups;
    }

    /// Reads and verifies the entry at `loc`; `Ok(None)` when the entry no
    /// longer sits there (purged, overwritten, or copied forward and its
    /// old segment deleted).
    fn read_at(&self, group: u32, index: u64, loc: Loc) -> Result<Option<Bytes>, WalError> {
        let moved = || self.locate(group, index) != Some(loc);
        let Some(file) = self.reader(loc.segment)? else {
            return if moved() { Ok(None) } else { Err(missing(self, loc)) };
        };
        let path = segment_path(&self.dir, loc.segment);
        let mut buf = vec![0u8; frame::HEADER + loc.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, loc.offset) {
            return if moved() { Ok(None) } else { Err(WalError::Io { path, source: e }) };
        }
        match frame::decode(&buf) {
            Ok(f)
                if matches!(f.kind, frame::FrameKind::Entry | frame::FrameKind::Copy)
                    && f.group == group
                    && f.index == index =>
            {
                Ok(Some(Bytes::from(buf).slice(frame::HEADER..)))
            }
            other => Err(WalError::Corrupt {
                segment: path,
                offset: loc.offset,
                reason: match other {
                    Ok(f) => {
                        format!("entry {index} of group {group} reads back as {:?} {}/{}", f.kind, f.group, f.index)
                    }
                    Err(bad) => format!("entry {index} of group {group} reads back with {bad}"),
                },
            }),
        }
    }
}

/// The journal. Cheap to clone (an `Arc` inside); every clone is the same
/// journal; Send + Sync.
#[derive(Clone)]
pub struct Wal {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tx: RwLock<Option<Sender<Op>>>,
    runner: Runner,
}

/// Who runs the writer.
enum Runner {
    Thread { thread: Mutex<Option<JoinHandle<()>>>, id: ThreadId },
    Inline(Arc<InlineWriter>),
}

impl Inner {
    fn inline(&self) -> Option<&InlineWriter> {
        match &self.runner {
            Runner::Inline(writer) => Some(writer),
            Runner::Thread { .. } => None,
        }
    }

    /// Queues `op`; an inline writer writes it (and whatever else waits)
    /// before this returns. `Err` gives back what could not be queued.
    fn queue(&self, tx: &Sender<Op>, op: Op) -> Result<(), Op> {
        // Weighed only where the weight decides who writes it.
        let weight = if self.inline().is_some_and(|w| w.hands_off()) { op.weight() } else { 0 };
        tx.send(op).map_err(|e| e.0)?;
        if let Some(writer) = self.inline() {
            writer.queued();
            writer.run_or_hand_off(weight);
        }
        Ok(())
    }

    /// Ends the writer once nothing more can be queued: joins its thread
    /// (unless this is it), or stops the inline one.
    fn stop_writer(&self) {
        match &self.runner {
            Runner::Thread { thread, id } => {
                let thread = thread.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(thread) = thread
                    && std::thread::current().id() != *id
                {
                    let _ = thread.join();
                }
            }
            Runner::Inline(writer) => writer.stop(),
        }
    }

    /// Whether this thread is the writer's (a callback): waiting on the
    /// journal here would wait for itself.
    fn on_writer(&self) -> bool {
        match &self.runner {
            Runner::Thread { id, .. } => std::thread::current().id() == *id,
            Runner::Inline(_) => InlineWriter::writing_here(),
        }
    }
}

impl Drop for Inner {
    /// The last handle gone without `close`: the writer drains, fsyncs
    /// and stops (joined, unless this is the writer thread itself).
    fn drop(&mut self) {
        self.tx.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = self.inline() {
            writer.run_queued();
        }
        self.stop_writer();
    }
}

impl Wal {
    /// Creates `dir` (and parents) if missing, locks it, replays every
    /// segment and starts the writer thread.
    pub fn open(options: WalOptions) -> Result<(Wal, Recovered), WalError> {
        let (shared, tx, writer, recovered) = Self::prepare(&options)?;
        let thread = std::thread::Builder::new()
            .name("ursula-wal".into())
            .spawn(move || writer.run())
            .map_err(WalError::io(&options.dir))?;
        let runner = Runner::Thread { id: thread.thread().id(), thread: Mutex::new(Some(thread)) };
        let inner = Inner { shared, tx: RwLock::new(Some(tx)), runner };
        Ok((Wal { inner: Arc::new(inner) }, recovered))
    }

    /// As `open`, but without a writer thread: each call writes what is
    /// queued (and runs the callbacks) before it returns, or leaves it to
    /// the thread writing at that moment, which takes it in its batch. For
    /// a simulation that must not depend on a thread's timing, and for
    /// `Fsync::Never`, where a write is a copy into the page cache: the
    /// rare requests that fsync (states, synced appends, a rotation) then
    /// wait on the caller's thread.
    pub fn open_inline(options: WalOptions) -> Result<(Wal, Recovered), WalError> {
        Self::open_inline_runner(options, None)
    }

    /// As `open_inline`, but a request of `large` bytes or more (payloads
    /// and frame headers) is written on a helper thread, with whatever is
    /// queued behind it until the helper is done: a caller's thread is not
    /// held for a large copy. Callbacks then run on either thread.
    pub fn open_inline_with_helper(options: WalOptions, large: usize) -> Result<(Wal, Recovered), WalError> {
        Self::open_inline_runner(options, Some(large))
    }

    fn open_inline_runner(options: WalOptions, large: Option<usize>) -> Result<(Wal, Recovered), WalError> {
        let (shared, tx, writer, recovered) = Self::prepare(&options)?;
        let inline = InlineWriter::new(writer, large).map_err(WalError::io(&options.dir))?;
        let inner = Inner { shared, tx: RwLock::new(Some(tx)), runner: Runner::Inline(inline) };
        Ok((Wal { inner: Arc::new(inner) }, recovered))
    }

    /// Checks the options, locks and replays the directory, and builds the
    /// writer with the queue it reads.
    fn prepare(options: &WalOptions) -> Result<(Arc<Shared>, Sender<Op>, Writer, Recovered), WalError> {
        if options.segment_size < MIN_SEGMENT_SIZE {
            return Err(WalError::Options(format!(
                "segment_size {} is below the minimum of {MIN_SEGMENT_SIZE} bytes",
                options.segment_size
            )));
        }
        let dir = options.dir.clone();
        std::fs::create_dir_all(&dir).map_err(WalError::io(&dir))?;
        let lock = segment::lock(&dir)?;
        let replay_started = std::time::Instant::now();
        let replayed = recover::replay(&dir, options.cut_damage_before_valid_frames)?;
        let replay_ns = u64::try_from(replay_started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let (active, len) = replayed.newest.unwrap_or((1, 0));
        let path = segment_path(&dir, active);
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(WalError::io(&path))?;
        let mut index = replayed.index;
        index.add_segment(active);
        // A group with nothing left is no group: which dead segments are
        // still on disk must not show.
        let recovered = Recovered {
            groups: index
                .groups
                .iter()
                .map(|(g, gi)| {
                    (*g, RecoveredGroup { slots: gi.slots.clone(), purged: gi.purged.clone(), entries: gi.range() })
                })
                .filter(|(_, r)| *r != RecoveredGroup::default())
                .collect(),
            torn_tail: replayed.torn_tail,
            unsettled_damage: replayed.unsettled_damage,
        };
        let stats = Counters::default();
        stats.bytes_on_disk.store(index.bytes_on_disk(), Ordering::Relaxed);
        stats.segments.store(index.segments.len() as u64, Ordering::Relaxed);
        stats.recovery_ns.store(replay_ns, Ordering::Relaxed);
        stats.recovery_records.store(replayed.records, Ordering::Relaxed);
        stats.recovery_bytes.store(index.bytes_on_disk(), Ordering::Relaxed);
        let live = index.groups.values().filter_map(|g| g.range()).map(|(first, last)| last - first + 1).sum();
        stats.recovery_live_entries.store(live, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            dir,
            index: Mutex::new(index),
            readers: Mutex::new(HashMap::new()),
            stats,
            lagging: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::channel();
        let writer = Writer::new(shared.clone(), rx, options, (active, file, len), lock);
        Ok((shared, tx, writer, recovered))
    }

    fn send(&self, op: Op) {
        let tx = self.inner.tx.read().unwrap_or_else(|p| p.into_inner());
        let refused = match tx.as_ref() {
            Some(tx) => self.inner.queue(tx, op).err(),
            None => Some(op),
        };
        drop(tx);
        if let Some(op) = refused {
            (op.into_done())(Err(WalError::Closed));
        }
    }

    /// Appends entries `(index, payload)` of `group`; indices must be
    /// contiguous. An index that already exists replaces that entry and
    /// every later one; a first index that does not continue the live run
    /// starts a new run; entries at or below the purge point are ignored.
    /// `done` runs once the frames are written, after fsync when `sync` or
    /// `Fsync::Always`.
    pub fn append(&self, group: u32, entries: Vec<(u64, Bytes)>, sync: bool, done: Done) {
        self.send(Op::Append { group, entries, sync, done });
    }

    /// Sets a durable state slot; always fsynced before `done` runs,
    /// whatever `WalOptions::fsync` says.
    pub fn set_state(&self, group: u32, slot: u8, value: Bytes, done: Done) {
        self.send(Op::State { group, slot, value, done });
    }

    /// Removes the group's entries with index >= `since`.
    pub fn truncate(&self, group: u32, since: u64, done: Done) {
        self.send(Op::Truncate { group, since, done });
    }

    /// Removes the group's entries with index <= `upto`, keeping `marker`
    /// as its purge record. A purge behind the current one is ignored.
    /// Segments it frees are deleted before `done` runs.
    pub fn purge(&self, group: u32, upto: u64, marker: Bytes, done: Done) {
        self.send(Op::Purge { group, upto, marker, done });
    }

    /// Reads one entry back from disk, verifying its checksum; `Ok(None)`
    /// when it is not live.
    pub fn read(&self, group: u32, index: u64) -> Result<Option<Bytes>, WalError> {
        let shared = &self.inner.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(WalError::Closed);
        }
        // A concurrent purge or overwrite may delete the segment under us:
        // then the entry is no longer live. Compaction may have copied it
        // forward: then it is read where it sits now.
        let mut tried = None;
        loop {
            let Some(loc) = shared.locate(group, index) else { return Ok(None) };
            if tried == Some(loc) {
                return Err(missing(shared, loc));
            }
            if let Some(payload) = shared.read_at(group, index, loc)? {
                return Ok(Some(payload));
            }
            tried = Some(loc);
        }
    }

    /// Runs one compaction pass and waits for it (not on the writer's
    /// thread, nor on an async runtime's).
    pub fn compact(&self, limits: CompactLimits) -> Result<(), WalError> {
        self.wait("compact", |done| Op::Compact { limits, done })
    }

    /// The groups the latest compaction pass found too large to copy:
    /// their snapshot and log purge free the segments they keep.
    pub fn lagging_groups(&self) -> Vec<u32> {
        self.inner.shared.lagging.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn wait(&self, what: &'static str, make: impl FnOnce(Done) -> Op) -> Result<(), WalError> {
        if self.inner.on_writer() {
            return Err(WalError::OnWriterThread(what));
        }
        let (tx, rx) = mpsc::channel();
        self.send(make(Box::new(move |r| {
            let _ = tx.send(r);
        })));
        rx.recv().unwrap_or(Err(WalError::Closed))
    }

    /// Forgets the cut [`Recovered::unsettled_damage`] reported, once the
    /// owner recorded what it had to: later opens no longer report it.
    pub fn settle_damage(&self) -> Result<(), WalError> {
        recover::settle_damage(&self.inner.shared.dir)
    }

    /// Writes and fsyncs everything queued before it.
    pub fn sync(&self) -> Result<(), WalError> {
        self.wait("sync", |done| Op::Sync { done })
    }

    /// Drains the queue, fsyncs and stops the writer (releasing the
    /// directory lock); every later call fails with `Closed`.
    pub fn close(&self) -> Result<(), WalError> {
        if self.inner.on_writer() {
            return Err(WalError::OnWriterThread("close"));
        }
        // Taking the sender under the write lock: nothing can queue behind Close.
        let Some(tx) = self.inner.tx.write().unwrap_or_else(|p| p.into_inner()).take() else {
            return Err(WalError::Closed);
        };
        let (done_tx, done_rx) = mpsc::channel();
        let done: Done = Box::new(move |r| {
            let _ = done_tx.send(r);
        });
        let sent = self.inner.queue(&tx, Op::Close { done });
        drop(tx);
        let result = match sent {
            Ok(()) => done_rx.recv().unwrap_or(Err(WalError::Closed)),
            Err(_) => Err(WalError::Closed),
        };
        self.inner.stop_writer();
        self.inner.shared.closed.store(true, Ordering::Release);
        result
    }

    pub fn stats(&self) -> WalStats {
        let c = &self.inner.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let dirty_segments = self.inner.shared.lock_index().segments.values().filter(|s| s.dirty()).count() as u64;
        let lagging_groups = self.inner.shared.lagging.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
        WalStats {
            bytes_on_disk: get(&c.bytes_on_disk),
            segments: get(&c.segments),
            frames_written: get(&c.frames_written),
            batches_written: get(&c.batches_written),
            fsyncs: get(&c.fsyncs),
            rotations: get(&c.rotations),
            reclaimed_segments: get(&c.reclaimed_segments),
            reclaimed_bytes: get(&c.reclaimed_bytes),
            reclaim_ns: get(&c.reclaim_ns),
            reclaim_failures: get(&c.reclaim_failures),
            rewritten_bytes: get(&c.rewritten_bytes),
            dirty_segments,
            lagging_groups,
            pinned_segments: get(&c.pinned_segments),
            recovery_ns: get(&c.recovery_ns),
            recovery_records: get(&c.recovery_records),
            recovery_bytes: get(&c.recovery_bytes),
            recovery_live_entries: get(&c.recovery_live_entries),
        }
    }
}

fn missing(shared: &Shared, loc: Loc) -> WalError {
    let path = segment_path(&shared.dir, loc.segment);
    WalError::Io { path, source: std::io::Error::new(std::io::ErrorKind::NotFound, "live segment is missing") }
}
