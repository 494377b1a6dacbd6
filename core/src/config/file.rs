//! The config file's keys. Every section refuses unknown keys, so a typo
//! stops startup instead of being ignored.

use std::path::PathBuf;

use serde::Deserialize;

use super::size::ByteSize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub protocol: ProtocolSection,
    #[serde(default)]
    pub runtime: RuntimeSection,
    #[serde(default)]
    pub raft: RaftSection,
    #[serde(default)]
    pub storage: StorageSection,
    #[serde(default)]
    pub governance: GovernanceSection,
    #[serde(default)]
    pub observability: ObservabilitySection,
}

/// `[observability]` (spec/07, "Server and runtime").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservabilitySection {
    /// Tokio console, in a binary built with the feature (this one is not).
    pub tokio_console: Option<bool>,
}

/// `[governance]`: how the voters share the work of leading.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GovernanceSection {
    #[serde(default)]
    pub leadership_balance: LeadershipBalanceSection,
}

/// `[governance.leadership_balance]` (spec/07).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeadershipBalanceSection {
    /// Ours: `false` leaves leaderships where elections put them.
    pub enabled: Option<bool>,
    /// Ours: between two balancer ticks (`1s`).
    pub interval: Option<String>,
    pub peer_timeout: Option<String>,
    pub max_per_tick: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    #[serde(default)]
    pub cold: ColdSection,
    #[serde(default)]
    pub snapshot: SnapshotSection,
}

/// `[storage.snapshot]`: where Raft snapshots live (spec/07).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSection {
    /// `auto`, `inline` or `s3`.
    pub backend: Option<String>,
    pub s3_prefix: Option<String>,
    pub s3_timeout: Option<String>,
    pub s3_max_retries: Option<u32>,
    pub drive_interval: Option<String>,
}

/// `[storage.cold]` (spec/07, "Cold storage").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdSection {
    /// `none`, `memory` or `s3`.
    pub backend: Option<String>,
    pub root: Option<String>,
    pub flush_interval: Option<String>,
    pub flush_size: Option<ByteSize>,
    /// Splits `flush_size`: the threshold (spec/07's advanced knobs).
    pub flush_min_hot_size: Option<ByteSize>,
    /// Splits `flush_size`: the most one tick takes.
    pub flush_max_size: Option<ByteSize>,
    pub flush_max_concurrency: Option<usize>,
    pub max_hot_size_per_group: Option<ByteSize>,
    /// `0` (also unquoted) disables the age flush.
    #[serde(default, deserialize_with = "duration_or_zero")]
    pub flush_max_hot_age: Option<String>,
    /// Ours: bytes of fetched cold spans kept for repeated reads.
    pub cache_size: Option<ByteSize>,
    /// Ours: how long an unreferenced object waits before deletion.
    pub gc_grace: Option<String>,
    /// Ours: the orphan sweep's grace for staged snapshot parts (a day).
    pub parts_grace: Option<String>,
    /// spec/07's background compaction of small chunks: not built here, so
    /// `true` is only warned about.
    pub compaction_enabled: Option<bool>,
    #[serde(default)]
    pub s3: S3Section,
}

/// A duration key whose `0` disables what it times: the spec writes that
/// `0` bare, so an unquoted `0` reads as `"0"`; any other bare number
/// needs its unit.
fn duration_or_zero<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Number(i64),
    }
    match Option::<Written>::deserialize(d)? {
        None => Ok(None),
        Some(Written::Text(t)) => Ok(Some(t)),
        Some(Written::Number(0)) => Ok(Some("0".into())),
        Some(Written::Number(n)) => {
            Err(serde::de::Error::custom(format!("{n} needs a unit: a duration such as \"5m\", or 0 to disable")))
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Section {
    pub bucket: Option<String>,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// `aes256` (default), `aws-kms` or `none`.
    pub server_side_encryption: Option<String>,
    pub kms_key_id: Option<String>,
    pub timeout: Option<String>,
    pub max_retries: Option<u32>,
    /// The snapshot-store health probe's deadline (`5s`).
    pub probe_timeout: Option<String>,
    /// Bad health ticks before the node sheds its leaderships (`3`).
    pub unhealthy_ticks: Option<u32>,
    /// Good health ticks in a row before it may lead again (`2`).
    pub heal_ticks: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<String>,
    /// The cluster plane (Raft gRPC between voters).
    pub cluster_listen: Option<String>,
    /// Names the deployment in `Ursula-Cluster-Id`.
    pub cluster_id: Option<String>,
    /// The admin plane (operator routes); loopback by default.
    pub admin_listen: Option<String>,
    /// How long a request head may take to arrive after the accept or the previous answer (`10s`).
    pub header_read_timeout: Option<String>,
    /// How long an HTTP/2 client connection may stay open with no request in flight (`60s`).
    pub idle_timeout: Option<String>,
    /// A request body with no byte (or below the minimum rate) for this long answers `408` (`30s`).
    pub body_stall_timeout: Option<String>,
    /// The slowest request body rate taken over one stall window (`1024`).
    pub body_min_bytes_per_sec: Option<u64>,
    /// Write body bytes the node holds at once (`256MiB`).
    pub http_inflight_body_size: Option<ByteSize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolSection {
    /// `ndjson` (the spec's form) or `array` (older clients).
    pub json_reads: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSection {
    /// Worker threads; defaults to the available parallelism.
    pub core_count: Option<usize>,
    /// Pin each worker thread to a CPU: `true` always, `false` never,
    /// omitted when the process may use exactly `core_count` CPUs.
    pub cpu_affinity: Option<bool>,
    /// Live-read waiters per core (`65536`; `0`: no limit).
    pub live_read_max_waiters_per_core: Option<u64>,
    /// Snapshot bodies of at least this size go to the cold tier (`1MiB`).
    pub external_payload_min_size: Option<ByteSize>,
    /// Resident memory past which the process aborts (unset: never).
    pub node_memory_abort_cap_size: Option<ByteSize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaftSection {
    pub node_id: Option<u64>,
    pub group_count: Option<u32>,
    pub snapshot_log_budget: Option<ByteSize>,
    /// A group's proposed, unapplied write bytes (`64MiB`).
    pub max_uncommitted_size_per_group: Option<ByteSize>,
    pub snapshot_backstop_logs: Option<u64>,
    /// Append bytes held for Raft transport per direction (`128MiB`).
    pub append_transport_budget_bytes: Option<ByteSize>,
    pub snapshot_build_max_concurrency: Option<usize>,
    pub snapshot_pressure_max_groups_per_tick: Option<usize>,
    pub init_membership_per_group: Option<bool>,
    /// spec/38's other spelling of the first start's membership bootstrap.
    pub init_membership: Option<bool>,
    /// Log entries kept below a snapshot for followers that lag (ours: `0`).
    pub max_in_snapshot_log_to_keep: Option<u64>,
    pub install_snapshot_timeout: Option<String>,
    /// How long a replica keeps a removed stream in its snapshot and log.
    pub deleted_data_max_age: Option<String>,
    /// Ours: a leader's heartbeat period (`100ms`).
    pub heartbeat_interval: Option<String>,
    /// Ours: a follower campaigns after hearing nothing for a random time
    /// between these (`400ms`, `800ms`).
    pub election_timeout_min: Option<String>,
    pub election_timeout_max: Option<String>,
    #[serde(default)]
    pub peers: Vec<PeerSection>,
    #[serde(default)]
    pub wal: WalSection,
}

/// One `[[raft.peers]]` entry: a voter, this node included.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerSection {
    pub node_id: u64,
    /// Where peers dial its cluster plane.
    pub url: String,
    /// Where leader redirects send clients; required with `server.cluster_listen`.
    pub client_url: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalSection {
    pub path: Option<PathBuf>,
    pub fsync: Option<FsyncSetting>,
    pub segment_size: Option<ByteSize>,
    pub cache_size: Option<ByteSize>,
    pub min_available_size: Option<ByteSize>,
    pub resume_available_size: Option<ByteSize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncSetting {
    Never,
    Always,
}
