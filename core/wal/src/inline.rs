//! The writer run on the callers' threads instead of its own (`Wal::open_inline`):
//! a request is written, and its callback run, before the call that queued
//! it returns, unless another thread is writing, which then writes it too.
//! A deterministic simulation needs this (a writer thread's timing would
//! decide the order in which the simulated voters see their writes
//! complete), and so does a node with `Fsync::Never`, whose appends are
//! copies into the page cache: handing each to a thread and back cost more
//! than the write.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Mutex, TryLockError};

use crate::writer::Writer;

thread_local! {
    /// Set while this thread runs the writer (and so its callbacks).
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

pub(crate) struct InlineWriter {
    writer: Mutex<Option<Writer>>,
    /// Requests sent less requests taken by a drain. A request is counted
    /// after it is sent, so a drain may take it first and the count dip
    /// below zero for a moment; above zero, something waits in the queue.
    queued: AtomicIsize,
}

impl InlineWriter {
    pub(crate) fn new(writer: Writer) -> InlineWriter {
        InlineWriter { writer: Mutex::new(Some(writer)), queued: AtomicIsize::new(0) }
    }

    /// Counts a request just sent.
    pub(crate) fn queued(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether this thread is inside the writer (a callback).
    pub(crate) fn writing_here() -> bool {
        WRITING.with(Cell::get)
    }

    /// Writes what is queued. A callback that queues more is served by the
    /// drain it runs in; a thread that finds the writer busy leaves its
    /// request to the thread that holds it, which looks at the count again
    /// each time it lets go, so a request sent while it drained is never
    /// left behind.
    pub(crate) fn run_queued(&self) {
        while self.queued.load(Ordering::SeqCst) > 0 {
            let mut guard = match self.writer.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            let Some(writer) = guard.as_mut() else { return };
            WRITING.with(|w| w.set(true));
            let taken = writer.drain();
            WRITING.with(|w| w.set(false));
            self.queued.fetch_sub(taken as isize, Ordering::SeqCst);
        }
    }

    /// Stops the writer: its final fsync, and the directory lock released.
    pub(crate) fn stop(&self) {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(mut writer) = writer {
            writer.finish();
        }
    }
}
