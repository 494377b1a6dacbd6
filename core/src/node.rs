//! Running a node: start the engine the config names, serve, and stop on a
//! signal.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use ursula_gateway::HttpOptions;

use crate::backend::{NodeBackend, sweep_forever};
use crate::config::{EngineConfig, NodeConfig};
use crate::engine::{GroupEngine, MemoryEngine};
use crate::raft;

const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// Starts the node's engine, then serves on `listener` until `shutdown`
/// resolves. The `ursula listening on` line is printed once the node can
/// serve, so scripts and tests may send requests as soon as they see it.
pub async fn run(config: &NodeConfig, listener: TcpListener, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    match &config.engine {
        EngineConfig::Memory => {
            let engine = Arc::new(MemoryEngine::new(config.group_count));
            // Without `server.cluster_id` a node without a WAL gets a new id per start.
            let cluster_id = config.cluster_id.clone().unwrap_or_else(raft::generate_cluster_id);
            serve(config, listener, engine, cluster_id, shutdown).await
        }
        EngineConfig::Raft(raft_config) => {
            // Raft groups run on their own runtime, apart from the HTTP workers.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(config.core_count)
                .thread_name("ursula-raft")
                .enable_all()
                .build()
                .context("starting the Raft runtime")?;
            let (c, r) = (config.clone(), raft_config.clone());
            let started = runtime.spawn(async move { raft::start(&c, &r).await }).await.context("Raft startup");
            let node = match started {
                Ok(Ok(node)) => node,
                // A runtime may not be dropped inside another one: stop it first.
                Ok(Err(e)) | Err(e) => {
                    runtime.shutdown_background();
                    return Err(e);
                }
            };
            let engine = node.engine.clone();
            let cluster_id = node.cluster_id.clone();
            let served = serve(config, listener, engine, cluster_id, shutdown).await;
            let stopped = runtime.spawn(node.shutdown()).await.context("Raft shutdown");
            runtime.shutdown_background();
            served?;
            stopped?
        }
    }
}

async fn serve<E: GroupEngine>(
    config: &NodeConfig,
    listener: TcpListener,
    engine: Arc<E>,
    cluster_id: String,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let sweeper = tokio::spawn(sweep_forever(engine.clone(), SWEEP_INTERVAL));
    let backend = Arc::new(NodeBackend::new(engine));
    let options = HttpOptions { json_reads: config.json_reads, cluster_id, workers: config.core_count };
    // Tests and scripts read the bound address from this line.
    println!("ursula listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let served = ursula_gateway::serve(listener, backend, options, shutdown).await;
    sweeper.abort();
    Ok(served?)
}
