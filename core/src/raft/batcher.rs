//! Coalescing the AppendEntries of many groups to one peer: each group's
//! replication hands its request to the peer's batcher, which sends it at
//! once when no batch is out and otherwise in the next batch, with
//! everything else that queued meanwhile. An idle cluster pays no delay; a
//! busy one sends one batch per peer per round trip instead of one call per
//! group, which is where the CPU of replication went (syscalls and HTTP/2
//! frames per call). The batches travel on one long-lived stream per peer
//! (`AppendEntriesStream`), so a batch costs no call of its own either.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tonic::Streaming;
use tonic::transport::Channel;
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;

use super::batch_join::{Joined, Queued, Reply};
use super::peer_error::PeerError;
use super::transport_budget::Direction;

/// One batch in flight to a peer at a time: what queues while it is out
/// goes in the next. Three voters sharing two cores made 1.15x the appends
/// at 32 writers with fewer, fuller calls than with two in flight, and the
/// same at 8 (BENCHMARKS, issue 20).
///
/// A batch whose reply takes longer than this closes the peer's stream
/// (its requests' own deadlines, from 75 ms, have passed long before), so
/// one stuck batch does not hold every later one behind it.
const STREAM_STALL: std::time::Duration = std::time::Duration::from_secs(2);
/// Requests in one call.
const MAX_BATCH: usize = 256;
/// A request this large (a big append, a catch-up) goes alone on a lane of
/// its own: with one call in flight, every group's heartbeats would wait
/// behind its transfer, and a 32 MiB append on a slow (debug, loaded) host
/// outlasted the election timeout and cost its leader the leadership.
const LARGE_REQUEST: usize = 1024 * 1024;
/// Bytes of requests in one call: the heartbeats of other groups in the
/// same call must not wait behind a large catch-up past openraft's RPC
/// deadline (`heartbeat_interval`), and no call nears the message limit.
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// How long a batch call of `bytes` may take: `STREAM_STALL`, plus the
/// bytes at the slowest rate an append's own deadline allows for.
fn call_deadline(bytes: usize) -> std::time::Duration {
    STREAM_STALL + super::grpc_client::slowest_transfer(bytes)
}

/// Whether a request of `encoded_len` bytes goes on the lane for large
/// requests. Such a request may overtake, or be overtaken by, the batches:
/// a group's pipeline sends it alone (`pipeline`).
pub fn is_large(encoded_len: usize) -> bool {
    encoded_len >= LARGE_REQUEST
}

/// What the batchers of a node sent: batches (calls or stream messages)
/// and the requests in them.
#[derive(Default)]
pub struct BatchStats {
    pub calls: AtomicU64,
    pub requests: AtomicU64,
    /// Requests without entries: heartbeats and commit-index updates.
    pub empty_requests: AtomicU64,
    /// Requests joined into the one before them of their group (`batch_join`).
    pub joined_requests: AtomicU64,
}

/// The sending side of one peer's batcher; its task ends with the last clone.
#[derive(Clone)]
pub struct Batcher {
    queue: mpsc::UnboundedSender<Queued>,
}

impl Batcher {
    /// `budget`: the node's outbound `raft.append_transport_budget_bytes`,
    /// which each call is charged until its reply.
    pub fn start(
        client: RaftServiceClient<Channel>,
        url: String,
        stats: Arc<BatchStats>,
        budget: Arc<Direction>,
    ) -> Batcher {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(Call { client, url, stats, budget }, rx));
        Batcher { queue }
    }

    /// Queues `request` (ending at `last`) for the next batch, now: a
    /// group's requests go in the order they were queued.
    pub fn enqueue(&self, request: pb::AppendEntriesRequest, last: Option<pb::LogId>) -> Pending {
        let (reply, answer) = oneshot::channel();
        let queued = self.queue.send(Queued { request, last, reply }).is_ok();
        Pending { answer, queued }
    }

    /// Sends `request` in the next batch and waits for its own reply.
    #[cfg(test)]
    pub async fn send(&self, request: pb::AppendEntriesRequest, last: Option<pb::LogId>) -> Reply {
        self.enqueue(request, last).reply().await
    }
}

/// A queued request's reply to come.
pub struct Pending {
    answer: oneshot::Receiver<Reply>,
    queued: bool,
}

impl Pending {
    pub async fn reply(self) -> Reply {
        if !self.queued {
            return Err(PeerError::BatcherStopped);
        }
        self.answer.await.map_err(|_| PeerError::BatchDropped)?
    }
}

async fn run(call: Call, mut rx: mpsc::UnboundedReceiver<Queued>) {
    // Large requests, one call at a time and in order, beside the batches.
    let (bulk, mut large) = mpsc::unbounded_channel::<Queued>();
    let lane = call.clone();
    tokio::spawn(async move {
        while let Some(item) = large.recv().await {
            // Its waiter gave up (its deadline passed, or its pipeline
            // ended): openraft sends it again, so its megabytes wait no more.
            if item.reply.is_closed() {
                continue;
            }
            let bytes = item.request.encoded_len();
            lane.call(vec![Joined::alone(item)], bytes).await;
        }
    });
    let mut link = Link::Closed;
    // A request that did not fit the last batch opens the next one.
    let mut carried: Option<Queued> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let mut bytes = first.request.encoded_len();
        if is_large(bytes) {
            let _ = bulk.send(first);
            continue;
        }
        // What queued while the last batch was out goes in this one.
        let mut items = vec![first];
        while items.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => {
                    let len = item.request.encoded_len();
                    if is_large(len) {
                        let _ = bulk.send(item);
                        continue;
                    }
                    if bytes.saturating_add(len) > MAX_BATCH_BYTES {
                        carried = Some(item);
                        break;
                    }
                    bytes += len;
                    items.push(item);
                }
                Err(_) => break,
            }
        }
        let mut joins = 0;
        let items = super::batch_join::join_all(items, &mut joins);
        call.stats.joined_requests.fetch_add(joins, Ordering::Relaxed);
        if matches!(link, Link::Unary) {
            call.call(items, bytes).await;
        } else {
            call.exchange(&mut link, items, bytes).await;
        }
    }
}

/// The peer's batch stream, if one is open.
enum Link {
    Closed,
    Open {
        batches: mpsc::Sender<pb::AppendEntriesBatchRequest>,
        replies: Box<Streaming<pb::AppendEntriesBatchReply>>,
    },
    /// The peer does not serve the stream (an older version during a
    /// rolling upgrade): batches go as calls.
    Unary,
}

/// What a batch call needs: the peer's client, for its errors its URL, and the counters.
#[derive(Clone)]
struct Call {
    client: RaftServiceClient<Channel>,
    url: String,
    stats: Arc<BatchStats>,
    budget: Arc<Direction>,
}

impl Call {
    /// Sends `items` (`bytes` encoded) in one call and answers each waiter.
    async fn call(&self, items: Vec<Joined>, bytes: usize) {
        let _charged = self.budget.charge(bytes).await;
        self.count(&items);
        let (requests, waiters) = split(items);
        let replies = self.unary(pb::AppendEntriesBatchRequest { requests }, bytes).await;
        self.answer(waiters, replies);
    }

    /// One batch call of `bytes`, given up once it outlasts the stall time
    /// and the bytes' transfer at the slowest rate (a peer that swallows
    /// calls must not hold the lane, and its budget charge, for good).
    async fn unary(
        &self,
        batch: pb::AppendEntriesBatchRequest,
        bytes: usize,
    ) -> Result<pb::AppendEntriesBatchReply, PeerError> {
        let after = call_deadline(bytes);
        match tokio::time::timeout(after, self.client.clone().append_entries_batch(batch)).await {
            Ok(sent) => {
                sent.map(|r| r.into_inner()).map_err(|status| PeerError::Status { url: self.url.clone(), status })
            }
            Err(_) => Err(PeerError::Timeout { url: self.url.clone(), after }),
        }
    }

    /// Sends `items` as one batch on the peer's stream (opened first when
    /// it is closed) and answers each waiter with its reply. A stream that
    /// fails or stalls is closed; the next batch opens another.
    async fn exchange(&self, link: &mut Link, items: Vec<Joined>, bytes: usize) {
        let _charged = self.budget.charge(bytes).await;
        self.count(&items);
        let (requests, waiters) = split(items);
        let batch = pb::AppendEntriesBatchRequest { requests };
        if matches!(link, Link::Closed) {
            *link = self.open().await;
        }
        let replies = match link {
            // The peer has no stream: this batch, and the next ones, as calls.
            Link::Unary => self.unary(batch, bytes).await,
            Link::Open { batches, replies } => match round_trip(batches, replies, batch).await {
                Some(reply) => Ok(reply),
                None => Err(self.lost(link)),
            },
            Link::Closed => Err(self.lost(link)),
        };
        self.answer(waiters, replies);
    }

    /// Opens the peer's batch stream: `Unary` when the peer does not serve
    /// it, `Closed` when it could not be opened now.
    async fn open(&self) -> Link {
        let (batches, queued) = mpsc::channel(1);
        let outbound = futures_util::stream::unfold(queued, |mut queued| async move {
            queued.recv().await.map(|batch| (batch, queued))
        });
        match tokio::time::timeout(STREAM_STALL, self.client.clone().append_entries_stream(outbound)).await {
            Ok(Ok(replies)) => Link::Open { batches, replies: Box::new(replies.into_inner()) },
            Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => Link::Unary,
            Ok(Err(status)) => {
                tracing::debug!(peer = %self.url, %status, "opening the Raft batch stream failed");
                Link::Closed
            }
            Err(_) => Link::Closed,
        }
    }

    /// Closes a failed stream: the error its batch's waiters get.
    fn lost(&self, link: &mut Link) -> PeerError {
        *link = Link::Closed;
        PeerError::StreamLost { url: self.url.clone() }
    }

    fn count(&self, items: &[Joined]) {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        self.stats.requests.fetch_add(items.len() as u64, Ordering::Relaxed);
        let empty = items.iter().filter(|i| i.request.entries.is_empty()).count();
        self.stats.empty_requests.fetch_add(empty as u64, Ordering::Relaxed);
    }

    /// Answers each waiter with its reply, or all of them with the error.
    fn answer(&self, waiters: Vec<Joined>, replies: Result<pb::AppendEntriesBatchReply, PeerError>) {
        let replies = match replies {
            Ok(reply) if reply.replies.len() == waiters.len() => reply.replies,
            Ok(reply) => {
                let (replies, requests) = (reply.replies.len(), waiters.len());
                let why = PeerError::BatchMismatch { url: self.url.clone(), replies, requests };
                waiters.into_iter().for_each(|w| w.answer(Err(why.clone())));
                return;
            }
            Err(why) => {
                waiters.into_iter().for_each(|w| w.answer(Err(why.clone())));
                return;
            }
        };
        for (waiter, reply) in waiters.into_iter().zip(replies) {
            waiter.answer(Ok(reply));
        }
    }
}

/// One batch sent on an open stream and its reply; `None` when the stream
/// failed or the reply did not come within `STREAM_STALL`.
async fn round_trip(
    batches: &mpsc::Sender<pb::AppendEntriesBatchRequest>,
    replies: &mut Streaming<pb::AppendEntriesBatchReply>,
    batch: pb::AppendEntriesBatchRequest,
) -> Option<pb::AppendEntriesBatchReply> {
    batches.send(batch).await.ok()?;
    tokio::time::timeout(STREAM_STALL, replies.message()).await.ok()?.ok()?
}

/// The batch's requests, and the joined requests to answer (their own
/// requests left empty: they went in the batch).
fn split(mut items: Vec<Joined>) -> (Vec<pb::AppendEntriesRequest>, Vec<Joined>) {
    let requests = items.iter_mut().map(|j| std::mem::take(&mut j.request)).collect();
    (requests, items)
}
