//! A node's client listener carries two planes: requests whose content
//! type is `application/grpc*` go to its gRPC services (`StreamService`,
//! and `RaftService` when the cluster plane shares `server.listen`), the
//! rest to the HTTP surface. A gateway's `Read` is answered without
//! copying the view's bytes (`raw_read`).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use tonic::service::Routes;
use ursula_http::{Backend, Surface};

/// The body of a gRPC answer.
pub(crate) type GrpcBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// The service of the node's client listener.
pub fn service<B: Backend>(
    surface: Surface<B>,
    routes: Routes,
    reads: crate::raw_read::RawReads,
) -> impl Fn(Request<Incoming>) -> PlaneFuture + Clone + Send + Sync + 'static {
    move |req: Request<Incoming>| {
        // One box per plane, each holding its handler's future and nothing
        // beside it: the future is moved into the box on every request (a
        // wrapper around it would be one more move of some kilobytes). The
        // HTTP surface lends its handler what it needs (no clone per
        // request); gRPC clones its routes.
        if is_grpc(&req) {
            PlaneFuture::Grpc(Box::pin(grpc(routes.clone(), reads.clone(), req)))
        } else {
            PlaneFuture::Http(Box::pin(surface.handle(req)))
        }
    }
}

type Boxed<T> = Pin<Box<dyn Future<Output = Response<T>> + Send>>;

/// An answer of either plane on its way.
pub enum PlaneFuture {
    Http(Boxed<ursula_http::render::Body>),
    Grpc(Boxed<GrpcBody>),
}

impl Future for PlaneFuture {
    type Output = Response<PlaneBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            PlaneFuture::Http(f) => f.as_mut().poll(cx).map(|answer| answer.map(PlaneBody::Http)),
            PlaneFuture::Grpc(f) => f.as_mut().poll(cx).map(|answer| answer.map(PlaneBody::Grpc)),
        }
    }
}

async fn grpc(mut routes: Routes, reads: crate::raw_read::RawReads, req: Request<Incoming>) -> Response<GrpcBody> {
    use tonic::codegen::Service;
    use tracing::Instrument;
    // A gateway's call is this node's boundary. Raft's calls make their
    // own spans (the cluster plane may have a listener of its own).
    let path = req.uri().path();
    let span = match path.strip_prefix('/') {
        Some(name) if path.starts_with(STREAM_SERVICE) => ursula_http::telemetry::rpc_span(name, req.headers()),
        _ => tracing::Span::none(),
    };
    if path == ursula_proto::read_wire::READ_PATH {
        let answer = reads(req.into_body());
        return if span.is_none() { answer.await } else { answer.instrument(span).await };
    }
    // `Routes` is always ready; its error type is `Infallible`.
    let answered = if span.is_none() { routes.call(req).await } else { routes.call(req).instrument(span).await };
    match answered {
        Ok(answer) => answer.map(|body| body.map_err(std::io::Error::other).boxed_unsync()),
        Err(never) => match never {},
    }
}

const STREAM_SERVICE: &str = "/ursula.stream.";

fn is_grpc<T>(req: &Request<T>) -> bool {
    req.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// An answer of either plane, without boxing the HTTP one again.
pub enum PlaneBody {
    Http(ursula_http::render::Body),
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
