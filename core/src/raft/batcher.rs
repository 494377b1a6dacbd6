//! Coalescing the AppendEntries of many groups to one peer: each group's
//! replication hands its request to the peer's batcher, which sends it at
//! once when a call slot is free and otherwise in the next batch, with
//! everything else that queued meanwhile. An idle cluster pays no delay; a
//! busy one sends one call per peer per round trip instead of one per
//! group, which is where the CPU of replication went (syscalls and HTTP/2
//! frames per call).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use prost::Message;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::transport::Channel;
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;

use super::peer_error::PeerError;

/// Calls in flight to one peer at a time. With one, what queues while a
/// call is out goes in the next: three voters sharing two cores made 1.15x
/// the appends at 32 writers with fewer, fuller calls than with two in
/// flight, and the same at 8 (BENCHMARKS, issue 20).
const MAX_IN_FLIGHT: usize = 1;
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

type Reply = Result<pb::AppendEntriesReply, PeerError>;

struct Item {
    request: pb::AppendEntriesRequest,
    reply: oneshot::Sender<Reply>,
}

/// What the batchers of a node sent: calls and the requests in them.
#[derive(Default)]
pub struct BatchStats {
    pub calls: AtomicU64,
    pub requests: AtomicU64,
}

/// The sending side of one peer's batcher; its task ends with the last clone.
#[derive(Clone)]
pub struct Batcher {
    queue: mpsc::UnboundedSender<Item>,
}

impl Batcher {
    pub fn start(client: RaftServiceClient<Channel>, url: String, stats: Arc<BatchStats>) -> Batcher {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, url, rx, stats));
        Batcher { queue }
    }

    /// Sends `request` in the next batch and waits for its own reply.
    pub async fn send(&self, request: pb::AppendEntriesRequest) -> Reply {
        let (reply, answer) = oneshot::channel();
        self.queue.send(Item { request, reply }).map_err(|_| PeerError::BatcherStopped)?;
        answer.await.map_err(|_| PeerError::BatchDropped)?
    }
}

async fn run(
    client: RaftServiceClient<Channel>,
    url: String,
    mut rx: mpsc::UnboundedReceiver<Item>,
    stats: Arc<BatchStats>,
) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let call = Call { client, url, stats };
    // Large requests, one call at a time and in order, beside the batches.
    let (bulk, mut large) = mpsc::unbounded_channel::<Item>();
    let lane = call.clone();
    tokio::spawn(async move {
        while let Some(item) = large.recv().await {
            lane.call(vec![item]).await;
        }
    });
    // A request that did not fit the last batch opens the next one.
    let mut carried: Option<Item> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let mut bytes = first.request.encoded_len();
        if bytes >= LARGE_REQUEST {
            let _ = bulk.send(first);
            continue;
        }
        // Waiting for a slot is when a batch fills up.
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let mut items = vec![first];
        while items.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => {
                    let len = item.request.encoded_len();
                    if len >= LARGE_REQUEST {
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
        call.send(items, slot);
    }
}

/// What a batch call needs: the peer's client, for its errors its URL, and the counters.
#[derive(Clone)]
struct Call {
    client: RaftServiceClient<Channel>,
    url: String,
    stats: Arc<BatchStats>,
}

impl Call {
    /// Sends `items` in one call holding `slot` in a task of its own.
    fn send(&self, items: Vec<Item>, slot: tokio::sync::OwnedSemaphorePermit) {
        let call = self.clone();
        tokio::spawn(async move {
            call.call(items).await;
            drop(slot);
        });
    }

    /// Sends `items` in one call and answers each waiter.
    async fn call(&self, items: Vec<Item>) {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        self.stats.requests.fetch_add(items.len() as u64, Ordering::Relaxed);
        let (requests, waiters): (Vec<_>, Vec<_>) = items.into_iter().map(|i| (i.request, i.reply)).unzip();
        let sent = self.client.clone().append_entries_batch(pb::AppendEntriesBatchRequest { requests }).await;
        let url = &self.url;
        match sent {
            Ok(reply) => {
                let replies = reply.into_inner().replies;
                if replies.len() != waiters.len() {
                    let why =
                        PeerError::BatchMismatch { url: url.clone(), replies: replies.len(), requests: waiters.len() };
                    waiters.into_iter().for_each(|w| drop(w.send(Err(why.clone()))));
                    return;
                }
                for (waiter, reply) in waiters.into_iter().zip(replies) {
                    let _ = waiter.send(Ok(reply));
                }
            }
            Err(status) => {
                let why = PeerError::Status { url: url.clone(), status };
                waiters.into_iter().for_each(|w| drop(w.send(Err(why.clone()))));
            }
        }
    }
}
