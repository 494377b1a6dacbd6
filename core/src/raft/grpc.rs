//! Raft between voters over the private `RaftService` (tonic): the client
//! side as openraft's network, one lazily connected channel per peer shared
//! by every group, and the server side that hands each request to its
//! group. Every request carries the sender's cluster id; a node refuses a
//! peer of another cluster before it decodes the Raft payload.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, Raft};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;
use ursula_proto::raft::v1::raft_service_server::{RaftService, RaftServiceServer};

use super::batcher::{BatchStats, Batcher};
use super::pb as conv;
use super::peer_error::PeerError;
use super::refusals::{Direction, PeerRefusals};
use super::snapshot_store::{ObjectRef, SnapshotStore, Stored};
use super::types::{NodeId, TypeConfig};

/// The entries of one AppendEntries call, in bytes (one entry always goes,
/// whatever its size: the largest is a 32 MiB append, under the message
/// limit). The log store already reads no more than this per call
/// (`limited_get_log_entries`); the cut here keeps the bound whatever
/// openraft hands over.
const MAX_APPEND_BYTES: usize = super::log_store::MAX_REPLICATION_BYTES;

/// Cuts `req` to the longest prefix of entries within `max_bytes` (at least
/// one); returns the log id of the last entry kept when it cut any.
fn bound_append(
    req: &mut pb::AppendEntriesRequest,
    rpc: &AppendEntriesRequest<TypeConfig>,
    max_bytes: usize,
) -> Option<openraft::LogId<NodeId>> {
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
const BARRIER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a bootstrap probe waits for a peer.
const PROBE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

type Rpc<T, E = openraft::error::Infallible> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

fn unreachable<E: std::error::Error>(why: impl Into<PeerError>) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&why.into()))
}

/// Who this node is on the cluster plane, and its channels to the peers.
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
    ) -> Arc<Peers> {
        let (channels, batchers) = (Mutex::new(HashMap::new()), Mutex::new(HashMap::new()));
        let batch_stats = Arc::default();
        let unreachable = Mutex::default();
        Arc::new(Peers { cluster_id, node_id, urls, channels, batchers, batch_stats, refusals, unreachable })
    }

    fn client(&self, url: &str) -> Result<RaftServiceClient<Channel>, PeerError> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(url) {
            return Ok(c.clone());
        }
        let endpoint = Endpoint::from_shared(url.to_string())
            .map_err(|e| PeerError::BadUrl { url: url.to_owned(), source: Arc::new(e) })?;
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
        let batcher = Batcher::start(self.client(url)?, url.to_string(), self.batch_stats.clone());
        batchers.insert(url.to_string(), batcher.clone());
        Ok(batcher)
    }

    /// What peer `node` holds of `group` (the per-group bootstrap).
    pub async fn probe(&self, node: NodeId, group: u32) -> Result<pb::GroupHolding, PeerError> {
        use pb::probe_group_reply::Result as R;
        let url = self.urls.get(&node).ok_or(PeerError::NotConfigured(node))?;
        let mut client = self.client(url)?;
        let request = pb::ProbeGroupRequest { preamble: Some(self.preamble(group)) };
        let reply = tokio::time::timeout(PROBE_WAIT, client.probe_group(request))
            .await
            .map_err(|_| PeerError::Timeout { url: url.clone(), after: PROBE_WAIT })?
            .map_err(|status| PeerError::Status { url: url.clone(), status })?;
        match reply.into_inner().result {
            Some(R::Holding(h)) => Ok(h),
            Some(R::Refusal(r)) => {
                if r.kind() == Kind::ClusterMismatch {
                    self.refusals.record(Direction::RefusedBy, r.node_id, &r.cluster_id, url, true);
                }
                Err(PeerError::refused(url, &r))
            }
            None => Err(PeerError::Empty { url: url.clone() }),
        }
    }

    /// Asks `leader` for a read barrier of `group`: the log index to apply
    /// before a local read is as fresh as a leader read.
    pub async fn read_barrier(&self, leader: NodeId, group: u32) -> Result<u64, PeerError> {
        use pb::read_barrier_reply::Result as R;
        let url = self.urls.get(&leader).ok_or(PeerError::NotConfigured(leader))?;
        let mut client = self.client(url)?;
        let request = pb::ReadBarrierRequest { preamble: Some(self.preamble(group)) };
        let reply = tokio::time::timeout(BARRIER_WAIT, client.read_barrier(request))
            .await
            .map_err(|_| PeerError::Timeout { url: url.clone(), after: BARRIER_WAIT })?
            .map_err(|status| PeerError::Status { url: url.clone(), status })?;
        match reply.into_inner().result {
            Some(R::Index(index)) => Ok(index),
            Some(R::NotLeader(_)) => Err(PeerError::NotLeader { url: url.clone(), group }),
            Some(R::Refusal(r)) => Err(PeerError::refused(url, &r)),
            None => Err(PeerError::Empty { url: url.clone() }),
        }
    }

    /// Logs a peer's change between reachable and unreachable, once.
    fn observe<T>(&self, url: &str, outcome: &Result<T, PeerError>) {
        let lost = match outcome {
            Ok(_) => false,
            Err(
                PeerError::Status { .. }
                | PeerError::Timeout { .. }
                | PeerError::BatcherStopped
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

    fn preamble(&self, group: u32) -> pb::Preamble {
        pb::Preamble { cluster_id: self.cluster_id.clone(), node_id: self.node_id, group }
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
    url: String,
}

impl RaftNetworkFactory<TypeConfig> for GrpcNetwork {
    type Network = GrpcPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> GrpcPeer {
        let url = self.peers.urls.get(&target).cloned().unwrap_or_else(|| node.addr.clone());
        GrpcPeer { peers: self.peers.clone(), group: self.group, url }
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

impl GrpcPeer {
    /// A peer's refusal, counted when it names another cluster; openraft
    /// treats the peer as unreachable and backs off.
    fn refused<E: std::error::Error>(&self, r: pb::Refusal) -> RPCError<NodeId, BasicNode, E> {
        if r.kind() == Kind::ClusterMismatch {
            self.peers.refusals.record(Direction::RefusedBy, r.node_id, &r.cluster_id, &self.url, true);
        }
        unreachable(PeerError::refused(&self.url, &r))
    }
}

impl RaftNetwork<TypeConfig> for GrpcPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>> {
        let mut req = conv::append_request_to(self.peers.preamble(self.group), &rpc).map_err(unreachable)?;
        // Bounded in bytes, whatever the entry sizes: the rest goes in the next call.
        let sent_up_to = bound_append(&mut req, &rpc, MAX_APPEND_BYTES);
        let batcher = self.peers.batcher(&self.url).map_err(unreachable)?;
        let sent = match tokio::time::timeout(option.soft_ttl(), batcher.send(req)).await {
            Ok(sent) => sent,
            Err(_) => Err(PeerError::Timeout { url: self.url.clone(), after: option.soft_ttl() }),
        };
        self.peers.observe(&self.url, &sent);
        let reply = sent.map_err(unreachable)?;
        match (conv::append_reply_from(reply).map_err(|r| self.refused(r))?, sent_up_to) {
            // The follower took what was sent, not everything openraft asked for.
            (AppendEntriesResponse::Success, Some(last)) => Ok(AppendEntriesResponse::PartialSuccess(Some(last))),
            (answer, _) => Ok(answer),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let req = conv::snapshot_request_to(self.peers.preamble(self.group), &rpc).map_err(unreachable)?;
        let reply = call(self, &option, req, |mut c, r| async move { c.install_snapshot(r).await })
            .await
            .map_err(unreachable)?;
        conv::snapshot_reply_from(reply).map_err(|r| self.refused(r))
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> Rpc<VoteResponse<NodeId>> {
        let req = conv::vote_request_to(self.peers.preamble(self.group), &rpc);
        let reply = call(self, &option, req, |mut c, r| async move { c.vote(r).await }).await.map_err(unreachable)?;
        conv::vote_reply_from(reply).map_err(|r| self.refused(r))
    }
}

/// The server side: each request goes to its group's `Raft`, once the
/// node has started its groups.
pub struct RaftServer {
    cluster_id: String,
    node_id: NodeId,
    /// The node ids of `raft.peers`: refusals of those are listed.
    configured: std::collections::HashSet<NodeId>,
    refusals: Arc<PeerRefusals>,
    pub groups: Arc<OnceLock<Vec<Raft<TypeConfig>>>>,
    /// Raft snapshots on S3: a peer's object is copied before it is installed.
    objects: Option<Arc<SnapshotStore>>,
}

use pb::refusal::Kind;

impl RaftServer {
    pub fn new(
        cluster_id: String,
        node_id: NodeId,
        configured: std::collections::HashSet<NodeId>,
        refusals: Arc<PeerRefusals>,
        objects: Option<Arc<SnapshotStore>>,
    ) -> RaftServer {
        RaftServer { cluster_id, node_id, configured, refusals, groups: Arc::new(OnceLock::new()), objects }
    }

    /// A snapshot that arrives as a reference to a peer's object is copied
    /// into this node's directory here, before openraft sees it: a failed
    /// copy is a refusal the leader retries, not a storage error.
    async fn copy_reference(
        &self,
        group: u32,
        mut rpc: InstallSnapshotRequest<TypeConfig>,
    ) -> Result<InstallSnapshotRequest<TypeConfig>, pb::Refusal> {
        if rpc.offset != 0 || !rpc.done {
            return Ok(rpc);
        }
        let Some(parsed) = ObjectRef::parse(&rpc.data) else { return Ok(rpc) };
        let r = parsed.map_err(|e| self.refusal(Kind::SnapshotFailed, e.to_string()))?;
        let Some(objects) = &self.objects else {
            return Err(self.refusal(Kind::SnapshotFailed, "a snapshot reference needs S3 snapshots".into()));
        };
        let index = rpc.meta.last_log_id.map_or(0, |l| l.index);
        let copy = objects
            .copy(group, index, r)
            .await
            .map_err(|e| self.refusal(Kind::SnapshotFailed, format!("copying the snapshot object: {e}")))?;
        rpc.data = Stored::Object(copy).encode();
        Ok(rpc)
    }

    fn refusal(&self, kind: Kind, detail: String) -> pb::Refusal {
        conv::refusal(kind, &self.cluster_id, self.node_id, detail)
    }

    /// The group a request names, after the cluster check.
    fn group(
        &self,
        preamble: Option<&pb::Preamble>,
        from: Option<SocketAddr>,
    ) -> Result<&Raft<TypeConfig>, pb::Refusal> {
        let Some(p) = preamble else {
            return Err(self.refusal(Kind::Malformed, "no preamble".into()));
        };
        if p.cluster_id != self.cluster_id {
            let address = from.map(|a| a.to_string()).unwrap_or_default();
            let configured = self.configured.contains(&p.node_id);
            self.refusals.record(Direction::Refused, p.node_id, &p.cluster_id, &address, configured);
            return Err(self.refusal(Kind::ClusterMismatch, format!("this node is in cluster {:?}", self.cluster_id)));
        }
        self.refusals.accepted(p.node_id);
        self.groups
            .get()
            .and_then(|g| g.get(p.group as usize))
            .ok_or_else(|| self.refusal(Kind::UnknownGroup, format!("group {} is not running here", p.group)))
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
        tonic::transport::Server::builder().add_service(self.service()).serve_with_shutdown(addr, shutdown).await
    }
}

impl RaftServer {
    async fn append_one(&self, req: pb::AppendEntriesRequest, from: Option<SocketAddr>) -> pb::AppendEntriesReply {
        use pb::append_entries_reply::Result as R;
        let preamble = req.preamble.clone();
        let reply = match self.prepare(preamble.as_ref(), from, || conv::append_request_from(req)) {
            Ok((raft, rpc)) => raft.append_entries(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string())),
            Err(r) => Err(r),
        };
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
    ) -> Result<(&Raft<TypeConfig>, T), pb::Refusal> {
        let raft = self.group(preamble, from)?;
        let rpc = decode().map_err(|e| self.refusal(Kind::Malformed, e.to_string()))?;
        Ok((raft, rpc))
    }
}

/// What this voter holds of a group, for a peer's bootstrap probe.
fn holding(raft: &Raft<TypeConfig>) -> pb::GroupHolding {
    let m = raft.metrics();
    let m = m.borrow();
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
        let from = request.remote_addr();
        let req = request.into_inner();
        let result = match self.group(req.preamble.as_ref(), from) {
            Ok(raft) => match raft.ensure_linearizable().await {
                Ok(read_log_id) => R::Index(read_log_id.map_or(0, |id| id.index)),
                Err(RaftError::APIError(_)) => R::NotLeader(pb::NotLeader { leader: raft.current_leader().await }),
                Err(e) => R::Refusal(self.refusal(Kind::Fatal, e.to_string())),
            },
            Err(r) => R::Refusal(r),
        };
        Ok(Response::new(pb::ReadBarrierReply { result: Some(result) }))
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
        // The groups append concurrently; their WAL writes share a commit.
        let requests = request.into_inner().requests;
        let replies = futures_util::future::join_all(requests.into_iter().map(|r| self.append_one(r, from))).await;
        Ok(Response::new(pb::AppendEntriesBatchReply { replies }))
    }

    async fn vote(&self, request: Request<pb::VoteRequest>) -> Result<Response<pb::VoteReply>, Status> {
        use pb::vote_reply::Result as R;
        let from = request.remote_addr();
        let req = request.into_inner();
        let preamble = req.preamble.clone();
        let reply = match self.prepare(preamble.as_ref(), from, || conv::vote_request_from(req)) {
            Ok((raft, rpc)) => raft.vote(rpc).await.map_err(|e| self.refusal(Kind::Fatal, e.to_string())),
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
        let reply = match self.prepare(preamble.as_ref(), from, || conv::snapshot_request_from(req)) {
            Ok((raft, rpc)) => match self.copy_reference(group, rpc).await {
                Ok(rpc) => {
                    raft.install_snapshot(rpc).await.map_err(|e| self.refusal(Kind::SnapshotFailed, e.to_string()))
                }
                Err(r) => Err(r),
            },
            Err(r) => Err(r),
        };
        Ok(Response::new(match reply {
            Ok(reply) => conv::snapshot_reply_to(&reply),
            Err(r) => pb::InstallSnapshotReply { result: Some(R::Refusal(r)) },
        }))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{Entry, EntryPayload, LogId, Vote};

    use super::*;

    fn rpc_of(sizes: &[usize], commit: u64) -> (pb::AppendEntriesRequest, AppendEntriesRequest<TypeConfig>) {
        let log_id = |i: u64| LogId::new(openraft::CommittedLeaderId::new(1, 1), i);
        let entries: Vec<Entry<TypeConfig>> =
            (1..=sizes.len() as u64).map(|i| Entry { log_id: log_id(i), payload: EntryPayload::Blank }).collect();
        let rpc = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries,
            leader_commit: Some(log_id(commit)),
        };
        let req = pb::AppendEntriesRequest {
            entries: sizes.iter().map(|n| vec![0u8; *n]).collect(),
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
}
