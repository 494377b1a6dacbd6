//! Running a node: bind, serve, and stop on a signal.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use ursula_gateway::HttpOptions;

use crate::backend::{NodeBackend, sweep_forever};
use crate::config::NodeConfig;
use crate::engine::MemoryEngine;

/// Serves the development node on `listener` until `shutdown` resolves.
pub async fn run(
    config: &NodeConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let engine = Arc::new(MemoryEngine::new(config.group_count));
    // Without `server.cluster_id` a node without a WAL gets a new id per start.
    let cluster_id = config.cluster_id.clone().unwrap_or_else(generate_cluster_id);
    let sweeper = tokio::spawn(sweep_forever(engine.clone(), Duration::from_secs(30)));
    let backend = Arc::new(NodeBackend::new(engine));
    let options = HttpOptions { json_reads: config.json_reads, cluster_id, workers: config.core_count };
    let served = ursula_gateway::serve(listener, backend, options, shutdown).await;
    sweeper.abort();
    served
}

/// `u` followed by 32 hex digits (spec/07-configuration.md, `server.cluster_id`).
pub fn generate_cluster_id() -> String {
    format!("u{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}
