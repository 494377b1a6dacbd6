//! The journal's one writer thread. It takes the first waiting request and
//! then every other one already queued (group commit, across groups),
//! encodes them into one buffer, writes it with one `write_all`, fsyncs
//! once when any request needs it, updates the in-memory index, deletes
//! segments nothing needs any more, and only then runs the callbacks, in
//! request order.
//!
//! Segments rotate at `segment_size`. A new segment opens with a
//! checkpoint (every group's slots and purge record, then a Checkpoint
//! frame), so older segments matter only for the entries they hold; they
//! are deleted oldest first once no group has a live entry in them, which
//! compaction brings about for groups that went quiet.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

use crate::error::WalError;
use crate::frame::{self, FrameKind, MAX_PAYLOAD};
use crate::index::{Index, Loc};
use crate::segment::{segment_path, sync_dir};
use crate::{Done, Shared};

pub enum Op {
    Append {
        group: u32,
        entries: Vec<(u64, Bytes)>,
        sync: bool,
        done: Done,
    },
    State {
        group: u32,
        slot: u8,
        value: Bytes,
        done: Done,
    },
    Truncate {
        group: u32,
        since: u64,
        done: Done,
    },
    Purge {
        group: u32,
        upto: u64,
        marker: Bytes,
        done: Done,
    },
    Sync {
        done: Done,
    },
    Close {
        done: Done,
    },
    /// One compaction pass (`Writer::compact`).
    Compact {
        limits: crate::CompactLimits,
        done: Done,
    },
}

impl Op {
    pub fn into_done(self) -> Done {
        match self {
            Op::Append { done, .. }
            | Op::State { done, .. }
            | Op::Truncate { done, .. }
            | Op::Purge { done, .. }
            | Op::Sync { done }
            | Op::Close { done }
            | Op::Compact { done, .. } => done,
        }
    }

    /// Roughly the bytes the request adds to a batch.
    pub(crate) fn weight(&self) -> usize {
        match self {
            Op::Append { entries, .. } => entries.iter().map(|(_, p)| p.len() + frame::HEADER).sum(),
            Op::State { value: b, .. } | Op::Purge { marker: b, .. } => b.len() + frame::HEADER,
            _ => frame::HEADER,
        }
    }
}

/// An index update waiting for its frame to reach the file.
enum Change {
    Entry { group: u32, index: u64, loc: Loc },
    State { group: u32, slot: u8, value: Bytes },
    Truncate { group: u32, since: u64 },
    Purge { group: u32, upto: u64, marker: Bytes },
    Checkpoint(u64),
    Copied { group: u32, index: u64, loc: Loc },
    CopyEnd { group: u32, first: u64, last: u64 },
}

impl Change {
    fn apply(self, index: &mut Index) {
        match self {
            Change::Entry { group, index: i, loc } => index.append(group, i, loc),
            Change::State { group, slot, value } => index.set_state(group, slot, value),
            Change::Truncate { group, since } => index.truncate(group, since),
            Change::Purge { group, upto, marker } => index.purge(group, upto, marker),
            Change::Checkpoint(seq) => index.mark_checkpoint(seq),
            Change::Copied { group, index: i, loc } => index.copied(group, i, loc),
            Change::CopyEnd { group, first, last } => {
                if let Err(e) = index.copy_end(group, first, last, false) {
                    // The writer made the copies itself: this is a bug, and the
                    // run stays where it was.
                    tracing::error!(error = %e, "WAL: a compaction copy did not apply");
                }
            }
        }
    }
}

/// Requests taken into one batch at most, and the bytes after which the
/// writer stops draining (a batch is still written whole).
const MAX_BATCH: usize = 4096;
const MAX_BATCH_BYTES: usize = 16 << 20;

pub struct Writer {
    shared: Arc<Shared>,
    rx: Receiver<Op>,
    fsync_always: bool,
    segment_size: u64,
    active: u64,
    file: File,
    /// Bytes of the active segment already in the file.
    len: u64,
    /// Bytes at the start of the active segment taken by its checkpoint.
    /// A segment rotates only once it is also twice that long, so a
    /// checkpoint larger than `segment_size` (thousands of groups, tiny
    /// segments) costs at most half of each segment, not one per frame.
    checkpoint_len: u64,
    buf: Vec<u8>,
    pending: Vec<Change>,
    pending_frames: u64,
    /// The active segment holds bytes not yet fsynced.
    dirty: bool,
    /// A segment was created or deleted since the directory's last fsync.
    dir_dirty: bool,
    /// Set once a write or fsync failed: the file's tail is unknown, so
    /// nothing more is written (reopening recovers).
    broken: Option<(PathBuf, String)>,
    /// Since when each segment has held dead entries, as far as this
    /// process knows (compaction's age).
    dirty_since: BTreeMap<u64, Instant>,
    /// No compaction pass ran yet: segments found dirty then take their
    /// age from their file's last change.
    first_pass: bool,
    /// Held for the writer's life: the directory's lock.
    _lock: File,
}

impl Writer {
    pub fn new(
        shared: Arc<Shared>,
        rx: Receiver<Op>,
        options: &crate::WalOptions,
        (active, file, len): (u64, File, u64),
        lock: File,
    ) -> Writer {
        Writer {
            shared,
            rx,
            fsync_always: options.fsync == crate::Fsync::Always,
            segment_size: options.segment_size,
            active,
            file,
            len,
            checkpoint_len: 0,
            buf: Vec::new(),
            pending: Vec::new(),
            pending_frames: 0,
            dirty: false,
            dir_dirty: true,
            broken: None,
            dirty_since: BTreeMap::new(),
            first_pass: true,
            _lock: lock,
        }
    }

    /// Runs until every sender is gone (close, or the last `Wal` dropped),
    /// draining the queue first.
    pub fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            let batch = self.batch_from(first);
            self.write_batch(batch);
        }
        self.finish();
    }

    /// Writes every request queued now, without waiting for more (the
    /// inline mode's turn); returns how many it took.
    pub fn drain(&mut self) -> usize {
        let mut taken = 0;
        while let Ok(first) = self.rx.try_recv() {
            let batch = self.batch_from(first);
            taken += batch.len();
            self.write_batch(batch);
        }
        taken
    }

    /// The final fsync, once nothing more will be queued.
    pub fn finish(&mut self) {
        if self.broken.is_none()
            && let Err(e) = self.fsync()
        {
            tracing::error!(error = %e, "WAL: the final fsync failed");
        }
    }

    /// `first` and every request already waiting behind it, up to a batch's limits.
    fn batch_from(&mut self, first: Op) -> Vec<Op> {
        let mut weight = first.weight();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH && weight < MAX_BATCH_BYTES {
            match self.rx.try_recv() {
                Ok(op) => {
                    weight += op.weight();
                    batch.push(op);
                }
                Err(_) => break,
            }
        }
        batch
    }

    fn path(&self) -> PathBuf {
        segment_path(&self.shared.dir, self.active)
    }

    /// An I/O error of the active segment. The path is formatted only when
    /// there is an error: every flush and sync ends in one of these.
    fn io_error(&self) -> impl FnOnce(std::io::Error) -> WalError + '_ {
        move |source| WalError::Io { path: self.path(), source }
    }

    fn broken_error(&self) -> Option<WalError> {
        self.broken.as_ref().map(|(path, reason)| WalError::Broken { path: path.clone(), reason: reason.clone() })
    }

    fn fail(&mut self, e: &WalError) {
        tracing::error!(error = %e, "WAL: write failed; the journal refuses further writes until reopened");
        self.broken = Some((self.path(), e.to_string()));
        self.buf.clear();
        self.pending.clear();
        self.pending_frames = 0;
    }

    fn write_batch(&mut self, batch: Vec<Op>) {
        let mut dones: Vec<(Done, Result<(), WalError>)> = Vec::with_capacity(batch.len());
        let mut need_sync = false;
        let written_before = self.shared.stats.frames_written.load(Ordering::Relaxed);
        for op in batch {
            if let Some(e) = self.broken_error() {
                dones.push((op.into_done(), Err(e)));
                continue;
            }
            let (done, result) = match self.encode(op, &mut need_sync) {
                Ok(done) => (done, Ok(())),
                Err((done, e)) => (done, Err(e)),
            };
            dones.push((done, result));
        }
        if self.broken.is_none() {
            let flushed = self.flush().and_then(|()| if need_sync { self.fsync() } else { Ok(()) });
            if let Err(e) = flushed {
                self.fail(&e);
            } else {
                self.reclaim();
            }
        }
        if self.shared.stats.frames_written.load(Ordering::Relaxed) != written_before {
            self.shared.stats.batches_written.fetch_add(1, Ordering::Relaxed);
        }
        if self.buf.capacity() > MAX_BATCH_BYTES {
            self.buf = Vec::new();
        }
        let failed = self.broken_error().map(|e| e.to_string());
        for (done, mut result) in dones {
            if let (Some(reason), Ok(())) = (&failed, &result) {
                let path = self.broken.as_ref().map(|(p, _)| p.clone()).unwrap_or_default();
                result = Err(WalError::Broken { path, reason: reason.clone() });
            }
            if std::panic::catch_unwind(AssertUnwindSafe(move || done(result))).is_err() {
                tracing::error!("WAL: a completion callback panicked (ignored)");
            }
        }
    }

    /// Encodes one request into the batch. Err carries the request's own
    /// refusal (nothing of it was encoded) or the error that broke the writer.
    fn encode(&mut self, op: Op, need_sync: &mut bool) -> Result<Done, (Done, WalError)> {
        match op {
            Op::Append { group, entries, sync, done } => {
                if let Err(e) = check_append(group, &entries) {
                    return Err((done, e));
                }
                for (i, payload) in &entries {
                    let len = payload.len() as u32;
                    let r = self.put(FrameKind::Entry, group, *i, payload, |loc| Change::Entry {
                        group,
                        index: *i,
                        loc: Loc { len, ..loc },
                    });
                    if let Err(e) = r {
                        return Err((done, e));
                    }
                }
                *need_sync |= sync || (self.fsync_always && !entries.is_empty());
                Ok(done)
            }
            Op::State { group, slot, value, done } => {
                if value.len() > MAX_PAYLOAD {
                    return Err((done, too_large("state value", group, value.len())));
                }
                let change = Change::State { group, slot, value: value.clone() };
                if let Err(e) = self.put(FrameKind::State, group, u64::from(slot), &value, |_| change) {
                    return Err((done, e));
                }
                *need_sync = true;
                Ok(done)
            }
            Op::Truncate { group, since, done } => {
                if let Err(e) = self.put(FrameKind::Truncate, group, since, &[], |_| Change::Truncate { group, since })
                {
                    return Err((done, e));
                }
                *need_sync |= self.fsync_always;
                Ok(done)
            }
            Op::Purge { group, upto, marker, done } => {
                if marker.len() > MAX_PAYLOAD {
                    return Err((done, too_large("purge marker", group, marker.len())));
                }
                let change = Change::Purge { group, upto, marker: marker.clone() };
                if let Err(e) = self.put(FrameKind::Purge, group, upto, &marker, |_| change) {
                    return Err((done, e));
                }
                *need_sync |= self.fsync_always;
                Ok(done)
            }
            Op::Sync { done } | Op::Close { done } => {
                *need_sync = true;
                Ok(done)
            }
            Op::Compact { limits, done } => match self.compact(limits) {
                // Copies are made durable before reclaim deletes the originals.
                Ok(copied) => {
                    *need_sync |= copied;
                    Ok(done)
                }
                Err(e) => Err((done, e)),
            },
        }
    }

    /// One compaction pass (spec/35 "Deleted data"): seals the active
    /// segment once it held dead entries for `min_age`, then copies the
    /// whole live runs of the groups that keep the oldest such segments
    /// into the newest one, so that reclaim, after this batch, deletes
    /// them. Groups whose run is too large to copy are published as
    /// lagging for the snapshot driver. Returns whether anything was copied.
    fn compact(&mut self, limits: crate::CompactLimits) -> Result<bool, WalError> {
        // The plan must see every frame this batch encoded before it.
        if let Err(e) = self.flush() {
            self.fail(&e);
            return Err(e);
        }
        let now = Instant::now();
        self.note_dirty(now);
        if self.aged(self.active, now, limits.min_age) && self.len > self.checkpoint_len {
            if let Err(e) = self.rotate().and_then(|()| self.flush()) {
                self.fail(&e);
                return Err(e);
            }
            self.note_dirty(now);
        }
        let plan = self
            .shared
            .lock_index()
            .plan_compaction(limits.budget, limits.lagging_over, |seq| self.aged(seq, now, limits.min_age));
        self.shared.publish_lagging(plan.lagging, plan.pinned_segments);
        // Every payload is read before any is written: a failed read copies nothing.
        let mut runs = Vec::new();
        for (group, first, locs) in plan.copy {
            let mut run = Vec::with_capacity(locs.len());
            for (k, loc) in locs.into_iter().enumerate() {
                let index = first.saturating_add(k as u64);
                match self.shared.read_at(group, index, loc)? {
                    Some(payload) => run.push(payload),
                    None => {
                        return Err(WalError::Invalid(format!("entry {index} of group {group} moved while copied")));
                    }
                }
            }
            runs.push((group, first, run));
        }
        let copied = !runs.is_empty();
        for (group, first, run) in runs {
            let last = first.saturating_add(run.len() as u64 - 1);
            // A run and its CopyEnd share one segment: were a rotation to
            // split them, purging the group past the head copies could
            // reclaim the segment holding them and leave a CopyEnd that
            // recovery cannot apply. So rotate before a run that would not
            // fit, and never inside one (the segment may end a little long).
            let run_bytes: u64 =
                run.iter().map(|p| (frame::HEADER + p.len()) as u64).sum::<u64>() + (frame::HEADER + 8) as u64;
            self.rotate_if_full(run_bytes)?;
            for (k, payload) in run.into_iter().enumerate() {
                let index = first.saturating_add(k as u64);
                let len = payload.len() as u32;
                self.encode_frame(FrameKind::Copy, group, index, &payload, |loc| Change::Copied {
                    group,
                    index,
                    loc: Loc { len, ..loc },
                });
                self.shared.stats.rewritten_bytes.fetch_add(u64::from(len), Ordering::Relaxed);
            }
            self.encode_frame(FrameKind::CopyEnd, group, first, &last.to_le_bytes(), |_| Change::CopyEnd {
                group,
                first,
                last,
            });
        }
        Ok(copied)
    }

    /// Starts the age of every segment newly found dirty.
    fn note_dirty(&mut self, now: Instant) {
        let dirty: Vec<u64> =
            self.shared.lock_index().segments.iter().filter(|(_, s)| s.dirty()).map(|(q, _)| *q).collect();
        self.dirty_since.retain(|seq, _| dirty.contains(seq));
        for seq in dirty {
            if !self.dirty_since.contains_key(&seq) {
                let since = if self.first_pass { self.changed_at(seq, now) } else { now };
                self.dirty_since.insert(seq, since);
            }
        }
        self.first_pass = false;
    }

    /// When a segment's file last changed, on the monotonic clock.
    fn changed_at(&self, seq: u64, now: Instant) -> Instant {
        let age = fs::metadata(segment_path(&self.shared.dir, seq))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .unwrap_or_default();
        now.checked_sub(age).unwrap_or(now)
    }

    fn aged(&self, seq: u64, now: Instant, min_age: Duration) -> bool {
        self.dirty_since.get(&seq).is_some_and(|since| now.saturating_duration_since(*since) >= min_age)
    }

    /// Adds one frame to the batch, rotating first when the active segment is full.
    fn put(
        &mut self,
        kind: FrameKind,
        group: u32,
        index: u64,
        payload: &[u8],
        change: impl FnOnce(Loc) -> Change,
    ) -> Result<(), WalError> {
        self.rotate_if_full(0)?;
        self.encode_frame(kind, group, index, payload, change);
        Ok(())
    }

    /// Rotates when the active segment, grown by `coming` bytes, would
    /// pass its size (a segment holding only its checkpoint never rotates).
    fn rotate_if_full(&mut self, coming: u64) -> Result<(), WalError> {
        let filled = self.len + self.buf.len() as u64;
        let limit = self.segment_size.max(self.checkpoint_len.saturating_mul(2));
        let full = if coming == 0 { filled >= limit } else { filled.saturating_add(coming) > limit };
        if full
            && filled > self.checkpoint_len
            && let Err(e) = self.rotate()
        {
            self.fail(&e);
            return Err(self.broken_error().unwrap_or(e));
        }
        Ok(())
    }

    /// Adds one frame to the batch in the active segment.
    fn encode_frame(
        &mut self,
        kind: FrameKind,
        group: u32,
        index: u64,
        payload: &[u8],
        change: impl FnOnce(Loc) -> Change,
    ) {
        let offset = self.len + self.buf.len() as u64;
        frame::encode(&mut self.buf, kind, group, index, payload);
        self.pending.push(change(Loc { segment: self.active, offset, len: 0 }));
        self.pending_frames += 1;
    }

    /// Writes the buffered frames to the active segment and applies their
    /// index changes (so they are readable from here on).
    fn flush(&mut self) -> Result<(), WalError> {
        if self.buf.is_empty() && self.pending.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.buf).map_err(self.io_error())?;
        let n = self.buf.len() as u64;
        self.len += n;
        self.dirty |= n > 0;
        self.buf.clear();
        let mut index = self.shared.lock_index();
        index.grow(self.active, n);
        for change in self.pending.drain(..) {
            change.apply(&mut index);
        }
        let stats = &self.shared.stats;
        stats.frames_written.fetch_add(std::mem::take(&mut self.pending_frames), Ordering::Relaxed);
        stats.bytes_on_disk.store(index.bytes_on_disk(), Ordering::Relaxed);
        Ok(())
    }

    /// Makes everything written so far durable: the directory (new and
    /// deleted segments), then the active segment (older segments were
    /// synced when they were sealed).
    fn fsync(&mut self) -> Result<(), WalError> {
        if !self.dirty && !self.dir_dirty {
            return Ok(());
        }
        if self.dir_dirty {
            sync_dir(&self.shared.dir)?;
            self.dir_dirty = false;
        }
        if self.dirty {
            self.file.sync_data().map_err(self.io_error())?;
            self.dirty = false;
        }
        self.shared.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Starts the next segment with a checkpoint, after flushing what the
    /// batch encoded so far into the old one.
    fn rotate(&mut self) -> Result<(), WalError> {
        self.flush()?;
        let old_path = self.path();
        let next = self.active.checked_add(1).ok_or_else(|| WalError::Corrupt {
            segment: old_path.clone(),
            offset: 0,
            reason: "no segment number after this one".into(),
        })?;
        if self.dirty {
            // The new segment must never be durable while the old one's
            // tail is not: after a power loss that would read as damage in a
            // sealed segment, which recovery refuses, where spec/35 has a
            // node under `Never` start from the frames that verify. So the
            // old tail is synced under every policy (once per segment).
            self.file.sync_data().map_err(WalError::io(&old_path))?;
            self.shared.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.dirty = false;
        }
        let path = segment_path(&self.shared.dir, next);
        let file = OpenOptions::new().create_new(true).append(true).open(&path).map_err(WalError::io(&path))?;
        self.file = file;
        self.active = next;
        self.len = 0;
        self.dirty = false;
        self.dir_dirty = true;
        let stats = &self.shared.stats;
        stats.rotations.fetch_add(1, Ordering::Relaxed);
        let mut index = self.shared.lock_index();
        index.add_segment(next);
        stats.segments.store(index.segments.len() as u64, Ordering::Relaxed);
        for (group, g) in &index.groups {
            for (slot, value) in &g.slots {
                frame::encode(&mut self.buf, FrameKind::State, *group, u64::from(*slot), value);
                self.pending_frames += 1;
            }
            if let Some((upto, marker)) = &g.purged {
                frame::encode(&mut self.buf, FrameKind::Purge, *group, *upto, marker);
                self.pending_frames += 1;
            }
        }
        drop(index);
        frame::encode(&mut self.buf, FrameKind::Checkpoint, 0, next, &[]);
        self.pending_frames += 1;
        self.pending.push(Change::Checkpoint(next));
        self.checkpoint_len = self.buf.len() as u64;
        Ok(())
    }

    /// Deletes the oldest segments no group needs any more.
    fn reclaim(&mut self) {
        let dead = self.shared.lock_index().dead_prefix();
        if dead.is_empty() {
            return;
        }
        // The checkpoint that carries the dead segments' slots and purge
        // records (and the newer segments' names) must be on disk before
        // they go: with `Never`, or after a pass that sealed a segment and
        // copied nothing, it may not be yet.
        if let Err(e) = self.fsync() {
            self.fail(&e);
            return;
        }
        let started = Instant::now();
        self.reclaim_segments(dead);
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.shared.stats.reclaim_ns.fetch_add(took, Ordering::Relaxed);
    }

    fn reclaim_segments(&mut self, dead: Vec<u64>) {
        for seq in dead {
            let path = segment_path(&self.shared.dir, seq);
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(segment = %path.display(), error = %e, "WAL: cannot delete a reclaimed segment");
                self.shared.stats.reclaim_failures.fetch_add(1, Ordering::Relaxed);
                return;
            }
            {
                let mut index = self.shared.lock_index();
                let bytes = index.segments.get(&seq).map_or(0, |s| s.bytes);
                index.remove_segment(seq);
                let stats = &self.shared.stats;
                stats.reclaimed_bytes.fetch_add(bytes, Ordering::Relaxed);
                stats.bytes_on_disk.store(index.bytes_on_disk(), Ordering::Relaxed);
                stats.segments.store(index.segments.len() as u64, Ordering::Relaxed);
                stats.reclaimed_segments.fetch_add(1, Ordering::Relaxed);
            }
            // After the index forgets the segment, so a reader cannot cache it again.
            self.shared.lock_readers().remove(&seq);
            self.dir_dirty = true;
        }
    }
}

fn too_large(what: &str, group: u32, len: usize) -> WalError {
    WalError::Invalid(format!("{what} of group {group} is {len} bytes; a frame holds at most {MAX_PAYLOAD}"))
}

/// An append's own entries must fit in frames and be contiguous.
fn check_append(group: u32, entries: &[(u64, Bytes)]) -> Result<(), WalError> {
    for (k, (i, payload)) in entries.iter().enumerate() {
        if payload.len() > MAX_PAYLOAD {
            return Err(too_large(&format!("entry {i}"), group, payload.len()));
        }
        if let Some((next, _)) = entries.get(k + 1)
            && i.checked_add(1) != Some(*next)
        {
            return Err(WalError::Invalid(format!(
                "append to group {group}: entry {next} follows entry {i}; indices must be contiguous"
            )));
        }
    }
    Ok(())
}
