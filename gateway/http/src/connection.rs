//! One client connection, served with the timeouts an internet-facing
//! server needs: a request head must arrive within `header_read_timeout`
//! of the connection's accept or of its previous answer, and an HTTP/2
//! connection with no request in flight for `idle_timeout` is closed
//! gracefully. An HTTP/1.1 connection waiting for a head cannot tell a
//! slow head from a kept-alive idle one, so both close after
//! `header_read_timeout` (as hyper's own head timer did, which this check
//! replaces: that timer was made, armed and dropped on every request).
//! A live read (SSE, long-poll) is a request in flight until its answer's
//! body ends, so it is never idle. Request bodies have their own pace rule
//! (`front`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The timeouts of every client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// How long a request head may take to arrive after the accept or the
    /// previous answer (slowloris); an HTTP/1.1 connection idles no longer.
    pub header_read_timeout: Duration,
    /// How long an HTTP/2 connection may stay open with no request in flight.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits { header_read_timeout: Duration::from_secs(10), idle_timeout: Duration::from_secs(60) }
    }
}

/// How long a connection asked to close gracefully may take to finish.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Requests in flight on one connection, and when the last one ended.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `started` when a request last ended.
    last_end_ms: AtomicU64,
    /// The connection opened with HTTP/2's preface (`Sniffed`): it waits
    /// under `idle_timeout`, not for a head.
    http2: AtomicBool,
}

impl Activity {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// How long the connection has had no request in flight (zero while one is).
    fn idle_for(&self, now: Instant) -> Duration {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        let since_start = now.saturating_duration_since(self.started);
        since_start.saturating_sub(Duration::from_millis(self.last_end_ms.load(Ordering::SeqCst)))
    }
}

/// One request in flight: from its arrival until its answer's body ended
/// (or was dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let ended = u64::try_from(self.0.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_end_ms.store(ended, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

tokio::task_local! {
    /// The connection whose task is polling: an HTTP/1.1 request's handler
    /// runs inside it (an HTTP/2 stream runs in a task of its own).
    static CONNECTION: Arc<Activity>;
}

/// Keeps an HTTP/1.1 connection busy while a refused request's body is
/// read after its answer: the connection is not waiting for a head, so it
/// must not be cut for one. Dropped when the body has been drained.
pub struct Busy {
    _held: InFlight,
}

/// A hold on the connection that serves the calling handler; `None` where
/// there is none to hold (an HTTP/2 stream, a test without a connection).
pub fn hold_busy() -> Option<Busy> {
    CONNECTION.try_with(|activity| Busy { _held: activity.begin() }).ok()
}

/// A connection's socket that notes whether it opens with HTTP/2's preface,
/// so the connection knows from its first bytes whether it waits for a
/// head (HTTP/1.1) or idles under `idle_timeout` (HTTP/2).
struct Sniffed {
    tcp: TcpStream,
    activity: Arc<Activity>,
    /// Bytes of the preface matched so far; `None` once decided.
    matched: Option<usize>,
}

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Sniffed {
    fn note(&mut self, read: &[u8]) {
        let Some(matched) = self.matched else { return };
        self.matched = match preface(matched, read) {
            Preface::Partly(n) => Some(n),
            Preface::Http2 => {
                self.activity.http2.store(true, Ordering::Relaxed);
                None
            }
            Preface::Not => None,
        };
    }
}

/// How far a connection's first bytes match HTTP/2's preface.
#[derive(Debug, PartialEq, Eq)]
enum Preface {
    /// The first `n` bytes match; more must come to decide.
    Partly(usize),
    Http2,
    Not,
}

/// The preface matched after `read` follows `matched` bytes that did.
fn preface(matched: usize, read: &[u8]) -> Preface {
    let want = H2_PREFACE.get(matched..).unwrap_or_default();
    let n = read.len().min(want.len());
    if read.get(..n) != want.get(..n) {
        Preface::Not
    } else if matched + n == H2_PREFACE.len() {
        Preface::Http2
    } else {
        Preface::Partly(matched + n)
    }
}

impl tokio::io::AsyncRead for Sniffed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut me.tcp).poll_read(cx, buf);
        if me.matched.is_some() && buf.filled().len() > before {
            me.note(buf.filled().get(before..).unwrap_or_default());
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Sniffed {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, data)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// An answer's body that keeps its request in flight while it is sent.
struct Tracked<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B: http_body::Body + Unpin> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves `tcp` with `service` until the client or a timeout ends it.
pub async fn serve<S, F, O>(
    service: S,
    tcp: TcpStream,
    limits: ConnectionLimits,
    mut draining: tokio::sync::watch::Receiver<bool>,
) where
    S: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<O>> + Send + 'static,
    O: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    O::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity {
        started: Instant::now(),
        in_flight: AtomicUsize::new(0),
        last_end_ms: AtomicU64::new(0),
        http2: AtomicBool::new(false),
    });
    let tracked = activity.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let in_flight = tracked.begin();
        let answer = service(req);
        async move {
            let answer = answer.await;
            Ok::<_, std::convert::Infallible>(answer.map(|body| Tracked { body, _in_flight: in_flight }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Gateways and peers send megabyte gRPC messages over one connection each.
    builder
        .http2()
        .timer(TokioTimer::new())
        .initial_stream_window_size(ursula_proto::H2_STREAM_WINDOW)
        .initial_connection_window_size(ursula_proto::H2_CONNECTION_WINDOW)
        .max_frame_size(ursula_proto::H2_MAX_FRAME)
        .max_send_buf_size(ursula_proto::H2_MAX_SEND_BUFFER);
    let sniffed = Sniffed { tcp, activity: activity.clone(), matched: Some(0) };
    let connection = builder.serve_connection(TokioIo::new(sniffed), service);
    let mut connection = std::pin::pin!(connection);
    let shortest = limits.header_read_timeout.min(limits.idle_timeout);
    let check_every = (shortest / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    // The idle check and the drain signal are made once and polled only
    // when they may have fired: a busy connection's task wakes once or
    // twice per request, and polling a watch waiter takes its lock.
    let drain_seen = draining.clone();
    let mut drain_signal = std::pin::pin!(async move { draining.wait_for(|d| *d).await.is_ok() });
    let mut drain_pending = true;
    let mut check = std::pin::pin!(tokio::time::sleep(check_every));
    // Whether the last poll of each left this task's waker with it: a poll
    // the task's co-operative budget refused leaves none, so the next pass
    // polls it again.
    let mut drain_armed = false;
    let mut check_armed = false;
    let mut closing: Option<Instant> = None;
    // The connection's HTTP/1.1 handlers run inside this task and may hold
    // it busy (`hold_busy`).
    let serving = std::future::poll_fn(|cx| {
        loop {
            // The connection first: it is what wakes this task nearly every time.
            if let Poll::Ready(ended) = connection.as_mut().poll(cx) {
                return Poll::Ready(Some(ended));
            }
            // The server stops: finish what is in flight, then close.
            let drain_may_fire = !drain_armed || !matches!(drain_seen.has_changed(), Ok(false));
            if drain_pending
                && drain_may_fire
                && let Poll::Ready(stop) = poll_armed(drain_signal.as_mut(), cx, &mut drain_armed)
            {
                drain_pending = false;
                if stop && closing.is_none() {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(Instant::now());
                    continue;
                }
            }
            let check_may_fire = !check_armed || check.is_elapsed();
            if check_may_fire && poll_armed(check.as_mut(), cx, &mut check_armed).is_ready() {
                let now = Instant::now();
                // Unarmed: the next pass polls it for the new deadline.
                check.as_mut().reset(now + check_every);
                // A connection that did not open with HTTP/2 waits for a head.
                let http2 = activity.http2.load(Ordering::Relaxed);
                let allowed = if http2 { limits.idle_timeout } else { shortest };
                match closing {
                    // A head that did not come in time: cut at once (a
                    // graceful close would wait for a partial head).
                    None if !http2 && activity.idle_for(now) >= allowed => return Poll::Ready(None),
                    None if activity.idle_for(now) >= allowed => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some(now);
                    }
                    // A client that holds a closing connection open loses it.
                    Some(since) if now.saturating_duration_since(since) >= CLOSE_GRACE => return Poll::Ready(None),
                    _ => {}
                }
                continue;
            }
            return Poll::Pending;
        }
    });
    let ended = CONNECTION.scope(activity.clone(), serving).await;
    if let Some(Err(e)) = ended {
        tracing::debug!(error = %e, "connection ended");
    }
}

/// Polls `future`, noting in `armed` whether the task's waker is now
/// registered with it (a poll refused by the task's co-operative budget
/// returns `Pending` and registers none).
fn poll_armed<F: Future>(future: Pin<&mut F>, cx: &mut Context<'_>, armed: &mut bool) -> Poll<F::Output> {
    let budget = tokio::task::coop::has_budget_remaining();
    let polled = future.poll(cx);
    *armed = polled.is_pending() && budget;
    polled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_http2_from_http1() {
        assert_eq!(preface(0, H2_PREFACE), Preface::Http2);
        assert_eq!(preface(0, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x12\x04"), Preface::Http2);
        assert_eq!(preface(0, b"POST /demo/s HTTP/1.1\r\n"), Preface::Not);
        assert_eq!(preface(0, b"PRI /x HTTP/1.1"), Preface::Not);
        assert_eq!(preface(0, b""), Preface::Partly(0));
        // A preface split over reads.
        assert_eq!(preface(0, b"PRI * HT"), Preface::Partly(8));
        assert_eq!(preface(8, b"TP/2.0\r\n\r\nSM\r\n"), Preface::Partly(22));
        assert_eq!(preface(22, b"\r\n"), Preface::Http2);
        assert_eq!(preface(8, b"TP/1.1"), Preface::Not);
    }
}
