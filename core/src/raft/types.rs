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
    /// Its entry's record, once the leader's log encoded it: each peer's
    /// request sends it as is (`codec::encode_entry`); or as a follower
    /// received it, until its log wrote it. Never persisted.
    #[serde(skip)]
    pub record: Record,
}

impl Proposal {
    pub fn new(now_ms: u64, command: Command) -> Proposal {
        Proposal { now_ms, command, record: Record::default() }
    }
}

/// An entry's encoding, kept with the log id it was made for; clones of the
/// entry share it.
#[derive(Clone, Default)]
pub struct Record(std::sync::Arc<std::sync::OnceLock<Kept>>);

struct Kept {
    id: LogId,
    raw: bytes::Bytes,
    /// A slice of a peer's request, which holds many entries: not to be
    /// kept past the log's write.
    received: bool,
}

impl Record {
    /// The encoding made or received for `id`, if any.
    pub fn of(&self, id: &LogId) -> Option<bytes::Bytes> {
        self.0.get().filter(|k| k.id == *id).map(|k| k.raw.clone())
    }

    pub fn keep(&self, id: LogId, raw: bytes::Bytes) {
        let _ = self.0.set(Kept { id, raw, received: false });
    }

    /// Keeps the bytes a peer sent for the entry, for its log to write.
    pub fn keep_received(&self, id: LogId, raw: bytes::Bytes) {
        let _ = self.0.set(Kept { id, raw, received: true });
    }

    pub fn is_received(&self) -> bool {
        self.0.get().is_some_and(|k| k.received)
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0.get() {
            Some(k) if k.received => "Record(received)",
            Some(_) => "Record(kept)",
            None => "Record(none)",
        })
    }
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
