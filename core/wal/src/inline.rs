//! The writer run on the callers' threads instead of its own (`Wal::open_inline`):
//! a request is written, and its callback run, before the call that queued
//! it returns. A deterministic simulation needs this: a writer thread's
//! timing would decide the order in which the simulated voters see their
//! writes complete.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

use crate::writer::Writer;

thread_local! {
    /// Set while this thread runs the writer (and so its callbacks).
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

pub(crate) struct InlineWriter {
    writer: Mutex<Option<Writer>>,
    /// Requests sent and not yet taken by a drain.
    queued: AtomicUsize,
}

impl InlineWriter {
    pub(crate) fn new(writer: Writer) -> InlineWriter {
        InlineWriter { writer: Mutex::new(Some(writer)), queued: AtomicUsize::new(0) }
    }

    /// Counts a request about to be queued.
    pub(crate) fn queueing(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether this thread is inside the writer (a callback).
    pub(crate) fn writing_here() -> bool {
        WRITING.with(Cell::get)
    }

    /// Writes what is queued. A callback that queues more is served by the
    /// drain it runs in; a thread that finds the writer busy leaves its
    /// request to the thread that holds it, which drains until none is left.
    pub(crate) fn run_queued(&self) {
        while self.queued.load(Ordering::Acquire) > 0 {
            let mut guard = match self.writer.try_lock() {
                Ok(guard) => guard,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => return,
            };
            let Some(writer) = guard.as_mut() else { return };
            WRITING.with(|w| w.set(true));
            let taken = writer.drain();
            WRITING.with(|w| w.set(false));
            self.queued.fetch_sub(taken, Ordering::AcqRel);
            if taken == 0 {
                return;
            }
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
