//! A group's Raft log over the node's shared WAL: entries go to the
//! journal (batched with every other group's by its writer thread) and stay
//! in a bounded cache of recent entries; older ones are read from disk.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, EntryPayload, ErrorSubject, ErrorVerb, RaftLogReader, StorageIOError};
use ursula_wal::{RecoveredGroup, Wal, WalError};

use super::codec;
use super::types::{Entry, LogId, StorageError, TypeConfig, Vote};

/// WAL state slots of a group. Persisted: never renumber.
pub const SLOT_VOTE: u8 = 1;

struct LogInner {
    /// A contiguous run of the newest entries, ending at `last_log_id`.
    cache: VecDeque<(Entry, usize)>,
    cached_bytes: usize,
    budget: usize,
    /// The highest index whose journal write completed: only those may
    /// leave the cache, since only those can be read back from disk.
    durable: u64,
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
}

fn io_err(subject: ErrorSubject<u64>, verb: ErrorVerb, e: &(impl std::error::Error + 'static)) -> StorageError {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
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
    ) -> Result<GroupLog, StorageError> {
        let mut inner = LogInner {
            cache: VecDeque::new(),
            cached_bytes: 0,
            budget,
            durable: 0,
            last_log_id: None,
            last_purged: None,
            start: 0,
            vote: None,
            bytes_since_purge: 0,
        };
        if let Some(rec) = recovered {
            if let Some(raw) = rec.slots.get(&SLOT_VOTE) {
                inner.vote =
                    Some(codec::decode_vote(raw).map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Read, &e))?);
            }
            if let Some((_, marker)) = &rec.purged {
                inner.last_purged =
                    Some(codec::decode_log_id(marker).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?);
            }
            inner.last_log_id = inner.last_purged;
            inner.start = next_index(inner.last_purged);
            if let Some((first, last)) = rec.entries {
                let raw = wal
                    .read(group, last)
                    .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?
                    .ok_or_else(|| io_err(ErrorSubject::Logs, ErrorVerb::Read, &WalError::Closed))?;
                let entry = codec::decode_entry(&raw).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
                inner.last_log_id = Some(entry.log_id);
                inner.start = first;
                inner.durable = last;
            }
        }
        Ok(GroupLog { group, wal, inner: Arc::new(Mutex::new(inner)) })
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes of log written since the group's last purge.
    pub fn bytes_since_purge(&self) -> u64 {
        self.lock().bytes_since_purge
    }

    fn read_from_disk(&self, index: u64) -> Result<Entry, StorageError> {
        let subject = || ErrorSubject::LogIndex(index);
        let raw =
            self.wal.read(self.group, index).map_err(|e| io_err(subject(), ErrorVerb::Read, &e))?.ok_or_else(|| {
                io_err(subject(), ErrorVerb::Read, &std::io::Error::other("entry missing from the WAL"))
            })?;
        codec::decode_entry(&raw).map_err(|e| io_err(subject(), ErrorVerb::Read, &e))
    }
}

/// The index after `log_id`: where a log ending there continues.
fn next_index(log_id: Option<LogId>) -> u64 {
    log_id.map_or(0, |l| l.index + 1)
}

fn first_cached(inner: &LogInner) -> Option<u64> {
    inner.cache.front().map(|(e, _)| e.log_id.index)
}

impl RaftLogReader<TypeConfig> for GroupLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (from_disk, mut cached) = {
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
            let cached: Vec<Entry> = (cache_start..end)
                .filter_map(|i| inner.cache.get((i - base) as usize).map(|(e, _)| e.clone()))
                .collect();
            (start..cache_start.min(end), cached)
        };
        let mut out = Vec::with_capacity((from_disk.end - from_disk.start) as usize + cached.len());
        for index in from_disk {
            out.push(self.read_from_disk(index)?);
        }
        out.append(&mut cached);
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for GroupLog {
    type LogReader = GroupLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.lock();
        Ok(LogState { last_purged_log_id: inner.last_purged, last_log_id: inner.last_log_id })
    }

    async fn get_log_reader(&mut self) -> GroupLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let raw = codec::encode_vote(vote).map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Write, &e))?;
        // Votes are always fsynced (set_state), whatever raft.wal.fsync says.
        completion(|done| self.wal.set_state(self.group, SLOT_VOTE, raw, done))
            .await
            .map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Write, &e))?;
        self.lock().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.lock().vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut frames: Vec<(u64, Bytes)> = Vec::new();
        let mut sync = false;
        let mut inner = self.lock();
        for entry in entries {
            let raw = codec::encode_entry(&entry)
                .map_err(|e| io_err(ErrorSubject::Log(entry.log_id), ErrorVerb::Write, &e))?;
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
            callback.log_io_completed(Ok(()));
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
                    inner.durable = inner.durable.max(last);
                    evict(&mut inner);
                }
                callback.log_io_completed(result.map_err(std::io::Error::other));
            }),
        );
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let index = log_id.index;
        let before = {
            let mut inner = self.lock();
            while inner.cache.back().is_some_and(|(e, _)| e.log_id.index >= index) {
                if let Some((_, len)) = inner.cache.pop_back() {
                    inner.cached_bytes -= len;
                }
            }
            match inner.cache.back() {
                Some((e, _)) => Some(Some(e.log_id)),
                // Nothing of the log is left.
                None if index <= inner.start => Some(inner.last_purged),
                None => None,
            }
        };
        let before = match before {
            Some(b) => b,
            None => Some(self.read_from_disk(index - 1)?.log_id),
        };
        {
            let mut inner = self.lock();
            inner.last_log_id = before;
            inner.start = inner.start.min(next_index(before));
        }
        completion(|done| self.wal.truncate(self.group, index, done))
            .await
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, &e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let marker = codec::encode_log_id(&log_id).map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, &e))?;
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
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, &e))
    }
}

/// Drops the oldest cached entries above the budget, once they are on disk.
fn evict(inner: &mut LogInner) {
    while inner.cached_bytes > inner.budget
        && let Some((e, len)) = inner.cache.front()
        && e.log_id.index <= inner.durable
    {
        inner.cached_bytes -= *len;
        inner.cache.pop_front();
    }
}
