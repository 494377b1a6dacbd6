//! A group's Raft log over the node's shared WAL: entries go to the
//! journal (batched with every other group's by its writer thread) and stay
//! in a bounded cache of recent entries; older ones are read from disk.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use std::io;

use bytes::Bytes;
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{EntryPayload, RaftLogReader};
use ursula_wal::{RecoveredGroup, Wal, WalError};

use super::codec;
use super::types::{Entry, LogId, TypeConfig, Vote};

/// WAL state slots of a group. Persisted: never renumber.
pub const SLOT_VOTE: u8 = 1;

struct LogInner {
    /// A contiguous run of the newest entries, ending at `last_log_id`.
    cache: VecDeque<(Entry, usize)>,
    cached_bytes: usize,
    budget: usize,
    /// The highest index whose journal write completed (None: none has):
    /// only those may leave the cache, since only those can be read back
    /// from disk. A truncate lowers it, as those writes were of the entries
    /// it removed, not of what is re-appended at their indices.
    durable: Option<u64>,
    last_log_id: Option<LogId>,
    last_purged: Option<LogId>,
    /// The index of the log's first entry: the log holds every index from
    /// here to `last_log_id` (none when it is the one past `last_log_id`).
    /// Not always past `last_purged`: a log may begin anywhere, as the WAL's may.
    start: u64,
    vote: Option<Vote>,
    /// Encoded bytes appended since the last purge: the snapshot driver's measure.
    bytes_since_purge: u64,
}

#[derive(Clone)]
pub struct GroupLog {
    group: u32,
    wal: Wal,
    inner: Arc<Mutex<LogInner>>,
    reads: Arc<LogReads>,
}

/// Where the entries replication and apply read came from (spec/37's
/// `wal_cache_hits`, `wal_cache_misses`, `wal_disk_reads`, `wal_disk_read_bytes`).
#[derive(Default)]
pub struct LogReads {
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub disk_read_bytes: AtomicU64,
}

/// A group's log as `/__ursula/metrics` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogFigures {
    pub cache_hits: u64,
    /// Entries read from the journal; each is one disk read.
    pub cache_misses: u64,
    pub disk_read_bytes: u64,
    /// Encoded bytes of the entries in the cache.
    pub cache_bytes: u64,
    /// Live entries of the group's log (in the journal's index).
    pub indexed_entries: u64,
    /// The term of the log's last entry (or of its purge point); `None`
    /// for an empty log.
    pub last_log_term: Option<u64>,
}

/// A storage failure as openraft takes it: what was being done, and why.
fn io_err(doing: impl std::fmt::Display, e: &impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{doing}: {e}"))
}

/// Waits for a WAL completion on the async side.
async fn completion(submit: impl FnOnce(ursula_wal::Done)) -> Result<(), WalError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    submit(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.await.unwrap_or(Err(WalError::Closed))
}

impl GroupLog {
    /// Rebuilds a group's log from what the WAL recovered.
    pub fn recover(
        group: u32,
        wal: Wal,
        recovered: Option<&RecoveredGroup>,
        budget: usize,
    ) -> Result<GroupLog, io::Error> {
        let mut inner = LogInner {
            cache: VecDeque::new(),
            cached_bytes: 0,
            budget,
            durable: None,
            last_log_id: None,
            last_purged: None,
            start: 0,
            vote: None,
            bytes_since_purge: 0,
        };
        if let Some(rec) = recovered {
            if let Some(raw) = rec.slots.get(&SLOT_VOTE) {
                inner.vote = Some(codec::decode_vote(raw).map_err(|e| io_err("reading the vote", &e))?);
            }
            if let Some((_, marker)) = &rec.purged {
                inner.last_purged = Some(codec::decode_log_id(marker).map_err(|e| io_err("reading the log", &e))?);
            }
            inner.last_log_id = inner.last_purged;
            inner.start = next_index(inner.last_purged);
            if let Some((first, last)) = rec.entries {
                let raw = wal
                    .read(group, last)
                    .map_err(|e| io_err("reading the log", &e))?
                    .ok_or_else(|| io_err("reading the log", &WalError::Closed))?;
                let entry = codec::decode_entry(&raw).map_err(|e| io_err("reading the log", &e))?;
                inner.last_log_id = Some(entry.log_id);
                inner.start = first;
                inner.durable = Some(last);
            }
        }
        Ok(GroupLog { group, wal, inner: Arc::new(Mutex::new(inner)), reads: Arc::default() })
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes of log written since the group's last purge.
    pub fn bytes_since_purge(&self) -> u64 {
        self.lock().bytes_since_purge
    }

    /// The id of the log's last entry (or of its purge point).
    pub fn last_log_id(&self) -> Option<LogId> {
        self.lock().last_log_id
    }

    pub fn figures(&self) -> LogFigures {
        let inner = self.lock();
        let indexed = inner.last_log_id.map_or(0, |last| (last.index + 1).saturating_sub(inner.start));
        LogFigures {
            cache_hits: self.reads.cache_hits.load(Ordering::Relaxed),
            cache_misses: self.reads.cache_misses.load(Ordering::Relaxed),
            disk_read_bytes: self.reads.disk_read_bytes.load(Ordering::Relaxed),
            cache_bytes: inner.cached_bytes as u64,
            indexed_entries: indexed,
            last_log_term: inner.last_log_id.map(|l| l.leader_id.term),
        }
    }

    /// Entry `index` from the journal, with its encoded size. Its record is
    /// kept with it: a peer's request sends those bytes instead of a new
    /// encoding (a follower catching up from disk cost a decode and an
    /// encode of every entry).
    fn read_from_disk(&self, index: u64) -> Result<(Entry, usize), io::Error> {
        let doing = || format!("reading log entry {index}");
        let raw = self
            .wal
            .read(self.group, index)
            .map_err(|e| io_err(doing(), &e))?
            .ok_or_else(|| io_err(doing(), &"the entry is missing from the WAL"))?;
        self.reads.cache_misses.fetch_add(1, Ordering::Relaxed);
        self.reads.disk_read_bytes.fetch_add(raw.len() as u64, Ordering::Relaxed);
        let entry = codec::decode_entry(&raw).map_err(|e| io_err(doing(), &e))?;
        if let EntryPayload::Normal(p) = &entry.payload {
            p.record.keep(entry.log_id, raw.clone());
        }
        Ok((entry, raw.len()))
    }

    /// `append` with any completion: openraft's `LogFlushed` cannot be
    /// built outside openraft, so tests append through this.
    fn append_then<I>(
        &mut self,
        entries: I,
        done: impl FnOnce(Result<(), WalError>) + Send + 'static,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry>,
    {
        let mut frames: Vec<(u64, Bytes)> = Vec::new();
        let mut sync = false;
        let mut inner = self.lock();
        for mut entry in entries {
            let raw = codec::record_entry(&mut entry)
                .map_err(|e| io_err(format_args!("writing entry {}", entry.log_id), &e))?;
            codec::forget_received(&mut entry);
            // Membership batches are always fsynced (spec/07, raft.wal.fsync).
            sync |= matches!(entry.payload, EntryPayload::Membership(_));
            let index = entry.log_id.index;
            // Not continuing the log: a new run begins, as in the WAL.
            if index > next_index(inner.last_log_id) || index < inner.start {
                inner.start = index;
            }
            while inner.cache.back().is_some_and(|(e, _)| e.log_id.index >= index) {
                if let Some((_, len)) = inner.cache.pop_back() {
                    inner.cached_bytes -= len;
                }
            }
            if first_cached(&inner).is_some_and(|f| f + inner.cache.len() as u64 != index) {
                // Not contiguous with what is cached: start the run afresh.
                inner.cache.clear();
                inner.cached_bytes = 0;
            }
            inner.cached_bytes += raw.len();
            inner.bytes_since_purge += raw.len() as u64;
            inner.last_log_id = Some(entry.log_id);
            inner.cache.push_back((entry, raw.len()));
            frames.push((index, raw));
        }
        let Some(&(last, _)) = frames.last() else {
            drop(inner);
            done(Ok(()));
            return Ok(());
        };
        evict(&mut inner);
        drop(inner);
        let shared = self.inner.clone();
        self.wal.append(
            self.group,
            frames,
            sync,
            Box::new(move |result| {
                if result.is_ok() {
                    let mut inner = shared.lock().unwrap_or_else(|p| p.into_inner());
                    inner.durable = inner.durable.max(Some(last));
                    evict(&mut inner);
                }
                done(result);
            }),
        );
        Ok(())
    }
}

/// The index after `log_id`: where a log ending there continues.
fn next_index(log_id: Option<LogId>) -> u64 {
    log_id.map_or(0, |l| l.index + 1)
}

fn first_cached(inner: &LogInner) -> Option<u64> {
    inner.cache.front().map(|(e, _)| e.log_id.index)
}

/// The entries of one replication call, in encoded bytes (at least one
/// entry, whatever its size). openraft asks for up to `max_payload_entries`
/// (300) entries per call: with 1 MiB appends that was 300 MiB read from
/// the WAL and encoded to send a few of them, and a lagging follower's
/// calls ran past their deadline and never caught up (issue 17, finding 0).
pub const MAX_REPLICATION_BYTES: usize = 2 * 1024 * 1024;

impl GroupLog {
    /// The entries of `range` the log holds, in order, stopping before the
    /// one that would take their encoded size past `max_bytes` (the first
    /// entry always comes).
    fn read_entries<RB: RangeBounds<u64>>(&self, range: RB, max_bytes: usize) -> Result<Vec<Entry>, io::Error> {
        let (from_disk, cached) = {
            let inner = self.lock();
            let first_live = inner.start;
            let start = match range.start_bound() {
                Bound::Included(&s) => s,
                Bound::Excluded(&s) => s.saturating_add(1),
                Bound::Unbounded => 0,
            }
            .max(first_live);
            let end = match range.end_bound() {
                Bound::Included(&e) => e.saturating_add(1),
                Bound::Excluded(&e) => e,
                Bound::Unbounded => u64::MAX,
            }
            .min(inner.last_log_id.map_or(0, |l| l.index + 1));
            if start >= end {
                return Ok(Vec::new());
            }
            let cache_start = first_cached(&inner).unwrap_or(end).max(start);
            let base = first_cached(&inner).unwrap_or(0);
            // At most `max_bytes` of clones: the entries read from disk
            // first may leave room for fewer of these.
            let mut budget = Budget::new(max_bytes);
            let cached: Vec<(Entry, usize)> = (cache_start..end)
                .map_while(|i| inner.cache.get((i - base) as usize))
                .take_while(|(_, size)| budget.take(*size))
                .cloned()
                .collect();
            (start..cache_start.min(end), cached)
        };
        if from_disk.is_empty() {
            self.reads.cache_hits.fetch_add(cached.len() as u64, Ordering::Relaxed);
            return Ok(cached.into_iter().map(|(e, _)| e).collect());
        }
        let mut out = Vec::new();
        let mut budget = Budget::new(max_bytes);
        for index in from_disk {
            let (entry, size) = self.read_from_disk(index)?;
            if !budget.take(size) {
                return Ok(out);
            }
            out.push(entry);
        }
        let before = out.len();
        out.extend(cached.into_iter().take_while(|(_, size)| budget.take(*size)).map(|(e, _)| e));
        self.reads.cache_hits.fetch_add((out.len() - before) as u64, Ordering::Relaxed);
        Ok(out)
    }
}

/// Bytes left for a read; the first entry is always taken.
struct Budget {
    left: usize,
    first: bool,
}

impl Budget {
    fn new(max_bytes: usize) -> Budget {
        Budget { left: max_bytes, first: true }
    }

    fn take(&mut self, size: usize) -> bool {
        let fits = self.first || size <= self.left;
        self.first = false;
        self.left = self.left.saturating_sub(size);
        fits
    }
}

impl RaftLogReader<TypeConfig> for GroupLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        self.read_entries(range, usize::MAX)
    }

    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> Result<Vec<Entry>, io::Error> {
        self.read_entries(start..end, MAX_REPLICATION_BYTES)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.lock().vote)
    }
}

impl RaftLogStorage<TypeConfig> for GroupLog {
    type LogReader = GroupLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let inner = self.lock();
        Ok(LogState { last_purged_log_id: inner.last_purged, last_log_id: inner.last_log_id })
    }

    async fn get_log_reader(&mut self) -> GroupLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let raw = codec::encode_vote(vote).map_err(|e| io_err("writing the vote", &e))?;
        // Votes are always fsynced (set_state), whatever raft.wal.fsync says.
        completion(|done| self.wal.set_state(self.group, SLOT_VOTE, raw, done))
            .await
            .map_err(|e| io_err("writing the vote", &e))?;
        self.lock().vote = Some(*vote);
        Ok(())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        self.append_then(entries, move |result| callback.io_completed(result.map_err(io::Error::other)))
    }

    async fn truncate_after(&mut self, last: Option<LogId>) -> Result<(), io::Error> {
        let index = next_index(last);
        {
            let mut inner = self.lock();
            while inner.cache.back().is_some_and(|(e, _)| e.log_id.index >= index) {
                if let Some((_, len)) = inner.cache.pop_back() {
                    inner.cached_bytes -= len;
                }
            }
            if inner.last_log_id.is_none_or(|l| l.index < index) {
                return Ok(());
            }
            inner.last_log_id = last.or(inner.last_purged);
            inner.start = inner.start.min(index);
        }
        let shared = self.inner.clone();
        completion(|done| {
            self.wal.truncate(
                self.group,
                index,
                // Lowered on the writer thread: after every earlier append's
                // completion raised it, before any later one's. Whatever the
                // result, lowering it is safe.
                Box::new(move |result| {
                    let mut inner = shared.lock().unwrap_or_else(|p| p.into_inner());
                    inner.durable = inner.durable.min(index.checked_sub(1));
                    drop(inner);
                    done(result);
                }),
            )
        })
        .await
        .map_err(|e| io_err("deleting log entries", &e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let marker = codec::encode_log_id(&log_id).map_err(|e| io_err("deleting log entries", &e))?;
        {
            let mut inner = self.lock();
            while inner.cache.front().is_some_and(|(e, _)| e.log_id.index <= log_id.index) {
                if let Some((_, len)) = inner.cache.pop_front() {
                    inner.cached_bytes -= len;
                }
            }
            inner.last_purged = Some(log_id);
            inner.start = inner.start.max(log_id.index + 1);
            if inner.last_log_id.is_none_or(|l| l.index < log_id.index) {
                inner.last_log_id = Some(log_id);
            }
            inner.bytes_since_purge = 0;
        }
        completion(|done| self.wal.purge(self.group, log_id.index, marker, done))
            .await
            .map_err(|e| io_err("deleting log entries", &e))
    }
}

/// Drops the oldest cached entries above the budget, once they are on disk.
fn evict(inner: &mut LogInner) {
    while inner.cached_bytes > inner.budget
        && let Some((e, len)) = inner.cache.front()
        && inner.durable.is_some_and(|d| e.log_id.index <= d)
    {
        inner.cached_bytes -= *len;
        inner.cache.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use openraft::RaftLogReader;
    use openraft::entry::RaftEntry;
    use openraft::vote::RaftLeaderId;
    use openraft::vote::leader_id_adv::CommittedLeaderId;
    use tokio::sync::oneshot;
    use ursula_wal::{Fsync, MIN_SEGMENT_SIZE, WalOptions};

    use super::*;

    fn entry(term: u64, index: u64) -> Entry {
        Entry::new_blank(LogId { leader_id: CommittedLeaderId::new(term, 0), index })
    }

    /// A group's log with no cache to speak of, on a fresh WAL.
    fn open(dir: &std::path::Path) -> (Wal, GroupLog) {
        let options = WalOptions {
            dir: dir.to_path_buf(),
            fsync: Fsync::Never,
            segment_size: MIN_SEGMENT_SIZE,
            cut_damage_before_valid_frames: false,
        };
        let (wal, _) = Wal::open(options).expect("a fresh WAL");
        let log = GroupLog::recover(0, wal.clone(), None, 0).expect("an empty log");
        (wal, log)
    }

    /// Appends and hands back the append's completion, not awaited.
    fn append(log: &mut GroupLog, entries: Vec<Entry>) -> oneshot::Receiver<Result<(), WalError>> {
        let (tx, rx) = oneshot::channel();
        log.append_then(entries, move |r| drop(tx.send(r))).expect("the append");
        rx
    }

    /// Holds the WAL's writer thread (in a callback of another group's
    /// request) until the returned sender is dropped: later writes wait.
    fn hold_writer(wal: &Wal) -> mpsc::Sender<()> {
        let (held, is_held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        wal.truncate(
            1,
            0,
            Box::new(move |_| {
                let _ = held.send(());
                let _ = released.recv();
            }),
        );
        is_held.recv().expect("the writer thread");
        release
    }

    async fn terms(log: &mut GroupLog, range: std::ops::Range<u64>) -> Result<Vec<u64>, io::Error> {
        Ok(log.try_get_log_entries(range).await?.iter().map(|e| e.log_id.leader_id.term).collect())
    }

    /// Entries re-appended after a truncate stay readable until their own
    /// write completes: the truncated ones' completed writes do not count.
    #[tokio::test]
    async fn reappended_entries_stay_readable_before_their_write() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (wal, mut log) = open(dir.path());
        append(&mut log, (1..=3).map(|i| entry(1, i)).collect()).await.expect("the writer").expect("the write");
        log.truncate_after(Some(entry(1, 1).log_id)).await.expect("the truncate");

        let release = hold_writer(&wal);
        let written = append(&mut log, (2..=3).map(|i| entry(2, i)).collect());
        let read = terms(&mut log, 1..4).await;
        drop(release);
        assert_eq!(read.expect("a read while the write is pending"), [1, 2, 2]);
        written.await.expect("the writer").expect("the write");
        assert_eq!(terms(&mut log, 1..4).await.expect("a read from disk"), [1, 2, 2]);
        wal.close().expect("closing the WAL");
    }

    /// A brand-new log's first entry, at index 0, is not taken as written.
    #[tokio::test]
    async fn a_first_entry_at_zero_stays_readable_before_its_write() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (wal, mut log) = open(dir.path());

        let release = hold_writer(&wal);
        let written = append(&mut log, vec![entry(1, 0)]);
        let read = terms(&mut log, 0..1).await;
        drop(release);
        assert_eq!(read.expect("a read while the write is pending"), [1]);
        written.await.expect("the writer").expect("the write");
        assert_eq!(terms(&mut log, 0..1).await.expect("a read from disk"), [1]);
        wal.close().expect("closing the WAL");
    }

    /// A replication read stops at its byte budget, from the cache and from
    /// disk alike, and always returns the first entry.
    #[tokio::test]
    async fn a_replication_read_is_bounded_in_bytes() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (wal, mut log) = open(dir.path());
        let size = codec::encode_entry(&entry(1, 1)).expect("an entry").len();
        let count = |r: Result<Vec<Entry>, io::Error>| r.expect("a read").len();

        let release = hold_writer(&wal);
        let written = append(&mut log, (1..=10).map(|i| entry(1, i)).collect());
        assert_eq!(count(log.read_entries(1..11, 3 * size + size / 2)), 3, "from the cache");
        assert_eq!(count(log.read_entries(1..11, 0)), 1, "the first entry always comes");
        drop(release);
        written.await.expect("the writer").expect("the write");

        assert_eq!(count(log.read_entries(1..11, 3 * size + size / 2)), 3, "from disk");
        assert_eq!(count(log.read_entries(4..11, 0)), 1, "the first entry always comes");
        assert_eq!(count(log.read_entries(1..11, usize::MAX)), 10);
        assert_eq!(log.limited_get_log_entries(1, 11).await.expect("a read").len(), 10, "small entries fit");
        wal.close().expect("closing the WAL");
    }

    /// An entry read back from disk carries the journal's bytes as its
    /// record, which a peer's request then sends as they are.
    #[tokio::test]
    async fn an_entry_read_from_disk_keeps_its_record() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (wal, mut log) = open(dir.path());
        let key = ursula_stream::StreamKey::parse("bucket-1", "s").expect("a key");
        let delete = ursula_stream::Command::Delete(ursula_stream::DeleteStream { key, expect: None });
        let log_id = entry(1, 1).log_id;
        let normal = Entry { log_id, payload: EntryPayload::Normal(super::super::types::Proposal::new(5, delete)) };
        let encoded = codec::encode_entry(&normal).expect("an entry");
        append(&mut log, vec![normal]).await.expect("the writer").expect("the write");
        let read = log.read_entries(1..2, usize::MAX).expect("a read");
        assert_eq!(log.figures().cache_misses, 1, "read from disk");
        let EntryPayload::Normal(p) = &read[0].payload else { panic!("a proposal") };
        let kept = p.record.of(&log_id).expect("its record is kept");
        assert_eq!(kept, encoded);
        assert_eq!(codec::encode_entry(&read[0]).expect("an entry").as_ptr(), kept.as_ptr());
        wal.close().expect("closing the WAL");
    }

    /// spec/37's read counters: entries from the cache are hits, entries
    /// read back from the journal misses (one disk read each, with bytes).
    #[tokio::test]
    async fn reads_count_cache_hits_and_disk_reads() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = WalOptions {
            dir: dir.path().to_path_buf(),
            fsync: Fsync::Never,
            segment_size: MIN_SEGMENT_SIZE,
            cut_damage_before_valid_frames: false,
        };
        let (wal, _) = Wal::open(options).expect("a fresh WAL");
        // A cache of one entry's size: the older entries are read from disk.
        let mut log = GroupLog::recover(0, wal.clone(), None, 1).expect("an empty log");
        append(&mut log, (1..=3).map(|i| entry(1, i)).collect()).await.expect("the writer").expect("the write");
        assert_eq!(log.figures().indexed_entries, 3);
        let before = log.figures();
        assert_eq!(terms(&mut log, 1..4).await.expect("a read"), [1, 1, 1]);
        let after = log.figures();
        let (hits, misses) = (after.cache_hits - before.cache_hits, after.cache_misses - before.cache_misses);
        assert_eq!(hits + misses, 3, "{after:?}");
        assert!(misses >= 2 && after.disk_read_bytes > 0, "{after:?}");
        wal.close().expect("closing the WAL");
    }
}
