//! Conversions between openraft's RPC types and the `RaftService` messages
//! of `proto/ursula/raft/v1/raft.proto`. Entries and snapshot meta travel in
//! the journal's encoding (`codec`), so a replica stores what it received.

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderError, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::vote::RaftLeaderId;
use openraft::vote::leader_id_adv::CommittedLeaderId;
use ursula_proto::raft::v1 as pb;

use super::codec::{self, CodecError};
use super::types::{LogId, NodeId, TypeConfig, Vote};

pub fn log_id_to(id: &LogId) -> pb::LogId {
    pb::LogId { term: id.leader_id.term, node_id: id.leader_id.node_id, index: id.index }
}

fn log_id_from(id: pb::LogId) -> LogId {
    LogId::new(CommittedLeaderId::new(id.term, id.node_id), id.index)
}

fn vote_to(v: &Vote) -> pb::Vote {
    pb::Vote { term: v.leader_id.term, node_id: v.leader_id.node_id, committed: v.committed }
}

fn vote_from(v: Option<pb::Vote>) -> Result<Vote, CodecError> {
    let v = v.ok_or_else(|| CodecError { what: "vote", reason: "missing".into() })?;
    Ok(if v.committed { Vote::new_committed(v.term, v.node_id) } else { Vote::new(v.term, v.node_id) })
}

pub fn append_request_to(
    preamble: pb::Preamble,
    rpc: &AppendEntriesRequest<TypeConfig>,
) -> Result<pb::AppendEntriesRequest, CodecError> {
    Ok(pb::AppendEntriesRequest {
        preamble: Some(preamble),
        vote: Some(vote_to(&rpc.vote)),
        prev_log_id: rpc.prev_log_id.as_ref().map(log_id_to),
        entries: rpc.entries.iter().map(codec::encode_entry).collect::<Result<_, _>>()?,
        leader_commit: rpc.leader_commit.as_ref().map(log_id_to),
    })
}

pub fn append_request_from(req: pb::AppendEntriesRequest) -> Result<AppendEntriesRequest<TypeConfig>, CodecError> {
    Ok(AppendEntriesRequest {
        vote: vote_from(req.vote)?,
        prev_log_id: req.prev_log_id.map(log_id_from),
        entries: req.entries.iter().map(codec::decode_received_entry).collect::<Result<_, _>>()?,
        leader_commit: req.leader_commit.map(log_id_from),
    })
}

pub fn append_reply_to(r: &AppendEntriesResponse<TypeConfig>) -> pb::AppendEntriesReply {
    use pb::append_entries_reply::Result as R;
    let result = match r {
        AppendEntriesResponse::Success => R::Success(pb::Success {}),
        AppendEntriesResponse::PartialSuccess(m) => {
            R::PartialSuccess(pb::PartialSuccess { matching: m.as_ref().map(log_id_to) })
        }
        AppendEntriesResponse::Conflict => R::Conflict(pb::Conflict {}),
        AppendEntriesResponse::HigherVote(v) => R::HigherVote(vote_to(v)),
    };
    pb::AppendEntriesReply { result: Some(result) }
}

/// The reply, or the refusal that came instead.
pub fn append_reply_from(r: pb::AppendEntriesReply) -> Result<AppendEntriesResponse<TypeConfig>, pb::Refusal> {
    use pb::append_entries_reply::Result as R;
    match r.result {
        Some(R::Success(_)) => Ok(AppendEntriesResponse::Success),
        Some(R::PartialSuccess(p)) => Ok(AppendEntriesResponse::PartialSuccess(p.matching.map(log_id_from))),
        Some(R::Conflict(_)) => Ok(AppendEntriesResponse::Conflict),
        Some(R::HigherVote(v)) => vote_from(Some(v)).map(AppendEntriesResponse::HigherVote).map_err(malformed),
        Some(R::Refusal(r)) => Err(r),
        None => Err(malformed(CodecError { what: "append reply", reason: "empty".into() })),
    }
}

pub fn vote_request_to(preamble: pb::Preamble, rpc: &VoteRequest<TypeConfig>, pre_vote: bool) -> pb::VoteRequest {
    pb::VoteRequest {
        preamble: Some(preamble),
        vote: Some(vote_to(&rpc.vote)),
        last_log_id: rpc.last_log_id.as_ref().map(log_id_to),
        leadership_transfer: rpc.leadership_transfer,
        pre_vote,
    }
}

/// The request, and whether it is a pre-vote.
pub fn vote_request_from(req: pb::VoteRequest) -> Result<(VoteRequest<TypeConfig>, bool), CodecError> {
    let rpc = VoteRequest {
        vote: vote_from(req.vote)?,
        last_log_id: req.last_log_id.map(log_id_from),
        leadership_transfer: req.leadership_transfer,
    };
    Ok((rpc, req.pre_vote))
}

pub fn vote_reply_to(r: &VoteResponse<TypeConfig>) -> pb::VoteReply {
    pb::VoteReply {
        result: Some(pb::vote_reply::Result::Granted(pb::Granted {
            vote: Some(vote_to(&r.vote)),
            vote_granted: r.vote_granted,
            last_log_id: r.last_log_id.as_ref().map(log_id_to),
        })),
    }
}

pub fn vote_reply_from(r: pb::VoteReply) -> Result<VoteResponse<TypeConfig>, pb::Refusal> {
    match r.result {
        Some(pb::vote_reply::Result::Granted(g)) => Ok(VoteResponse {
            vote: vote_from(g.vote).map_err(malformed)?,
            vote_granted: g.vote_granted,
            last_log_id: g.last_log_id.map(log_id_from),
        }),
        Some(pb::vote_reply::Result::Refusal(r)) => Err(r),
        None => Err(malformed(CodecError { what: "vote reply", reason: "empty".into() })),
    }
}

/// One chunk of a snapshot: `data` from `offset`, the last when `done`.
pub fn snapshot_chunk_to(
    preamble: pb::Preamble,
    vote: &Vote,
    meta: &super::types::SnapshotMeta,
    offset: u64,
    data: Vec<u8>,
    done: bool,
) -> Result<pb::InstallSnapshotRequest, CodecError> {
    Ok(pb::InstallSnapshotRequest {
        preamble: Some(preamble),
        vote: Some(vote_to(vote)),
        meta: codec::encode_snapshot_meta(meta)?.to_vec(),
        offset,
        data,
        done,
    })
}

/// A received chunk: the sender's vote, the snapshot's meta, and the chunk.
pub struct SnapshotChunk {
    pub vote: Vote,
    pub meta: super::types::SnapshotMeta,
    pub offset: u64,
    pub data: Vec<u8>,
    pub done: bool,
}

pub fn snapshot_chunk_from(req: pb::InstallSnapshotRequest) -> Result<SnapshotChunk, CodecError> {
    Ok(SnapshotChunk {
        vote: vote_from(req.vote)?,
        meta: codec::decode_snapshot_meta(&req.meta)?,
        offset: req.offset,
        data: req.data,
        done: req.done,
    })
}

pub fn snapshot_reply_to(vote: &Vote) -> pb::InstallSnapshotReply {
    pb::InstallSnapshotReply { result: Some(pb::install_snapshot_reply::Result::Vote(vote_to(vote))) }
}

pub fn snapshot_reply_from(r: pb::InstallSnapshotReply) -> Result<SnapshotResponse<TypeConfig>, pb::Refusal> {
    match r.result {
        Some(pb::install_snapshot_reply::Result::Vote(v)) => {
            Ok(SnapshotResponse { vote: vote_from(Some(v)).map_err(malformed)? })
        }
        Some(pb::install_snapshot_reply::Result::Refusal(r)) => Err(r),
        None => Err(malformed(CodecError { what: "snapshot reply", reason: "empty".into() })),
    }
}

pub fn transfer_request_to(
    preamble: pb::Preamble,
    req: &TransferLeaderRequest<TypeConfig>,
) -> pb::TransferLeaderRequest {
    pb::TransferLeaderRequest {
        preamble: Some(preamble),
        from_leader: Some(vote_to(req.from_leader())),
        to_node_id: *req.to_node_id(),
        last_log_id: req.last_log_id().map(log_id_to),
    }
}

pub fn transfer_request_from(req: pb::TransferLeaderRequest) -> Result<TransferLeaderRequest<TypeConfig>, CodecError> {
    Ok(TransferLeaderRequest::new(vote_from(req.from_leader)?, req.to_node_id, req.last_log_id.map(log_id_from)))
}

pub fn transfer_reply_to(r: &TransferLeaderResponse<TypeConfig>) -> pb::TransferLeaderReply {
    use pb::transfer_leader_reply::Result as R;
    use pb::transfer_rejected::Why;
    let result = match r {
        Ok(()) => R::Accepted(pb::Success {}),
        Err(TransferLeaderError::VoteChanged { expected, actual }) => R::Rejected(pb::TransferRejected {
            why: Some(Why::VoteChanged(pb::VoteChanged {
                expected: Some(vote_to(expected)),
                actual: Some(vote_to(actual)),
            })),
        }),
        Err(TransferLeaderError::LogNotFlushed { expected, actual }) => R::Rejected(pb::TransferRejected {
            why: Some(Why::LogNotFlushed(pb::LogNotFlushed {
                expected: expected.as_ref().map(log_id_to),
                actual: actual.as_ref().map(log_id_to),
            })),
        }),
    };
    pb::TransferLeaderReply { result: Some(result) }
}

pub fn transfer_reply_from(r: pb::TransferLeaderReply) -> Result<TransferLeaderResponse<TypeConfig>, pb::Refusal> {
    use pb::transfer_leader_reply::Result as R;
    use pb::transfer_rejected::Why;
    let empty = |what| malformed(CodecError { what, reason: "empty".into() });
    match r.result {
        Some(R::Accepted(_)) => Ok(Ok(())),
        Some(R::Rejected(pb::TransferRejected { why: Some(Why::VoteChanged(v)) })) => {
            Ok(Err(TransferLeaderError::VoteChanged {
                expected: vote_from(v.expected).map_err(malformed)?,
                actual: vote_from(v.actual).map_err(malformed)?,
            }))
        }
        Some(R::Rejected(pb::TransferRejected { why: Some(Why::LogNotFlushed(l)) })) => {
            Ok(Err(TransferLeaderError::LogNotFlushed {
                expected: l.expected.map(log_id_from),
                actual: l.actual.map(log_id_from),
            }))
        }
        Some(R::Rejected(_)) => Err(empty("transfer rejection")),
        Some(R::Refusal(r)) => Err(r),
        None => Err(empty("transfer reply")),
    }
}

pub fn refusal(kind: pb::refusal::Kind, cluster_id: &str, node_id: NodeId, detail: String) -> pb::Refusal {
    pb::Refusal { kind: kind as i32, cluster_id: cluster_id.to_string(), node_id, detail }
}

fn malformed(e: CodecError) -> pb::Refusal {
    refusal(pb::refusal::Kind::Malformed, "", 0, e.to_string())
}
