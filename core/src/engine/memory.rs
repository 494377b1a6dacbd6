//! The in-memory group engine of the development node: each group is a
//! store behind its own lock, so groups never contend with each other.
//! Nothing survives a restart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ursula_stream::{ApplyCtx, Command, Outcome, StreamStore};

use super::group_state::{self, GroupState};
use super::{EngineError, GroupEngine};
use crate::clock::Clock;
use ursula_stream::routing::GroupId;

struct MemoryGroup {
    state: Mutex<GroupState>,
    /// Advanced under the state lock, so indices follow apply order.
    last_index: AtomicU64,
}

pub struct MemoryEngine {
    groups: Vec<MemoryGroup>,
    clock: Arc<dyn Clock>,
}

impl MemoryEngine {
    pub fn new(group_count: u32, clock: Arc<dyn Clock>) -> MemoryEngine {
        let group = || MemoryGroup {
            // Each group's history begins now: a random id keeps its tokens
            // apart from those of any earlier run.
            state: Mutex::new(GroupState::new(StreamStore::new(fastrand::u64(..)))),
            last_index: AtomicU64::new(0),
        };
        MemoryEngine { groups: (0..group_count.max(1)).map(|_| group()).collect(), clock }
    }

    fn group(&self, group: GroupId) -> Result<&MemoryGroup, EngineError> {
        self.groups.get(group.0 as usize).ok_or(EngineError::UnknownGroup(group))
    }
}

impl GroupEngine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }

    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    async fn propose(&self, group: GroupId, command: Command) -> Result<Outcome, EngineError> {
        let g = self.group(group)?;
        let mut state = group_state::lock(&g.state);
        let log_index = g.last_index.fetch_add(1, Ordering::Relaxed) + 1;
        let ctx = ApplyCtx { now_ms: self.clock.now_ms(), log_index };
        Ok(state.apply(command, ctx))
    }

    fn state(&self, group: GroupId) -> Result<&Mutex<GroupState>, EngineError> {
        Ok(&self.group(group)?.state)
    }
}
