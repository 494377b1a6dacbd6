//! Node configuration (spec/07-configuration.md): built-in defaults < a
//! preset < the TOML file (`--config`, else `./ursula.toml`, else
//! `/etc/ursula/ursula.toml`, else the user's config directory) < CLI overrides. Unknown keys and invalid
//! values refuse startup with one line naming the key.
//!
//! Module map:
//! - `file`: the file's sections and keys.
//! - `preset`: the resource presets, as base layers.
//! - `size`: byte sizes such as `64MiB`.
//! - `cold`: `[storage.cold]` into `ColdConfig`.
//! - `snapshot`: `[storage.snapshot]`, where Raft snapshots live.

mod cold;
mod file;
mod governance;
mod preset;
mod size;
mod snapshot;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use file::{FileConfig, FsyncSetting};
pub use governance::{LeadershipBalance, RaftTiming};
pub use preset::Preset;
pub use size::ByteSize;
pub use snapshot::SnapshotStoreConfig;
use ursula_http::{BodyPace, ConnectionLimits, JsonReads};

/// The validated settings a node runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// The config file read, if any (the first start says which).
    pub source: Option<PathBuf>,
    pub listen: SocketAddr,
    /// `server.admin_listen`: the admin plane.
    pub admin_listen: SocketAddr,
    pub json_reads: JsonReads,
    /// `server.header_read_timeout` and `server.idle_timeout`.
    pub connections: ConnectionLimits,
    /// `server.body_stall_timeout` and `server.body_min_bytes_per_sec`.
    pub body_pace: BodyPace,
    pub group_count: u32,
    /// `server.cluster_id` as configured; without one the node generates
    /// it (and a Raft node keeps it in its WAL).
    pub cluster_id: Option<String>,
    pub core_count: usize,
    /// Threads serving client connections: `runtime.core_count` when it is
    /// set, else `connection_workers` of the CPUs.
    pub http_workers: usize,
    /// `runtime.cpu_affinity`: `None` pins the HTTP workers only when the
    /// process may use exactly `http_workers` CPUs and runs in memory.
    pub cpu_affinity: Option<bool>,
    pub engine: EngineConfig,
    /// `[storage.cold]`; `None` without a cold backend.
    pub cold: Option<crate::cold::ColdConfig>,
    pub admission: Admission,
    /// `observability.tokio_console`: asked for, it is only warned about,
    /// since this binary is built without Tokio console.
    pub tokio_console: bool,
    /// `runtime.node_memory_abort_cap_size`: resident bytes past which the
    /// process aborts, like an OOM kill (spec/35); `None`: never.
    pub memory_abort_cap: Option<u64>,
}

/// Threads serving client connections when `runtime.core_count` is not
/// set, on a host with `cpus`: one fewer than its CPUs, at least one. The
/// last CPU is left to the Raft, WAL and main runtimes and to what shares
/// the host (a development node's clients). On two CPUs, one thread gave
/// an in-memory node 1.13-1.30x the appends of two (pinned) at 8 and 32
/// writers with 0.57-0.70x the p99; two unpinned threads 1.05-1.09x with
/// 1.6-5x the p99; a durable node 0.98-0.99x (BENCHMARKS, issue 24).
fn connection_workers(cpus: usize) -> usize {
    cpus.saturating_sub(1).max(1)
}

/// The node's admission limits (spec/07): what a write or a live read is
/// refused with `503` for, instead of the node holding more memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// `server.http_inflight_body_size`: write body bytes held at once.
    pub inflight_body_bytes: u64,
    /// `raft.max_uncommitted_size_per_group`: a group's proposed, unapplied write bytes.
    pub uncommitted_bytes_per_group: u64,
    /// `runtime.live_read_max_waiters_per_core` times the core count; `None`: no limit.
    pub live_read_waiters: Option<u64>,
}

impl Admission {
    pub const DEFAULT_INFLIGHT_BODY_BYTES: u64 = 256 * ByteSize::MIB;
    pub const DEFAULT_UNCOMMITTED_BYTES_PER_GROUP: u64 = 64 * ByteSize::MIB;
    pub const DEFAULT_LIVE_READ_WAITERS_PER_CORE: u64 = 65_536;
    /// A node with a cold backend copies snapshot commits within its body budget.
    pub const MIN_INFLIGHT_BODY_BYTES_WITH_COLD: u64 = 64 * ByteSize::MIB;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineConfig {
    /// The `default`/`dev` presets: one process, nothing survives a restart.
    Memory,
    Raft(Box<RaftConfig>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftConfig {
    pub node_id: u64,
    /// The voters, this node included; empty for a single node.
    pub peers: Vec<Peer>,
    /// The cluster plane's listener (set whenever `peers` is).
    pub cluster_listen: Option<SocketAddr>,
    pub init_membership_per_group: bool,
    /// `raft.max_in_snapshot_log_to_keep`: entries kept below a snapshot.
    pub max_in_snapshot_log_to_keep: u64,
    pub snapshot_log_budget: u64,
    pub snapshot_backstop_logs: u64,
    /// `raft.append_transport_budget_bytes`: append bytes held for Raft
    /// transport in each direction across the node.
    pub append_transport_budget: u64,
    /// `raft.snapshot_build_max_concurrency`: builds at once past the budget (1 to 16).
    pub snapshot_build_max_concurrency: usize,
    /// `raft.snapshot_pressure_max_groups_per_tick`: starts per driver pass below the budget.
    pub snapshot_pressure_max_groups_per_tick: usize,
    /// How long a leader waits on one snapshot install; bounds the S3 copy.
    pub install_snapshot_timeout: Duration,
    /// `raft.deleted_data_max_age`: a group owing a removal snapshots a
    /// quarter of this after applying it.
    pub deleted_data_max_age: Duration,
    /// `None`: snapshots inline (on the node's disk and in the RPC).
    pub snapshot_store: Option<Box<SnapshotStoreConfig>>,
    /// `storage.snapshot.drive_interval`: 5 s with S3 snapshots, 1 s inline.
    pub snapshot_drive_interval: Duration,
    pub wal: WalConfig,
    pub timing: RaftTiming,
    pub balance: LeadershipBalance,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub node_id: u64,
    pub url: String,
    pub client_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalConfig {
    /// None: a temporary directory, removed on clean shutdown.
    pub path: Option<PathBuf>,
    pub fsync: FsyncSetting,
    pub segment_size: u64,
    pub cache_size: u64,
    pub min_available_size: u64,
    pub resume_available_size: u64,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:4437";
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:4438";
/// Raft groups per owner core when `raft.group_count` is not set.
pub const GROUPS_PER_CORE: u32 = 16;
pub const MAX_GROUP_COUNT: u32 = 65_536;
pub const MIN_SEGMENT_SIZE: u64 = 4 * ByteSize::KIB;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for {key}: {value:?} ({expected})")]
    Value { key: &'static str, value: String, expected: &'static str },
    #[error("unknown preset {0:?} (default, dev, tiny, small, standard or large)")]
    Preset(String),
    #[error("{key}: {message}")]
    Refused { key: &'static str, message: String },
    /// A refusal whose text spec/38 ("Startup errors") pins as its heading,
    /// so an operator searching for what the node printed finds the fix.
    #[error("{0}")]
    Startup(String),
}

/// A duration key that must be non-zero, `default_secs` when unset.
fn nonzero(key: &'static str, text: Option<String>, default_secs: u64) -> Result<Duration, ConfigError> {
    let value = cold::duration(key, text, Duration::from_secs(default_secs))?;
    if value.is_zero() {
        return Err(ConfigError::Refused { key, message: "must be non-zero".into() });
    }
    Ok(value)
}

/// A count key that must be at least 1, `default` when unset.
fn at_least_one<T: Copy + Default + PartialEq + ToString>(
    key: &'static str,
    value: Option<T>,
    default: T,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if value == T::default() {
        return Err(ConfigError::Value { key, value: value.to_string(), expected: "at least 1" });
    }
    Ok(value)
}

/// Overrides from the command line, which win over the file.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub config: Option<PathBuf>,
    pub preset: Option<String>,
    pub node_id: Option<u64>,
    pub listen: Option<String>,
    pub json_reads: Option<String>,
}

/// The file to load: the one named, else the first of the search path that
/// exists: `./ursula.toml`, `/etc/ursula/ursula.toml`, then the user's
/// (`$XDG_CONFIG_HOME/ursula/ursula.toml`, else `~/.config/ursula/ursula.toml`).
fn config_path(named: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = named {
        return Some(p.to_path_buf());
    }
    let user = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("ursula").join("ursula.toml"));
    [PathBuf::from("ursula.toml"), PathBuf::from("/etc/ursula/ursula.toml")]
        .into_iter()
        .chain(user)
        .find(|p| p.is_file())
}

pub fn load(cli: &CliOverrides) -> Result<NodeConfig, ConfigError> {
    let preset = match &cli.preset {
        None => None,
        Some(name) => Some(name.parse::<Preset>().map_err(|()| ConfigError::Preset(name.clone()))?),
    };
    let file = match config_path(cli.config.as_deref()) {
        None => None,
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            Some((path, text))
        }
    };
    let text = file.as_ref().map_or("", |(_, t)| t.as_str());
    let merged = parse_layers(preset, text).map_err(|message| ConfigError::Parse {
        path: file.as_ref().map_or_else(PathBuf::new, |(p, _)| p.clone()),
        message,
    })?;
    // No file and no preset is the zero-config development node.
    let preset = preset.or(if file.is_none() { Some(Preset::Default) } else { None });
    let mut config = resolve(merged, preset, cli)?;
    config.source = file.map(|(path, _)| path);
    Ok(config)
}

/// The settings of `text` read as a config file (empty: the zero-config
/// development node) with `cli` over them, without looking for a file on
/// disk: for tests that run a node inside their own process.
pub fn from_text(text: &str, cli: &CliOverrides) -> Result<NodeConfig, ConfigError> {
    let preset = match &cli.preset {
        Some(name) => Some(name.parse::<Preset>().map_err(|()| ConfigError::Preset(name.clone()))?),
        None if text.trim().is_empty() => Some(Preset::Default),
        None => None,
    };
    let merged = parse_layers(preset, text).map_err(|message| ConfigError::Parse { path: PathBuf::new(), message })?;
    resolve(merged, preset, cli)
}

/// Parses `text` over the preset's layer into typed sections; the message
/// names the offending key (`raft.wal.fsync: unknown variant ...`).
pub fn parse_layers(preset: Option<Preset>, text: &str) -> Result<FileConfig, String> {
    let mut base: toml::Table =
        toml::from_str(preset.map_or("", Preset::layer)).map_err(|e| e.message().to_string())?;
    let over: toml::Table = toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => format!("line {}: {}", 1 + text[..span.start.min(text.len())].matches('\n').count(), e.message()),
        None => e.message().to_string(),
    })?;
    merge(&mut base, over);
    serde_path_to_error::deserialize(toml::Value::Table(base)).map_err(|e| {
        let path = e.path().to_string();
        // The toml deserializer appends "in `section`" on a second line; the path says it already.
        let inner = e.inner().to_string();
        let inner = inner.lines().next().unwrap_or_default();
        if path == "." { inner.to_string() } else { format!("{path}: {inner}") }
    })
}

/// Later layers win key by key; tables merge recursively.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

pub fn resolve(file: FileConfig, preset: Option<Preset>, cli: &CliOverrides) -> Result<NodeConfig, ConfigError> {
    let listen_text = cli.listen.clone().or(file.server.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen = listen_text.parse().map_err(|_| ConfigError::Value {
        key: "server.listen",
        value: listen_text.clone(),
        expected: "host:port, e.g. 127.0.0.1:4437",
    })?;
    let admin_text = file.server.admin_listen.clone().unwrap_or_else(|| DEFAULT_ADMIN_LISTEN.to_string());
    let admin_listen = admin_text.parse().map_err(|_| ConfigError::Value {
        key: "server.admin_listen",
        value: admin_text.clone(),
        expected: "host:port, e.g. 127.0.0.1:4438",
    })?;
    let connections = ConnectionLimits {
        header_read_timeout: nonzero("server.header_read_timeout", file.server.header_read_timeout, 10)?,
        idle_timeout: nonzero("server.idle_timeout", file.server.idle_timeout, 60)?,
    };
    let body_pace = BodyPace {
        stall_timeout: nonzero("server.body_stall_timeout", file.server.body_stall_timeout, 30)?,
        min_bytes_per_sec: file.server.body_min_bytes_per_sec.unwrap_or(1024),
    };
    let json_reads = match cli.json_reads.clone().or(file.protocol.json_reads) {
        None => JsonReads::default(),
        Some(v) => JsonReads::parse(&v).ok_or(ConfigError::Value {
            key: "protocol.json_reads",
            value: v,
            expected: "ndjson or array",
        })?,
    };
    let inflight_body_size = file.server.http_inflight_body_size;
    let cluster_id = match file.server.cluster_id {
        Some(id) if !valid_cluster_id(&id) => {
            return Err(ConfigError::Value {
                key: "server.cluster_id",
                value: id,
                expected: "1 to 64 of A-Z a-z 0-9 . _ -",
            });
        }
        id => id,
    };
    let (core_count, http_workers) = match file.runtime.core_count {
        Some(0) => {
            return Err(ConfigError::Value { key: "runtime.core_count", value: "0".into(), expected: "at least 1" });
        }
        Some(n) => (n, n),
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, usize::from);
            (cpus, connection_workers(cpus))
        }
    };
    let cpu_affinity = file.runtime.cpu_affinity;
    let storage = file.storage;
    let external_payload_min_size = file
        .runtime
        .external_payload_min_size
        .map_or(crate::cold::snapshots::EXTERNAL_PAYLOAD_MIN_SIZE as u64, |s| s.0);
    if external_payload_min_size == 0 {
        return Err(ConfigError::Value {
            key: "runtime.external_payload_min_size",
            value: "0B".into(),
            expected: "more than 0",
        });
    }
    let cold = cold::resolve(storage.cold, external_payload_min_size)?;
    let admission = admission(inflight_body_size, &file.runtime, &file.raft, core_count, cold.is_some())?;
    let raft = file.raft;
    let group_count = match raft.group_count {
        Some(n) if n == 0 || n > MAX_GROUP_COUNT => {
            return Err(ConfigError::Value { key: "raft.group_count", value: n.to_string(), expected: "1 to 65536" });
        }
        Some(n) => n,
        None => (core_count as u32).saturating_mul(GROUPS_PER_CORE).min(MAX_GROUP_COUNT),
    };
    // A WAL path asks for Raft whatever the preset; `default`/`dev` (or no
    // file and no preset) keep the in-memory engine.
    let memory = raft.wal.path.is_none() && preset.is_some_and(Preset::in_memory);
    let cluster_listen = file.server.cluster_listen;
    let engine = if memory {
        // The keys are checked whatever the engine.
        snapshot::drive_interval(storage.snapshot.drive_interval.clone(), false)?;
        snapshot::resolve(storage.snapshot, cold.as_ref(), false, Duration::MAX)?;
        EngineConfig::Memory
    } else {
        let mut raft = raft_config(raft, cli)?;
        raft.balance = governance::balance(file.governance.leadership_balance)?;
        cluster_plane(&mut raft, cluster_listen, cluster_id.as_deref())?;
        let clustered = !raft.peers.is_empty();
        let drive = storage.snapshot.drive_interval.clone();
        raft.snapshot_store =
            snapshot::resolve(storage.snapshot, cold.as_ref(), clustered, raft.install_snapshot_timeout)?;
        raft.snapshot_drive_interval = snapshot::drive_interval(drive, raft.snapshot_store.is_some())?;
        EngineConfig::Raft(Box::new(raft))
    };

    Ok(NodeConfig {
        source: None,
        listen,
        admin_listen,
        json_reads,
        connections,
        body_pace,
        group_count,
        cluster_id,
        core_count,
        http_workers,
        cpu_affinity,
        engine,
        cold,
        admission,
        tokio_console: file.observability.tokio_console.unwrap_or(false),
        memory_abort_cap: file.runtime.node_memory_abort_cap_size.map(|s| s.0).filter(|cap| *cap > 0),
    })
}

fn admission(
    inflight_body_size: Option<ByteSize>,
    runtime: &file::RuntimeSection,
    raft: &file::RaftSection,
    core_count: usize,
    cold: bool,
) -> Result<Admission, ConfigError> {
    let inflight_body_bytes = inflight_body_size.map_or(Admission::DEFAULT_INFLIGHT_BODY_BYTES, |s| s.0);
    if cold && inflight_body_bytes < Admission::MIN_INFLIGHT_BODY_BYTES_WITH_COLD {
        let message = format!(
            "InflightBodyBudgetTooSmall: a node with a cold backend needs at least 64MiB, not {inflight_body_bytes} bytes"
        );
        return Err(ConfigError::Refused { key: "server.http_inflight_body_size", message });
    }
    let uncommitted_bytes_per_group =
        raft.max_uncommitted_size_per_group.map_or(Admission::DEFAULT_UNCOMMITTED_BYTES_PER_GROUP, |s| s.0);
    if uncommitted_bytes_per_group == 0 {
        let message = "must be more than 0".to_string();
        return Err(ConfigError::Refused { key: "raft.max_uncommitted_size_per_group", message });
    }
    let per_core = runtime.live_read_max_waiters_per_core.unwrap_or(Admission::DEFAULT_LIVE_READ_WAITERS_PER_CORE);
    let live_read_waiters = (per_core > 0).then(|| per_core.saturating_mul(core_count as u64));
    Ok(Admission { inflight_body_bytes, uncommitted_bytes_per_group, live_read_waiters })
}

/// The startup refusals of a node with peers (spec/07, `raft.peers`).
fn cluster_plane(raft: &mut RaftConfig, listen: Option<String>, cluster_id: Option<&str>) -> Result<(), ConfigError> {
    let refuse = |key, message: &str| Err(ConfigError::Refused { key, message: message.to_string() });
    let listen = match listen {
        None => None,
        Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| ConfigError::Value {
            key: "server.cluster_listen",
            value: text.clone(),
            expected: "host:port",
        })?),
    };
    if raft.peers.is_empty() {
        return Ok(());
    }
    if cluster_id.is_none() {
        return Err(ConfigError::Startup("server.cluster_id is required when raft.peers is set".into()));
    }
    if raft.wal.path.is_none() {
        return Err(ConfigError::Startup("raft.wal.path is required when raft.peers is set".into()));
    }
    if !raft.peers.iter().any(|p| p.node_id == raft.node_id) {
        return Err(ConfigError::Startup("raft.peers must include this node id".into()));
    }
    let mut ids: Vec<u64> = raft.peers.iter().map(|p| p.node_id).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != raft.peers.len() {
        return refuse("raft.peers", "two entries have the same node_id");
    }
    if listen.is_none() {
        // One port for both planes: redirects name the peer url.
        for p in raft.peers.iter_mut().filter(|p| p.client_url.is_empty()) {
            p.client_url = p.url.clone();
        }
    } else if raft.peers.iter().any(|p| p.client_url.is_empty()) {
        return refuse("raft.peers", "every entry needs client_url when server.cluster_listen is set");
    } else if raft.peers.iter().any(|p| p.client_url == p.url) {
        return refuse(
            "raft.peers",
            "with server.cluster_listen set, each client_url must differ from its url (the cluster listener)",
        );
    }
    raft.cluster_listen = listen;
    Ok(())
}

fn raft_config(raft: file::RaftSection, cli: &CliOverrides) -> Result<RaftConfig, ConfigError> {
    let timing = governance::timing(&raft)?;
    let peers: Vec<Peer> = raft
        .peers
        .into_iter()
        .map(|p| Peer { node_id: p.node_id, client_url: p.client_url.unwrap_or_default(), url: p.url })
        .collect();
    let wal = raft.wal;
    let segment_size = wal.segment_size.map_or(64 * ByteSize::MIB, |s| s.0);
    if segment_size < MIN_SEGMENT_SIZE {
        return Err(ConfigError::Value {
            key: "raft.wal.segment_size",
            value: ByteSize(segment_size).to_string(),
            expected: "at least 4KiB",
        });
    }
    let min_available_size = wal.min_available_size.map_or(512 * ByteSize::MIB, |s| s.0);
    let resume_available_size = wal.resume_available_size.map_or(ByteSize::GIB, |s| s.0);
    if min_available_size > 0 && resume_available_size <= min_available_size {
        return Err(ConfigError::Value {
            key: "raft.wal.resume_available_size",
            value: ByteSize(resume_available_size).to_string(),
            expected: "more than raft.wal.min_available_size",
        });
    }
    let snapshot_backstop_logs = at_least_one("raft.snapshot_backstop_logs", raft.snapshot_backstop_logs, 100_000)?;
    let snapshot_log_budget = raft.snapshot_log_budget.map_or(ByteSize::GIB, |s| s.0);
    if snapshot_log_budget == 0 {
        return Err(ConfigError::Value {
            key: "raft.snapshot_log_budget",
            value: "0B".into(),
            expected: "more than 0",
        });
    }
    let append_transport_budget = raft.append_transport_budget_bytes.map_or(128 * ByteSize::MIB, |s| s.0);
    if append_transport_budget == 0 {
        return Err(ConfigError::Value {
            key: "raft.append_transport_budget_bytes",
            value: "0".into(),
            expected: "more than 0",
        });
    }
    let snapshot_build_max_concurrency = raft.snapshot_build_max_concurrency.unwrap_or(2);
    if !(1..=16).contains(&snapshot_build_max_concurrency) {
        return Err(ConfigError::Startup(format!(
            "raft.snapshot_build_max_concurrency ({snapshot_build_max_concurrency}) must be between 1 and 16"
        )));
    }
    let snapshot_pressure_max_groups_per_tick =
        at_least_one("raft.snapshot_pressure_max_groups_per_tick", raft.snapshot_pressure_max_groups_per_tick, 16)?;
    let install_snapshot_timeout =
        cold::duration("raft.install_snapshot_timeout", raft.install_snapshot_timeout, Duration::from_secs(120))?;
    if install_snapshot_timeout.is_zero() {
        return Err(ConfigError::Refused { key: "raft.install_snapshot_timeout", message: "must be non-zero".into() });
    }
    let least_deleted_age = install_snapshot_timeout.saturating_mul(8);
    let deleted_data_max_age = match raft.deleted_data_max_age {
        None => least_deleted_age.max(Duration::from_secs(3600)),
        Some(text) => {
            let age = cold::duration("raft.deleted_data_max_age", Some(text), Duration::ZERO)?;
            if age < least_deleted_age {
                return Err(ConfigError::Startup(format!(
                    "raft.deleted_data_max_age ({}s) must be at least eight times raft.install_snapshot_timeout ({}s)",
                    age.as_secs(),
                    least_deleted_age.as_secs()
                )));
            }
            age
        }
    };
    let node_id = cli.node_id.or(raft.node_id);
    if node_id == Some(0) {
        return Err(ConfigError::Startup("raft.node_id must be non-zero".into()));
    }
    if node_id.is_none() && !peers.is_empty() {
        let message = "required with raft.peers: set it, or start with --node-id".to_string();
        return Err(ConfigError::Refused { key: "raft.node_id", message });
    }
    Ok(RaftConfig {
        // A single node needs no configured id; 1 is what the examples use.
        node_id: node_id.unwrap_or(1),
        peers,
        cluster_listen: None,
        // `raft.init_membership` is spec/38's other name for the same bootstrap.
        init_membership_per_group: raft.init_membership_per_group.or(raft.init_membership).unwrap_or(false),
        // 0 by default where spec/43 says 64: the snapshot driver measures
        // a group's log since its last purge, so entries kept below a
        // snapshot would count again (64 entries of 1 MiB are past a
        // group's threshold, and it would snapshot every pass).
        max_in_snapshot_log_to_keep: raft.max_in_snapshot_log_to_keep.unwrap_or(0),
        snapshot_log_budget,
        snapshot_backstop_logs,
        append_transport_budget,
        snapshot_build_max_concurrency,
        snapshot_pressure_max_groups_per_tick,
        install_snapshot_timeout,
        deleted_data_max_age,
        snapshot_store: None,
        snapshot_drive_interval: Duration::from_secs(1),
        wal: WalConfig {
            path: wal.path,
            fsync: wal.fsync.unwrap_or(FsyncSetting::Never),
            segment_size,
            cache_size: wal.cache_size.map_or(256 * ByteSize::MIB, |s| s.0),
            min_available_size,
            resume_available_size,
        },
        timing,
        balance: LeadershipBalance::DEFAULT,
    })
}

pub fn valid_cluster_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests;
