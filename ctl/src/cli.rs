//! The command line (spec/34 "Verbs"). `--config` is global: it may come
//! before or after the verb.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "ursulactl",
    version,
    about = "Operate an Ursula cluster over its admin plane: status, readiness gates, drain, purge, backup and restore.",
    long_about = "Operate an Ursula cluster over its admin plane: which node leads which Raft groups, \
                  whether a node is caught up, and the safe steps of a rolling restart \
                  (drain, restart, wait, undrain, verify-cluster).\n\n\
                  Exit codes: 0 success; 2 an abort (drain timeout, no safe transfer target, catch-up \
                  stall, a gate not reached in time); 1 a configuration or transport error, printed as \
                  one line `ursulactl: <kind>: <message>`."
)]
pub struct Cli {
    /// The cluster manifest: TOML, JSON or YAML by extension, or `-` for stdin (format sniffed).
    #[arg(long, global = true, value_name = "MANIFEST")]
    pub config: Option<String>,
    /// Seconds one HTTP request to a node may take.
    #[arg(long, global = true, default_value_t = 30, value_name = "SECS")]
    pub http_timeout_secs: u64,
    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Per node: groups, leaderships by leader, shed state, applied lag and readiness.
    Status {
        /// One JSON document for programs instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Wait until every node reports its groups led, a clean maintenance report and 200 from /__ursula/ready.
    WaitReady {
        /// The groups every node must report.
        #[arg(long, value_name = "N")]
        expected_groups: Option<usize>,
        /// Give up (exit 2) after this long.
        #[arg(long, default_value_t = 300, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Mark a node drained (it stops taking leaderships) and move every leadership it holds to a caught-up peer.
    Drain {
        /// The node's `id` in the manifest.
        #[arg(long, value_name = "ID")]
        node: u64,
        /// Print the transfer plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Entries a target may be behind the group's commit (the transfer lets it catch up).
        #[arg(long, default_value_t = 64, value_name = "ENTRIES")]
        lag_tolerance: u64,
        /// Give up (exit 2) when the node still leads a group after this long.
        #[arg(long, default_value_t = 120, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Lift a node's drain mark so it may lead groups again.
    Undrain {
        /// The node's `id` in the manifest.
        #[arg(long, value_name = "ID")]
        node: u64,
    },
    /// Wait until a node is a voter of every group and has applied what its peers committed (within --lag-tolerance).
    Wait {
        /// The node's `id` in the manifest.
        #[arg(long, value_name = "ID")]
        node: u64,
        /// Entries a group may still be behind.
        #[arg(long, default_value_t = 64, value_name = "ENTRIES")]
        lag_tolerance: u64,
        /// Give up (exit 2) only when the node made no progress for this long.
        #[arg(long, default_value_t = 90, value_name = "SECS")]
        stall_timeout_secs: u64,
    },
    /// Require every node present, one agreed leader per group, full voter sets and caught-up replicas, in two samples in a row.
    VerifyCluster {
        #[arg(long, default_value_t = 64, value_name = "ENTRIES")]
        lag_tolerance: u64,
        #[arg(long, default_value_t = 60, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Confirm every group's leader with a fresh ReadIndex round and wait for every replica to apply that prefix; prints JSON.
    VerifyQuorum {
        #[arg(long, value_name = "N")]
        expected_groups: usize,
        #[arg(long, default_value_t = 120, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// The same observation of the voters left after one known voter is gone; prints JSON scoped as a surviving quorum.
    VerifySurvivors {
        /// The one unavailable voter, kept in the manifest and left out of the observation.
        #[arg(long, value_name = "ID")]
        excluded_node_id: u64,
        #[arg(long, value_name = "N")]
        expected_groups: usize,
        #[arg(long, default_value_t = 120, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Erase a bucket from every group and from the cold store, with a proof of erasure (JSON report).
    PurgeBucket {
        /// The bucket to erase for good: later creates and appends in it answer 404 BUCKET_ERASED.
        bucket: String,
        /// The voter to ask (any voter purges the whole cluster); the first that answers by default.
        #[arg(long, value_name = "ID")]
        node: Option<u64>,
        /// Keep retrying 503s (a group without a leader) until this long.
        #[arg(long, default_value_t = 120, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Export every Raft group into a backup: one MessagePack object per group (the replica with the highest index) and manifest.json, written last.
    BackupCreate {
        /// A local directory (created if missing) or s3://bucket/prefix (AWS credential chain, AWS_REGION, AWS_ENDPOINT_URL).
        #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
        location: String,
        /// The manifest's timestamp instead of now.
        #[arg(long, value_name = "MS")]
        created_unix_ms: Option<u64>,
    },
    /// Check a backup without a cluster: the manifest lists every group once, and each object's size, BLAKE3 and contents.
    BackupVerify {
        /// The backup: a local directory or s3://bucket/prefix.
        #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
        location: String,
    },
    /// Restore a verified backup into a fresh, empty cluster with the same group count, once the cluster confirms it holds every cold object the backup references.
    Restore {
        /// The backup: a local directory or s3://bucket/prefix.
        #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
        location: String,
    },
    /// Explain the recovery plan of one stalled group and send nothing; with --accept-loss, accept the loss of writes acknowledged after the voters' last fsync and send it (spec/35).
    RecoverGroup {
        /// The stalled Raft group.
        #[arg(long, value_name = "G")]
        group: u32,
        /// Send the plan: the group starts a new history, every stream a new Stream-Incarnation.
        #[arg(long)]
        accept_loss: bool,
        /// Plans sent at most (a wedged or refused plan is planned again).
        #[arg(long, default_value_t = 3, value_name = "N")]
        max_plans: u32,
        /// Seconds one accept-unsynced-loss call may take.
        #[arg(long, default_value_t = 60, value_name = "SECS")]
        accept_timeout_secs: u64,
        /// Give up (exit 2) when the group has not recovered after this long.
        #[arg(long, default_value_t = 600, value_name = "SECS")]
        timeout_secs: u64,
    },
    /// Print the manifest with each node's current process incarnation pinned (JSON).
    PinIncarnations {
        /// Pin a new process for this one node (a replacement); every other node must match its saved pin.
        #[arg(long, value_name = "ID")]
        replace_node: Option<u64>,
    },
}
