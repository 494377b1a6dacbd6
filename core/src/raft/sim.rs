//! A seeded simulation of the Raft engine (issue 25): three voters of one
//! stream group in this process, each a real openraft `Raft` over its own
//! WAL and state machine (the node's `GroupLog` and `GroupMachine`), joined
//! by an in-process network that drops, delays (and so reorders),
//! duplicates and partitions messages, with voters crashed and restarted
//! from their WAL, on a paused clock the simulation moves. A producer
//! writes throughout, repeating a write until it is acknowledged. After
//! every step: one leadership per leader id (openraft's ids are (term,
//! node), so a term may see several leaders in turn). At the end, with every fault
//! healed: each replica holds every acknowledged append at the offset it
//! was acknowledged with, every record at most once and in order.
//!
//! A seed reproduces its run: it fixes the fault schedule, the client's
//! choices and openraft's draws (election timeouts, tick phases: the
//! runtime's generator is seeded on this thread); every task runs on one
//! thread, the WALs write inline (no writer thread whose timing would
//! matter) and the paused clock moves only when every task waits.
//! `URSULA_SIM_SEEDS` (default 200) and `URSULA_SIM_FIRST` pick the seeds;
//! `scripts/sim.sh` runs thousands.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::WatchReceiver;
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse};
use openraft::{BasicNode, Raft, SnapshotPolicy};
use ursula_stream::{
    AppendStream, Body, Boundary, Command, ContentType, CreateStream, Lifetime, Outcome, ProducerHeaders, ReadFrom,
    ReadQuery, StreamKey,
};
use ursula_wal::Wal;

use super::boot;
use super::state_machine::GroupShared;
use super::types::{GroupRaft, NodeId, Proposal, Snapshot, SnapshotData, TypeConfig, Vote};
use crate::config::{ByteSize, FsyncSetting, WalConfig};

const VOTERS: u64 = 3;
const STEPS: usize = 60;

/// The network's faults, drawn from the seed.
struct Faults {
    rng: fastrand::Rng,
    /// Directed links that carry nothing.
    cut: BTreeSet<(NodeId, NodeId)>,
}

struct Net {
    rafts: Mutex<BTreeMap<NodeId, GroupRaft>>,
    faults: Mutex<Faults>,
}

/// What one message meets on its way.
struct Fate {
    delay: Duration,
    lost: bool,
    duplicated: bool,
    reply_lost: bool,
}

impl Net {
    fn fate(&self, from: NodeId, to: NodeId) -> Fate {
        let mut f = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        Fate {
            delay: Duration::from_millis(f.rng.u64(0..20)),
            lost: f.cut.contains(&(from, to)) || f.rng.u32(0..100) < 5,
            duplicated: f.rng.u32(0..100) < 5,
            reply_lost: f.cut.contains(&(to, from)) || f.rng.u32(0..100) < 2,
        }
    }

    fn raft(&self, id: NodeId) -> Option<GroupRaft> {
        self.rafts.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }
}

#[derive(Clone)]
struct SimNetwork {
    net: Arc<Net>,
    from: NodeId,
}

struct SimPeer {
    net: Arc<Net>,
    from: NodeId,
    to: NodeId,
}

fn unreachable(why: &str) -> Unreachable<TypeConfig> {
    Unreachable::new(&std::io::Error::other(why.to_owned()))
}

impl RaftNetworkFactory<TypeConfig> for SimNetwork {
    type Network = SimPeer;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> SimPeer {
        SimPeer { net: self.net.clone(), from: self.from, to: target }
    }
}

impl SimPeer {
    /// Carries one call through the network's faults: lost, late, twice,
    /// or answered into a cut.
    async fn deliver<T, E: std::fmt::Display, F, Fut>(&self, call: F) -> Result<T, Unreachable<TypeConfig>>
    where
        F: Fn(GroupRaft) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let fate = self.net.fate(self.from, self.to);
        tokio::time::sleep(fate.delay).await;
        if fate.lost {
            return Err(unreachable("lost"));
        }
        let Some(raft) = self.net.raft(self.to) else { return Err(unreachable("down")) };
        let answer = call(raft.clone()).await.map_err(|e| unreachable(&e.to_string()));
        if fate.duplicated {
            let _ = call(raft).await;
        }
        if fate.reply_lost {
            return Err(unreachable("reply lost"));
        }
        answer
    }
}

impl RaftNetworkV2<TypeConfig> for SimPeer {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.deliver(|r| {
            let rpc = rpc.clone();
            async move { r.append_entries(rpc).await }
        })
        .await
        .map_err(RPCError::Unreachable)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.deliver(|r| {
            let rpc = rpc.clone();
            async move { r.vote(rpc).await }
        })
        .await
        .map_err(RPCError::Unreachable)
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.deliver(|r| {
            let rpc = rpc.clone();
            async move { r.pre_vote(rpc).await }
        })
        .await
        .map_err(RPCError::Unreachable)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let (meta, data) = (snapshot.meta, snapshot.snapshot.into_inner());
        self.deliver(|r| {
            let snapshot = Snapshot { meta: meta.clone(), snapshot: std::io::Cursor::new(data.clone()) };
            async move { r.install_full_snapshot(vote, snapshot).await }
        })
        .await
        .map_err(StreamingError::Unreachable)
    }
}

fn settings() -> Arc<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "sim".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        enable_pre_vote: Some(true),
        // Snapshots and installs happen within a run.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(15),
        max_in_snapshot_log_to_keep: 0,
        allow_log_reversion: Some(true),
        enable_leader_restore: Some(false),
        ..Default::default()
    };
    Arc::new(config.validate().expect("simulation settings"))
}

struct Voter {
    raft: GroupRaft,
    wal: Wal,
    shared: Arc<GroupShared>,
}

async fn open_voter(dir: &Path, id: NodeId, net: &Arc<Net>) -> Voter {
    let wal_config = WalConfig {
        path: Some(dir.to_path_buf()),
        fsync: FsyncSetting::Never,
        segment_size: 64 * ByteSize::KIB,
        cache_size: ByteSize::MIB,
        min_available_size: 0,
        resume_available_size: 0,
    };
    let (wal, recovered) = Wal::open_inline(boot::wal_options(dir, &wal_config, true)).expect("the voter's WAL");
    let snapshots = boot::snapshot_dir(dir).expect("a snapshot directory");
    let (log, machine) =
        boot::open_group(0, &wal, &recovered, 1 << 20, &snapshots, "sim", None).await.expect("the group");
    let shared = machine.shared();
    let network = SimNetwork { net: net.clone(), from: id };
    let raft = Raft::new(id, settings(), network, log, machine).await.expect("a Raft");
    net.rafts.lock().unwrap_or_else(|p| p.into_inner()).insert(id, raft.clone());
    Voter { raft, wal, shared }
}

fn key() -> StreamKey {
    StreamKey::parse("simulation", "log").expect("a key")
}

fn text() -> ContentType {
    ContentType::parse("text/plain").expect("a content type")
}

fn record(seq: u64) -> String {
    format!("r{seq:05};")
}

/// What the producer saw acknowledged: seq -> the offset its bytes start at.
type Acked = BTreeMap<u64, u64>;

struct Sim {
    seed: u64,
    rng: fastrand::Rng,
    net: Arc<Net>,
    dirs: Vec<PathBuf>,
    voters: BTreeMap<NodeId, Voter>,
    /// Each leader id (term, node) that led, with the life of the node it led in.
    leaders: BTreeMap<(u64, NodeId), u32>,
    /// Per voter: how many times it was started.
    lives: BTreeMap<NodeId, u32>,
    acked: Acked,
    next_seq: u64,
    created: bool,
}

impl Sim {
    fn violation(&self, what: String) -> ! {
        panic!("seed {}: {what}", self.seed)
    }

    fn leader(&self) -> Option<NodeId> {
        self.voters
            .iter()
            .find_map(|(id, v)| (v.raft.metrics().borrow_watched().current_leader == Some(*id)).then_some(*id))
    }

    /// One leadership per leader id. openraft's leader ids are (term,
    /// node): a term may see several leaders in turn, each with a higher
    /// id, but a leader id must never lead twice, as a voter that lost its
    /// vote and won the same term again in a later life would.
    fn check_terms(&mut self) {
        for (id, v) in &self.voters {
            let m = v.raft.metrics().borrow_watched().clone();
            if m.current_leader != Some(*id) {
                continue;
            }
            let life = self.lives.get(id).copied().unwrap_or(0);
            match self.leaders.insert((m.current_term, *id), life) {
                Some(earlier) if earlier != life => self.violation(format!(
                    "voter {id} led term {} in its life {earlier} and again in life {life}",
                    m.current_term
                )),
                _ => {}
            }
        }
    }

    async fn propose(&self, leader: NodeId, command: Command) -> Option<Outcome> {
        let raft = &self.voters.get(&leader)?.raft;
        let write = raft.client_write(Proposal::new(1, command));
        match tokio::time::timeout(Duration::from_secs(2), write).await {
            Ok(Ok(response)) => Some(response.data),
            _ => None,
        }
    }

    /// One attempt of the producer's next write (or of the create first).
    async fn write(&mut self) {
        // A client waits a while for a leader to show up.
        let mut leader = self.leader();
        for _ in 0..20 {
            if leader.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            leader = self.leader();
        }
        let Some(leader) = leader else { return };
        if !self.created {
            let create = CreateStream {
                key: key(),
                body: Body::prepare(Some(&text()), Bytes::new()),
                content_type: text(),
                lifetime: Lifetime::Forever,
                closed: false,
                stream_seq: None,
                expect: None,
            };
            self.created = matches!(self.propose(leader, Command::Create(create)).await, Some(Outcome::Create(Ok(_))));
            return;
        }
        let seq = self.next_seq;
        let append = AppendStream {
            key: key(),
            content_type: Some(text()),
            body: Body::prepare(Some(&text()), Bytes::from(record(seq))),
            close: false,
            stream_seq: None,
            producer: Some(ProducerHeaders { id: "p".into(), epoch: 0, seq, digest: None }),
            expect: None,
        };
        if let Some(Outcome::Append(Ok(ok))) = self.propose(leader, Command::Append(append)).await {
            // A repeat of a write that applied before has no receipt: its
            // offset is where the records before it end.
            let start = ok.receipt.map_or(seq * record(0).len() as u64, |r| r.start.bytes());
            self.acked.insert(seq, start);
            self.next_seq += 1;
        }
    }

    async fn crash(&mut self, id: NodeId) {
        self.net.rafts.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if let Some(v) = self.voters.remove(&id) {
            let _ = v.raft.shutdown().await;
            // The writer finishes what it was handed, as the kernel keeps
            // what a crashed process wrote; without this the old writer
            // thread could still write while the restart reads the files.
            let _ = v.wal.close();
        }
    }

    async fn restart(&mut self, id: NodeId) {
        if !self.voters.contains_key(&id) {
            *self.lives.entry(id).or_default() += 1;
            let voter = open_voter(&self.dirs[(id - 1) as usize], id, &self.net).await;
            self.voters.insert(id, voter);
        }
    }

    fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.net.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn step(&mut self) {
        let id = self.rng.u64(1..=VOTERS);
        match self.rng.u32(0..100) {
            0..60 => self.write().await,
            60..66 => self.crash(id).await,
            66..76 => self.restart(id).await,
            76..82 => {
                // One voter cut off, both ways.
                let mut f = self.faults();
                for other in (1..=VOTERS).filter(|o| *o != id) {
                    f.cut.insert((id, other));
                    f.cut.insert((other, id));
                }
            }
            82..86 => {
                // One direction only.
                let other = (id % VOTERS) + 1;
                self.faults().cut.insert((id, other));
            }
            86..94 => self.faults().cut.clear(),
            _ => tokio::time::sleep(Duration::from_millis(self.rng.u64(0..500))).await,
        }
        // Every step takes some time: messages move, timers fire.
        tokio::time::sleep(Duration::from_millis(self.rng.u64(10..100))).await;
        self.check_terms();
    }

    /// Heals everything, restarts every voter and waits until all hold the
    /// same applied state; then checks every acknowledged append.
    async fn settle_and_check(&mut self) {
        self.faults().cut.clear();
        for id in 1..=VOTERS {
            self.restart(id).await;
        }
        // A write acknowledged after healing commits, in the new leader's
        // term, everything before it; replicas restarted since their last
        // snapshot apply it all again only then.
        let last = self.next_seq;
        for _ in 0..400 {
            if self.next_seq <= last {
                self.write().await;
            } else if self.converged() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.check_terms();
        }
        if !self.converged() {
            self.violation("the voters never converged after every fault healed".into());
        }
        for (id, v) in &self.voters {
            let content = read_all(v);
            let mut expected_at = 0u64;
            let mut seen = BTreeSet::new();
            for piece in content.split_inclusive(';') {
                let seq: u64 = piece
                    .trim_start_matches('r')
                    .trim_end_matches(';')
                    .parse()
                    .unwrap_or_else(|_| self.violation(format!("voter {id} holds a damaged record {piece:?}")));
                if !seen.insert(seq) {
                    self.violation(format!("voter {id} holds record {seq} twice"));
                }
                if let Some(start) = self.acked.get(&seq)
                    && *start != expected_at
                {
                    self.violation(format!("voter {id} holds record {seq} at {expected_at}, acknowledged at {start}"));
                }
                expected_at += piece.len() as u64;
            }
            if let Some(missing) = self.acked.keys().find(|seq| !seen.contains(seq)) {
                self.violation(format!("voter {id} lost acknowledged record {missing}"));
            }
            let order: Vec<u64> = seen.iter().copied().collect();
            let mut in_stream: Vec<u64> = content
                .split_inclusive(';')
                .filter_map(|p| p.trim_start_matches('r').trim_end_matches(';').parse().ok())
                .collect();
            let as_written = in_stream.clone();
            in_stream.sort_unstable();
            if in_stream != order || as_written != order {
                self.violation(format!("voter {id} holds the records out of order"));
            }
        }
    }

    fn converged(&self) -> bool {
        let contents: BTreeSet<String> = self.voters.values().map(read_all).collect();
        contents.len() == 1 && self.voters.len() == VOTERS as usize
    }
}

/// The stream as the voter's applied state holds it.
fn read_all(v: &Voter) -> String {
    let query =
        ReadQuery { from: ReadFrom::Start, max_bytes: 1 << 30, boundary: Boundary::Byte, whole_json_messages: false };
    let state = crate::engine::group_state::lock(&v.shared.state);
    match state.store.read(&key(), query, 1) {
        Ok(view) => view.chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect(),
        Err(_) => String::new(),
    }
}

/// What a run did, to compare two runs of one seed.
#[derive(Debug, PartialEq)]
struct Summary {
    acked: Acked,
    leaders: Vec<(u64, NodeId)>,
}

async fn run(seed: u64) -> Summary {
    let root = tempfile::tempdir().expect("a directory");
    let dirs: Vec<PathBuf> = (1..=VOTERS).map(|i| root.path().join(format!("n{i}"))).collect();
    let net = Arc::new(Net {
        rafts: Mutex::default(),
        faults: Mutex::new(Faults { rng: fastrand::Rng::with_seed(seed ^ 0x5eed), cut: BTreeSet::new() }),
    });
    let mut sim = Sim {
        seed,
        rng: fastrand::Rng::with_seed(seed),
        net,
        dirs,
        voters: BTreeMap::new(),
        leaders: BTreeMap::new(),
        lives: BTreeMap::new(),
        acked: Acked::new(),
        next_seq: 0,
        created: false,
    };
    for id in 1..=VOTERS {
        sim.restart(id).await;
    }
    let members: BTreeMap<NodeId, BasicNode> = (1..=VOTERS).map(|id| (id, BasicNode::default())).collect();
    sim.voters[&1].raft.initialize(members).await.expect("initializing the group");
    for _ in 0..STEPS {
        sim.step().await;
    }
    sim.settle_and_check().await;
    for id in 1..=VOTERS {
        sim.crash(id).await;
    }
    Summary { acked: sim.acked, leaders: sim.leaders.into_keys().collect() }
}

/// Runs one seed on a paused single-thread runtime with openraft's draws seeded.
fn run_seed(seed: u64) -> std::thread::Result<Summary> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("a runtime");
    super::runtime::seed_this_thread(Some(seed));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| runtime.block_on(run(seed))));
    super::runtime::seed_this_thread(None);
    result
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn seeded_runs_keep_every_acknowledged_append_once_in_order_with_one_leadership_per_leader_id() {
    let first = env_u64("URSULA_SIM_FIRST", 0);
    let seeds = env_u64("URSULA_SIM_SEEDS", 200);
    let (mut acked, mut failing) = (0, Vec::new());
    for seed in first..first + seeds {
        match run_seed(seed) {
            Ok(summary) => acked += summary.acked.len(),
            Err(_) => failing.push(seed),
        }
    }
    eprintln!(
        "simulation: {seeds} seeds from {first}, {acked} acknowledged appends checked, failing seeds: {failing:?}"
    );
    assert!(failing.is_empty(), "failing seeds: {failing:?} (URSULA_SIM_FIRST=<seed> URSULA_SIM_SEEDS=1 repeats one)");
}

#[test]
fn a_seed_repeats_its_run() {
    for seed in [3, 1234, 8942] {
        let first = run_seed(seed).expect("the run");
        let again = run_seed(seed).expect("the run again");
        assert_eq!(first, again, "seed {seed} ran differently the second time");
        assert!(!first.acked.is_empty(), "seed {seed} acknowledged nothing");
    }
}
