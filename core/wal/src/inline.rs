//! The writer run on the callers' threads instead of its own (`Wal::open_inline`):
//! a request is written, and its callback run, before the call that queued
//! it returns, unless another thread is writing, which then writes it too.
//! A deterministic simulation needs this (a writer thread's timing would
//! decide the order in which the simulated voters see their writes
//! complete), and so does a node with `Fsync::Never`, whose appends are
//! copies into the page cache: handing each to a thread and back cost more
//! than the write.
//!
//! Large writes are the exception (`Wal::open_inline_with_helper`): copying
//! a 32 MiB entry held a voter's Raft thread, and with it every group's
//! heartbeats and answers, for hundreds of milliseconds on a loaded host.
//! Such a request is left to a helper thread, and so is every request
//! queued after it until the helper has drained them (the caller would
//! otherwise take the writer first and write the large one itself).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, TryLockError, Weak};
use std::thread::JoinHandle;

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
    helper: Option<Helper>,
}

/// The thread that writes what is too large for a caller's thread.
struct Helper {
    /// Requests at least this heavy (payloads and frame headers) go to it.
    from_weight: usize,
    signal: Arc<Signal>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Between the callers and the helper.
#[derive(Default)]
struct Signal {
    /// Set (under `wake`) from a hand-off until a drain of the helper ends
    /// with no hand-off pending: meanwhile every request goes to the helper.
    handed: AtomicBool,
    wake: Mutex<Wake>,
    woken: Condvar,
}

#[derive(Default)]
struct Wake {
    pending: bool,
    stop: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl InlineWriter {
    /// The writer, with requests of `large` bytes or more (payloads and
    /// frame headers) written on a helper thread when it is set.
    pub(crate) fn new(writer: Writer, large: Option<usize>) -> std::io::Result<Arc<InlineWriter>> {
        let signal = Arc::new(Signal::default());
        let helper = large.map(|from_weight| Helper { from_weight, signal: signal.clone(), thread: Mutex::new(None) });
        let inline = Arc::new(InlineWriter { writer: Mutex::new(Some(writer)), queued: AtomicIsize::new(0), helper });
        if let Some(h) = &inline.helper {
            let weak = Arc::downgrade(&inline);
            let thread =
                std::thread::Builder::new().name("ursula-wal-large".into()).spawn(move || help(&signal, &weak))?;
            *lock(&h.thread) = Some(thread);
        }
        Ok(inline)
    }

    /// Whether a request's weight decides where it is written.
    pub(crate) fn hands_off(&self) -> bool {
        self.helper.is_some()
    }

    /// Counts a request just sent.
    pub(crate) fn queued(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether this thread is inside the writer (a callback).
    pub(crate) fn writing_here() -> bool {
        WRITING.with(Cell::get)
    }

    /// Writes what is queued, or leaves it to the helper when the request
    /// just sent weighs `weight` bytes or more or the helper has such a
    /// request to write. A callback (on whichever thread) queues into the
    /// drain it runs in.
    pub(crate) fn run_or_hand_off(&self, weight: usize) {
        if let Some(h) = &self.helper
            && !Self::writing_here()
            && (weight >= h.from_weight || h.signal.handed.load(Ordering::SeqCst))
        {
            let mut wake = lock(&h.signal.wake);
            h.signal.handed.store(true, Ordering::SeqCst);
            wake.pending = true;
            drop(wake);
            h.signal.woken.notify_one();
            return;
        }
        self.run_queued();
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

    /// Stops the writer: the helper joined once it drained what was handed
    /// to it, the final fsync, and the directory lock released. From inside
    /// a callback (the writer held on this thread) it only tells the
    /// helper to stop.
    pub(crate) fn stop(&self) {
        if let Some(h) = &self.helper {
            lock(&h.signal.wake).stop = true;
            h.signal.woken.notify_one();
            if Self::writing_here() {
                return;
            }
            if let Some(thread) = lock(&h.thread).take() {
                let _ = thread.join();
            }
        } else if Self::writing_here() {
            return;
        }
        let writer = lock(&self.writer).take();
        if let Some(mut writer) = writer {
            writer.finish();
        }
    }
}

/// The helper's loop: a drain per hand-off, until it is told to stop and
/// nothing is pending, or the writer is gone.
fn help(signal: &Signal, inline: &Weak<InlineWriter>) {
    loop {
        {
            let mut wake = lock(&signal.wake);
            while !wake.pending && !wake.stop {
                wake = signal.woken.wait(wake).unwrap_or_else(|p| p.into_inner());
            }
            if !wake.pending {
                return;
            }
            wake.pending = false;
        }
        let Some(writer) = inline.upgrade() else { return };
        writer.run_queued();
        drop(writer);
        let wake = lock(&signal.wake);
        if !wake.pending {
            signal.handed.store(false, Ordering::SeqCst);
        }
    }
}
