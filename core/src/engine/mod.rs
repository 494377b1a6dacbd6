//! Group engines: where a group's commands are ordered and applied. The
//! in-memory engine applies at once; the Raft engine (the `raft` module) goes
//! through a replicated log. Both hold one `StreamStore` per group.

pub mod group_state;
mod memory;

use std::future::Future;
use std::sync::Mutex;

pub use memory::MemoryEngine;
use ursula_stream::{Command, ForkStep, Incarnation, Offset, Outcome, StreamKey, StreamStore};

use group_state::GroupState;

use crate::clock::Clock;

use ursula_stream::routing::GroupId;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("group {0:?} is not hosted here")]
    UnknownGroup(GroupId),
    /// The group has no leader here now; nothing was applied.
    #[error("group {0:?} has no leader")]
    NoLeader(GroupId),
    /// The WAL's filesystem is short of space; nothing was applied.
    #[error("the WAL filesystem is below raft.wal.min_available_size")]
    DiskPressure,
    /// A committed command failed to apply and stopped the group on this replica.
    #[error("group {0:?} stopped: a committed command failed to apply")]
    ApplyStopped(GroupId),
    /// The group holds a recovery plan whose history event has not applied here.
    #[error("group {0:?} starts a new history: its event has not applied")]
    HistoryPending(GroupId),
    /// The node's Raft log is over twice `raft.snapshot_log_budget`; nothing was applied.
    #[error("the Raft log is over twice raft.snapshot_log_budget")]
    LogPressure,
    /// The write was proposed, then the leadership was lost or the commit
    /// was not seen in time: it may have applied.
    #[error("group {0:?} lost the leadership after a proposal")]
    OutcomeUnknown(GroupId),
    /// The engine failed; a write's outcome is unknown.
    #[error("engine failure: {0}")]
    Fatal(String),
}

/// Who leads a group, as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This node leads, in `term` (0 for an engine without Raft).
    Local {
        term: u64,
    },
    Peer {
        id: u64,
        term: u64,
        client_url: String,
    },
    Unknown,
}

/// A leadership transfer the admin plane triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transferred {
    pub group: u32,
    pub from: u64,
    pub to: u64,
    pub term: u64,
}

/// Why a leadership transfer was not triggered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("raft group {0} is not registered on this node")]
    UnknownGroup(u32),
    #[error("this node does not lead raft group {group}")]
    NotLeader { group: u32, leader: Option<u64> },
    #[error("{0}")]
    InvalidTarget(&'static str),
    /// A voter of the group that cannot take it now (spec/34: `409` for a
    /// recovering target; spec/35: a handoff goes only to a voter that
    /// holds every committed entry).
    #[error("{0}")]
    TargetNotReady(&'static str),
    #[error("raft group {group} stopped: {why}")]
    Stopped { group: u32, why: String },
}

/// A node's leadership-shed state (spec/35 "Maintenance drain").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShedState {
    pub bits: u8,
    pub state: &'static str,
    pub should_accept_transfer: bool,
    pub should_campaign: bool,
    pub should_shed_current_leaders: bool,
}

/// A snapshot the admin plane asked for: the group's snapshot covers
/// everything it had applied when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SnapshotTaken {
    #[serde(rename = "raft_group_id")]
    pub group: u32,
    pub snapshot_index: u64,
}

/// A log purge asked of a group (`POST /__ursula/raft/{group}/purge?upto=N`):
/// through `purged_upto`, at most the group's last snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PurgeAsked {
    #[serde(rename = "raft_group_id")]
    pub group: u32,
    pub requested: u64,
    pub purged_upto: u64,
}

/// A group's voter set replaced (`POST /__ursula/raft/{group}/membership`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VotersReplaced {
    #[serde(rename = "raft_group_id")]
    pub group: u32,
    pub voters: Vec<u64>,
    /// The log index at which the new voter set committed.
    pub log_index: u64,
}

/// A leader's proof of its leadership (`GET /__ursula/raft/{group}/quorum`):
/// a quorum confirmed it in `term` after the request arrived, and every
/// replica that applies `required_applied_index` holds what it committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct QuorumProof {
    #[serde(rename = "raft_group_id")]
    pub group: u32,
    pub leader: u64,
    pub term: u64,
    pub required_applied_index: u64,
}

/// Why an admin operation on a node's Raft was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdminError {
    #[error("this node runs no Raft")]
    NoRaft,
    #[error("raft group {0} is not registered on this node")]
    UnknownGroup(u32),
    #[error("this node does not lead raft group {0}")]
    NotLeader(u32),
    #[error("no snapshot of raft group {0} could start in time")]
    Busy(u32),
    /// The request names something the group cannot take (`400`).
    #[error("{0}")]
    Invalid(String),
    /// Another node leads the group (`409`, naming it).
    #[error("this node does not lead raft group {group}")]
    LedElsewhere { group: u32, leader: Option<u64> },
    /// A snapshot of the group builds, or an earlier purge has not landed.
    #[error("raft group {0} is building a snapshot or purging its log")]
    PurgeBusy(u32),
    #[error("{0}")]
    Failed(String),
    /// A replica refused a recovery plan (`409` with this body, spec/35).
    #[error("the recovery plan was refused: {0}")]
    PlanRefused(Box<serde_json::Value>),
}

/// What a forwarded command counted.
/// A fork step applied here: its outcome as the step's answer.
pub fn local_fork_step(outcome: Outcome) -> Result<ForkStep, EngineError> {
    ForkStep::from_outcome(outcome).ok_or_else(|| EngineError::Fatal("a fork step applied as another command".into()))
}

pub fn counted(outcome: Outcome) -> Result<u64, EngineError> {
    match outcome {
        Outcome::PurgeBucket { removed } => Ok(removed as u64),
        Outcome::Renew => Ok(0),
        other => Err(EngineError::Fatal(format!("a forwarded command applied as {other:?}"))),
    }
}

/// How a wait on a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    Changed,
    TimedOut,
}

pub trait GroupEngine: Send + Sync + 'static {
    /// A short name for metrics: `memory`, `raft`.
    fn name(&self) -> &'static str;
    /// This node's id (`raft.node_id`; 1 for a node without Raft).
    fn node_id(&self) -> u64 {
        1
    }
    fn group_count(&self) -> u32;
    /// The time proposals are stamped with and queries read.
    fn clock(&self) -> &dyn Clock;
    /// Engine fields of `/__ursula/metrics`.
    fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// Why this node may not serve (a reason of spec/38), or `None`.
    fn unready_reason(&self) -> Option<&'static str> {
        None
    }
    /// Fields of `/__ursula/ready` beside the verdict.
    fn readiness_details(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// Confirms this node still leads `group` and has applied all it committed.
    fn linearize(&self, _group: GroupId) -> impl Future<Output = Result<(), EngineError>> + Send {
        async { Ok(()) }
    }
    /// Brings this replica's applied state of `group` up to the point a
    /// quorum-confirmed leader read would see: on the leader a ReadIndex
    /// round, on a follower the leader's barrier forwarded and applied.
    fn confirm(&self, group: GroupId) -> impl Future<Output = Result<(), EngineError>> + Send {
        self.linearize(group)
    }
    /// Who leads `group`; an engine without peers always leads.
    fn leadership(&self, _group: GroupId) -> Leadership {
        Leadership::Local { term: 0 }
    }
    /// Hands `group`'s leadership to voter `to`. An engine without peers
    /// has no other voter.
    fn transfer_leader(&self, group: u32, to: u64) -> impl Future<Output = Result<Transferred, TransferError>> + Send {
        let refused = if group >= self.group_count() {
            TransferError::UnknownGroup(group)
        } else if to == self.node_id() {
            TransferError::InvalidTarget("the target is this node, which already leads the group")
        } else {
            TransferError::InvalidTarget("the target is not a voter of the group")
        };
        async move { Err(refused) }
    }
    /// The index of the last command this replica applied in `group` (0
    /// for an engine without a log).
    fn applied_index(&self, _group: GroupId) -> u64 {
        0
    }
    /// Resolves once this replica of `group` applied `index` (`NoLeader`
    /// when it does not within a few seconds). An engine without peers
    /// applies each command as it proposes it.
    fn wait_applied(&self, _group: GroupId, _index: u64) -> impl Future<Output = Result<(), EngineError>> + Send {
        async { Ok(()) }
    }
    /// Sets (`Some(true)`), lifts (`Some(false)`) or reads (`None`) the
    /// maintenance drain mark.
    fn maintenance(&self, _set: Option<bool>) -> impl Future<Output = Result<ShedState, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Takes a snapshot of `group` covering everything it applied so far.
    fn snapshot(&self, _group: u32) -> impl Future<Output = Result<SnapshotTaken, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Replaces `group`'s voter set with `voters`, on its leader.
    fn replace_voters(
        &self,
        _group: u32,
        _voters: std::collections::BTreeSet<u64>,
    ) -> impl Future<Output = Result<VotersReplaced, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Purges `group`'s log through `upto`, at most through its last snapshot.
    fn purge_log(&self, _group: u32, _upto: u64) -> impl Future<Output = Result<PurgeAsked, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Takes a recovery plan of `group` on this replica (spec/35
    /// `accept-unsynced-loss`): its answer, or a refusal.
    fn accept_unsynced_loss(
        &self,
        _group: u32,
        _plan: crate::raft::recovery_plan::PlanRequest,
    ) -> impl Future<Output = Result<serde_json::Value, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Proves this node's leadership of `group` with a fresh quorum round.
    fn quorum(&self, _group: u32) -> impl Future<Output = Result<QuorumProof, AdminError>> + Send {
        async { Err(AdminError::NoRaft) }
    }
    /// Has the leader of `group`, wherever it is, propose `command`: a
    /// read's TTL renewal or a purge's part (no client write: those are
    /// redirected). Returns what it counted (the streams a purge removed).
    /// An engine without peers applies it here.
    fn forward_to_leader(
        &self,
        group: GroupId,
        command: Command,
    ) -> impl Future<Output = Result<u64, EngineError>> + Send {
        let proposed = self.propose(group, command);
        async move { counted(proposed.await?) }
    }
    /// Has the leader of `group`, wherever it is, apply a fork step
    /// (`ReferenceSource`, `ReleaseSource`: a fork's part in its source's
    /// group) and answers its outcome. An engine without peers applies it here.
    fn fork_step(
        &self,
        group: GroupId,
        command: Command,
    ) -> impl Future<Output = Result<ForkStep, EngineError>> + Send {
        let proposed = self.propose(group, command);
        async move { local_fork_step(proposed.await?) }
    }
    /// Orders and applies one command in `group`, stamping its time and index.
    fn propose(&self, group: GroupId, command: Command) -> impl Future<Output = Result<Outcome, EngineError>> + Send;
    /// The group's applied state, which queries read and live readers wait on.
    fn state(&self, group: GroupId) -> Result<&Mutex<GroupState>, EngineError>;

    /// Runs a query against the group's applied state.
    fn query<R: Send>(&self, group: GroupId, f: impl FnOnce(&StreamStore, u64) -> R + Send) -> Result<R, EngineError> {
        let state = group_state::lock(self.state(group)?);
        Ok(f(&state.store, self.clock().now_ms()))
    }

    /// Resolves when the stream at `key` is no longer `incarnation` at or
    /// below `offset` (new bytes, closure, deletion), or after `timeout`.
    /// Starts what watches the cold tier's store for this engine (the
    /// Raft engine's snapshot-store health gate); `None`: nothing to watch.
    fn watch_cold(
        self: &std::sync::Arc<Self>,
        _cold: &std::sync::Arc<crate::cold::Cold>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        None
    }

    fn wait(
        &self,
        group: GroupId,
        key: &StreamKey,
        incarnation: Incarnation,
        offset: Offset,
        timeout: std::time::Duration,
    ) -> impl Future<Output = Result<Waited, EngineError>> + Send {
        let state = self.state(group);
        let now = self.clock().now_ms();
        async move { Ok(group_state::wait(state?, key, incarnation, offset, now, timeout).await) }
    }
}
