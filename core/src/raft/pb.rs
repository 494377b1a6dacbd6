//! Conversions between openraft's RPC types and the `RaftService` messages
//! of `proto/ursula/raft/v1/raft.proto`. Entries and snapshot meta travel in
//! the journal's encoding (`codec`), so a replica stores what it received.

use openraft::CommittedLeaderId;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
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
        entries: rpc.entries.iter().map(|e| codec::encode_entry(e).map(|b| b.to_vec())).collect::<Result<_, _>>()?,
        leader_commit: rpc.leader_commit.as_ref().map(log_id_to),
    })
}

pub fn append_request_from(req: pb::AppendEntriesRequest) -> Result<AppendEntriesRequest<TypeConfig>, CodecError> {
    Ok(AppendEntriesRequest {
        vote: vote_from(req.vote)?,
        prev_log_id: req.prev_log_id.map(log_id_from),
        entries: req.entries.iter().map(|b| codec::decode_entry(b)).collect::<Result<_, _>>()?,
        leader_commit: req.leader_commit.map(log_id_from),
    })
}

pub fn append_reply_to(r: &AppendEntriesResponse<NodeId>) -> pb::AppendEntriesReply {
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
pub fn append_reply_from(r: pb::AppendEntriesReply) -> Result<AppendEntriesResponse<NodeId>, pb::Refusal> {
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

pub fn vote_request_to(preamble: pb::Preamble, rpc: &VoteRequest<NodeId>) -> pb::VoteRequest {
    pb::VoteRequest {
        preamble: Some(preamble),
        vote: Some(vote_to(&rpc.vote)),
        last_log_id: rpc.last_log_id.as_ref().map(log_id_to),
    }
}

pub fn vote_request_from(req: pb::VoteRequest) -> Result<VoteRequest<NodeId>, CodecError> {
    Ok(VoteRequest { vote: vote_from(req.vote)?, last_log_id: req.last_log_id.map(log_id_from) })
}

pub fn vote_reply_to(r: &VoteResponse<NodeId>) -> pb::VoteReply {
    pb::VoteReply {
        result: Some(pb::vote_reply::Result::Granted(pb::Granted {
            vote: Some(vote_to(&r.vote)),
            vote_granted: r.vote_granted,
            last_log_id: r.last_log_id.as_ref().map(log_id_to),
        })),
    }
}

pub fn vote_reply_from(r: pb::VoteReply) -> Result<VoteResponse<NodeId>, pb::Refusal> {
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

pub fn snapshot_request_to(
    preamble: pb::Preamble,
    rpc: &InstallSnapshotRequest<TypeConfig>,
) -> Result<pb::InstallSnapshotRequest, CodecError> {
    Ok(pb::InstallSnapshotRequest {
        preamble: Some(preamble),
        vote: Some(vote_to(&rpc.vote)),
        meta: codec::encode_snapshot_meta(&rpc.meta)?.to_vec(),
        offset: rpc.offset,
        data: rpc.data.clone(),
        done: rpc.done,
    })
}

pub fn snapshot_request_from(
    req: pb::InstallSnapshotRequest,
) -> Result<InstallSnapshotRequest<TypeConfig>, CodecError> {
    Ok(InstallSnapshotRequest {
        vote: vote_from(req.vote)?,
        meta: codec::decode_snapshot_meta(&req.meta)?,
        offset: req.offset,
        data: req.data,
        done: req.done,
    })
}

pub fn snapshot_reply_to(r: &InstallSnapshotResponse<NodeId>) -> pb::InstallSnapshotReply {
    pb::InstallSnapshotReply { result: Some(pb::install_snapshot_reply::Result::Vote(vote_to(&r.vote))) }
}

pub fn snapshot_reply_from(r: pb::InstallSnapshotReply) -> Result<InstallSnapshotResponse<NodeId>, pb::Refusal> {
    match r.result {
        Some(pb::install_snapshot_reply::Result::Vote(v)) => {
            Ok(InstallSnapshotResponse { vote: vote_from(Some(v)).map_err(malformed)? })
        }
        Some(pb::install_snapshot_reply::Result::Refusal(r)) => Err(r),
        None => Err(malformed(CodecError { what: "snapshot reply", reason: "empty".into() })),
    }
}

pub fn refusal(kind: pb::refusal::Kind, cluster_id: &str, node_id: NodeId, detail: String) -> pb::Refusal {
    pb::Refusal { kind: kind as i32, cluster_id: cluster_id.to_string(), node_id, detail }
}

fn malformed(e: CodecError) -> pb::Refusal {
    refusal(pb::refusal::Kind::Malformed, "", 0, e.to_string())
}
