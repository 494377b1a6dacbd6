//! The openraft type configuration of a stream group: its log carries
//! proposals (a command stamped with the leader's clock) and its state
//! machine answers with the stream store's outcome.

use std::io::Cursor;

use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use ursula_stream::{Command, Outcome};

/// What a group's log entry carries: the command and the proposer's wall
/// clock, so every replica applies it at the same `now_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proposal {
    pub now_ms: u64,
    pub command: Command,
}

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Proposal,
        R = Outcome,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type NodeId = u64;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, BasicNode>;
pub type StorageError = openraft::StorageError<NodeId>;
