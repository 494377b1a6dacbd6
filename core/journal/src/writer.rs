//! The journal's one writer thread. It takes every request that is
//! waiting (group commit), encodes them into one buffer, writes it with one
//! `write_all`, fsyncs once when any request needs it, and only then runs
//! the callbacks. Segments rotate at `segment_size`; a new segment opens
//! with a checkpoint of every group's slots and purge record, so older
//! segments matter only for the entries they hold, and those are deleted
//! oldest first once no group has a live entry in them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;

use bytes::Bytes;

use crate::error::WalError;
use crate::frame::{self, FrameKind};
use crate::index::Loc;
use crate::recover::segment_path;
use crate::{Done, Shared};

pub enum Op {
    Append { group: u32, entries: Vec<(u64, Bytes)>, sync: bool, done: Done },
    State { group: u32, slot: u8, value: Bytes, done: Done },
    Truncate { group: u32, since: u64, done: Done },
    Purge { group: u32, upto: u64, marker: Bytes, done: Done },
    Sync { done: Done },
    Close { done: Done },
}

/// Requests taken into one batch at most.
const MAX_BATCH: usize = 4096;

pub struct Writer {
    pub shared: Arc<Shared>,
    pub rx: Receiver<Op>,
    pub fsync_always: bool,
    pub segment_size: u64,
    pub active: u64,
    pub file: File,
    pub len: u64,
    /// Set once a write failed: the file's tail is unknown, so nothing more is accepted.
    pub broken: Option<String>,
}

impl Writer {
    pub fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match self.rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            if self.write_batch(batch) {
                return;
            }
        }
        // Every handle is gone: leave what was written on stable storage.
        let _ = self.file.sync_data();
    }

    fn failed(&self) -> WalError {
        let path = segment_path(&self.shared.dir, self.active);
        WalError::Io { path, source: std::io::Error::other(self.broken.clone().unwrap_or_default()) }
    }

    /// Writes one batch; true once a `Close` was in it.
    fn write_batch(&mut self, batch: Vec<Op>) -> bool {
        let mut buf = Vec::new();
        let mut need_sync = false;
        let mut closing = false;
        let mut dones = Vec::with_capacity(batch.len());
        let mut frames = 0u64;
        let mut result = Ok(());
        for op in batch {
            if self.broken.is_none()
                && let Err(e) = self.maybe_rotate(&mut buf)
            {
                self.broken = Some(e.to_string());
                result = Err(());
            }
            let mut index = self.shared.lock_index();
            match op {
                Op::Append { group, entries, sync, done } => {
                    for (i, payload) in &entries {
                        let offset = self.len + buf.len() as u64;
                        frame::encode(&mut buf, FrameKind::Entry, group, *i, payload);
                        index.append(group, *i, Loc { segment: self.active, offset, len: payload.len() as u32 });
                        frames += 1;
                    }
                    need_sync |= sync || (self.fsync_always && !entries.is_empty());
                    dones.push(done);
                }
                Op::State { group, slot, value, done } => {
                    frame::encode(&mut buf, FrameKind::State, group, u64::from(slot), &value);
                    index.set_state(group, slot, value);
                    frames += 1;
                    need_sync = true;
                    dones.push(done);
                }
                Op::Truncate { group, since, done } => {
                    frame::encode(&mut buf, FrameKind::Truncate, group, since, &[]);
                    index.truncate(group, since);
                    frames += 1;
                    need_sync |= self.fsync_always;
                    dones.push(done);
                }
                Op::Purge { group, upto, marker, done } => {
                    frame::encode(&mut buf, FrameKind::Purge, group, upto, &marker);
                    index.purge(group, upto, marker);
                    frames += 1;
                    need_sync |= self.fsync_always;
                    dones.push(done);
                }
                Op::Sync { done } => {
                    need_sync = true;
                    dones.push(done);
                }
                Op::Close { done } => {
                    need_sync = true;
                    closing = true;
                    dones.push(done);
                }
            }
        }
        if self.broken.is_none() {
            if let Err(e) =
                self.file.write_all(&buf).and_then(|()| if need_sync { self.file.sync_data() } else { Ok(()) })
            {
                self.broken = Some(e.to_string());
                result = Err(());
            } else {
                self.len += buf.len() as u64;
                let stats = &self.shared.stats;
                stats.bytes_on_disk.fetch_add(buf.len() as u64, Ordering::Relaxed);
                stats.frames_written.fetch_add(frames, Ordering::Relaxed);
                stats.batches_written.fetch_add(1, Ordering::Relaxed);
                if need_sync {
                    stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            result = Err(());
        }
        for done in dones {
            done(if result.is_ok() { Ok(()) } else { Err(self.failed()) });
        }
        if result.is_ok() {
            self.reclaim();
        }
        closing
    }

    /// Starts a new segment once the active one is full, flushing what the
    /// batch encoded so far into the old one first.
    fn maybe_rotate(&mut self, buf: &mut Vec<u8>) -> Result<(), WalError> {
        if self.len + (buf.len() as u64) < self.segment_size {
            return Ok(());
        }
        let old = segment_path(&self.shared.dir, self.active);
        self.file.write_all(buf).map_err(WalError::io(&old))?;
        // With fsync=never a full segment is left to the page cache: syncing
        // 64 MiB here would stall every group's writes behind it.
        if self.fsync_always {
            self.file.sync_data().map_err(WalError::io(&old))?;
        }
        self.shared.stats.bytes_on_disk.fetch_add(buf.len() as u64, Ordering::Relaxed);
        buf.clear();
        let next = self.active + 1;
        let path = segment_path(&self.shared.dir, next);
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(WalError::io(&path))?;
        File::open(&self.shared.dir).and_then(|d| d.sync_all()).map_err(WalError::io(&self.shared.dir))?;
        self.file = file;
        self.active = next;
        self.len = 0;
        let stats = &self.shared.stats;
        stats.segments.fetch_add(1, Ordering::Relaxed);
        stats.rotations.fetch_add(1, Ordering::Relaxed);
        let mut index = self.shared.lock_index();
        index.add_segment(next);
        for (group, g) in &index.groups {
            for (slot, value) in &g.slots {
                frame::encode(buf, FrameKind::State, *group, u64::from(*slot), value);
            }
            if let Some((upto, marker)) = &g.purged {
                frame::encode(buf, FrameKind::Purge, *group, *upto, marker);
            }
        }
        Ok(())
    }

    /// Deletes the oldest segments no group needs any more.
    fn reclaim(&mut self) {
        let dead = self.shared.lock_index().dead_prefix(self.active);
        for seq in dead {
            let path = segment_path(&self.shared.dir, seq);
            let size = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(segment = %path.display(), error = %e, "cannot delete a reclaimed WAL segment");
                return;
            }
            self.shared.lock_index().live.remove(&seq);
            self.shared.lock_readers().remove(&seq);
            let stats = &self.shared.stats;
            stats.bytes_on_disk.fetch_sub(size.min(stats.bytes_on_disk.load(Ordering::Relaxed)), Ordering::Relaxed);
            stats.segments.fetch_sub(1, Ordering::Relaxed);
            stats.reclaimed_segments.fetch_add(1, Ordering::Relaxed);
        }
    }
}
