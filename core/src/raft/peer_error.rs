//! Why a call to a Raft peer produced no answer, typed: the transport, its
//! batcher, the bootstrap probe and the read barrier report these, and
//! openraft sees each as "unreachable" and backs off.

use std::sync::Arc;
use std::time::Duration;

use ursula_proto::raft::v1 as pb;

use super::codec::CodecError;
use super::types::NodeId;

#[derive(Debug, Clone, thiserror::Error)]
pub enum PeerError {
    #[error("node {0} is not among raft.peers")]
    NotConfigured(NodeId),
    #[error("peer url {url:?}: {source}")]
    BadUrl { url: String, source: Arc<tonic::transport::Error> },
    #[error("{url}: {status}")]
    Status { url: String, status: tonic::Status },
    #[error("{url}: no answer within {after:?}")]
    Timeout { url: String, after: Duration },
    /// The peer refused the call (another cluster, a group it lacks, ...).
    #[error("{url}: refused ({kind:?}) by node {node_id} of cluster {cluster_id:?}: {detail}")]
    Refused { url: String, kind: pb::refusal::Kind, node_id: NodeId, cluster_id: String, detail: String },
    #[error("{url}: no longer leads group {group}")]
    NotLeader { url: String, group: u32 },
    #[error("{url}: an answer with neither a value nor a refusal")]
    Empty { url: String },
    #[error("{url}: an answer that does not decode: {detail}")]
    Malformed { url: String, detail: String },
    #[error("{url}: {replies} replies to {requests} requests")]
    BatchMismatch { url: String, replies: usize, requests: usize },
    #[error("the peer's batcher stopped")]
    BatcherStopped,
    #[error("the batch was dropped before its reply")]
    BatchDropped,
    #[error("{url}: the batch stream failed or stalled; reopening")]
    StreamLost { url: String },
    /// The request could not be encoded for the wire.
    #[error(transparent)]
    Encode(#[from] CodecError),
}

impl PeerError {
    /// The peer's group holds a recovery plan whose history event is pending.
    pub fn history_pending(&self) -> bool {
        matches!(self, PeerError::Refused { kind: pb::refusal::Kind::HistoryPending, .. })
    }

    pub fn refused(url: &str, r: &pb::Refusal) -> PeerError {
        PeerError::Refused {
            url: url.to_owned(),
            kind: r.kind(),
            node_id: r.node_id,
            cluster_id: r.cluster_id.clone(),
            detail: r.detail.clone(),
        }
    }
}
