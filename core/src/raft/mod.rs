//! The durable engine: multi-Raft on openraft over the node's shared WAL.
//!
//! Module map:
//! - `types`: the openraft type configuration (`Proposal`, `Outcome`).
//! - `runtime`: openraft's Tokio runtime with a generator a simulation seeds.
//! - `watch`: openraft's watch channel, waking receivers in a fixed order.
//! - `codec`: log entries, votes and snapshots as bytes.
//! - `log_store`: a group's Raft log over the WAL, with its entry cache.
//! - `log_store_suite`: openraft's storage suite over the log store and state machine (tests).
//! - `state_machine`: the stream store as openraft's state machine.
//! - `snapshot_file`: a group's snapshot on disk.
//! - `snapshot_store`: Raft snapshots as S3 objects each node owns.
//! - `network`: the (empty) network of a node without peers.
//! - `batcher`: AppendEntries of many groups to one peer in one call.
//! - `grpc_client`: Raft to peers over `RaftService` (openraft's network).
//! - `grpc_server`: `RaftService`, handing each request to its group.
//! - `refusals`: peers of another cluster, counted and logged once.
//! - `format_check`: the Raft protocol's format epoch: the startup probe, the unready latch.
//! - `peer_calls`: bootstrap probes, read barriers and forwarded commands to a peer.
//! - `peer_error`: why a call to a peer produced no answer, typed.
//! - `pb`: openraft's RPC types to and from the protobuf messages.
//! - `engine`: `RaftEngine`, the `GroupEngine` over the groups.
//! - `maintenance`: the `raft_maintenance` report and snapshots on demand.
//! - `leadership`: transfers, the leadership balancer, a draining voter's hand-off.
//! - `disk_guard`: refusing writes when the WAL disk runs short.
//! - `driver`: the snapshot driver and the disk probe.
//! - `bootstrap`: the per-group membership initializer.
//! - `boot`: opening the WAL and starting the groups; clean shutdown.

#[cfg(test)]
mod apply_fault;
#[cfg(test)]
mod apply_stop_tests;
mod batch_join;
mod batcher;
#[cfg(test)]
mod batcher_tests;
mod boot;
mod bootstrap;
mod codec;
mod disk_guard;
mod driver;
mod engine;
mod fence;
mod format_check;
mod grpc_client;
mod grpc_server;
mod leadership;
mod log_pressure;
mod log_store;
#[cfg(test)]
mod log_store_suite;
mod maintenance;
mod network;
mod pb;
mod peer_calls;
mod peer_error;
mod pipeline;
mod plan_run;
mod recovery_gate;
pub mod recovery_plan;
mod refusals;
mod reversions;
pub mod runtime;
#[cfg(test)]
mod sim;
mod snapshot_file;
mod snapshot_plan;
mod snapshot_store;
mod state_machine;
mod store_health;
mod transport_budget;
mod types;
mod watch;

pub use boot::{RaftNode, generate_cluster_id, start};

/// A lone voter of `groups` groups with its WAL in a temporary directory,
/// for in-process tests of the engine; the directory lives as long as it.
#[cfg(test)]
async fn lone_voter(groups: u32) -> (tempfile::TempDir, RaftNode) {
    use crate::config::{CliOverrides, EngineConfig};
    let dir = tempfile::tempdir().expect("a tempdir");
    let text = format!("[raft]\ngroup_count = {groups}\n[raft.wal]\npath = {:?}\n", dir.path());
    let config = crate::config::from_text(&text, &CliOverrides::default()).expect("settings");
    let EngineConfig::Raft(raft) = &config.engine else { panic!("a WAL path runs Raft") };
    let node =
        start(&config, raft, std::sync::Arc::new(crate::clock::SystemClock), None).await.expect("the node starts");
    (dir, node)
}
pub use engine::RaftEngine;
