//! Serving the HTTP surface on a bound listener (HTTP/1.1 and h2c).
//!
//! One task accepts; connections are handed round-robin to worker threads,
//! each running its own one-worker runtime, so a request is served on
//! one thread from start to end without the wake-ups of a work-stealing
//! scheduler (thread-per-core, DESIGN.md).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::backend::Backend;
use crate::handlers::{Shared, handle};
use crate::immutable_cache::ImmutableCache;
use crate::options::HttpOptions;

/// The body of a gRPC answer.
pub type GrpcBody = UnsyncBoxBody<Bytes, std::io::Error>;
/// gRPC served on the same listener (a node's `StreamService`, and its
/// `RaftService` when the planes share `server.listen`): requests whose
/// content type is `application/grpc*` go here instead of the HTTP surface.
pub type GrpcPlane =
    Arc<dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = Response<GrpcBody>> + Send>> + Send + Sync>;

/// Serves until `shutdown` resolves. Takes a bound listener so callers
/// (and tests) choose the address, port 0 included.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    options: HttpOptions,
    grpc: Option<GrpcPlane>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let workers = options.workers.max(1);
    let cache = options.immutable_cache.as_ref().filter(|c| c.max_bytes > 0).map(ImmutableCache::new);
    let uploads = options.uploads.clone().map(crate::uploads::UploadBudget::new);
    let shared = Arc::new(Shared { backend, options, grpc, cache, uploads });
    let mut lanes = Vec::with_capacity(workers);
    for i in 0..workers {
        lanes.push(start_worker(i, shared.clone())?);
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
            () = &mut shutdown => return Ok(()),
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
}

/// A worker thread with a one-worker runtime that serves the connections
/// sent to it; it ends when the sender is dropped. (A one-worker
/// multi-thread runtime measured faster here than a current-thread one: its
/// worker polls I/O and tasks in the same turn.)
fn start_worker<B: Backend>(
    index: usize,
    shared: Arc<Shared<B>>,
) -> std::io::Result<mpsc::UnboundedSender<std::net::TcpStream>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<std::net::TcpStream>();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    std::thread::Builder::new().name(format!("ursula-http-{index}")).spawn(move || {
        runtime.block_on(async move {
            while let Some(std_tcp) = rx.recv().await {
                match TcpStream::from_std(std_tcp) {
                    Ok(tcp) => {
                        tokio::spawn(serve_connection(shared.clone(), tcp));
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot adopt a connection"),
                }
            }
        });
    })?;
    Ok(tx)
}

async fn serve_connection<B: Backend>(shared: Arc<Shared<B>>, tcp: TcpStream) {
    let service = service_fn(move |req: Request<Incoming>| {
        let shared = shared.clone();
        async move {
            let answer = match &shared.grpc {
                Some(grpc) if is_grpc(&req) => grpc(req).await.map(PlaneBody::Grpc),
                _ => handle(shared.clone(), req).await.map(PlaneBody::Http),
            };
            Ok::<_, std::convert::Infallible>(answer)
        }
    });
    if let Err(e) = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), service).await {
        tracing::debug!(error = %e, "connection ended");
    }
}

fn is_grpc<T>(req: &Request<T>) -> bool {
    req.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// An answer of either plane, without boxing the HTTP one again.
enum PlaneBody {
    Http(crate::render::Body),
    Grpc(GrpcBody),
}

impl http_body::Body for PlaneBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            PlaneBody::Http(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            PlaneBody::Grpc(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            PlaneBody::Http(b) => b.is_end_stream(),
            PlaneBody::Grpc(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            PlaneBody::Http(b) => b.size_hint(),
            PlaneBody::Grpc(b) => b.size_hint(),
        }
    }
}
