//! A `Read` on a voter's connection for reads, its answer read as the
//! frames arrive, each chunk kept as the piece it came in (no copy when a
//! chunk came in one frame, as a voter of this version sends them:
//! `ursula_proto::read_wire`). A read of a stream answered as its bytes
//! are streams on to the client as it arrives, with HTTP/2's flow control
//! from the voter to the client. Bulk reads have connections of their own,
//! so 8 MiB answers never hold appends behind the shared connection's
//! flow-control window: one per voter for each thread that serves reads,
//! made on that thread's runtime, so an answer's frames arrive on the
//! thread that sends them on to the client instead of each frame waking
//! it from another (a read's bytes cross no thread inside the gateway).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use prost::Message;
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use ursula_http::ReadRest;
use ursula_http::wire::pb;
use ursula_proto::read_wire::{READ_PATH, ReadAnswer, ReadReplyParser};

use super::CallError;

/// A voter's connection for reads, with the trace context added to each call.
pub type ReadChannel = InterceptedService<Channel, ursula_http::telemetry::TraceInterceptor>;

/// Each upstream's connections for reads, one per thread that asks: a
/// channel's connection runs on the runtime that made it (tonic spawns its
/// tasks there), and a client lane's tasks all run on its one worker
/// thread. Such a thread must not outlive the runtime its channels were
/// made on (a lane's worker ends with its runtime).
pub struct ReadChannels {
    timeouts: super::UpstreamTimeouts,
    /// Each connection's flow-control window: the one connection per voter
    /// of before, shared out over the lanes, but at least one answer's
    /// (8 MiB), so what all lanes buffer unread stays near what one did.
    window: u32,
    /// Tells this set's channels from another's in the threads' maps (a
    /// test process may make several sets).
    id: u64,
    /// Channels made, for the tests: each is a connection of its own.
    #[cfg(test)]
    made: std::sync::atomic::AtomicU64,
}

thread_local! {
    /// This thread's read channels, by set and upstream.
    static LOCAL: std::cell::RefCell<std::collections::HashMap<(u64, usize), ReadChannel>> =
        std::cell::RefCell::default();
}

impl ReadChannels {
    pub fn new(timeouts: super::UpstreamTimeouts, lanes: usize) -> ReadChannels {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let shared = ursula_proto::H2_CONNECTION_WINDOW / u32::try_from(lanes.max(1)).unwrap_or(u32::MAX);
        ReadChannels {
            timeouts,
            window: shared.max(ursula_proto::H2_STREAM_WINDOW),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            #[cfg(test)]
            made: Default::default(),
        }
    }

    /// This thread's channel to upstream `at` (at `url`), made on first
    /// use. Called inside a Tokio runtime, which its connection then runs on.
    pub fn get(&self, at: usize, url: &str) -> ReadChannel {
        LOCAL.with(|local| {
            local
                .borrow_mut()
                .entry((self.id, at))
                .or_insert_with(|| {
                    #[cfg(test)]
                    self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    super::Upstreams::read_channel(url, self.timeouts, self.window)
                })
                .clone()
        })
    }
}

/// A `Read` whose answer's headers came: its body still to read.
struct Answering {
    body: tonic::service::interceptor::ResponseBody<tonic::body::Body>,
    parser: ReadReplyParser,
    /// The trailers came with an OK status.
    ended: bool,
}

impl Answering {
    /// Reads the next data frame; `false` once the body has ended.
    async fn next_frame(&mut self) -> Result<bool, Status> {
        let Some(frame) = self.body.frame().await else { return Ok(false) };
        match frame?.into_data() {
            Ok(data) => self.parser.push(data).map_err(|e| Status::internal(format!("a read answer: {e}")))?,
            Err(frame) => {
                if let Some(trailers) = frame.trailers_ref() {
                    failed(trailers)?;
                    self.ended = true;
                }
            }
        }
        Ok(true)
    }

    /// The answer's status once its body ended.
    fn ended(&self) -> Result<(), Status> {
        if !self.ended {
            return Err(Status::internal("a read answer without its status"));
        }
        self.parser.complete().map_err(|e| Status::internal(format!("a read answer: {e}")))
    }
}

/// Sends the call; the answer once its headers say it goes on.
async fn call(mut channel: ReadChannel, request: &pb::ReadRequest) -> Result<Answering, Status> {
    use tonic::codegen::Service;
    let framed = ursula_proto::read_wire::framed(&request.encode_to_vec());
    let call = http::Request::builder()
        .method(http::Method::POST)
        .uri(READ_PATH)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(tonic::body::Body::new(Full::new(framed).map_err(|never| match never {})))
        .map_err(|e| Status::internal(format!("a read call: {e}")))?;
    std::future::poll_fn(|cx| channel.poll_ready(cx)).await.map_err(|e| Status::from_error(e.into()))?;
    let answer = channel.call(call).await.map_err(|e| Status::from_error(e.into()))?;
    let (head, body) = answer.into_parts();
    // A failure before any message comes in the headers alone.
    failed(&head.headers)?;
    if head.status != http::StatusCode::OK {
        return Err(Status::unknown(format!("a read answered HTTP {}", head.status)));
    }
    Ok(Answering { body, parser: ReadReplyParser::new(ursula_proto::MAX_MESSAGE_BYTES), ended: false })
}

/// `StreamService/Read` on `channel`: the reply, chunks as their pieces.
pub async fn read(channel: ReadChannel, request: &pb::ReadRequest) -> Result<ReadAnswer, CallError> {
    let mut answering = call(channel, request).await?;
    while answering.next_frame().await? {}
    answering.ended()?;
    Ok(answering.parser.finish().map_err(|e| Status::internal(format!("a read answer: {e}")))?)
}

/// A read answered as it arrives: what `streamed` makes of the view's
/// encoded part, the chunk bytes read with it, and the rest as it comes,
/// when `streamed` says the answer may go out that way (`Some`). Otherwise,
/// or for a reply that is no view, the whole reply as `read` gives it.
pub async fn read_streamed<V>(
    channel: ReadChannel,
    request: &pb::ReadRequest,
    streamed: impl FnOnce(&[u8]) -> Option<V>,
) -> Result<Result<(V, Vec<Bytes>, ReadRest), ReadAnswer>, CallError> {
    let mut answering = call(channel, request).await?;
    let mut more = true;
    while more && answering.parser.view().is_none() {
        more = answering.next_frame().await?;
    }
    if more && let Some(view) = answering.parser.view().and_then(streamed) {
        let first = answering.parser.stream_from_here();
        return Ok(Ok((view, first, rest(answering))));
    }
    while answering.next_frame().await? {}
    answering.ended()?;
    Ok(Err(answering.parser.finish().map_err(|e| Status::internal(format!("a read answer: {e}")))?))
}

/// The chunk bytes of `answering` as they arrive; an `Err` when the
/// answer breaks off or ends without its OK status.
fn rest(answering: Answering) -> ReadRest {
    let pieces = futures_util::stream::unfold(Some((answering, std::collections::VecDeque::new())), |state| async {
        let (mut answering, mut ready) = state?;
        loop {
            if let Some(piece) = ready.pop_front() {
                return Some((Ok(piece), Some((answering, ready))));
            }
            match answering.next_frame().await {
                Ok(true) => ready.extend(answering.parser.take_bytes()),
                Ok(false) => {
                    return match answering.ended() {
                        Ok(()) => None,
                        Err(e) => {
                            tracing::debug!(error = %e, "a streamed read broke off");
                            Some((Err(()), None))
                        }
                    };
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a streamed read broke off");
                    return Some((Err(()), None));
                }
            }
        }
    });
    Box::pin(pieces)
}

/// The call's status when `headers` say it failed.
fn failed(headers: &http::HeaderMap) -> Result<(), Status> {
    match Status::from_header_map(headers) {
        Some(status) if status.code() != tonic::Code::Ok => Err(status),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;

    use super::ReadChannels;
    use crate::upstream::UpstreamTimeouts;

    /// A one-worker runtime, as a client lane runs.
    fn lane() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime")
    }

    /// A read on upstream `at` of `reads` from a task of `runtime`, which
    /// makes the thread's lazy channel connect.
    fn read_on(runtime: &tokio::runtime::Runtime, reads: &Arc<ReadChannels>, at: usize, url: &str) {
        let (reads, url) = (reads.clone(), url.to_string());
        runtime.block_on(async move {
            tokio::spawn(async move {
                let request = ursula_http::wire::pb::ReadRequest::default();
                // Nothing answers: the call times out or fails; its connection is made.
                let call = super::read(reads.get(at, &url), &request);
                let _ = tokio::time::timeout(std::time::Duration::from_millis(200), call).await;
            })
            .await
            .expect("task")
        });
    }

    #[test]
    fn a_thread_reads_from_a_voter_on_one_connection_of_its_own() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let reads = Arc::new(ReadChannels::new(UpstreamTimeouts::DEFAULT, 4));
        assert_eq!(reads.window, 8 << 20, "32 MiB over four lanes, and never below one answer");
        let (first, second) = (lane(), lane());
        read_on(&first, &reads, 0, &url);
        read_on(&first, &reads, 0, &url);
        read_on(&second, &reads, 0, &url);
        read_on(&first, &reads, 1, &url);
        assert_eq!(reads.made.load(Relaxed), 3, "one channel per lane thread and voter, made once");
        // The connections, as they come (a loaded host may connect late),
        // then a while longer for any that should not come at all.
        let mut accepted = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while accepted < 3 && std::time::Instant::now() < deadline {
            match listener.accept() {
                Ok(_) => accepted += 1,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        accepted += std::iter::from_fn(|| listener.accept().ok()).count();
        assert_eq!(accepted, 3, "each channel is one connection, reused by its thread's reads");
    }
}
