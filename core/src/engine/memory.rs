//! The in-memory group engine of the development node: each group is a
//! store behind its own lock, so groups never contend with each other.
//! Nothing survives a restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use ursula_stream::{ApplyCtx, Command, Incarnation, Offset, Outcome, StreamKey, StreamStore};

use super::{EngineError, GroupEngine, Waited};
use crate::routing::GroupId;

struct GroupState {
    store: StreamStore,
    last_index: u64,
    /// Live readers waiting on a stream; woken by any write to it.
    watchers: HashMap<StreamKey, watch::Sender<u64>>,
}

pub struct MemoryEngine {
    groups: Vec<Mutex<GroupState>>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn touched(command: &Command) -> Option<&StreamKey> {
    match command {
        Command::Create(c) => Some(&c.key),
        Command::Append(c) => Some(&c.key),
        Command::Delete(c) => Some(&c.key),
        Command::PublishSnapshot(c) => Some(&c.key),
        Command::AdvanceRetention(c) => Some(&c.key),
        Command::Renew(_) | Command::Sweep => None,
    }
}

impl MemoryEngine {
    pub fn new(group_count: u32) -> MemoryEngine {
        let group = || {
            // Each group's history begins now: a random id keeps its tokens
            // apart from those of any earlier run.
            Mutex::new(GroupState {
                store: StreamStore::new(fastrand::u64(..)),
                last_index: 0,
                watchers: HashMap::new(),
            })
        };
        MemoryEngine { groups: (0..group_count.max(1)).map(|_| group()).collect() }
    }

    fn group(&self, group: GroupId) -> Result<std::sync::MutexGuard<'_, GroupState>, EngineError> {
        let lock = self.groups.get(group.0 as usize).ok_or(EngineError::UnknownGroup(group))?;
        // A panic while holding the lock cannot leave a half-applied command
        // (apply has no partial writes), so a poisoned lock is still usable.
        Ok(lock.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl GroupEngine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }

    async fn propose(&self, group: GroupId, command: Command) -> Result<Outcome, EngineError> {
        let mut state = self.group(group)?;
        state.last_index += 1;
        let ctx = ApplyCtx { now_ms: now_ms(), log_index: state.last_index };
        // Only a stream someone waits on needs its key kept for the wake-up.
        let key = if state.watchers.is_empty() { None } else { touched(&command).cloned() };
        let outcome = state.store.apply(command, ctx);
        if let Some(key) = key
            && let Some(tx) = state.watchers.get(&key)
        {
            tx.send_modify(|v| *v += 1);
            if tx.receiver_count() == 0 {
                state.watchers.remove(&key);
            }
        }
        Ok(outcome)
    }

    fn query<R: Send>(&self, group: GroupId, f: impl FnOnce(&StreamStore, u64) -> R + Send) -> Result<R, EngineError> {
        let state = self.group(group)?;
        Ok(f(&state.store, now_ms()))
    }

    async fn wait(
        &self,
        group: GroupId,
        key: &StreamKey,
        incarnation: Incarnation,
        offset: Offset,
        timeout: Duration,
    ) -> Result<Waited, EngineError> {
        let mut rx = {
            let mut state = self.group(group)?;
            let moved = match state.store.live(key, now_ms()) {
                None => true,
                Some(s) => s.incarnation != incarnation || s.closed || s.data.tail() > offset,
            };
            if moved {
                return Ok(Waited::Changed);
            }
            state.watchers.entry(key.clone()).or_insert_with(|| watch::channel(0).0).subscribe()
        };
        let waited = match tokio::time::timeout(timeout, rx.changed()).await {
            Ok(_) => Waited::Changed,
            Err(_) => Waited::TimedOut,
        };
        drop(rx);
        let mut state = self.group(group)?;
        if state.watchers.get(key).is_some_and(|tx| tx.receiver_count() == 0) {
            state.watchers.remove(key);
        }
        Ok(waited)
    }
}
