//! What a front door composes around the shared surface. The HTTP layer
//! knows neither a node nor a gateway: each passes its own `FrontDoor`,
//! whose hooks run at fixed points of every request. A gateway fills them
//! (the immutable cache answers early and keeps marked answers, the body
//! budget reads bodies; access control, quotas and usage go here next); a
//! node passes `PlainFrontDoor`. Both read bodies under `BodyPace`.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::request::Parts;
use http::{Method, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::ops::Metrics;
use crate::render::Answer;

/// Any error a request body may fail with.
pub type BodyError = Box<dyn StdError + Send + Sync>;
/// A request body as the hooks see it, whatever the connection gave.
pub type RequestBody = UnsyncBoxBody<Bytes, BodyError>;

/// A request body read in full. It may hold a share of a budget (`held`)
/// until the request that carries it has been answered.
pub struct Upload {
    pub bytes: Bytes,
    _held: Option<Box<dyn Send + Sync>>,
}

impl Upload {
    pub fn new(bytes: Bytes) -> Upload {
        Upload { bytes, _held: None }
    }

    /// A body that keeps `held` alive until the answer is sent.
    pub fn holding(bytes: Bytes, held: impl Send + Sync + 'static) -> Upload {
        Upload { bytes, _held: Some(Box::new(held)) }
    }
}

/// The request an answer belongs to, as `answered` sees it.
pub struct Answered<'a> {
    pub method: &'a Method,
    pub uri: &'a Uri,
}

/// When a live read admitted with a credential must end (the credential's
/// expiry): a front door puts it in the request's extensions; SSE ends
/// there with `event: credential-expired`, a long-poll answers as its
/// timeout would. A catch-up read ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveDeadline(pub Instant);

/// A lower request-body limit for this request than the surface's (a
/// tenant's quota): bodies above it are refused with it, and a `HEAD`
/// advertises it (extensions §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimit(pub u64);

/// What a front door admitted a request with (a live-read slot, an upload
/// slot, a usage tally): kept until the answer's body is finished or
/// dropped, whichever comes first.
#[derive(Clone, Default)]
pub struct Holds {
    pub held: Vec<std::sync::Arc<dyn Send + Sync>>,
    /// Bytes of the answer's body written, when a front door counts them.
    pub sent: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Bytes of the request's body read, when a front door counts them.
    pub received: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

/// The hooks of one front door.
pub trait FrontDoor: Send + Sync + 'static {
    /// Runs before the request is routed (after a CORS preflight, which
    /// never reaches it): an answer of its own (a refusal, a cache hit), or
    /// `None` to serve the request, which it may amend (strip a credential,
    /// add a `LiveDeadline`).
    fn admit<'a>(&'a self, request: &'a mut Parts) -> BoxFuture<'a, Option<Answer>>;

    /// Reads a request body of at most `limit` bytes; `declared` is its
    /// `Content-Length`, already checked against `limit`.
    fn read_body(
        &self,
        body: RequestBody,
        declared: Option<u64>,
        limit: u64,
    ) -> BoxFuture<'_, Result<Upload, ApiError>>;

    /// The answer on its way out, after the common headers were added.
    fn answered<'a>(&'a self, request: Answered<'a>, answer: Answer) -> BoxFuture<'a, Answer>;

    /// The front door's own figures, added to `/__ursula/metrics`.
    fn metrics(&self, metrics: &mut Metrics);

    /// Whether `admit` admits every request unchanged and `answered` passes
    /// every answer on as it is (a node's front door): the surface then
    /// calls neither, and keeps no copy of the request's method and URI.
    fn passes_through(&self) -> bool {
        false
    }
}

/// How slowly a request body may arrive (the 0.8 release notes' slow-body
/// rule, on a node as on a gateway): each window of `stall_timeout` must
/// bring at least one byte and `min_bytes_per_sec` over the window, or the
/// request answers `408 BODY_TOO_SLOW` and nothing is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPace {
    pub stall_timeout: Duration,
    pub min_bytes_per_sec: u64,
}

impl Default for BodyPace {
    fn default() -> BodyPace {
        BodyPace { stall_timeout: Duration::from_secs(30), min_bytes_per_sec: 1024 }
    }
}

impl BodyPace {
    /// Bytes a window of `stall_timeout` must bring.
    pub fn min_bytes_per_window(&self) -> u64 {
        let per_ms = u128::from(self.min_bytes_per_sec) * self.stall_timeout.as_millis();
        u64::try_from(per_ms / 1000).unwrap_or(u64::MAX)
    }

    /// A reader of one body under this pace.
    pub fn reader(self) -> PacedReader {
        PacedReader { pace: self, window_end: None, in_window: 0 }
    }
}

/// Reads a body's data frames, refusing one that stalls or trickles.
pub struct PacedReader {
    pace: BodyPace,
    /// The end of the current window, from the first read that waited:
    /// a body that arrived with its head never starts a timer.
    window_end: Option<Instant>,
    in_window: u64,
}

impl PacedReader {
    /// The next data of `body`, `None` at its end.
    pub async fn next<T>(&mut self, body: &mut T) -> Result<Option<Bytes>, ApiError>
    where
        T: http_body::Body<Data = Bytes> + Unpin,
    {
        loop {
            let mut next = body.frame();
            let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut next).poll(cx)));
            let frame = match polled.await {
                std::task::Poll::Ready(frame) => frame,
                std::task::Poll::Pending => {
                    let window_end = *self.window_end.get_or_insert_with(|| Instant::now() + self.pace.stall_timeout);
                    match tokio::time::timeout_at(window_end, next).await {
                        Ok(frame) => frame,
                        Err(_) => {
                            // A window passed: it must have brought the minimum.
                            if self.in_window == 0 || self.in_window < self.pace.min_bytes_per_window() {
                                return Err(ApiError::BodyTooSlow);
                            }
                            self.in_window = 0;
                            self.window_end = Some(Instant::now() + self.pace.stall_timeout);
                            continue;
                        }
                    }
                }
            };
            let frame = match frame {
                Some(Ok(frame)) => frame,
                Some(Err(_)) => return Err(ApiError::BodyUnreadable),
                None => return Ok(None),
            };
            if let Ok(data) = frame.into_data() {
                self.in_window = self.in_window.saturating_add(data.len() as u64);
                return Ok(Some(data));
            }
        }
    }
}

/// A node's front door: the slow-body rule and, when set, the node's
/// in-flight body budget (`server.http_inflight_body_size`).
pub struct PlainFrontDoor {
    pub pace: BodyPace,
    pub inflight: Option<std::sync::Arc<crate::inflight::InflightBodies>>,
}

impl FrontDoor for PlainFrontDoor {
    fn admit<'a>(&'a self, _request: &'a mut Parts) -> BoxFuture<'a, Option<Answer>> {
        Box::pin(std::future::ready(None))
    }

    fn read_body(
        &self,
        body: RequestBody,
        declared: Option<u64>,
        limit: u64,
    ) -> BoxFuture<'_, Result<Upload, ApiError>> {
        let Some(inflight) = &self.inflight else { return Box::pin(read_whole_body(body, limit, self.pace)) };
        let pace = self.pace;
        let share = inflight.reserve(declared.unwrap_or(0));
        Box::pin(async move {
            let mut share = match share {
                Ok(share) => share,
                Err(refused) => {
                    // Answered at once; the body is read and dropped behind
                    // the answer, so its client reads the 503, not a reset.
                    drain_behind_answer(body);
                    return Err(ApiError::Backend(refused));
                }
            };
            let bytes =
                read_body_bytes(body, limit, pace, |total| share.grow_to(total).map_err(ApiError::Backend)).await?;
            Ok(Upload::holding(bytes, share))
        })
    }

    fn answered<'a>(&'a self, _request: Answered<'a>, answer: Answer) -> BoxFuture<'a, Answer> {
        Box::pin(std::future::ready(answer))
    }

    fn passes_through(&self) -> bool {
        true
    }

    fn metrics(&self, metrics: &mut Metrics) {
        if let Some(inflight) = &self.inflight {
            metrics.count("ingress_body_bytes_inflight", inflight.held());
            metrics.count("ingress_body_bytes_limit", inflight.capacity());
            metrics.count("ingress_body_bytes_refusals", inflight.refusals());
        }
    }
}

/// Bodies up to this size are copied into their own allocation.
const COPY_BODIES_UP_TO: usize = 1024 * 1024;

/// Reads a whole body of at most `limit` bytes at `pace`, with no budget.
pub async fn read_whole_body(body: RequestBody, limit: u64, pace: BodyPace) -> Result<Upload, ApiError> {
    Ok(Upload::new(read_body_bytes(body, limit, pace, |_| Ok(())).await?))
}

/// Reads a whole body of at most `limit` bytes at `pace`; `charge` is told
/// the bytes read so far after each frame and may refuse the body.
async fn read_body_bytes(
    mut body: RequestBody,
    limit: u64,
    pace: BodyPace,
    mut charge: impl FnMut(u64) -> Result<(), ApiError>,
) -> Result<Bytes, ApiError> {
    // The first frame apart: most bodies are one, and need no list.
    let mut first: Option<Bytes> = None;
    let mut more: Vec<Bytes> = Vec::new();
    let mut total = 0u64;
    let mut reader = pace.reader();
    while let Some(data) = reader.next(&mut body).await? {
        total = total.saturating_add(data.len() as u64);
        if total > limit {
            return Err(ApiError::RequestTooLarge { limit });
        }
        charge(total)?;
        match first {
            None => first = Some(data),
            Some(_) => more.push(data),
        }
    }
    let bytes = match first {
        None => Bytes::new(),
        // A small body arrives as a slice of the connection's read buffer;
        // stored as is, it would pin that whole buffer for the stream's life.
        Some(one) if more.is_empty() && one.len() > COPY_BODIES_UP_TO => one,
        Some(one) if more.is_empty() => Bytes::copy_from_slice(&one),
        Some(one) => {
            let mut whole = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
            whole.extend_from_slice(&one);
            for part in &more {
                whole.extend_from_slice(part);
            }
            whole.into()
        }
    };
    Ok(bytes)
}

/// How long a refused body may take to drain, and how long it may pause.
const DRAIN_TOTAL: Duration = Duration::from_secs(30);
const DRAIN_IDLE: Duration = Duration::from_secs(5);

/// Reads and drops a request's body in the background after its answer,
/// holding its HTTP/1.1 connection busy meanwhile: the connection waits for
/// the rest of this body, not for a head, and must not be cut for one.
pub fn drain_behind_answer<T>(body: T)
where
    T: http_body::Body<Data = Bytes> + Send + 'static,
{
    let busy = crate::connection::hold_busy();
    tokio::spawn(async move {
        let mut body = std::pin::pin!(body);
        drain_refused_body(&mut body).await;
        drop(busy);
    });
}

/// Reads and drops the rest of a refused request body (at most 30 s, and
/// never 5 s without data), so a client still sending it reads the refusal
/// instead of a reset. Returns the bytes drained.
pub async fn drain_refused_body<T>(body: &mut T) -> u64
where
    T: http_body::Body<Data = Bytes> + Unpin,
{
    let end = Instant::now() + DRAIN_TOTAL;
    let mut drained = 0u64;
    loop {
        let idle = (Instant::now() + DRAIN_IDLE).min(end);
        match tokio::time::timeout_at(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    drained = drained.saturating_add(data.len() as u64);
                }
            }
            _ => return drained,
        }
    }
}
