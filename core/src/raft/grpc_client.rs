//! Raft between voters over the private `RaftService` (tonic), the client
//! side: openraft's network, one lazily connected channel per peer shared
//! by every group. Every request carries the sender's cluster id; a peer
//! of another cluster refuses it before it decodes the Raft payload.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use openraft::BasicNode;
use openraft::base::{BoxFuture, BoxStream, OptionalSend};
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use tonic::transport::{Channel, Endpoint};
use tonic::{Response, Status};
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;

use super::batcher::{BatchStats, Batcher};
use super::pb as conv;
use super::peer_error::PeerError;
use super::refusals::{Direction, PeerRefusals};
use super::reversions::Answered;
use super::types::{LogId, NodeId, Snapshot, SnapshotData, TypeConfig, Vote};

use pb::refusal::Kind;

/// The entries of one AppendEntries call, in bytes (one entry always goes,
/// whatever its size: the largest is a 32 MiB append, under the message
/// limit). The log store already reads no more than this per call
/// (`limited_get_log_entries`); the cut here keeps the bound whatever
/// openraft hands over.
const MAX_APPEND_BYTES: usize = super::log_store::MAX_REPLICATION_BYTES;

/// The slowest transfer rate an AppendEntries payload is given time for.
/// openraft's deadline for a replication call is the heartbeat interval,
/// right for a heartbeat but not for a 32 MiB entry: a call cut off at that
/// deadline is resent whole and cut off again, and the entry never commits.
const SLOWEST_PAYLOAD_BYTES_PER_SEC: u64 = 8 * 1024 * 1024;

/// The deadline of an AppendEntries call of `payload` bytes: openraft's
/// soft deadline, plus the time the bytes take at the slowest rate.
fn append_deadline(option: &RPCOption, payload: usize) -> std::time::Duration {
    option.soft_ttl() + slowest_transfer(payload)
}

/// How long `bytes` take at the slowest rate a replication call allows for.
pub(super) fn slowest_transfer(bytes: usize) -> std::time::Duration {
    std::time::Duration::from_millis((bytes as u64).saturating_mul(1000) / SLOWEST_PAYLOAD_BYTES_PER_SEC)
}

/// Cuts `req` to the longest prefix of entries within `max_bytes` (at least
/// one); returns the log id of the last entry kept when it cut any.
fn bound_append(
    req: &mut pb::AppendEntriesRequest,
    rpc: &AppendEntriesRequest<TypeConfig>,
    max_bytes: usize,
) -> Option<LogId> {
    let mut total = 0usize;
    let keep = req
        .entries
        .iter()
        .position(|e| {
            total = total.saturating_add(e.len());
            total > max_bytes
        })
        .map(|over| over.max(1))?;
    if keep >= req.entries.len() {
        return None;
    }
    req.entries.truncate(keep);
    let last = rpc.entries.get(keep - 1).map(|e| e.log_id)?;
    // Committed as far as the sent entries reach: never more than them.
    if req.leader_commit.as_ref().is_some_and(|c| c.index > last.index) {
        req.leader_commit = Some(conv::log_id_to(&last));
    }
    Some(last)
}

/// How long a follower waits for its leader's read barrier.
pub(super) const BARRIER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a bootstrap probe waits for a peer.
pub(super) const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long a command forwarded to a group's leader may take (its commit waits up to 10 s).
pub(super) const FORWARD_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Bytes of snapshot in one `InstallSnapshot` call.
const SNAPSHOT_CHUNK_BYTES: usize = 4 * 1024 * 1024;

type Rpc<T> = Result<T, RPCError<TypeConfig>>;

fn unreachable(why: impl Into<PeerError>) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::new(&why.into()))
}

/// Who this node is on the cluster plane, and its channels to the peers.
impl Peers {
    /// Peer `id`'s `[[raft.peers]].url`.
    pub fn url_of(&self, id: NodeId) -> Option<&str> {
        self.urls.get(&id).map(String::as_str)
    }
}

pub struct Peers {
    cluster_id: String,
    node_id: NodeId,
    /// `[[raft.peers]].url` by node id: the only source of peer addresses
    /// (spec/07), so a moved peer is followed by changing the config, not
    /// the membership replicated in the log.
    urls: HashMap<NodeId, String>,
    channels: Mutex<HashMap<String, RaftServiceClient<Channel>>>,
    /// AppendEntries of all groups to a peer, coalesced (by peer url).
    batchers: Mutex<HashMap<String, Batcher>>,
    pub batch_stats: Arc<BatchStats>,
    /// Followers that lost entries they had acknowledged (spec/35).
    pub reversions: super::reversions::Reversions,
    /// `raft.append_transport_budget_bytes`, both directions.
    pub transport: Arc<super::transport_budget::TransportBudget>,
    refusals: Arc<PeerRefusals>,
    /// Peers (by url) last seen unreachable: one line of ours per change
    /// instead of openraft's line per failed RPC.
    unreachable: Mutex<std::collections::HashSet<String>>,
}

impl Peers {
    pub fn new(
        cluster_id: String,
        node_id: NodeId,
        urls: HashMap<NodeId, String>,
        refusals: Arc<PeerRefusals>,
        transport: Arc<super::transport_budget::TransportBudget>,
    ) -> Arc<Peers> {
        let (channels, batchers) = (Mutex::new(HashMap::new()), Mutex::new(HashMap::new()));
        let batch_stats = Arc::default();
        let unreachable = Mutex::default();
        let reversions = Default::default();
        Arc::new(Peers {
            cluster_id,
            node_id,
            urls,
            channels,
            batchers,
            batch_stats,
            reversions,
            transport,
            refusals,
            unreachable,
        })
    }

    fn client(&self, url: &str) -> Result<RaftServiceClient<Channel>, PeerError> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(url) {
            return Ok(c.clone());
        }
        let endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| PeerError::BadUrl { url: url.to_owned(), source: Arc::new(e) })?
            .initial_stream_window_size(ursula_proto::H2_STREAM_WINDOW)
            .initial_connection_window_size(ursula_proto::H2_CONNECTION_WINDOW)
            // Answers come in frames this large (the server's own limit is the same).
            .max_frame_size(ursula_proto::H2_MAX_FRAME);
        let client = RaftServiceClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(ursula_proto::MAX_MESSAGE_BYTES);
        channels.insert(url.to_string(), client.clone());
        Ok(client)
    }

    fn batcher(&self, url: &str) -> Result<Batcher, PeerError> {
        let mut batchers = self.batchers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = batchers.get(url) {
            return Ok(b.clone());
        }
        let (stats, budget) = (self.batch_stats.clone(), self.transport.outbound.clone());
        let batcher = Batcher::start(self.client(url)?, url.to_string(), stats, budget);
        batchers.insert(url.to_string(), batcher.clone());
        Ok(batcher)
    }

    /// One call to peer `node` within `wait`: the peer's url and its reply.
    pub(super) async fn ask<Rep, Fut>(
        &self,
        node: NodeId,
        wait: std::time::Duration,
        send: impl FnOnce(RaftServiceClient<Channel>) -> Fut,
    ) -> Result<(&str, Rep), PeerError>
    where
        Fut: Future<Output = Result<Response<Rep>, Status>>,
    {
        let url = self.urls.get(&node).ok_or(PeerError::NotConfigured(node))?;
        let reply = tokio::time::timeout(wait, send(self.client(url)?))
            .await
            .map_err(|_| PeerError::Timeout { url: url.clone(), after: wait })?
            .map_err(|status| {
                self.refusals.format.check_status(url, &status);
                PeerError::Status { url: url.clone(), status }
            })?;
        Ok((url, reply.into_inner()))
    }

    /// A peer's refusal: one naming another cluster is counted and logged
    /// once, one of another Raft protocol leaves this node unready.
    pub(super) fn refused_by(&self, url: &str, r: &pb::Refusal) -> PeerError {
        match r.kind() {
            Kind::ClusterMismatch => self.refusals.record(Direction::RefusedBy, r.node_id, &r.cluster_id, url, true),
            Kind::FormatEpochMismatch => self.refusals.format.record(Direction::RefusedBy, url, &r.detail),
            _ => {}
        }
        PeerError::refused(url, r)
    }

    /// Logs a peer's change between reachable and unreachable, once.
    fn observe<T>(&self, url: &str, outcome: &Result<T, PeerError>) {
        if let Err(PeerError::Status { status, .. }) = outcome {
            self.refusals.format.check_status(url, status);
        }
        let lost = match outcome {
            Ok(_) => false,
            Err(
                PeerError::Status { .. }
                | PeerError::Timeout { .. }
                | PeerError::BatcherStopped
                | PeerError::StreamLost { .. }
                | PeerError::BatchDropped,
            ) => true,
            // A refusal is an answer (logged once by `refusals`); the rest are ours.
            Err(_) => return,
        };
        let mut down = self.unreachable.lock().unwrap_or_else(|p| p.into_inner());
        match (lost, down.contains(url)) {
            (true, false) => {
                if let Err(e) = outcome {
                    tracing::warn!(peer = %url, error = %e, "a Raft peer is unreachable; retrying");
                }
                down.insert(url.to_owned());
            }
            (false, true) => {
                tracing::warn!(peer = %url, "a Raft peer is reachable again");
                down.remove(url);
            }
            _ => {}
        }
    }

    pub(super) fn preamble(&self, group: u32) -> pb::Preamble {
        pb::Preamble {
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            group,
            format_epoch: crate::format_epoch::FORMAT_EPOCH,
        }
    }
}

/// openraft's network of one group.
#[derive(Clone)]
pub struct GrpcNetwork {
    pub peers: Arc<Peers>,
    pub group: u32,
}

pub struct GrpcPeer {
    peers: Arc<Peers>,
    group: u32,
    target: NodeId,
    url: String,
}

impl RaftNetworkFactory<TypeConfig> for GrpcNetwork {
    type Network = GrpcPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> GrpcPeer {
        let url = self.peers.urls.get(&target).cloned().unwrap_or_else(|| node.addr.clone());
        GrpcPeer { peers: self.peers.clone(), group: self.group, target, url }
    }
}

/// Sends one call under the RPC's deadline; any failure is "unreachable",
/// which openraft retries with backoff.
async fn call<Req, Rep, Fut>(
    peer: &GrpcPeer,
    option: &RPCOption,
    request: Req,
    send: impl FnOnce(RaftServiceClient<Channel>, Req) -> Fut,
) -> Result<Rep, PeerError>
where
    Fut: Future<Output = Result<Response<Rep>, Status>>,
{
    let client = peer.peers.client(&peer.url)?;
    let outcome = match tokio::time::timeout(option.soft_ttl(), send(client, request)).await {
        Ok(Ok(reply)) => Ok(reply.into_inner()),
        Ok(Err(status)) => Err(PeerError::Status { url: peer.url.clone(), status }),
        Err(_) => Err(PeerError::Timeout { url: peer.url.clone(), after: option.soft_ttl() }),
    };
    peer.peers.observe(&peer.url, &outcome);
    outcome
}

/// A peer's refusal (`Peers::refused_by`); openraft treats the peer as
/// unreachable and backs off.
fn refused(peers: &Peers, url: &str, r: pb::Refusal) -> RPCError<TypeConfig> {
    unreachable(peers.refused_by(url, &r))
}

/// AppendEntries of one group a peer may hold at once (openraft's pipeline
/// to it); the batcher sends one batch per peer at a time, and what a
/// group queued meanwhile goes joined into one request (`batch_join`).
const PIPELINE_DEPTH: usize = 16;

impl GrpcPeer {
    fn refused(&self, r: pb::Refusal) -> RPCError<TypeConfig> {
        refused(&self.peers, &self.url, r)
    }

    /// Queues `rpc` on the peer's batcher now (a group's requests keep
    /// their order); the future is its answer.
    fn queue_append(
        &self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        option: &RPCOption,
    ) -> impl Future<Output = Rpc<AppendEntriesResponse<TypeConfig>>> + Send + use<> {
        let (_, queue) = self.prepare_append(rpc, option);
        queue()
    }

    /// Makes `rpc` ready to send: whether it is large (the batcher sends it
    /// on its own lane), and the call that queues it and gives its answer.
    fn prepare_append(
        &self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        option: &RPCOption,
    ) -> (bool, impl FnOnce() -> AppendAnswer + Send + use<>) {
        let prepared = (|| -> Rpc<Prepared> {
            let mut req = conv::append_request_to(self.peers.preamble(self.group), rpc).map_err(unreachable)?;
            // Bounded in bytes, whatever the entry sizes: the rest goes in the next call.
            let sent_up_to = bound_append(&mut req, rpc, MAX_APPEND_BYTES);
            let last = sent_up_to.or_else(|| rpc.entries.last().map(|e| e.log_id)).or(rpc.prev_log_id);
            let batcher = self.peers.batcher(&self.url).map_err(unreachable)?;
            let deadline = append_deadline(option, req.entries.iter().map(bytes::Bytes::len).sum());
            Ok(Prepared { req, batcher, sent_up_to, last, deadline })
        })();
        let large = prepared.as_ref().is_ok_and(|p| super::batcher::is_large(prost::Message::encoded_len(&p.req)));
        let (peers, url) = (self.peers.clone(), self.url.clone());
        let (group, target, vote_term, prev) = (self.group, self.target, rpc.vote.leader_id.term, rpc.prev_log_id);
        let queue = move || -> AppendAnswer {
            let queued = prepared.map(|Prepared { req, batcher, sent_up_to, last, deadline }| {
                (batcher.enqueue(req, last.as_ref().map(conv::log_id_to)), sent_up_to, last, deadline)
            });
            Box::pin(async move {
                let (pending, sent_up_to, last, deadline) = queued?;
                let sent = match tokio::time::timeout(deadline, pending.reply()).await {
                    Ok(sent) => sent,
                    Err(_) => Err(PeerError::Timeout { url: url.clone(), after: deadline }),
                };
                peers.observe(&url, &sent);
                let reply = sent.map_err(unreachable)?;
                let answer = conv::append_reply_from(reply).map_err(|r| refused(&peers, &url, r))?;
                if let Some(detail) = out_of_range(&answer, prev, last) {
                    return Err(unreachable(PeerError::Malformed { url, detail }));
                }
                let answered = match &answer {
                    AppendEntriesResponse::Success => Some(Answered::Took(last)),
                    AppendEntriesResponse::PartialSuccess(took) => Some(Answered::Took(*took)),
                    AppendEntriesResponse::Conflict => Some(Answered::Conflict),
                    AppendEntriesResponse::HigherVote(_) => None,
                };
                if let Some(answered) = answered {
                    peers.reversions.observe(group, target, vote_term, prev.as_ref(), answered);
                }
                match (answer, sent_up_to) {
                    // The follower took what was sent, not everything openraft asked for.
                    (AppendEntriesResponse::Success, Some(last)) => {
                        Ok(AppendEntriesResponse::PartialSuccess(Some(last)))
                    }
                    (answer, _) => Ok(answer),
                }
            })
        };
        (large, queue)
    }
}

/// An AppendEntries ready to queue on its peer's batcher.
struct Prepared {
    req: pb::AppendEntriesRequest,
    batcher: Batcher,
    /// Where `bound_append` cut the entries, if it did.
    sent_up_to: Option<LogId>,
    /// The last log id the request reaches.
    last: Option<LogId>,
    deadline: std::time::Duration,
}

/// The answer to come of one queued AppendEntries.
type AppendAnswer = BoxFuture<'static, Rpc<AppendEntriesResponse<TypeConfig>>>;

/// Why a follower's answer to a request from `prev` through `last` cannot
/// be true: a conflict before the first entry (nothing precedes it to
/// disagree with), or a part taken outside the range sent. openraft
/// asserts on such answers, so they are the peer's malformed replies.
fn out_of_range(
    answer: &AppendEntriesResponse<TypeConfig>,
    prev: Option<LogId>,
    last: Option<LogId>,
) -> Option<String> {
    match answer {
        AppendEntriesResponse::Conflict if prev.is_none() => Some("a conflict before the first entry".to_owned()),
        AppendEntriesResponse::PartialSuccess(took) if *took < prev || *took > last => {
            Some(format!("a part taken up to {took:?}, outside {prev:?}..={last:?}"))
        }
        _ => None,
    }
}

/// An answer as openraft's pipeline takes it, and whether the pipeline
/// goes on after it (not after a failure or a part taken).
fn stream_result(
    answer: Rpc<AppendEntriesResponse<TypeConfig>>,
    prev: Option<LogId>,
    last: Option<LogId>,
) -> (Rpc<StreamAppendResult<TypeConfig>>, bool) {
    let answer = match answer {
        Ok(a) => a,
        Err(e) => return (Err(e), false),
    };
    let result = answer.into_stream_result(prev, last);
    let goes_on = matches!(&result, Ok(matching) if *matching == last);
    (Ok(result), goes_on)
}

impl RaftNetworkV2<TypeConfig> for GrpcPeer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        self.queue_append(&rpc, &option).await
    }

    /// A group's replication pipelined: each request queued as openraft
    /// makes it, up to `PIPELINE_DEPTH` answers awaited, in order.
    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, Rpc<StreamAppendResult<TypeConfig>>>, RPCError<TypeConfig>>>
    where
        S: futures_util::Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        let peer: &GrpcPeer = self;
        let answers = super::pipeline::pipeline(input, PIPELINE_DEPTH, move |rpc| {
            let (prev, last) = (rpc.prev_log_id, rpc.entries.last().map(|e| e.log_id).or(rpc.prev_log_id));
            let (large, queue) = peer.prepare_append(&rpc, &option);
            (large, move || {
                let answer = queue();
                async move { stream_result(answer.await, prev, last) }
            })
        });
        let answers: BoxStream<'s, _> = Box::pin(answers);
        Box::pin(async move { Ok(answers) })
    }

    async fn vote(&mut self, rpc: VoteRequest<TypeConfig>, option: RPCOption) -> Rpc<VoteResponse<TypeConfig>> {
        self.ballot(rpc, false, option).await
    }

    async fn pre_vote(&mut self, rpc: VoteRequest<TypeConfig>, option: RPCOption) -> Rpc<VoteResponse<TypeConfig>> {
        self.ballot(rpc, true, option).await
    }

    /// The whole snapshot, in chunks of `SNAPSHOT_CHUNK_BYTES` over
    /// `InstallSnapshot`; the receiver installs it with the last one.
    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let send = async {
            let data = snapshot.snapshot.into_inner();
            let mut offset = 0usize;
            loop {
                let end = (offset + SNAPSHOT_CHUNK_BYTES).min(data.len());
                let done = end == data.len();
                let chunk = data[offset..end].to_vec();
                let preamble = self.peers.preamble(self.group);
                let req = conv::snapshot_chunk_to(preamble, &vote, &snapshot.meta, offset as u64, chunk, done)
                    .map_err(|e| StreamingError::Unreachable(Unreachable::new(&PeerError::from(e))))?;
                let reply = call(self, &option, req, |mut c, r| async move { c.install_snapshot(r).await })
                    .await
                    .map_err(|e| StreamingError::Unreachable(Unreachable::new(&e)))?;
                let answer = conv::snapshot_reply_from(reply).map_err(|r| match self.refused(r) {
                    RPCError::Unreachable(u) => StreamingError::Unreachable(u),
                    other => StreamingError::Unreachable(Unreachable::new(&other)),
                })?;
                // A higher vote ends the send: the leader steps down.
                if done || answer.vote > vote {
                    return Ok(answer);
                }
                offset = end;
            }
        };
        tokio::select! {
            answer = send => answer,
            closed = cancel => Err(StreamingError::Closed(closed)),
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<TransferLeaderResponse<TypeConfig>> {
        let req = conv::transfer_request_to(self.peers.preamble(self.group), &req);
        let reply = call(self, &option, req, |mut c, r| async move { c.transfer_leader(r).await })
            .await
            .map_err(unreachable)?;
        conv::transfer_reply_from(reply).map_err(|r| self.refused(r))
    }
}

impl GrpcPeer {
    async fn ballot(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        pre_vote: bool,
        option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        let req = conv::vote_request_to(self.peers.preamble(self.group), &rpc, pre_vote);
        let reply = call(self, &option, req, |mut c, r| async move { c.vote(r).await }).await.map_err(unreachable)?;
        conv::vote_reply_from(reply).map_err(|r| self.refused(r))
    }
}

#[cfg(test)]
mod tests {
    use openraft::EntryPayload;
    use openraft::vote::RaftLeaderId;
    use openraft::vote::leader_id_adv::CommittedLeaderId;

    use super::*;
    use crate::raft::types::Entry;

    fn rpc_of(sizes: &[usize], commit: u64) -> (pb::AppendEntriesRequest, AppendEntriesRequest<TypeConfig>) {
        let log_id = |i: u64| LogId::new(CommittedLeaderId::new(1, 1), i);
        let entries: Vec<Entry> =
            (1..=sizes.len() as u64).map(|i| Entry { log_id: log_id(i), payload: EntryPayload::Blank }).collect();
        let rpc = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries,
            leader_commit: Some(log_id(commit)),
        };
        let req = pb::AppendEntriesRequest {
            entries: sizes.iter().map(|n| bytes::Bytes::from(vec![0u8; *n])).collect(),
            leader_commit: Some(conv::log_id_to(&log_id(commit))),
            ..Default::default()
        };
        (req, rpc)
    }

    #[test]
    fn an_append_is_cut_to_its_byte_bound_and_commits_no_further_than_it_sends() {
        const MIB: usize = 1024 * 1024;
        let (mut req, rpc) = rpc_of(&[MIB; 20], 20);
        let last = bound_append(&mut req, &rpc, 8 * MIB).expect("cut");
        assert_eq!((req.entries.len(), last.index), (8, 8));
        assert_eq!(req.leader_commit.map(|c| c.index), Some(8), "commit clamped to what was sent");

        let (mut req, rpc) = rpc_of(&[MIB; 4], 2);
        assert_eq!(bound_append(&mut req, &rpc, 8 * MIB), None, "within the bound: untouched");
        assert_eq!((req.entries.len(), req.leader_commit.map(|c| c.index)), (4, Some(2)));

        let (mut req, rpc) = rpc_of(&[32 * MIB, MIB], 1);
        let last = bound_append(&mut req, &rpc, 8 * MIB).expect("cut");
        assert_eq!((req.entries.len(), last.index), (1, 1), "one entry always goes, whatever its size");
    }

    #[test]
    fn an_append_has_time_for_its_payload_beyond_the_heartbeat_deadline() {
        use std::time::Duration;
        let option = RPCOption::new(Duration::from_millis(100));
        assert_eq!(append_deadline(&option, 0), option.soft_ttl(), "a heartbeat keeps openraft's deadline");
        assert_eq!(append_deadline(&option, 32 * 1024 * 1024), option.soft_ttl() + Duration::from_secs(4));
    }

    #[test]
    fn an_answer_outside_the_range_sent_is_malformed() {
        use AppendEntriesResponse as A;
        let id = |term: u64, i: u64| Some(LogId::new(CommittedLeaderId::new(term, 1), i));
        let (prev, last) = (id(2, 5), id(2, 9));
        for (answer, bad) in [
            (A::Success, false),
            (A::Conflict, false),
            (A::PartialSuccess(prev), false),
            (A::PartialSuccess(id(2, 7)), false),
            (A::PartialSuccess(last), false),
            (A::PartialSuccess(None), true),
            (A::PartialSuccess(id(2, 4)), true),
            (A::PartialSuccess(id(1, 7)), true),
            (A::PartialSuccess(id(2, 10)), true),
        ] {
            assert_eq!(out_of_range(&answer, prev, last).is_some(), bad, "{answer:?}");
        }
        assert!(out_of_range(&A::Conflict, None, id(2, 3)).is_some(), "a conflict before the first entry");
        assert!(out_of_range(&A::PartialSuccess(None), None, id(2, 3)).is_none(), "nothing taken from the start");
    }
}
