//! A group's applied state as both engines hold it: the stream store and
//! the live readers waiting on its streams. Applying a command wakes the
//! readers of the stream it touched.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use ursula_stream::{ApplyCtx, Command, Incarnation, Offset, Outcome, StreamKey, StreamStore};

use super::Waited;

pub struct GroupState {
    pub store: StreamStore,
    /// Live readers waiting on a stream; woken by any write to it.
    watchers: HashMap<StreamKey, watch::Sender<u64>>,
    /// Commands applied here and the time their applies took (spec/37:
    /// `ursula.mutations.applied`, `ursula.raft_apply.ns`).
    pub mutations_applied: u64,
    pub apply_ns: u64,
}

fn touched(command: &Command) -> Option<&StreamKey> {
    match command {
        Command::Create(c) => Some(&c.key),
        Command::Append(c) => Some(&c.key),
        Command::Delete(c) => Some(&c.key),
        Command::PublishSnapshot(c) => Some(&c.key),
        Command::AdvanceRetention(c) => Some(&c.key),
        Command::CreateFork(c) => Some(&c.create.key),
        // A soft-deleted source's collection wakes no reader: it had none to serve.
        Command::ReferenceSource(_) | Command::ReleaseSource(_) => None,
        // Moving bytes to the cold tier, or between its objects, changes
        // nothing a reader waits for.
        // A purge or an import wakes every reader (below): they touch many streams.
        Command::Renew(_)
        | Command::Sweep
        | Command::ExpireStreams(_)
        | Command::CommitCold(_)
        | Command::CompactCold(_)
        | Command::PurgeBucket(_)
        | Command::Import(_)
        | Command::AcceptLoss(_) => None,
    }
}

impl GroupState {
    pub fn new(store: StreamStore) -> GroupState {
        GroupState { store, watchers: HashMap::new(), mutations_applied: 0, apply_ns: 0 }
    }

    pub fn apply(&mut self, command: Command, ctx: ApplyCtx) -> Outcome {
        // Only a stream someone waits on needs its key kept for the wake-up.
        let key = if self.watchers.is_empty() { None } else { touched(&command).cloned() };
        // A new history ends every live read of an old token, as a purge does.
        let purge = matches!(command, Command::PurgeBucket(_) | Command::Import(_) | Command::AcceptLoss(_));
        let started = std::time::Instant::now();
        let outcome = self.store.apply(command, ctx);
        self.apply_ns += u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.mutations_applied += 1;
        if purge {
            self.wake_all();
        }
        if let Some(key) = key
            && let Some(tx) = self.watchers.get(&key)
        {
            tx.send_modify(|v| *v += 1);
            if tx.receiver_count() == 0 {
                self.watchers.remove(&key);
            }
        }
        outcome
    }

    /// Wakes every reader, e.g. when the whole store was replaced by a snapshot.
    pub fn wake_all(&mut self) {
        for tx in self.watchers.values() {
            tx.send_modify(|v| *v += 1);
        }
    }
}

/// Locks a group; a panic while holding the lock cannot leave a
/// half-applied command (apply has no partial writes), so a poisoned lock
/// is still usable.
pub fn lock(state: &Mutex<GroupState>) -> MutexGuard<'_, GroupState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Resolves when the stream at `key` is no longer `incarnation` at or
/// below `offset`, or after `timeout`.
pub async fn wait(
    state: &Mutex<GroupState>,
    key: &StreamKey,
    incarnation: Incarnation,
    offset: Offset,
    now_ms: u64,
    timeout: Duration,
) -> Waited {
    let mut rx = {
        let mut g = lock(state);
        let moved = match g.store.live(key, now_ms) {
            None => true,
            Some(s) => s.incarnation != incarnation || s.closed || s.data.tail() > offset,
        };
        if moved {
            return Waited::Changed;
        }
        g.watchers.entry(key.clone()).or_insert_with(|| watch::channel(0).0).subscribe()
    };
    let waited = match tokio::time::timeout(timeout, rx.changed()).await {
        Ok(_) => Waited::Changed,
        Err(_) => Waited::TimedOut,
    };
    drop(rx);
    let mut g = lock(state);
    if g.watchers.get(key).is_some_and(|tx| tx.receiver_count() == 0) {
        g.watchers.remove(key);
    }
    waited
}
