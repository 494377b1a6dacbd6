//! Serving the HTTP surface on a bound listener (HTTP/1.1 and h2c).
//!
//! One task accepts; connections are handed round-robin to worker threads,
//! each running its own one-worker runtime, so a request is served on
//! one thread from start to end without the wake-ups of a work-stealing
//! scheduler (thread-per-core, DESIGN.md).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::backend::Backend;
use crate::connection::ConnectionLimits;
use crate::front::FrontDoor;
use crate::handlers::{Shared, handle};
use crate::options::HttpOptions;
use crate::render::Answer;

/// The HTTP surface over one backend and one front door: a request in,
/// its answer out. A front door serves it as is (`serve_surface`) or
/// inside a service of its own (a node's gRPC mux).
pub struct Surface<B> {
    shared: Arc<Shared<B>>,
}

impl<B> Clone for Surface<B> {
    fn clone(&self) -> Self {
        Surface { shared: self.shared.clone() }
    }
}

impl<B: Backend> Surface<B> {
    pub fn new(backend: Arc<B>, options: HttpOptions, front: Arc<dyn FrontDoor>) -> Surface<B> {
        let cluster_id_header = crate::render::cluster_id_header(&options.cluster_id);
        Surface { shared: Arc::new(Shared { backend, options, front, stats: Default::default(), cluster_id_header }) }
    }

    /// Makes this surface's figures what an OTLP exporter reads at export
    /// time (spec/37: no SDK call on the request path).
    pub fn publish_metrics(&self) {
        let shared = self.shared.clone();
        let source = move || -> crate::telemetry::MetricsFuture {
            let shared = shared.clone();
            Box::pin(async move { shared.metrics().await })
        };
        crate::telemetry::publish_metrics(tokio::runtime::Handle::current(), Arc::new(source));
    }

    /// The handler's own future, not an async wrapper around it (which
    /// would hold a second copy of the request beside it).
    pub fn handle<T>(&self, req: Request<T>) -> impl Future<Output = Answer> + 'static
    where
        T: http_body::Body<Data = Bytes> + Send + 'static,
        T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        handle(self.shared.clone(), req)
    }

    /// Worker threads serving connections (`runtime.core_count`).
    pub fn workers(&self) -> usize {
        self.shared.options.workers.max(1)
    }
}

/// Serves the surface alone until `shutdown` resolves.
pub async fn serve_surface<B: Backend>(
    listener: TcpListener,
    surface: Surface<B>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let workers = Workers::unpinned(surface.workers());
    let limits = surface.shared.options.connections;
    serve(
        listener,
        workers,
        limits,
        move |req| {
            let surface = surface.clone();
            async move { surface.handle(req).await }
        },
        shutdown,
    )
    .await
}

/// The worker threads that serve connections: how many, and the CPU each
/// is pinned to (`affinity::plan`; none when `cpus` is empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workers {
    pub count: usize,
    pub cpus: Vec<usize>,
}

impl Workers {
    pub fn unpinned(count: usize) -> Workers {
        Workers { count, cpus: Vec::new() }
    }
}

/// How long open connections may finish their requests after `shutdown`
/// (spec/35, graceful voter shutdown): then they are dropped.
pub const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves `service` on `listener` with `workers`' threads until `shutdown`
/// resolves, then stops accepting, asks every connection to close after
/// its requests in flight and waits up to `DRAIN_WAIT` for them. Takes a
/// bound listener so callers (and tests) choose the address, port 0 included.
pub async fn serve<S, F, O>(
    listener: TcpListener,
    workers: Workers,
    limits: ConnectionLimits,
    service: S,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()>
where
    S: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<O>> + Send + 'static,
    O: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    O::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let cpus = workers.cpus;
    let workers = workers.count.max(1);
    let (drain, draining) = watch::channel(false);
    let mut lanes = Vec::with_capacity(workers);
    let mut drained = Vec::with_capacity(workers);
    for i in 0..workers {
        let cpu = cpus.get(i).copied();
        let (lane, done) = start_worker(i, cpu, service.clone(), limits, draining.clone())?;
        lanes.push(lane);
        drained.push(done);
    }
    let mut next = 0usize;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let std_tcp = match tcp.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot hand over a connection");
                continue;
            }
        };
        if let Some(lane) = lanes.get(next % workers) {
            let _ = lane.send(std_tcp);
        }
        next = next.wrapping_add(1);
    }
    drop(listener);
    drop(lanes);
    let _ = drain.send(true);
    let _ = tokio::time::timeout(DRAIN_WAIT, futures_util::future::join_all(drained)).await;
    Ok(())
}

/// A worker thread with a one-worker runtime that serves the connections
/// sent to it; it ends when the sender is dropped. (A one-worker
/// multi-thread runtime measured faster here than a current-thread one: its
/// worker polls I/O and tasks in the same turn.)
fn start_worker<S, F, O>(
    index: usize,
    cpu: Option<usize>,
    service: S,
    limits: ConnectionLimits,
    draining: watch::Receiver<bool>,
) -> std::io::Result<(mpsc::UnboundedSender<std::net::TcpStream>, tokio::sync::oneshot::Receiver<()>)>
where
    S: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<O>> + Send + 'static,
    O: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    O::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<std::net::TcpStream>();
    let (done, drained) = tokio::sync::oneshot::channel();
    let pin = move || {
        if let Some(cpu) = cpu {
            crate::affinity::pin_current_thread(cpu);
        }
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().on_thread_start(pin).build()?;
    std::thread::Builder::new().name(format!("ursula-http-{index}")).spawn(move || {
        pin();
        runtime.block_on(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Some(std_tcp) = rx.recv().await {
                match TcpStream::from_std(std_tcp) {
                    Ok(tcp) => {
                        connections.spawn(crate::connection::serve(service.clone(), tcp, limits, draining.clone()));
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot adopt a connection"),
                }
                // Ended connections leave the set as new ones come.
                while connections.try_join_next().is_some() {}
            }
            // The listener stopped: each connection closes once its
            // requests in flight are answered.
            while connections.join_next().await.is_some() {}
            let _ = done.send(());
        });
    })?;
    Ok((tx, drained))
}
