//! Running a node: start the engine the config names, serve, and stop on a
//! signal.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tonic::service::Routes;
use ursula_http::{HttpOptions, PlainFrontDoor, Surface};

use crate::backend::{NodeBackend, sweep_forever, sweep_interval};
use crate::clock::{Clock, SystemClock};
use crate::config::{EngineConfig, NodeConfig};
use crate::engine::{GroupEngine, MemoryEngine};
use crate::format_epoch::ObjectNamespace;
use crate::raft;
use crate::stream_plane::StreamPlane;

/// Starts the node's engine, then serves on `listener` until `shutdown`
/// resolves. The `ursula listening on` line is printed once the node can
/// serve, so scripts and tests may send requests as soon as they see it.
pub async fn run(config: &NodeConfig, listener: TcpListener, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    run_with_clock(config, listener, Arc::new(SystemClock), shutdown).await
}

/// `run` with the node's time taken from `clock` (tests hold it still).
pub async fn run_with_clock(
    config: &NodeConfig,
    listener: TcpListener,
    clock: Arc<dyn Clock>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // spec/35: the object store's format marker is checked before the
    // node writes anything, and written once every check passed.
    let unmarked = match &config.cold {
        Some(cold) => match ObjectNamespace::of(cold).await? {
            Some(namespace) => namespace.check().await?.then_some(namespace),
            None => None,
        },
        None => None,
    };
    let marking = async move {
        match unmarked {
            Some(namespace) => namespace.mark().await,
            None => Ok(()),
        }
    };
    // One set of cold threads for every S3 client of the node (the cold
    // tier's and the Raft snapshot store's), made only when one is used.
    let snapshots_on_s3 = matches!(&config.engine, EngineConfig::Raft(r) if r.snapshot_store.is_some());
    let cold_io = match config.cold.is_some() || snapshots_on_s3 {
        true => Some(crate::cold::io::ColdIo::start(crate::cold::io::ColdIo::workers_for(config.core_count))?),
        false => None,
    };
    match &config.engine {
        EngineConfig::Memory => {
            marking.await?;
            let engine = Arc::new(MemoryEngine::new(config.group_count, clock));
            // Without `server.cluster_id` a node without a WAL gets a new id per start.
            let cluster_id = config.cluster_id.clone().unwrap_or_else(raft::generate_cluster_id);
            let me = Me { node_id: 1, client_url: None, raft_routes: None };
            serve(config, listener, engine, cluster_id, me, cold_io, shutdown).await
        }
        EngineConfig::Raft(raft_config) => {
            // Raft groups run on their own runtime, apart from the HTTP
            // workers, with half as many threads: fewer threads to wake per
            // write. On two cores one Raft worker made three voters 1.07x
            // faster and left a single node as it was (BENCHMARKS, issue 20).
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(raft_workers(config.core_count))
                .thread_name("ursula-raft")
                .enable_all()
                .build()
                .context("starting the Raft runtime")?;
            let (c, r) = (config.clone(), raft_config.clone());
            let io = cold_io.clone();
            let started =
                runtime.spawn(async move { raft::start(&c, &r, clock, io).await }).await.context("Raft startup");
            let mut node = match started {
                Ok(Ok(node)) => node,
                // A runtime may not be dropped inside another one: stop it first.
                Ok(Err(e)) | Err(e) => {
                    runtime.shutdown_background();
                    return Err(e);
                }
            };
            if let Err(e) = marking.await {
                runtime.spawn(node.shutdown()).await.context("Raft shutdown")??;
                runtime.shutdown_background();
                return Err(e.into());
            }
            let engine = node.engine.clone();
            let cluster_id = node.cluster_id.clone();
            let me = Me {
                node_id: raft_config.node_id,
                client_url: raft_config
                    .peers
                    .iter()
                    .find(|p| p.node_id == raft_config.node_id)
                    .map(|p| p.client_url.clone()),
                raft_routes: node.shared_raft_routes.take(),
            };
            // On the signal the voter first hands its leaderships off, while
            // it still serves; then its listeners drain (spec/35).
            let peer_timeout = raft_config.balance.peer_timeout;
            let node_ref = &node;
            let handing_off = async move {
                shutdown.await;
                node_ref.hand_off(peer_timeout).await;
            };
            let served = serve(config, listener, engine, cluster_id, me, cold_io, handing_off).await;
            let stopped = runtime.spawn(node.shutdown()).await.context("Raft shutdown");
            runtime.shutdown_background();
            served?;
            stopped?
        }
    }
}

/// Threads of the Raft runtime for `core_count` owner threads.
fn raft_workers(core_count: usize) -> usize {
    (core_count / 2).max(1)
}

/// Binds and serves the admin plane. A node whose admin address is taken
/// (several development nodes on one host) serves without one and says so.
async fn start_admin<E: GroupEngine>(
    config: &NodeConfig,
    admin: crate::admin::Admin<E>,
) -> Option<tokio::task::JoinHandle<()>> {
    match TcpListener::bind(config.admin_listen).await {
        Ok(listener) => {
            let address = listener.local_addr().ok()?;
            println!("ursula admin listening on http://{address}");
            let serving = crate::admin::serve(Arc::new(admin), listener, std::future::pending());
            Some(tokio::spawn(serving))
        }
        Err(e) => {
            tracing::warn!(listen = %config.admin_listen, error = %e, "the admin plane could not bind; serving without it");
            None
        }
    }
}

/// `raft.deleted_data_max_age`, or its default (an hour) on a node
/// without Raft: the expiry sweep's pace follows it.
fn deleted_data_max_age(config: &NodeConfig) -> Duration {
    match &config.engine {
        EngineConfig::Raft(r) => r.deleted_data_max_age,
        EngineConfig::Memory => Duration::from_secs(3600),
    }
}

/// What the first start says: the mode, the config file, the planes.
fn start_line(config: &NodeConfig, cluster_id: &str, node_id: u64) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mode = match &config.engine {
        EngineConfig::Memory => "development node, in memory (nothing survives a restart)".to_string(),
        EngineConfig::Raft(r) => {
            let wal = r.wal.path.as_ref().map_or_else(|| "a temporary directory".into(), |p| p.display().to_string());
            if r.peers.is_empty() {
                format!("durable node, WAL in {wal}")
            } else {
                let cluster = r.cluster_listen.map_or_else(|| "the client listener".into(), |a| a.to_string());
                format!("voter {node_id} of {} in cluster {cluster_id}, WAL in {wal}, Raft on {cluster}", r.peers.len())
            }
        }
    };
    let source = config.source.as_ref().map_or_else(|| "no config file".into(), |p| format!("config {}", p.display()));
    format!("ursula {version} (Ursula {URSULA_RELEASE} protocol and API): {mode}; {source}")
}

/// The Ursula release whose protocol, API and config this server implements.
pub const URSULA_RELEASE: &str = "0.9";

/// Who this node is on its client plane.
struct Me {
    node_id: u64,
    /// This node's `[[raft.peers]].client_url`; else its bound address.
    client_url: Option<String>,
    /// `RaftService`, when the cluster plane shares `server.listen`.
    raft_routes: Option<Routes>,
}

async fn serve<E: GroupEngine>(
    config: &NodeConfig,
    listener: TcpListener,
    engine: Arc<E>,
    cluster_id: String,
    me: Me,
    cold_io: Option<Arc<crate::cold::io::ColdIo>>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let cold = match &config.cold {
        Some(c) => {
            let io = cold_io.context("a cold tier without its threads")?;
            Some(Arc::new(crate::cold::Cold::open(c.clone(), engine.group_count(), io).await?))
        }
        None => None,
    };
    let flusher = cold.clone().map(|c| tokio::spawn(crate::cold::flush::run(engine.clone(), c, me.node_id)));
    let store_gate = cold.as_ref().and_then(|c| engine.watch_cold(c));
    let backend = Arc::new(NodeBackend::new(engine.clone(), cold.clone(), &config.admission));
    let sweeper = tokio::spawn(sweep_forever(
        engine.clone(),
        sweep_interval(deleted_data_max_age(config)),
        backend.expiry_stats(),
    ));
    let admin = crate::admin::Admin {
        backend: backend.clone(),
        engine,
        cold,
        node_id: me.node_id,
        cluster_id: cluster_id.clone(),
    };
    let admin = start_admin(config, admin).await;
    let address = listener.local_addr()?;
    let client_url = me.client_url.unwrap_or_else(|| format!("http://{address}"));
    let inflight = ursula_http::inflight::InflightBodies::new(config.admission.inflight_body_bytes);
    // Append streams stop taking appends when the node stops (spec/35): a
    // gateway's stream ends, and the connection can drain.
    let (stop_streams, stopping) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        let _ = stop_streams.send(true);
    };
    let plane =
        StreamPlane::new(backend.clone(), cluster_id.clone(), me.node_id, client_url, inflight.clone(), stopping);
    let reads = crate::raw_read::hook(plane.clone());
    let streams = plane.service();
    let routes = match me.raft_routes {
        Some(raft) => raft.add_service(streams),
        None => Routes::new(streams),
    };
    let options = HttpOptions {
        json_reads: config.json_reads,
        cluster_id,
        workers: config.http_workers,
        cors: ursula_http::Cors::AnyOrigin,
        max_request_bytes: ursula_http::limits::MAX_REQUEST_BYTES,
        connections: config.connections,
    };
    let neighbours = match config.engine {
        EngineConfig::Memory => ursula_http::affinity::Neighbours::Alone,
        EngineConfig::Raft(_) => ursula_http::affinity::Neighbours::BusyThreads,
    };
    let allowed = ursula_http::affinity::allowed_cpus();
    let cpus = ursula_http::affinity::plan(config.cpu_affinity, config.http_workers, &allowed, neighbours);
    if !cpus.is_empty() {
        tracing::info!(?cpus, "each HTTP worker thread is pinned to a CPU (runtime.cpu_affinity)");
    }
    let workers = ursula_http::Workers { count: options.workers, cpus };
    let started = start_line(config, &options.cluster_id, me.node_id);
    if let Some(cap) = config.memory_abort_cap {
        tokio::spawn(crate::memory_cap::watch(cap));
    }
    if config.tokio_console {
        tracing::warn!(
            "observability.tokio_console is set, but this binary is built without Tokio console: nothing listens for one"
        );
    }
    let surface =
        Surface::new(backend, options, Arc::new(PlainFrontDoor { pace: config.body_pace, inflight: Some(inflight) }));
    surface.publish_metrics();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        node = me.node_id,
        config = %config.source.as_ref().map_or_else(|| "none".into(), |p| p.display().to_string()),
        listen = %address,
        admin_listen = %config.admin_listen,
        "{started}"
    );
    println!("{started}");
    // Tests and scripts read the bound address from this line.
    println!("ursula listening on http://{address}");
    std::io::stdout().flush()?;
    let mux = crate::mux::service(surface, routes, reads);
    let served = ursula_http::serve(listener, workers, config.connections, mux, shutdown).await;
    sweeper.abort();
    if let Some(admin) = admin {
        admin.abort();
    }
    if let Some(gate) = store_gate {
        gate.abort();
    }
    if let Some(flusher) = flusher {
        flusher.abort();
    }
    Ok(served?)
}
