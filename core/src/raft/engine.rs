//! The Raft group engine: every group an openraft `Raft` whose state
//! machine is the stream store. Writes go through the group's log; reads
//! and waits use the applied state the state machine shares.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::ReadPolicy;
use serde_json::{Map, Value, json};
use ursula_stream::{Command, Outcome};
use ursula_wal::Wal;

use super::disk_guard::DiskGuard;
use super::log_store::GroupLog;
use super::state_machine::GroupShared;
use super::types::{GroupRaft, Proposal};
use crate::clock::Clock;
use crate::engine::group_state::GroupState;
use crate::engine::{
    AdminError, EngineError, GroupEngine, Leadership, QuorumProof, ShedState, SnapshotTaken, TransferError, Transferred,
};
use ursula_stream::routing::GroupId;

/// How long a proposal waits for its apply before its answer becomes
/// `OUTCOME_UNKNOWN` (an isolated leader never sees its entries commit).
const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a follower waits to apply up to its leader's read barrier.
const BARRIER_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A command forwarded to `leader` that got no answer: its outcome is
/// unknown after a timeout, else nothing was applied.
fn forwarding_failed(group: GroupId, leader: u64, e: super::peer_error::PeerError) -> EngineError {
    tracing::warn!(group = group.0, leader, error = %e, "a command forwarded to the leader got no answer");
    match e {
        super::peer_error::PeerError::Timeout { .. } => EngineError::OutcomeUnknown(group),
        e if e.history_pending() => EngineError::HistoryPending(group),
        _ => EngineError::NoLeader(group),
    }
}

pub struct RaftGroup {
    pub raft: GroupRaft,
    pub shared: Arc<GroupShared>,
    pub log: GroupLog,
    /// Proposals pass it; a leadership transfer closes it (`fence`).
    pub fence: Arc<super::fence::ProposalFence>,
}

pub struct RaftEngine {
    pub(super) node_id: u64,
    /// Client planes of the peers by node id, for leader redirects.
    pub(super) client_urls: std::collections::HashMap<u64, String>,
    pub(super) groups: Vec<RaftGroup>,
    pub(super) wal: Wal,
    pub(super) guard: Arc<DiskGuard>,
    pub(super) refusals: Arc<super::refusals::PeerRefusals>,
    /// The time proposals are stamped with.
    pub(super) clock: Arc<dyn Clock>,
    /// The cluster plane's client side; `None` on a single node.
    pub(super) peers: Option<Arc<super::grpc_client::Peers>>,
    /// Raft snapshots on S3; `None`: inline.
    pub(super) objects: Option<Arc<super::snapshot_store::SnapshotStore>>,
    pub(super) shed: Arc<super::leadership::Shed>,
    pub(super) log_pressure: super::log_pressure::LogPressure,
    /// The snapshot-store health gate; `None` without S3 snapshots.
    pub(super) store_health: Option<Arc<super::store_health::StoreHealth>>,
    /// `storage.snapshot.drive_interval`: the health gate's tick.
    pub(super) drive_interval: std::time::Duration,
    /// `governance.leadership_balance.peer_timeout`.
    pub(super) peer_timeout: std::time::Duration,
    /// Groups that wait at their crash-recovery gate.
    pub(super) recovery_gates: Arc<super::recovery_gate::RecoveryGates>,
    pub(super) transfers: super::leadership::TransferStats,
    /// The most snapshot builds the driver has seen running at once.
    pub(super) snapshot_builds_peak: std::sync::atomic::AtomicUsize,
    /// Per group, the last purge an operator asked for (`purge_now`).
    pub(super) purges_asked: std::sync::Mutex<std::collections::HashMap<u32, u64>>,
}

impl RaftEngine {
    /// A group that serves: hosted here and not stopped by a failed apply.
    fn group(&self, group: GroupId) -> Result<&RaftGroup, EngineError> {
        let g = self.groups.get(group.0 as usize).ok_or(EngineError::UnknownGroup(group))?;
        if g.shared.apply_stopped.load(Ordering::SeqCst) {
            return Err(EngineError::ApplyStopped(group));
        }
        // spec/35: a group that holds a recovery plan serves nothing until
        // its history event applied.
        if self.holds_plan(group.0) {
            return Err(EngineError::HistoryPending(group));
        }
        Ok(g)
    }

    /// The groups a failed apply stopped on this replica.
    pub fn apply_stopped_groups(&self) -> Vec<u32> {
        let stopped = self.groups.iter().enumerate().filter(|(_, g)| g.shared.apply_stopped.load(Ordering::SeqCst));
        stopped.map(|(i, _)| i as u32).collect()
    }

    pub fn groups(&self) -> &[RaftGroup] {
        &self.groups
    }

    /// spec/38 `raft_replica_unready`: some initialized group holds this
    /// replica as a learner or not at all (`local_replica_not_voter`).
    fn not_a_voter_somewhere(&self) -> bool {
        self.groups.iter().any(|g| {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            let membership = m.membership_config.membership();
            membership.voter_ids().next().is_some() && !membership.voter_ids().any(|id| id == self.node_id)
        })
    }

    /// Every group knows a leader (this node or a peer), but for those a
    /// failed apply stopped: the node stays ready for its other groups.
    fn all_led(&self) -> bool {
        self.groups.iter().all(|g| {
            g.shared.apply_stopped.load(Ordering::SeqCst) || g.raft.metrics().borrow_watched().current_leader.is_some()
        })
    }
}

/// A write whose body the log pressure gate refuses (spec/38): snapshots,
/// deletes and housekeeping still go through, so the log can shrink.
fn carries_body(command: &Command) -> bool {
    match command {
        Command::Create(c) => !c.body.is_empty(),
        Command::Append(a) => !a.body.is_empty(),
        Command::PublishSnapshot(_) => true,
        _ => false,
    }
}

/// The bytes of a command's body, which its entry carries to every voter.
fn body_bytes(command: &Command) -> usize {
    match command {
        Command::Create(c) => c.body.len(),
        Command::Append(a) => a.body.len(),
        Command::PublishSnapshot(p) => p.body.len(),
        _ => 0,
    }
}

/// How long a proposal of `command` waits for its apply: `COMMIT_WAIT`,
/// plus the time its body takes to reach a follower at the slowest rate a
/// replication call is given (a 32 MiB append: 4 s more), so a large
/// write on a busy host is not answered unknown while it replicates.
fn commit_wait(command: &Command) -> std::time::Duration {
    COMMIT_WAIT + super::grpc_client::slowest_transfer(body_bytes(command))
}

impl GroupEngine for RaftEngine {
    fn name(&self) -> &'static str {
        "raft"
    }

    fn node_id(&self) -> u64 {
        self.node_id
    }

    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }

    fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }

    #[tracing::instrument(name = "raft.propose", level = "debug", skip_all, fields(group = group.0))]
    async fn propose(&self, group: GroupId, command: Command) -> Result<Outcome, EngineError> {
        let g = self.group(group)?;
        if self.guard.under_pressure() {
            return Err(EngineError::DiskPressure);
        }
        if carries_body(&command) && self.log_pressure.refuse_write() {
            return Err(EngineError::LogPressure);
        }
        // Held until the answer: a transfer waits for it (`fence`).
        let _proposing = g.fence.enter().await;
        // Checked right before proposing, so that `NoLeader` means nothing
        // was proposed (extensions §5.7).
        if g.raft.metrics().borrow_watched().current_leader != Some(self.node_id) {
            return Err(EngineError::NoLeader(group));
        }
        let wait = commit_wait(&command);
        let write = g.raft.client_write(Proposal::new(self.clock.now_ms(), command));
        match tokio::time::timeout(wait, write).await {
            Ok(Ok(response)) => Ok(response.data),
            // Refused before its entry was appended: nothing was proposed.
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(EngineError::NoLeader(group)),
            // This node led a moment ago: the entry may be in the log, and a
            // new leader may still commit it.
            Ok(Err(RaftError::APIError(ClientWriteError::LogEntryDiscarded(_)))) | Err(_) => {
                Err(EngineError::OutcomeUnknown(group))
            }
            // The entry itself, or one before it, failed to apply.
            Ok(Err(_)) if g.shared.apply_stopped.load(Ordering::SeqCst) => Err(EngineError::ApplyStopped(group)),
            Ok(Err(e)) => {
                tracing::error!(group = group.0, error = %e, "a Raft group failed a write");
                Err(EngineError::Fatal(e.to_string()))
            }
        }
    }

    fn state(&self, group: GroupId) -> Result<&Mutex<GroupState>, EngineError> {
        Ok(&self.group(group)?.shared.state)
    }

    fn metrics(&self) -> Map<String, Value> {
        let groups: Vec<Value> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let m = g.raft.metrics().borrow_watched().clone();
                let log = g.log.figures();
                let membership = m.membership_config.membership();
                let voters: Vec<u64> = membership.voter_ids().collect();
                let learners: Vec<u64> = membership.learner_ids().collect();
                json!({
                    "raft_group_id": i,
                    "current_leader": m.current_leader,
                    "current_term": m.current_term,
                    "last_log_index": m.last_log_index,
                    "committed_index": m.local_committed.map(|c| c.index),
                    // spec/35: with committed_index, the replica's committed entry.
                    "committed_term": m.local_committed.map(|c| c.leader_id.term),
                    "committed_node": m.local_committed.map(|c| c.leader_id.node_id),
                    "voters": voters,
                    "learners": learners,
                    // The voter sets of the membership, two while a change is
                    // joint; and of the committed membership.
                    "voter_configs": membership.get_joint_config(),
                    "committed_voter_configs": m.committed_membership_config.membership().get_joint_config(),
                    "last_applied_index": g.shared.applied_index.load(Ordering::Relaxed),
                    "snapshot_index": g.shared.snapshot_index.load(Ordering::Relaxed),
                    "purged_index": m.purged.map(|p| p.index),
                    "log_bytes_since_snapshot": g.log.bytes_since_purge(),
                    // spec/35's recovery runbook reads these.
                    "last_log_term": log.last_log_term,
                    "recovery_gate": self.recovery_gates.state(i as u32),
                    "recovery": self.recovery_gates.plans.held(i as u32).map(|p| p.report()),
                    // The last accepted loss this replica applied.
                    "history": {
                        "event_index": crate::engine::group_state::lock(&g.shared.state)
                            .store
                            .history_event()
                            .map(|e| e.log_index),
                    },
                    "leads_live": leads_live(&m, self.node_id, g.raft.config().election_timeout_max),
                    "maintenance": { "running": !g.shared.apply_stopped.load(Ordering::SeqCst) },
                    // spec/37: the group's log cache and journal index.
                    "wal_cache_bytes": log.cache_bytes,
                    "wal_indexed_entries": log.indexed_entries,
                    "wal_cache_hits": log.cache_hits,
                    "wal_cache_misses": log.cache_misses,
                    "wal_disk_read_bytes": log.disk_read_bytes,
                })
            })
            .collect();
        let wal = self.wal.stats();
        let mut m = Map::new();
        m.insert("raft_node_id".into(), self.node_id.into());
        let led = self.groups.iter().filter(|g| g.raft.metrics().borrow_watched().current_leader == Some(self.node_id));
        m.insert("raft_leaderships".into(), led.count().into());
        m.insert("apply_stopped_groups".into(), json!(self.apply_stopped_groups()));
        m.insert("raft_leader_transfers_triggered".into(), self.transfers.triggered.load(Ordering::Relaxed).into());
        m.insert("leadership_shed".into(), self.shed.state().state.into());
        m.insert("leadership_shed_state".into(), json!(self.shed.state()));
        m.insert("raft_groups".into(), Value::Array(groups));
        let building = self.groups.iter().filter(|g| g.shared.building.load(Ordering::Relaxed)).count();
        m.insert("raft_snapshot_builds_in_flight".into(), building.into());
        let peak = self.snapshot_builds_peak.fetch_max(building, Ordering::Relaxed).max(building);
        m.insert("raft_snapshot_builds_in_flight_max".into(), peak.into());
        m.insert("raft_maintenance".into(), self.maintenance_report());
        m.insert("wal_physical_bytes".into(), wal.bytes_on_disk.into());
        m.insert("wal_segments".into(), wal.segments.into());
        m.insert("wal_frames_written".into(), wal.frames_written.into());
        m.insert("wal_batches_written".into(), wal.batches_written.into());
        m.insert("wal_fsyncs".into(), wal.fsyncs.into());
        m.insert("wal_rotations".into(), wal.rotations.into());
        // The node's reads of its groups' logs: from the cache, or from disk.
        let reads = self
            .groups
            .iter()
            .map(|g| g.log.figures())
            .fold((0u64, 0u64, 0u64), |(h, m, b), f| (h + f.cache_hits, m + f.cache_misses, b + f.disk_read_bytes));
        m.insert("wal_cache_hits".into(), reads.0.into());
        m.insert("wal_cache_misses".into(), reads.1.into());
        m.insert("wal_disk_reads".into(), reads.1.into());
        m.insert("wal_disk_read_bytes".into(), reads.2.into());
        m.insert("wal_reclaims".into(), wal.reclaimed_segments.into());
        m.insert("wal_reclaimed_bytes".into(), wal.reclaimed_bytes.into());
        m.insert("wal_reclaim_ns".into(), wal.reclaim_ns.into());
        m.insert("wal_reclaim_failures".into(), wal.reclaim_failures.into());
        m.insert("wal_rewritten_bytes".into(), wal.rewritten_bytes.into());
        m.insert("wal_dirty_segments".into(), wal.dirty_segments.into());
        m.insert("wal_lagging_groups".into(), wal.lagging_groups.into());
        m.insert("wal_pinned_segments".into(), wal.pinned_segments.into());
        m.insert("wal_recovery_ns".into(), wal.recovery_ns.into());
        m.insert("wal_recovery_records".into(), wal.recovery_records.into());
        m.insert("wal_recovery_bytes".into(), wal.recovery_bytes.into());
        m.insert("wal_recovery_live_entries".into(), wal.recovery_live_entries.into());
        m.insert("wal_available_bytes".into(), self.guard.available().into());
        m.insert("wal_min_available_bytes".into(), self.guard.min_available().into());
        m.insert("wal_resume_available_bytes".into(), self.guard.resume_available().into());
        m.insert("wal_disk_stat_errors".into(), self.guard.stat_errors().into());
        m.insert("wal_disk_pressure".into(), self.guard.under_pressure().into());
        self.refusals.metrics(&mut m);
        self.log_pressure.metrics(&mut m);
        self.store_health_metrics(&mut m);
        m.insert("recovery_gates".into(), self.recovery_gates.metrics());
        m.insert("wal_recovery".into(), self.recovery_gates.report());
        m.insert("snapshot_backend".into(), if self.objects.is_some() { "s3" } else { "inline" }.into());
        if let Some(objects) = &self.objects {
            objects.metrics(&mut m);
        }
        if let Some(peers) = &self.peers {
            let stats = &peers.batch_stats;
            m.insert("raft_append_calls".into(), stats.calls.load(Ordering::Relaxed).into());
            m.insert("raft_append_requests".into(), stats.requests.load(Ordering::Relaxed).into());
            m.insert("raft_append_empty_requests".into(), stats.empty_requests.load(Ordering::Relaxed).into());
            m.insert("raft_append_joined_requests".into(), stats.joined_requests.load(Ordering::Relaxed).into());
            peers.reversions.metrics(&mut m);
            let t = &peers.transport;
            m.insert("raft_append_transport_budget_bytes".into(), t.capacity.into());
            m.insert("raft_append_transport_outbound_bytes".into(), t.outbound.held().into());
            m.insert("raft_append_transport_inbound_bytes".into(), t.inbound.held().into());
            m.insert("raft_append_transport_outbound_waits".into(), t.outbound.waits().into());
            m.insert("raft_append_transport_inbound_waits".into(), t.inbound.waits().into());
        }
        m
    }

    async fn linearize(&self, group: GroupId) -> Result<(), EngineError> {
        match self.group(group)?.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(_)) => Err(EngineError::NoLeader(group)),
            Err(e) => {
                tracing::error!(group = group.0, error = %e, "a Raft group failed a read");
                Err(EngineError::Fatal(e.to_string()))
            }
        }
    }

    #[tracing::instrument(name = "raft.read_barrier", level = "debug", skip_all, fields(group = group.0))]
    async fn confirm(&self, group: GroupId) -> Result<(), EngineError> {
        let g = self.group(group)?;
        let leader = g.raft.metrics().borrow_watched().current_leader;
        match (leader, &self.peers) {
            (Some(id), _) if id == self.node_id => self.linearize(group).await,
            (Some(id), Some(peers)) => {
                let index = peers.read_barrier(id, group.0).await.map_err(|e| {
                    tracing::debug!(group = group.0, error = %e, "no read barrier from the leader");
                    if e.history_pending() { EngineError::HistoryPending(group) } else { EngineError::NoLeader(group) }
                })?;
                self.wait_applied(group, index).await
            }
            _ => Err(EngineError::NoLeader(group)),
        }
    }

    async fn wait_applied(&self, group: GroupId, index: u64) -> Result<(), EngineError> {
        self.group(group)?
            .raft
            .wait(Some(BARRIER_APPLY_WAIT))
            .applied_index_at_least(Some(index), "an index to read at")
            .await
            .map(|_| ())
            .map_err(|_| EngineError::NoLeader(group))
    }

    fn leadership(&self, group: GroupId) -> Leadership {
        // A stopped replica still names the leader it knew: a write it
        // leads is answered `APPLY_STOPPED`, one a peer leads goes there.
        let Some(g) = self.groups.get(group.0 as usize) else { return Leadership::Unknown };
        let m = g.raft.metrics();
        let m = m.borrow_watched();
        match m.current_leader {
            Some(id) if id == self.node_id => Leadership::Local { term: m.current_term },
            Some(id) => match self.client_urls.get(&id) {
                Some(url) => Leadership::Peer { id, term: m.current_term, client_url: url.clone() },
                None => Leadership::Unknown,
            },
            None => Leadership::Unknown,
        }
    }

    async fn transfer_leader(&self, group: u32, to: u64) -> Result<Transferred, TransferError> {
        self.transfer(group, to).await
    }

    async fn maintenance(&self, set: Option<bool>) -> Result<ShedState, AdminError> {
        match set {
            Some(on) => self.set_maintenance(on).await.map_err(|e| AdminError::Failed(e.to_string())),
            None => Ok(self.shed.state()),
        }
    }

    async fn snapshot(&self, group: u32) -> Result<SnapshotTaken, AdminError> {
        self.snapshot_now(group).await
    }

    async fn purge_log(&self, group: u32, upto: u64) -> Result<crate::engine::PurgeAsked, AdminError> {
        self.purge_now(group, upto).await
    }

    async fn replace_voters(
        &self,
        group: u32,
        voters: std::collections::BTreeSet<u64>,
    ) -> Result<crate::engine::VotersReplaced, AdminError> {
        self.replace_voters_now(group, voters).await
    }

    fn applied_index(&self, group: GroupId) -> u64 {
        self.groups.get(group.0 as usize).map_or(0, |g| g.shared.applied_index.load(Ordering::Relaxed))
    }

    async fn fork_step(&self, group: GroupId, command: Command) -> Result<ursula_stream::ForkStep, EngineError> {
        match (self.leadership(group), &self.peers) {
            (Leadership::Local { .. }, _) => crate::engine::local_fork_step(self.propose(group, command).await?),
            (Leadership::Peer { id, .. }, Some(peers)) => {
                peers.forward_fork_step(id, group.0, &command).await.map_err(|e| forwarding_failed(group, id, e))
            }
            _ => Err(EngineError::NoLeader(group)),
        }
    }

    async fn forward_to_leader(&self, group: GroupId, command: Command) -> Result<u64, EngineError> {
        match (self.leadership(group), &self.peers) {
            (Leadership::Local { .. }, _) => crate::engine::counted(self.propose(group, command).await?),
            (Leadership::Peer { id, .. }, Some(peers)) => {
                peers.forward(id, group.0, &command).await.map_err(|e| forwarding_failed(group, id, e))
            }
            _ => Err(EngineError::NoLeader(group)),
        }
    }

    async fn quorum(&self, group: u32) -> Result<QuorumProof, AdminError> {
        self.quorum_proof(group).await
    }

    async fn accept_unsynced_loss(
        &self,
        group: u32,
        plan: super::recovery_plan::PlanRequest,
    ) -> Result<Value, AdminError> {
        self.take_plan(group, plan).await
    }

    fn readiness_details(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("peer_cluster_mismatches".into(), self.refusals.mismatches());
        self.store_health_metrics(&mut m);
        m.insert("recovery_gates".into(), self.recovery_gates.metrics());
        m.insert("recovery_stalled_groups".into(), json!(self.recovery_gates.stalled_groups()));
        m
    }

    fn watch_cold(self: &Arc<Self>, cold: &Arc<crate::cold::Cold>) -> Option<tokio::task::JoinHandle<()>> {
        let crate::cold::ColdBackend::S3(s3) = &cold.config.backend else { return None };
        self.store_health.as_ref()?;
        let window = s3.write_window(cold.config.flush_interval);
        let gate = super::store_health::run(self.clone(), cold.clone(), self.drive_interval, s3.health, window);
        Some(tokio::spawn(gate))
    }

    fn unready_reason(&self) -> Option<&'static str> {
        if self.refusals.format.seen() {
            Some("format_epoch_mismatch")
        } else if self.guard.under_pressure() {
            Some("wal_disk_pressure")
        } else if !self.recovery_gates.stalled_groups().is_empty() {
            Some("recovery_stalled")
        } else if self.recovery_gates.any_closed() {
            Some("recovery_gate_closed")
        } else if !self.all_led() || self.not_a_voter_somewhere() {
            Some("raft_replica_unready")
        } else {
            None
        }
    }
}

/// A leader whose quorum acknowledged it within an election timeout
/// (`election_timeout_ms`) leads with a live quorum (spec/35 `leads_live`).
pub(super) fn leads_live(
    m: &openraft::RaftMetrics<super::types::TypeConfig>,
    me: u64,
    election_timeout_ms: u64,
) -> bool {
    use openraft::Instant as _;
    let window = std::time::Duration::from_millis(election_timeout_ms);
    m.current_leader == Some(me) && m.last_quorum_acked.as_ref().is_some_and(|at| at.elapsed() < window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_write_waits_for_its_body_to_replicate_too() {
        let append = |len: usize| {
            let key = ursula_stream::StreamKey::parse("wait", "s").expect("a key");
            Command::Append(ursula_stream::AppendStream {
                key,
                content_type: None,
                body: ursula_stream::Body::prepare(None, bytes::Bytes::from(vec![0u8; len])),
                close: false,
                stream_seq: None,
                producer: None,
                expect: None,
            })
        };
        assert_eq!(commit_wait(&append(0)), COMMIT_WAIT);
        assert_eq!(commit_wait(&Command::Sweep), COMMIT_WAIT);
        assert_eq!(commit_wait(&append(32 * 1024 * 1024)), COMMIT_WAIT + std::time::Duration::from_secs(4));
    }
}
