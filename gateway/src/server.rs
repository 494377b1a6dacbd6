//! Serving the HTTP surface on a bound listener (HTTP/1.1 and h2c).

use std::future::Future;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::backend::Backend;
use crate::handlers::{Shared, handle};
use crate::options::HttpOptions;

/// Serves until `shutdown` resolves. Takes a bound listener so callers
/// (and tests) choose the address, port 0 included.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    options: HttpOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared { backend, options });
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
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(shared, req).await) }
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), service).await
            {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
}
