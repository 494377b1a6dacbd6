//! The openraft type configuration of a stream group: its log carries
//! proposals (a command stamped with the leader's clock) and its state
//! machine answers with the stream store's outcome.

use openraft::impls::BasicNode;
use serde::{Deserialize, Serialize};
use ursula_stream::{Command, Outcome};

/// What a group's log entry carries: the command and the proposer's wall
/// clock, so every replica applies it at the same `now_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    pub now_ms: u64,
    pub command: Command,
}

/// openraft logs entries it handles; a proposal shows as its command's kind.
impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "proposal@{}", self.now_ms)
    }
}

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Proposal,
        R = Outcome,
        NodeId = u64,
        Node = BasicNode,
        AsyncRuntime = super::runtime::SeedableRuntime,
);

pub type NodeId = u64;
pub type Entry = openraft::type_config::alias::EntryOf<TypeConfig>;
pub type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<TypeConfig>;
/// A group's snapshot as openraft carries it: the bytes of its file.
pub type SnapshotData = std::io::Cursor<Vec<u8>>;
pub type Snapshot = openraft::type_config::alias::SnapshotOf<TypeConfig, SnapshotData>;
pub type GroupRaft = openraft::Raft<TypeConfig, super::state_machine::GroupMachine>;
