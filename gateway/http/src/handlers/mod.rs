//! Route handlers. Each returns `Result<Answer, ApiError>`; the dispatcher
//! renders refusals once and adds the headers every answer carries.
//!
//! Module map:
//! - `write`: create (`PUT`), append/close (`POST`), delete.
//! - `head`: `HEAD` metadata.
//! - `read`: catch-up and long-poll reads, ETags, gzip.
//! - `bodies`: what reads share: their query, the cursor clock, framing.
//! - `sse`: Server-Sent Events framing and the live loop.
//! - `snapshot`: snapshot publish and read (with byte ranges), retention.
//! - `parts`: snapshot upload in parts (stage, commit, discard).
//! - `bootstrap`: `/bootstrap` as `multipart/mixed`.
//! - `immutable`: the cacheable chunk and snapshot resources.
//! - `ops`: `/__ursula/` operational endpoints.

mod bodies;
mod bootstrap;
mod head;
mod immutable;
mod ops;
mod parts;
pub mod read;
mod snapshot;
mod sse;
mod write;

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use ursula_stream::StreamKey;

use crate::backend::{Backend, WriteRoute};
use crate::error::ApiError;
use crate::front::{Answered, FrontDoor, Holds, RequestBody, RequestLimit, Upload};
use crate::options::HttpOptions;
use crate::render::{self, Answer};
use crate::route::{Route, Sub, route};
use crate::telemetry::{self, Op, RequestStats};
use tracing::Instrument;

/// What every handler shares.
pub struct Shared<B> {
    pub backend: Arc<B>,
    pub options: HttpOptions,
    pub front: Arc<dyn FrontDoor>,
    pub stats: RequestStats,
    /// `options.cluster_id` as a header value, made once.
    pub cluster_id_header: Option<http::HeaderValue>,
}

impl<B: Backend> Shared<B> {
    /// Every figure of `/__ursula/metrics`: the backend's, the front door's
    /// and the surface's own.
    pub async fn metrics(&self) -> crate::ops::Metrics {
        let mut m = self.backend.metrics().await;
        self.front.metrics(&mut m);
        self.stats.fill(&mut m);
        m.text("cluster_id", self.options.cluster_id.as_str());
        m
    }
}

/// Serves one request inside its boundary span, and counts its answer.
pub async fn handle<B, T>(shared: Arc<Shared<B>>, req: Request<T>) -> Answer
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let routed = route(req.uri().path());
    let op = Op::of(req.method(), routed.as_ref().ok());
    let span = telemetry::boundary_span(op, routed.as_ref().ok(), req.headers());
    let started = telemetry::latency_clock(op);
    // An untraced request (every one while export is off) pays for no span
    // and no extra move of the request's (large) future.
    let answer = if span.is_none() {
        serve(shared.clone(), req, routed).await
    } else {
        Box::pin(serve(shared.clone(), req, routed)).instrument(span.clone()).await
    };
    let status = answer.status();
    span.record("http.response.status_code", status.as_u16());
    shared.stats.answered(op, status);
    telemetry::record_latency(op, started, status);
    answer
}

async fn serve<B, T>(shared: Arc<Shared<B>>, req: Request<T>, routed: Result<Route, ApiError>) -> Answer
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let head = req.method() == Method::HEAD;
    let (mut parts, body) = req.into_parts();
    let origin = parts.headers.get(http::header::ORIGIN).cloned();
    let options = shared.clone();
    let passes_through = options.front.passes_through();
    // What the front door's `answered` is told; one that passes every
    // answer through needs neither copy.
    let request = (!passes_through).then(|| (parts.method.clone(), parts.uri.clone()));
    // The preflight is the same for every path and comes before the front
    // door's checks: it must not tell whether a resource exists.
    let early = if parts.method == Method::OPTIONS {
        Some(render::preflight())
    } else if parts.version == http::Version::HTTP_11 && !parts.headers.contains_key(http::header::HOST) {
        // RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host.
        Some(render::error(&ApiError::InvalidRequest("an HTTP/1.1 request needs a Host header"), head))
    } else if passes_through {
        None
    } else {
        shared.front.admit(&mut parts).await
    };
    let served = early.is_none();
    let allow = allowed_methods(routed.as_ref().ok());
    // The answer keeps the holds; the request's copy lets the body reader count.
    let holds = parts.extensions.get::<Holds>().cloned();
    let mut answer = match early {
        Some(answer) => {
            // A refusal before the body was read (a quota, a credential):
            // the client may still be sending it. A cache hit has none.
            drain_unread(&parts.headers, body);
            answer
        }
        None => {
            dispatch(shared, Request::from_parts(parts, body), routed).await.unwrap_or_else(|e| render::error(&e, head))
        }
    };
    if let Some(holds) = holds {
        answer = render::holding(answer, holds);
    }
    if answer.status() == StatusCode::METHOD_NOT_ALLOWED {
        answer.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    }
    let origin = origin.as_ref().and_then(|o| o.to_str().ok());
    render::add_common_headers(&mut answer, &options.options.cors, origin);
    // Every answer of the server names the protocol and the deployment
    // (extensions §10); an intermediary's own refusal names neither.
    if answer.extensions().get::<render::IntermediaryAnswer>().is_none() {
        render::add_server_identity(&mut answer, options.cluster_id_header.as_ref());
    }
    match request {
        Some((method, uri)) if served => options.front.answered(Answered { method: &method, uri: &uri }, answer).await,
        _ => answer,
    }
}

async fn dispatch<B, T>(
    shared: Arc<Shared<B>>,
    req: Request<T>,
    routed: Result<Route, ApiError>,
) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let routed = routed?;
    crate::headers::refuse_duplicates(req.headers())?;
    crate::headers::refuse_encoded_body(req.headers())?;
    if let Some(key) = write_target(&routed, req.method())
        && let Err(elsewhere) = route_write(&shared, key, &req)
    {
        let (parts, body) = req.into_parts();
        drain_unread(&parts.headers, body);
        return Err(elsewhere);
    }
    match routed {
        Route::Bucket(_) if req.method() == Method::PUT => {
            // Buckets are implicit: a create only validates the id (spec/25).
            Ok(render::finish(render::builder(StatusCode::CREATED), render::empty()))
        }
        Route::Bucket(_) => Err(ApiError::MethodNotAllowed),
        Route::Stream(key) => match *req.method() {
            Method::PUT => Box::pin(write::create(&shared, key, req)).await,
            Method::POST => write::append(&shared, key, req).await,
            Method::DELETE => Box::pin(write::delete(&shared, key, req.headers())).await,
            Method::HEAD => {
                Box::pin(async {
                    leader_read(&shared, &key, &req).await?;
                    head::head(&shared, key, req.headers(), request_limit(&shared, req.extensions())).await
                })
                .await
            }
            Method::GET => Box::pin(read::get(shared, key, req)).await,
            _ => Err(ApiError::MethodNotAllowed),
        },
        Route::Sub(key, sub) => Box::pin(sub_resource(shared, key, sub, req)).await,
        Route::Ops(path) => Box::pin(ops::ops(&shared, &path, req.method())).await,
    }
}

/// The requests to a stream's sub-resources: rarer than appends and reads,
/// so the caller boxes their (large) future and an append's stays small.
async fn sub_resource<B, T>(
    shared: Arc<Shared<B>>,
    key: StreamKey,
    sub: Sub,
    req: Request<T>,
) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match sub {
        Sub::Snapshot(offset) => match *req.method() {
            // A commit of parts assembles what was staged in the cold tier.
            Method::PUT if req.headers().contains_key(crate::names::STREAM_SNAPSHOT_PARTS) => {
                parts::commit(&shared, key, &offset, req).await
            }
            Method::PUT => snapshot::publish(&shared, key, &offset, req).await,
            Method::GET | Method::HEAD => {
                leader_read(&shared, &key, &req).await?;
                snapshot::read(&shared, key, &offset, &req).await
            }
            _ => Err(ApiError::MethodNotAllowed),
        },
        Sub::SnapshotLatest => Err(ApiError::RemovedRoute(
            "the latest-snapshot path was removed; take Stream-Snapshot-Offset from HEAD and read snapshot/{offset}",
        )),
        Sub::SnapshotParts(offset) if req.method() == Method::POST => parts::stage(&shared, key, &offset, req).await,
        Sub::DiscardParts if req.method() == Method::DELETE => parts::discard(&shared, key, &req).await,
        Sub::SnapshotParts(_) | Sub::DiscardParts => Err(ApiError::MethodNotAllowed),
        Sub::Retention(offset) if req.method() == Method::PUT => {
            snapshot::retention(&shared, key, &offset, req.headers()).await
        }
        Sub::Bootstrap if req.method() == Method::GET => {
            leader_read(&shared, &key, &req).await?;
            bootstrap::bootstrap(&shared, key, &req).await
        }
        Sub::Chunk { token, offset } if matches!(*req.method(), Method::GET | Method::HEAD) => {
            immutable::chunk(&shared, key, &token, &offset, &req).await
        }
        Sub::ImmutableSnapshot { token, offset } if matches!(*req.method(), Method::GET | Method::HEAD) => {
            immutable::snapshot(&shared, key, &token, &offset, &req).await
        }
        Sub::Retention(_) | Sub::Bootstrap | Sub::Chunk { .. } | Sub::ImmutableSnapshot { .. } => {
            Err(ApiError::MethodNotAllowed)
        }
    }
}

/// The `Allow` of a `405` (RFC 9110 §15.5.6): the methods the path takes.
fn allowed_methods(routed: Option<&Route>) -> &'static str {
    match routed {
        Some(Route::Bucket(_)) => "PUT, OPTIONS",
        Some(Route::Stream(_)) => "GET, HEAD, PUT, POST, DELETE, OPTIONS",
        Some(Route::Sub(_, sub)) => match sub {
            Sub::Snapshot(_) => "GET, HEAD, PUT, OPTIONS",
            Sub::SnapshotParts(_) => "POST, OPTIONS",
            Sub::DiscardParts => "DELETE, OPTIONS",
            Sub::Retention(_) => "PUT, OPTIONS",
            Sub::Bootstrap => "GET, OPTIONS",
            Sub::Chunk { .. } | Sub::ImmutableSnapshot { .. } => "GET, HEAD, OPTIONS",
            Sub::SnapshotLatest => "OPTIONS",
        },
        Some(Route::Ops(_)) => "GET, HEAD",
        None => "OPTIONS",
    }
}

/// The stream a request writes to, for the routing answers (extensions §5.7).
fn write_target<'a>(routed: &'a Route, method: &Method) -> Option<&'a StreamKey> {
    match (routed, method) {
        (Route::Stream(key), &Method::PUT | &Method::POST | &Method::DELETE) => Some(key),
        (Route::Sub(key, Sub::Snapshot(_) | Sub::Retention(_)), &Method::PUT) => Some(key),
        (Route::Sub(key, Sub::SnapshotParts(_)), &Method::POST) => Some(key),
        (Route::Sub(key, Sub::DiscardParts), &Method::DELETE) => Some(key),
        _ => None,
    }
}

/// Serves a read that must reflect the leader (`consistency=leader`, HEAD,
/// live reads): redirected from a follower, confirmed on the leader.
pub(crate) async fn leader_read<B: Backend, T>(
    shared: &Shared<B>,
    key: &StreamKey,
    req: &Request<T>,
) -> Result<(), ApiError> {
    route_write(shared, key, req)?;
    Ok(shared.backend.linearize(key).await?)
}

/// The rest of a body answered before it was read (a redirect, a refusal)
/// is read and dropped in the background, so an HTTP/1.1 client still
/// sending it reads the answer instead of a reset (extensions §5.5). A
/// client that sent `Expect: 100-continue` sends no body then.
fn drain_unread<T>(headers: &http::HeaderMap, body: T)
where
    T: http_body::Body<Data = Bytes> + Send + 'static,
{
    let continues =
        headers.get(http::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if continues || http_body::Body::is_end_stream(&body) {
        return;
    }
    crate::front::drain_behind_answer(body);
}

/// Redirects a write this node does not lead, before its body is read.
fn route_write<B: Backend, T>(shared: &Shared<B>, key: &StreamKey, req: &Request<T>) -> Result<(), ApiError> {
    match shared.backend.leader_route(key) {
        WriteRoute::Local => Ok(()),
        WriteRoute::NoLeader { group } => Err(ApiError::NoLeader { group }),
        WriteRoute::Leader(hint) => {
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
            let location = format!("{}{target}", hint.client_url.trim_end_matches('/'));
            Err(ApiError::Redirect { location, hint })
        }
    }
}

/// The request limit of this request: the surface's, or a front door's
/// lower one.
fn request_limit<B>(shared: &Shared<B>, extensions: &http::Extensions) -> u64 {
    let surface = shared.options.request_limit();
    extensions.get::<RequestLimit>().map_or(surface, |l| l.0.min(surface))
}

/// Reads a request body up to the request limit, refusing from
/// `Content-Length` before reading when it can; the front door reads it (a
/// gateway under its body budget and slow-body rules). The answer holds
/// the body's share of any budget until the request is answered.
async fn read_body<B, T>(shared: &Shared<B>, req: Request<T>) -> Result<Upload, ApiError>
where
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limit = request_limit(shared, req.extensions());
    let declared = crate::headers::content_length(req.headers());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::RequestTooLarge { limit });
    }
    let counter = req.extensions().get::<Holds>().and_then(|h| h.received.clone());
    let body: RequestBody = req.into_body().map_err(Into::into).boxed_unsync();
    let upload = shared.front.read_body(body, declared, limit).await?;
    if let Some(counter) = counter {
        counter.fetch_add(upload.bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(upload)
}
