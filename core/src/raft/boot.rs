//! Starting and stopping a Raft node: the WAL directory (configured, or a
//! temporary one removed on clean shutdown), the cluster id kept in the
//! WAL, one openraft instance per group, and the background drivers.

use crate::clock::Clock;
use crate::format_epoch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use openraft::{BasicNode, Raft, SnapshotPolicy};
use ursula_wal::{Fsync, NODE_GROUP, Recovered, Wal, WalOptions};

use super::bootstrap;
use super::disk_guard::{DiskGuard, available_bytes};
use super::driver;
use super::engine::{RaftEngine, RaftGroup};
use super::grpc_client::{GrpcNetwork, Peers};
use super::grpc_server::{RaftServer, VoterLimits};
use super::leadership::Shed;
use super::log_store::GroupLog;
use super::network::NoPeers;
use super::recovery_gate::{self, RecoveryGates};
use super::recovery_plan::RecoveryPlans;
use super::refusals::PeerRefusals;
use super::snapshot_store::SnapshotStore;
use super::state_machine::GroupMachine;
use crate::config::{FsyncSetting, NodeConfig, RaftConfig, WalConfig};
use ursula_stream::routing::fnv1a;

/// Node-level WAL slots (group `NODE_GROUP`). Persisted: never renumber.
const SLOT_CLUSTER_ID: u8 = 1;
const SLOT_GROUP_COUNT: u8 = 2;
/// The maintenance drain mark: `[1]` set, `[0]` or absent lifted.
pub(super) const SLOT_MAINTENANCE: u8 = 3;
/// The groups whose crash-recovery gate is still closed (`recovery_gate`).
pub(super) const SLOT_RECOVERY_GATES: u8 = 4;
/// The recovery plans this replica took and has not carried out (`recovery_plan`).
pub(super) const SLOT_RECOVERY_PLANS: u8 = 5;

/// How long groups may take to elect themselves at startup.
const LEADER_WAIT: Duration = Duration::from_secs(30);

pub struct RaftNode {
    pub engine: Arc<RaftEngine>,
    pub cluster_id: String,
    dir: PathBuf,
    temporary: bool,
    drivers: Vec<tokio::task::JoinHandle<()>>,
    /// Stops the cluster plane's gRPC server.
    cluster_plane: Option<tokio::sync::oneshot::Sender<()>>,
    /// `RaftService` for `server.listen` when the planes share it.
    pub shared_raft_routes: Option<tonic::service::Routes>,
}

/// `u` followed by 32 hex digits (spec/07-configuration.md, `server.cluster_id`).
pub fn generate_cluster_id() -> String {
    format!("u{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

fn wal_dir(raft: &RaftConfig) -> anyhow::Result<(PathBuf, bool)> {
    match &raft.wal.path {
        Some(path) => {
            std::fs::create_dir_all(path).with_context(|| format!("creating raft.wal.path {}", path.display()))?;
            Ok((path.clone(), false))
        }
        None => {
            let dir = tempfile::Builder::new()
                .prefix("ursula-wal-")
                .tempdir()
                .context("creating a temporary WAL directory")?
                .keep();
            eprintln!(
                "ursula: WAL in temporary directory {} (removed on clean shutdown; set raft.wal.path to keep streams)",
                dir.display()
            );
            Ok((dir, true))
        }
    }
}

fn node_slot(recovered: &Recovered, slot: u8) -> Option<&Bytes> {
    recovered.groups.get(&NODE_GROUP).and_then(|g| g.slots.get(&slot))
}

pub(super) async fn set_node_slot(wal: &Wal, slot: u8, value: Bytes) -> anyhow::Result<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    wal.set_state(
        NODE_GROUP,
        slot,
        value,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx.await.context("the WAL writer stopped")?.context("writing node state to the WAL")
}

/// The cluster id: the WAL's, else the configured one, else a new one; a
/// WAL of another cluster refuses the start.
async fn cluster_id(wal: &Wal, recovered: &Recovered, dir: &Path, configured: Option<&str>) -> anyhow::Result<String> {
    if let Some(stored) = node_slot(recovered, SLOT_CLUSTER_ID) {
        let stored = String::from_utf8_lossy(stored).into_owned();
        if let Some(c) = configured
            && c != stored
        {
            bail!(
                "the WAL at {} belongs to cluster {stored:?} but server.cluster_id is {c:?}; fix server.cluster_id or start on an empty raft.wal.path",
                dir.display()
            );
        }
        return Ok(stored);
    }
    let id = configured.map_or_else(generate_cluster_id, str::to_string);
    set_node_slot(wal, SLOT_CLUSTER_ID, Bytes::from(id.clone())).await?;
    Ok(id)
}

/// Streams map to groups by the group count, so a WAL keeps the count it began with.
async fn check_group_count(wal: &Wal, recovered: &Recovered, count: u32) -> anyhow::Result<()> {
    match node_slot(recovered, SLOT_GROUP_COUNT) {
        Some(raw) => {
            let stored = <[u8; 4]>::try_from(raw.as_ref()).map(u32::from_le_bytes).unwrap_or(0);
            if stored != count {
                bail!("raft.group_count is {count} but this WAL was written with {stored} groups; it cannot change");
            }
            Ok(())
        }
        None => set_node_slot(wal, SLOT_GROUP_COUNT, Bytes::copy_from_slice(&count.to_le_bytes())).await,
    }
}

fn raft_settings(raft: &RaftConfig) -> anyhow::Result<Arc<openraft::Config>> {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let timing = &raft.timing;
    let config = openraft::Config {
        cluster_name: "ursula".into(),
        heartbeat_interval: millis(timing.heartbeat_interval),
        election_timeout_min: millis(timing.election_timeout_min),
        election_timeout_max: millis(timing.election_timeout_max),
        // A voter cut off for a while campaigns only once a majority would
        // vote for it, so its return does not depose a working leader.
        enable_pre_vote: Some(true),
        snapshot_policy: SnapshotPolicy::LogsSinceLast(raft.snapshot_backstop_logs),
        // Entries a follower a little behind still catches up from, instead
        // of a snapshot install (spec/43, `raft.max_in_snapshot_log_to_keep`).
        max_in_snapshot_log_to_keep: raft.max_in_snapshot_log_to_keep,
        // A voter whose WAL was wiped rejoins with an empty log; its leader
        // replicates to it again instead of refusing (spec/35, "Rejoining a
        // wiped node").
        allow_log_reversion: Some(true),
        // Neither the state machine nor the commit index is on disk when an
        // apply returns: a leader restored without an election could serve
        // reads from a stale state (openraft's `enable_leader_restore`).
        enable_leader_restore: Some(false),
        // One install may copy a snapshot object through S3 (spec/07).
        install_snapshot_timeout: u64::try_from(raft.install_snapshot_timeout.as_millis()).unwrap_or(u64::MAX),
        ..Default::default()
    };
    Ok(Arc::new(config.validate().context("Raft settings")?))
}

/// The node's journal directory, `raft-log` under `dir`.
fn log_dir(dir: &Path) -> PathBuf {
    dir.join("raft-log")
}

/// The options of the node's WAL, in `raft-log` under `dir`. A voter with
/// peers cuts damage in its newest segment even when valid frames follow
/// it, and waits at its recovery gates (spec/35); a lone voter has nothing
/// to catch up from and refuses to start instead.
pub(crate) fn wal_options(dir: &Path, wal: &WalConfig, clustered: bool) -> WalOptions {
    WalOptions {
        cut_damage_before_valid_frames: clustered,
        dir: log_dir(dir),
        fsync: match wal.fsync {
            FsyncSetting::Never => Fsync::Never,
            FsyncSetting::Always => Fsync::Always,
        },
        segment_size: wal.segment_size,
    }
}

/// Under `fsync = "never"`, WAL writes of this many bytes or more are
/// copied on a thread of their own instead of the Raft thread.
const LARGE_WAL_WRITE: usize = 512 * 1024;

/// Opens the node's WAL in `raft-log` under `dir`, with what it recovered.
pub(crate) fn open_wal(dir: &Path, wal: &WalConfig, clustered: bool) -> anyhow::Result<(Wal, Recovered)> {
    let options = wal_options(dir, wal, clustered);
    // With `never` an append is a copy into the page cache, cheaper on the
    // Raft thread than a hand-off to a writer thread and back (0.88-0.91x
    // CPU per append in an A/B), except a large one, which would hold every
    // group's heartbeats; `always` keeps its fsyncs off that thread.
    let opened = match options.fsync {
        Fsync::Never => Wal::open_inline_with_helper(options, LARGE_WAL_WRITE),
        Fsync::Always => Wal::open(options),
    };
    let (wal, recovered) = opened.with_context(|| format!("opening the WAL in {}", dir.display()))?;
    if let Some(torn) = &recovered.torn_tail {
        eprintln!(
            "ursula: recovered the WAL: dropped a torn tail of {} bytes at {}:{}",
            torn.dropped_bytes,
            torn.segment.display(),
            torn.offset
        );
    }
    Ok((wal, recovered))
}

/// The groups' snapshot directory, `raft-snapshots` under `dir`, created if missing.
pub(crate) fn snapshot_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let snapshot_dir = dir.join("raft-snapshots");
    std::fs::create_dir_all(&snapshot_dir).with_context(|| format!("creating {}", snapshot_dir.display()))?;
    Ok(snapshot_dir)
}

/// Group `g`'s Raft log, rebuilt from what the WAL recovered, and its state
/// machine, loaded from its snapshot (the empty store's history id derives
/// from the cluster id and the group).
pub(crate) async fn open_group(
    g: u32,
    wal: &Wal,
    recovered: &Recovered,
    cache_budget: usize,
    snapshot_dir: &Path,
    cluster_id: &str,
    objects: Option<Arc<SnapshotStore>>,
) -> anyhow::Result<(GroupLog, GroupMachine)> {
    let log = GroupLog::recover(g, wal.clone(), recovered.groups.get(&g), cache_budget)
        .with_context(|| format!("recovering the log of group {g}"))?;
    let history_id = fnv1a(cluster_id.bytes().chain([0]).chain(g.to_le_bytes()));
    let machine = GroupMachine::open(g, snapshot_dir.to_path_buf(), history_id, objects)
        .await
        .with_context(|| format!("loading the snapshot of group {g}"))?;
    Ok((log, machine))
}

/// Opens the WAL and recovers every group; on a lone voter, waits until
/// each group not held at its recovery gate has elected this node.
/// The format-epoch probe (spec/35 "Upgrading"), after the WAL's cluster
/// check and before any other peer contact: a configured peer of another
/// Raft protocol refuses the start; one of another cluster is reported and
/// listed, and the node starts anyway.
async fn probe_peers(
    raft: &RaftConfig,
    peers: &Peers,
    refusals: &PeerRefusals,
    cluster_id: &str,
) -> anyhow::Result<()> {
    let others: Vec<_> =
        raft.peers.iter().filter(|p| p.node_id != raft.node_id).map(|p| (p.node_id, p.url.clone())).collect();
    for (node, url, theirs) in super::format_check::probe_peers(&others, peers.preamble(0)).await? {
        if theirs != cluster_id {
            refusals.record(super::refusals::Direction::Probed, node, &theirs, &url, true);
        }
    }
    Ok(())
}

/// `cold_io`: the threads the S3 snapshot store's requests run on (the
/// node's cold threads), set when `raft.snapshot_store` is.
pub async fn start(
    config: &NodeConfig,
    raft: &RaftConfig,
    clock: Arc<dyn Clock>,
    cold_io: Option<Arc<crate::cold::io::ColdIo>>,
) -> anyhow::Result<RaftNode> {
    let (dir, temporary) = wal_dir(raft)?;
    // spec/35: a directory of another format epoch is refused before anything is written.
    // A directory without journal bytes has nothing to protect: it is
    // marked at once, so a first start that stops halfway is no older one.
    if format_epoch::check_wal_dir(&log_dir(&dir))? {
        format_epoch::mark_wal_dir(&log_dir(&dir))?;
    }
    let (wal, recovered) = open_wal(&dir, &raft.wal, !raft.peers.is_empty())?;
    let cluster_id = cluster_id(&wal, &recovered, &dir, config.cluster_id.as_deref()).await?;
    check_group_count(&wal, &recovered, config.group_count).await?;
    let snapshot_dir = snapshot_dir(&dir)?;

    let settings = raft_settings(raft)?;
    let objects = match &raft.snapshot_store {
        Some(store) if !raft.peers.is_empty() => Some(Arc::new(
            SnapshotStore::connect(store, raft.node_id, config.group_count, raft.install_snapshot_timeout, cold_io)
                .await
                .context("connecting the S3 snapshot store")?,
        )),
        _ => None,
    };
    let cache_budget = usize::try_from(raft.wal.cache_size / u64::from(config.group_count)).unwrap_or(usize::MAX);
    let clustered = !raft.peers.is_empty();
    let recovery_gates = Arc::new(recovery_gates(&wal, &recovered, &dir, raft, config.group_count).await?);
    let members: BTreeMap<u64, BasicNode> = if clustered {
        raft.peers.iter().map(|p| (p.node_id, BasicNode { addr: p.url.clone() })).collect()
    } else {
        [(raft.node_id, BasicNode { addr: config.listen.to_string() })].into()
    };
    let refusals = Arc::new(PeerRefusals::default());
    let shed = Arc::new(Shed::default());
    let guard = Arc::new(DiskGuard::new(raft.wal.min_available_size, raft.wal.resume_available_size));
    guard.observe(available_bytes(&dir));
    let urls = raft.peers.iter().map(|p| (p.node_id, p.url.clone())).collect();
    let transport = super::transport_budget::TransportBudget::new(raft.append_transport_budget);
    let peers = Peers::new(cluster_id.clone(), raft.node_id, urls, refusals.clone(), transport.clone());
    if clustered {
        probe_peers(raft, &peers, &refusals, &cluster_id).await?;
    }
    let mut groups = Vec::with_capacity(config.group_count as usize);
    // Gated groups a lone voter found empty: they hold nothing to lose.
    let mut empty_gated = Vec::new();
    for g in 0..config.group_count {
        let (log, machine) =
            open_group(g, &wal, &recovered, cache_budget, &snapshot_dir, &cluster_id, objects.clone()).await?;
        let shared = machine.shared();
        // A gated group starts without its election timer (a lone voter
        // would otherwise elect itself over the history it may have lost).
        let settings = if recovery_gates.may_campaign(g) {
            settings.clone()
        } else {
            Arc::new(openraft::Config { enable_elect: false, ..(*settings).clone() })
        };
        let node = if clustered {
            let network = GrpcNetwork { peers: peers.clone(), group: g };
            Raft::new(raft.node_id, settings, network, log.clone(), machine).await
        } else {
            Raft::new(raft.node_id, settings, NoPeers, log.clone(), machine).await
        }
        .with_context(|| format!("starting Raft group {g}"))?;
        // A single node is its own membership: it initializes at once.
        if !clustered && !node.is_initialized().await.context("reading Raft state")? {
            // (openraft elects the initializing voter whatever its election timer.)
            node.initialize(members.clone()).await.with_context(|| format!("initializing Raft group {g}"))?;
            if !recovery_gates.may_campaign(g) {
                empty_gated.push(g);
            }
        }
        groups.push(RaftGroup { raft: node, shared, log, fence: Arc::default() });
    }
    let mut shared_raft_routes = None;
    let mut cluster_plane = None;
    if clustered {
        let configured = raft.peers.iter().map(|p| p.node_id).collect();
        let server = RaftServer::new(
            cluster_id.clone(),
            raft.node_id,
            configured,
            refusals.clone(),
            objects.clone(),
            VoterLimits {
                shed: shed.clone(),
                gates: recovery_gates.clone(),
                disk: guard.clone(),
                transport: transport.inbound.clone(),
            },
        );
        let _ = server.groups.set(groups.iter().map(|g| g.raft.clone()).collect());
        let _ = server.fences.set(groups.iter().map(|g| g.fence.clone()).collect());
        match raft.cluster_listen {
            None => shared_raft_routes = Some(tonic::service::Routes::new(server.service())),
            Some(addr) => {
                // Bound here so a taken port fails the start with a clear message.
                std::net::TcpListener::bind(addr).with_context(|| format!("binding server.cluster_listen {addr}"))?;
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(async move {
                    if let Err(e) = server.serve(addr, async move { drop(stopped.await) }).await {
                        tracing::error!(error = %e, "the cluster plane stopped");
                    }
                });
                cluster_plane = Some(stop);
            }
        }
    }
    // On a cluster, each group's initializer bootstraps it once every voter
    // reports it empty; a replica that held it, or a wiped one whose peers
    // hold it, never initializes it again.
    if clustered && raft.init_membership_per_group {
        for (g, group) in groups.iter().enumerate() {
            let g = g as u32;
            if bootstrap::initializer(&members, g) == Some(raft.node_id) {
                let task = bootstrap::bootstrap(group.raft.clone(), g, raft.node_id, members.clone(), peers.clone());
                tokio::spawn(task);
            }
        }
    } else if clustered {
        tracing::info!("raft.init_membership_per_group is false: this node initializes no group");
    }
    // A lone voter elects itself at once in every group it does not hold
    // at its gate; a cluster's groups elect as peers come up.
    let elects_now =
        |g: usize| !clustered && (recovery_gates.may_campaign(g as u32) || empty_gated.contains(&(g as u32)));
    for (g, group) in groups.iter().enumerate().filter(|(g, _)| elects_now(*g)) {
        group
            .raft
            .wait(Some(LEADER_WAIT))
            .metrics(|m| m.current_leader == Some(raft.node_id), "this node leads")
            .await
            .with_context(|| format!("Raft group {g} elected no leader"))?;
    }

    let client_urls = raft.peers.iter().map(|p| (p.node_id, p.client_url.clone())).collect();
    let peers = clustered.then_some(peers);
    let engine = Arc::new(RaftEngine {
        node_id: raft.node_id,
        client_urls,
        groups,
        wal,
        guard,
        refusals,
        clock,
        peers,
        objects,
        shed,
        transfers: Default::default(),
        snapshot_builds_peak: Default::default(),
        purges_asked: Default::default(),
        log_pressure: super::log_pressure::LogPressure::new(raft.snapshot_log_budget, clustered),
        store_health: raft
            .snapshot_store
            .as_ref()
            .map(|s| Arc::new(super::store_health::StoreHealth::new(s.s3.health))),
        drive_interval: raft.snapshot_drive_interval,
        peer_timeout: raft.balance.peer_timeout,
        recovery_gates: recovery_gates.clone(),
    });
    if node_slot(&recovered, SLOT_MAINTENANCE).is_some_and(|v| v.first() == Some(&1)) {
        engine.restore_maintenance(true);
    }
    for g in empty_gated {
        recovery_gate::open(&engine, g).await;
    }
    // A gated group neither campaigns nor votes until its leader's barrier.
    engine.elect(engine.shed.may_lead());
    for g in recovery_gates.closed_groups() {
        tokio::spawn(recovery_gate::open_when_caught_up(engine.clone(), g));
    }
    let mut drivers = vec![
        tokio::spawn(driver::snapshots(
            engine.clone(),
            super::snapshot_plan::Limits {
                budget: raft.snapshot_log_budget,
                max_builds: raft.snapshot_build_max_concurrency,
                per_tick: raft.snapshot_pressure_max_groups_per_tick,
            },
            raft.snapshot_drive_interval,
            raft.deleted_data_max_age,
        )),
        tokio::spawn(driver::disk(engine.guard.clone(), dir.clone())),
        tokio::spawn(driver::log_pressure(engine.clone())),
        tokio::spawn(driver::journal(
            engine.clone(),
            ursula_wal::CompactLimits::for_segment_size(raft.wal.segment_size, raft.deleted_data_max_age / 4),
            raft.snapshot_drive_interval,
        )),
    ];
    drivers.push(tokio::spawn(super::plan_run::carry_out_plans(engine.clone())));
    if clustered {
        drivers.push(tokio::spawn(driver::keep_voters(engine.clone())));
    }
    if clustered && raft.balance.enabled {
        drivers.push(tokio::spawn(driver::balance(engine.clone(), raft.balance)));
    }
    if let Some(objects) = engine.objects.clone() {
        let (every, per_tick) = (raft.snapshot_drive_interval, raft.snapshot_pressure_max_groups_per_tick);
        drivers.push(tokio::spawn(driver::snapshot_gc(objects, config.group_count, every, per_tick)));
    }
    Ok(RaftNode { engine, cluster_id, dir, temporary, drivers, cluster_plane, shared_raft_routes })
}

/// Reads the run state, decides which groups start gated (spec/35
/// "Recovering after a host crash"), records a new gated set in the WAL
/// and only then marks this run as running.
async fn recovery_gates(
    wal: &Wal,
    recovered: &Recovered,
    dir: &Path,
    raft: &RaftConfig,
    groups: u32,
) -> anyhow::Result<RecoveryGates> {
    let prior = recovery_gate::read_run_state(dir);
    let records = recovered.groups.iter().any(|(g, r)| *g != NODE_GROUP && r.entries.is_some());
    let always = raft.wal.fsync == FsyncSetting::Always;
    let boot = recovery_gate::boot_id();
    // A lone voter gates too: it has no leader to catch up from, so its
    // groups stall and only an operator's plan reopens them, under a new
    // history that tells clients how much of each stream survived (spec/35).
    let lost = recovery_gate::lost_tail(&prior, boot.as_deref(), always, records);
    let damaged = recovered.unsettled_damage.as_ref().map(|_| recovery_gate::DAMAGED_TAIL);
    let reason = lost.or(damaged);
    let kept = node_slot(recovered, SLOT_RECOVERY_GATES).map(|raw| RecoveryGates::decode(raw)).unwrap_or_default();
    let mut plans = match node_slot(recovered, SLOT_RECOVERY_PLANS) {
        Some(raw) => RecoveryPlans::decode(raw).context("reading the recorded recovery plans")?,
        None => Default::default(),
    };
    // A plan's leader that may have lost entries again comes back with a
    // closed gate instead: it campaigns for no one, and waits for another plan.
    if reason.is_some() {
        plans.retain(|group, plan| {
            if plan.lead {
                tracing::warn!(
                    group,
                    "this replica led a recovery plan and may have lost entries: the plan is dropped"
                );
            }
            !plan.lead
        });
    }
    let plans = RecoveryPlans::new(groups, plans);
    let gates = RecoveryGates::new(groups, prior, reason, &kept)
        .with_damaged_tail(recovered.unsettled_damage.clone())
        .with_plans(plans);
    if reason.is_some() {
        set_node_slot(wal, SLOT_RECOVERY_PLANS, gates.plans.encode()).await?;
    }
    if let Some(why) = reason {
        tracing::warn!(
            why,
            "this voter may have lost acknowledged entries: every group waits at its recovery gate for its leader's barrier \
             (a lone voter's, for an operator's recovery plan)"
        );
        set_node_slot(wal, SLOT_RECOVERY_GATES, gates.encode()).await?;
    }
    // Only now that the gates are kept may the WAL forget its cut.
    if let Some(cut) = &recovered.unsettled_damage {
        tracing::warn!(cut, "the WAL's newest segment held a damaged frame, cut at open");
        wal.settle_damage().context("settling the WAL's cut")?;
    }
    recovery_gate::write_run_state(dir, false).context("writing the run state")?;
    Ok(gates)
}

/// How long a stopping voter waits for its leaderships to move (spec/35).
pub const HAND_OFF_WAIT: Duration = Duration::from_secs(5);

impl RaftNode {
    /// The first step of a graceful stop: this voter drains, hands each
    /// leadership it holds to a caught-up peer and waits, up to
    /// `HAND_OFF_WAIT`, until other voters lead them.
    pub async fn hand_off(&self, peer_timeout: Duration) {
        if self.engine.voters().len() < 2 {
            return;
        }
        let started = std::time::Instant::now();
        let left = self.engine.hand_off_all(started + HAND_OFF_WAIT, peer_timeout).await;
        let waited = started.elapsed().as_millis();
        if left == 0 {
            tracing::info!(waited_ms = waited as u64, "handed off every leadership");
        } else {
            tracing::warn!(left, waited_ms = waited as u64, "stopping with leaderships no peer took");
        }
    }

    /// Stops every group, fsyncs and closes the WAL, and removes a
    /// temporary WAL directory. A WAL that cannot close stays on disk.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        for d in &self.drivers {
            d.abort();
        }
        if let Some(stop) = self.cluster_plane {
            let _ = stop.send(());
        }
        for g in self.engine.groups() {
            let _ = g.raft.shutdown().await;
        }
        self.engine.wal.close().context("closing the WAL")?;
        // Everything acknowledged is on disk: the next start needs no gate.
        if !self.temporary {
            recovery_gate::write_run_state(&self.dir, true).context("marking the run state clean")?;
        }
        if self.temporary {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("removing the temporary WAL {}", self.dir.display()))?;
        }
        Ok(())
    }
}
