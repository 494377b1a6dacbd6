//! Raft between voters over the private `RaftService` (tonic), the server
//! side: each request goes to its group's `Raft` once the node has started
//! its groups, after the cluster check and before any decoding. Snapshots
//! arrive in chunks and are installed whole with the last one.

use std::collections::HashMap;
use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use openraft::async_runtime::WatchReceiver;
use openraft::error::RaftError;
use tonic::{Request, Response, Status, Streaming};
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_server::{RaftService, RaftServiceServer};

use super::disk_guard::DiskGuard;
use super::format_check;
use super::leadership::Shed;
use super::pb as conv;
use super::recovery_gate::RecoveryGates;
use super::recovery_plan::HeldPlan;
use super::refusals::{Direction, PeerRefusals};
use super::snapshot_store::{ObjectRef, SnapshotStore, Stored};
use super::types::{GroupRaft, LogId, NodeId, Snapshot, SnapshotMeta, TypeConfig, Vote};

use pb::refusal::Kind;

/// The answers of one peer's batch stream, in the order of its batches.
type BatchReplies =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<pb::AppendEntriesBatchReply, Status>> + Send>>;

/// How long a forwarded command waits for its commit (both kinds are
/// idempotent: a renewal, a purge).
const FORWARD_COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A snapshot being received for a group: the chunks so far.
struct Receiving {
    last_log_id: Option<LogId>,
    vote: Vote,
    data: Vec<u8>,
}

/// The `RaftService` of this voter: a shared handle, so a batch stream's
/// answers (served after the call returned) reach the same state.
#[derive(Clone)]
pub struct RaftServer(Arc<ServerState>);

impl std::ops::Deref for RaftServer {
    type Target = ServerState;
    fn deref(&self) -> &ServerState {
        &self.0
    }
}

pub struct ServerState {
    cluster_id: String,
    node_id: NodeId,
    /// The node ids of `raft.peers`: refusals of those are listed.
    configured: std::collections::HashSet<NodeId>,
    refusals: Arc<PeerRefusals>,
    pub groups: Arc<OnceLock<Vec<GroupRaft>>>,
    /// The groups' proposal fences: forwarded commands pass them too.
    pub fences: OnceLock<Vec<Arc<super::fence::ProposalFence>>>,
    /// Snapshots being received, by group.
    receiving: Mutex<HashMap<u32, Receiving>>,
    /// This voter's drain mark, recovery gates and disk guard.
    limits: VoterLimits,
    /// Raft snapshots on S3: a peer's object is copied before it is installed.
    objects: Option<Arc<SnapshotStore>>,
}

/// What makes this voter refuse a peer's request.
pub struct VoterLimits {
    /// This voter's drain mark: a draining voter takes no leadership.
    pub shed: Arc<Shed>,
    /// A group that waits at its recovery gate grants no vote and takes no leadership.
    pub gates: Arc<RecoveryGates>,
    /// Under WAL disk pressure this voter takes no log entries from a leader.
    pub disk: Arc<DiskGuard>,
    /// The inbound half of `raft.append_transport_budget_bytes`: a batch is
    /// taken once it fits, so a peer's stream waits instead of piling up.
    pub transport: Arc<super::transport_budget::Direction>,
}

impl RaftServer {
    pub fn new(
        cluster_id: String,
        node_id: NodeId,
        configured: std::collections::HashSet<NodeId>,
        refusals: Arc<PeerRefusals>,
        objects: Option<Arc<SnapshotStore>>,
        limits: VoterLimits,
    ) -> RaftServer {
        let (groups, receiving) = (Arc::new(OnceLock::new()), Mutex::default());
        RaftServer(Arc::new(ServerState {
            cluster_id,
            node_id,
            configured,
            refusals,
            groups,
            fences: OnceLock::new(),
            receiving,
            limits,
            objects,
        }))
    }

    /// Whether the group a request names waits at its recovery gate here.
    fn gated(&self, preamble: Option<&pb::Preamble>) -> bool {
        preamble.is_some_and(|p| self.limits.gates.is_closed(p.group))
    }

    /// The recovery plan this replica holds for the group a request names.
    fn plan(&self, preamble: Option<&pb::Preamble>) -> Option<HeldPlan> {
        preamble.and_then(|p| self.limits.gates.plans.held(p.group))
    }

    /// A replica that holds a recovery plan votes only for the plan's
    /// leader above the plan term; one gated without a plan votes for no
    /// one: it may have lost entries it acknowledged, so its vote could
    /// elect an older history (spec/35).
    fn admits_vote(
        &self,
        preamble: Option<&pb::Preamble>,
        rpc: &openraft::raft::VoteRequest<TypeConfig>,
    ) -> Result<(), pb::Refusal> {
        match self.plan(preamble) {
            Some(plan) => {
                let (candidate, term) = (rpc.vote.leader_id.node_id, rpc.vote.leader_id.term);
                let last = rpc.last_log_id.as_ref().map(|l| (l.leader_id.term, l.index));
                plan.admits_vote(candidate, term, last).map_err(|why| self.refusal(Kind::Draining, why))
            }
            None if self.gated(preamble) => {
                Err(self.refusal(Kind::Draining, "this replica waits at its recovery gate and grants no vote".into()))
            }
            None => Ok(()),
        }
    }

    /// A replica that holds a recovery plan answers no barrier and takes
    /// no forwarded command until the group's history event applied: a
    /// barrier below the event would open a gate on the old history, and
    /// the event is the first entry of the plan's leader (spec/35).
    fn no_pending_history<'a>(
        &self,
        preamble: &Option<pb::Preamble>,
        raft: &'a GroupRaft,
    ) -> Result<&'a GroupRaft, pb::Refusal> {
        match self.plan(preamble.as_ref()) {
            Some(_) => {
                Err(self.refusal(Kind::HistoryPending, "the group's new history event has not applied here".into()))
            }
            None => Ok(raft),
        }
    }

    /// A replica that holds a recovery plan takes replication only from a
    /// leader above the plan term.
    fn admits_leader(&self, preamble: Option<&pb::Preamble>, vote: &Vote) -> Result<(), pb::Refusal> {
        match self.plan(preamble) {
            Some(plan) if !plan.admits_leader(vote.leader_id.term) => Err(self.refusal(
                Kind::Draining,
                format!("this replica holds a recovery plan: it follows only a leader above term {}", plan.leader_term),
            )),
            _ => Ok(()),
        }
    }

    /// A snapshot that arrives as a reference to a peer's object is copied
    /// into this node's directory here, before openraft sees it: a failed
    /// copy is a refusal the leader retries, not a storage error.
    async fn copy_reference(&self, group: u32, meta: &SnapshotMeta, data: Vec<u8>) -> Result<Vec<u8>, pb::Refusal> {
        let Some(parsed) = ObjectRef::parse(&data) else { return Ok(data) };
        let r = parsed.map_err(|e| self.refusal(Kind::SnapshotFailed, e.to_string()))?;
        let Some(objects) = &self.objects else {
            return Err(self.refusal(Kind::SnapshotFailed, "a snapshot reference needs S3 snapshots".into()));
        };
        let index = meta.last_log_id.map_or(0, |l| l.index);
        let copy = objects
            .copy(group, index, r)
            .await
            .map_err(|e| self.refusal(Kind::SnapshotFailed, format!("copying the snapshot object: {e}")))?;
        Ok(Stored::Object(copy).into_raw())
    }

    /// Adds a chunk to the group's snapshot in progress; the whole snapshot
    /// once this was its last chunk.
    fn receive(
        &self,
        group: u32,
        chunk: conv::SnapshotChunk,
    ) -> Result<Option<(Vote, SnapshotMeta, Vec<u8>)>, pb::Refusal> {
        let mut receiving = self.receiving.lock().unwrap_or_else(|p| p.into_inner());
        if chunk.offset == 0 {
            let last_log_id = chunk.meta.last_log_id;
            receiving.insert(group, Receiving { last_log_id, vote: chunk.vote, data: Vec::new() });
        }
        let Some(r) = receiving.get_mut(&group).filter(|r| {
            r.last_log_id == chunk.meta.last_log_id && r.vote == chunk.vote && r.data.len() as u64 == chunk.offset
        }) else {
            receiving.remove(&group);
            let why = format!("snapshot chunk at {} does not continue the snapshot being received", chunk.offset);
            return Err(self.refusal(Kind::SnapshotFailed, why));
        };
        r.data.extend_from_slice(&chunk.data);
        if !chunk.done {
            return Ok(None);
        }
        let r = receiving.remove(&group).map(|r| r.data).unwrap_or_default();
        Ok(Some((chunk.vote, chunk.meta, r)))
    }

    fn refusal(&self, kind: Kind, detail: String) -> pb::Refusal {
        conv::refusal(kind, &self.cluster_id, self.node_id, detail)
    }

    /// The group a request names, after the cluster check.
    fn group(&self, preamble: Option<&pb::Preamble>, from: Option<SocketAddr>) -> Result<&GroupRaft, pb::Refusal> {
        let Some(p) = preamble else {
            return Err(self.refusal(Kind::Malformed, "no preamble".into()));
        };
        let address = || from.map(|a| a.to_string()).unwrap_or_default();
        if p.cluster_id != self.cluster_id {
            let configured = self.configured.contains(&p.node_id);
            self.refusals.record(Direction::Refused, p.node_id, &p.cluster_id, &address(), configured);
            // No cluster id: a node before format epoch 4, which reads this
            // kind as a protocol mismatch (spec/35), or a stray client.
            return Err(if p.cluster_id.is_empty() {
                self.refusal(Kind::FormatEpochMismatch, format_check::unidentified_text())
            } else {
                self.refusal(Kind::ClusterMismatch, format!("this node is in cluster {:?}", self.cluster_id))
            });
        }
        if !format_check::speaks_ours(p.format_epoch) {
            let why = format_check::mismatch_text(p.format_epoch);
            self.refusals.format.record(Direction::Refused, &address(), &why);
            return Err(self.refusal(Kind::FormatEpochMismatch, why));
        }
        self.refusals.accepted(p.node_id);
        self.groups
            .get()
            .and_then(|g| g.get(p.group as usize))
            .ok_or_else(|| self.refusal(Kind::UnknownGroup, format!("group {} is not running here", p.group)))
    }

    /// The groups of a batch append concurrently; their WAL writes share a commit.
    async fn append_batch(
        &self,
        batch: pb::AppendEntriesBatchRequest,
        from: Option<SocketAddr>,
    ) -> pb::AppendEntriesBatchReply {
        let _charged = self.limits.transport.charge(prost::Message::encoded_len(&batch)).await;
        let appends = batch.requests.into_iter().map(|r| self.append_one(r, from));
        pb::AppendEntriesBatchReply { replies: futures_util::future::join_all(appends).await }
    }

    pub fn service(self) -> RaftServiceServer<RaftServer> {
        RaftServiceServer::new(self)
            .max_decoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
    }

    /// Serves `RaftService` alone on `addr` (`server.cluster_listen`)
    /// until `shutdown` resolves.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), tonic::transport::Error> {
        tonic::transport::Server::builder()
            .initial_stream_window_size(ursula_proto::H2_STREAM_WINDOW)
            .initial_connection_window_size(ursula_proto::H2_CONNECTION_WINDOW)
            .max_frame_size(ursula_proto::H2_MAX_FRAME)
            // A peer's calls cut off at their deadline reset their streams;
            // under load dozens do at once (every group's votes or
            // heartbeats), and h2's default of 20 reset streams not yet
            // accepted closed the whole connection, the transfers on it
            // included. Peers are trusted callers of a private plane.
            .http2_max_pending_accept_reset_streams(Some(PEER_RESET_STREAMS))
            .add_service(self.service())
            .serve_with_shutdown(addr, shutdown)
            .await
    }
}

/// Streams a peer may reset before the server accepted them, at once.
const PEER_RESET_STREAMS: usize = 4096;

impl RaftServer {
    async fn append_one(&self, req: pb::AppendEntriesRequest, from: Option<SocketAddr>) -> pb::AppendEntriesReply {
        use pb::append_entries_reply::Result as R;
        // A follower whose WAL disk runs short takes no more entries (the
        // leader retries), so its log cannot fill the filesystem it needs
        // for the snapshot that frees it; heartbeats still keep the term.
        if !req.entries.is_empty() && self.limits.disk.under_pressure() {
            // The rest (vote, previous log id, commit) still reaches Raft,
            // as a heartbeat would: a heartbeat joined into this request
            // (`batch_join`) still keeps the term and the leader's lease.
            let mut beat = req;
            beat.entries.clear();
            let _ = self.deliver(beat, from).await;
            let why = "the WAL filesystem is below raft.wal.min_available_size".to_string();
            return pb::AppendEntriesReply { result: Some(R::Refusal(self.refusal(Kind::DiskPressure, why))) };
        }
        self.deliver(req, from).await
    }

    /// Hands a checked request to its group's Raft.
    async fn deliver(&self, req: pb::AppendEntriesRequest, from: Option<SocketAddr>) -> pb::AppendEntriesReply {
        use pb::append_entries_reply::Result as R;
        let preamble = req.preamble.clone();
        let reply = match self.prepare(preamble.as_ref(), from, || conv::append_request_from(req)) {
            Ok((raft, rpc)) => match self.admits_leader(preamble.as_ref(), &rpc.vote) {
                Ok(()) => raft.append_entries(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string())),
                Err(r) => Err(r),
            },
            Err(r) => Err(r),
        };
        // spec/35: a replica a live leader replicates to refuses a plan.
        if let (Ok(answer), Some(p)) = (&reply, &preamble)
            && !matches!(answer, openraft::raft::AppendEntriesResponse::HigherVote(_))
        {
            self.limits.gates.plans.heard_leader(p.group);
        }
        match reply {
            Ok(reply) => conv::append_reply_to(&reply),
            Err(r) => pb::AppendEntriesReply { result: Some(R::Refusal(r)) },
        }
    }

    /// The cluster check, then the decoding: a refusal for either.
    fn prepare<T>(
        &self,
        preamble: Option<&pb::Preamble>,
        from: Option<SocketAddr>,
        decode: impl FnOnce() -> Result<T, super::codec::CodecError>,
    ) -> Result<(&GroupRaft, T), pb::Refusal> {
        let raft = self.group(preamble, from)?;
        let rpc = decode().map_err(|e| self.refusal(Kind::Malformed, e.to_string()))?;
        Ok((raft, rpc))
    }
}

/// What this voter holds of a group, for a peer's bootstrap probe.
fn holding(raft: &GroupRaft) -> pb::GroupHolding {
    let m = raft.metrics();
    let m = m.borrow_watched();
    let members = m.membership_config.membership().voter_ids().next().is_some();
    let holds = members || m.last_log_index.is_some() || m.snapshot.is_some() || m.current_term > 0;
    pb::GroupHolding { holds, leader: m.current_leader, term: m.current_term }
}

#[tonic::async_trait]
impl RaftService for RaftServer {
    async fn probe_group(
        &self,
        request: Request<pb::ProbeGroupRequest>,
    ) -> Result<Response<pb::ProbeGroupReply>, Status> {
        use pb::probe_group_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let result = match self.group(req.preamble.as_ref(), from) {
            Ok(raft) => R::Holding(holding(raft)),
            Err(r) => R::Refusal(r),
        };
        Ok(Response::new(pb::ProbeGroupReply { result: Some(result) }))
    }

    async fn read_barrier(
        &self,
        request: Request<pb::ReadBarrierRequest>,
    ) -> Result<Response<pb::ReadBarrierReply>, Status> {
        use pb::read_barrier_reply::Result as R;
        use tracing::Instrument;
        let span =
            ursula_http::telemetry::rpc_span("ursula.raft.v1.RaftService/ReadBarrier", request.metadata().as_ref());
        let from = request.remote_addr();
        let req = request.into_inner();
        let result = match self
            .group(req.preamble.as_ref(), from)
            .and_then(|raft| self.no_pending_history(&req.preamble, raft))
        {
            Ok(raft) => match raft.ensure_linearizable(openraft::raft::ReadPolicy::ReadIndex).instrument(span).await {
                Ok(read_log_id) => R::Index(read_log_id.index()),
                Err(RaftError::APIError(_)) => R::NotLeader(pb::NotLeader { leader: raft.current_leader().await }),
                Err(e) => R::Refusal(self.refusal(Kind::Fatal, e.to_string())),
            },
            Err(r) => R::Refusal(r),
        };
        Ok(Response::new(pb::ReadBarrierReply { result: Some(result) }))
    }

    async fn forward_command(
        &self,
        request: Request<pb::ForwardCommandRequest>,
    ) -> Result<Response<pb::ForwardCommandReply>, Status> {
        use openraft::error::ClientWriteError;
        use pb::forward_command_reply::Result as R;
        use tracing::Instrument;
        use ursula_stream::{Command, Outcome};
        let span =
            ursula_http::telemetry::rpc_span("ursula.raft.v1.RaftService/ForwardCommand", request.metadata().as_ref());
        let from = request.remote_addr();
        let req = request.into_inner();
        let raft =
            self.group(req.preamble.as_ref(), from).and_then(|raft| self.no_pending_history(&req.preamble, raft));
        let result = match (raft, conv_command(&req.command)) {
            (Err(r), _) => R::Refusal(r),
            (_, Err(why)) => R::Refusal(self.refusal(Kind::Malformed, why)),
            (Ok(raft), Ok(command)) => {
                let fence = req.preamble.as_ref().and_then(|p| self.fences.get()?.get(p.group as usize));
                let _proposing = match fence {
                    Some(fence) => Some(fence.enter().await),
                    None => None,
                };
                let write = raft.client_write(super::types::Proposal::new(crate::clock::wall_ms(), command));
                match tokio::time::timeout(FORWARD_COMMIT_WAIT, write).instrument(span).await {
                    Ok(Ok(done)) => match done.data {
                        Outcome::PurgeBucket { removed } => R::Count(removed as u64),
                        Outcome::Renew => R::Count(0),
                        outcome @ (Outcome::ReferenceSource(_) | Outcome::ReleaseSource { .. }) => {
                            match ursula_stream::ForkStep::from_outcome(outcome) {
                                Some(step) => R::ForkStep(ursula_http::wire::encode(&step).to_vec()),
                                None => R::Refusal(self.refusal(Kind::Fatal, "not a fork step".into())),
                            }
                        }
                        other => R::Refusal(self.refusal(Kind::Fatal, format!("applied as {other:?}"))),
                    },
                    Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                        R::NotLeader(pb::NotLeader { leader: f.leader_id })
                    }
                    Ok(Err(e)) => R::Refusal(self.refusal(Kind::Fatal, e.to_string())),
                    Err(_) => R::Refusal(self.refusal(Kind::Fatal, "the command did not commit in time".into())),
                }
            }
        };
        // Only these commands are forwarded: renewals, purges and a fork's
        // steps in its source's group (`Command` has no others a follower proposes).
        fn conv_command(bytes: &[u8]) -> Result<Command, String> {
            match super::codec::decode_command(bytes).map_err(|e| e.to_string())? {
                c @ (Command::Renew(_)
                | Command::PurgeBucket(_)
                | Command::ReferenceSource(_)
                | Command::ReleaseSource(_)) => Ok(c),
                _ => Err("only renewals, purges and fork steps are forwarded".into()),
            }
        }
        Ok(Response::new(pb::ForwardCommandReply { result: Some(result) }))
    }

    async fn append_entries(
        &self,
        request: Request<pb::AppendEntriesRequest>,
    ) -> Result<Response<pb::AppendEntriesReply>, Status> {
        let from = request.remote_addr();
        Ok(Response::new(self.append_one(request.into_inner(), from).await))
    }

    async fn append_entries_batch(
        &self,
        request: Request<pb::AppendEntriesBatchRequest>,
    ) -> Result<Response<pb::AppendEntriesBatchReply>, Status> {
        let from = request.remote_addr();
        Ok(Response::new(self.append_batch(request.into_inner(), from).await))
    }

    type AppendEntriesStreamStream = BatchReplies;

    async fn append_entries_stream(
        &self,
        request: Request<Streaming<pb::AppendEntriesBatchRequest>>,
    ) -> Result<Response<BatchReplies>, Status> {
        let from = request.remote_addr();
        // Each batch is read once the last one is answered: the peer sends
        // the next one only then, and a group's requests stay in order.
        let replies = futures_util::stream::unfold(
            (self.clone(), request.into_inner()),
            move |(server, mut batches)| async move {
                let batch = batches.message().await.ok().flatten()?;
                let reply = server.append_batch(batch, from).await;
                Some((Ok(reply), (server, batches)))
            },
        );
        Ok(Response::new(Box::pin(replies)))
    }

    async fn vote(&self, request: Request<pb::VoteRequest>) -> Result<Response<pb::VoteReply>, Status> {
        use pb::vote_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let preamble = req.preamble.clone();
        let reply = match self.prepare(preamble.as_ref(), from, || conv::vote_request_from(req)) {
            Ok((raft, (rpc, pre))) => match self.admits_vote(preamble.as_ref(), &rpc) {
                Err(r) => Err(r),
                Ok(()) if pre => raft.pre_vote(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string())),
                Ok(()) => raft.vote(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string())),
            },
            Err(r) => Err(r),
        };
        Ok(Response::new(match reply {
            Ok(reply) => conv::vote_reply_to(&reply),
            Err(r) => pb::VoteReply { result: Some(R::Refusal(r)) },
        }))
    }

    async fn install_snapshot(
        &self,
        request: Request<pb::InstallSnapshotRequest>,
    ) -> Result<Response<pb::InstallSnapshotReply>, Status> {
        use pb::install_snapshot_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let preamble = req.preamble.clone();
        let group = preamble.as_ref().map_or(0, |p| p.group);
        let reply = match self.prepare(preamble.as_ref(), from, || conv::snapshot_chunk_from(req)) {
            Ok((raft, chunk)) => match self.admits_leader(preamble.as_ref(), &chunk.vote) {
                Ok(()) => self.install_chunk(raft, group, chunk).await,
                Err(r) => Err(r),
            },
            Err(r) => Err(r),
        };
        Ok(Response::new(match reply {
            Ok(vote) => conv::snapshot_reply_to(&vote),
            Err(r) => pb::InstallSnapshotReply { result: Some(R::Refusal(r)) },
        }))
    }

    async fn leadership_shed(
        &self,
        request: Request<pb::LeadershipShedRequest>,
    ) -> Result<Response<pb::LeadershipShedReply>, Status> {
        use pb::leadership_shed_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let result = match self.group(req.preamble.as_ref(), from) {
            Ok(_) => {
                let mut state = self.shed_state();
                let preamble = req.preamble.as_ref();
                if req.for_group && (self.gated(preamble) || self.plan(preamble).is_some()) {
                    state.should_accept_transfer = false;
                }
                R::State(state)
            }
            Err(r) => R::Refusal(r),
        };
        Ok(Response::new(pb::LeadershipShedReply { result: Some(result) }))
    }

    /// Answered whatever the sender: the prober decides (spec/35).
    async fn format_probe(
        &self,
        _request: Request<pb::FormatProbeRequest>,
    ) -> Result<Response<pb::FormatProbeReply>, Status> {
        Ok(Response::new(pb::FormatProbeReply {
            format_epoch: crate::format_epoch::FORMAT_EPOCH,
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
        }))
    }

    async fn transfer_leader(
        &self,
        request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        use pb::transfer_leader_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let preamble = req.preamble.clone();
        let reply = match self.prepare(preamble.as_ref(), from, || conv::transfer_request_from(req)) {
            // A draining voter does not campaign: the leader's followers
            // elect another once its heartbeats stop.
            Ok((_, rpc))
                if *rpc.to_node_id() == self.node_id
                    && (!self.limits.shed.may_lead()
                        || self.gated(preamble.as_ref())
                        || self.plan(preamble.as_ref()).is_some()) =>
            {
                Err(self.refusal(Kind::Draining, "this voter sheds its leaderships and takes none".into()))
            }
            Ok((raft, rpc)) => {
                raft.handle_transfer_leader(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string()))
            }
            Err(r) => Err(r),
        };
        Ok(Response::new(match reply {
            Ok(answer) => conv::transfer_reply_to(&answer),
            Err(r) => pb::TransferLeaderReply { result: Some(R::Refusal(r)) },
        }))
    }
}

impl RaftServer {
    fn shed_state(&self) -> pb::ShedState {
        let willing = self.limits.shed.may_lead();
        pb::ShedState { should_campaign: willing, should_accept_transfer: willing }
    }

    /// Keeps a chunk; with the last one, installs the whole snapshot. The
    /// answer is this node's vote.
    async fn install_chunk(
        &self,
        raft: &GroupRaft,
        group: u32,
        chunk: conv::SnapshotChunk,
    ) -> Result<Vote, pb::Refusal> {
        let Some((vote, meta, data)) = self.receive(group, chunk)? else {
            return Ok(raft.metrics().borrow_watched().vote);
        };
        let data = self.copy_reference(group, &meta, data).await?;
        let snapshot = Snapshot { meta, snapshot: Cursor::new(data) };
        match raft.install_full_snapshot(vote, snapshot).await {
            Ok(answer) => Ok(answer.vote),
            Err(e) => Err(self.refusal(Kind::SnapshotFailed, e.to_string())),
        }
    }
}
