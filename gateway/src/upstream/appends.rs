//! Appends to one voter in batches: what clients append while the batch
//! calls are out (up to `MAX_CALLS_IN_FLIGHT`) goes in the next one
//! (`AppendBatch`), so 32 writers cost a few calls per round trip instead
//! of 32, which is where the gateway's CPU per small append went (an HTTP/2
//! stream, its frames and a task per call). An idle gateway pays no delay:
//! a lone append goes at once. Each request
//! keeps its own answer, refusal and routing, as if it went alone. A large
//! append, and one in a sampled trace (whose context a batch call cannot
//! carry for each of its requests), takes the plain `Append` call.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

use tokio::sync::{mpsc, oneshot};
use ursula_http::wire::pb;

use super::Client;

/// Requests in one call.
const MAX_BATCH: usize = 256;
/// Calls out to one voter at once. With one, the gateway and the voter took
/// turns, each idle while the other worked; four gave 1.2x the appends at 8
/// writers (one node or three voters) and 1.0-1.1x at 32, in A/Bs in one run.
const MAX_CALLS_IN_FLIGHT: usize = 4;
/// Bytes of requests in one call; an append this large goes alone, on the
/// plain `Append` call.
const MAX_BATCH_BYTES: usize = 1024 * 1024;
pub const ALONE_FROM_BYTES: usize = 256 * 1024;

type Reply = Result<pb::WriteReply, tonic::Status>;

struct Item {
    request: pb::WriteRequest,
    reply: oneshot::Sender<Reply>,
    /// `stream_of(&request)`, hashed once.
    stream: u64,
}

/// What the batchers sent: calls and the appends in them.
#[derive(Default)]
pub struct BatchStats {
    pub calls: AtomicU64,
    pub appends: AtomicU64,
}

/// The sending side of one upstream's batcher; its task ends with the last clone.
#[derive(Clone)]
pub struct Appends {
    queue: mpsc::UnboundedSender<Item>,
}

impl Appends {
    pub fn start(client: Client, stats: Arc<BatchStats>) -> Appends {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, rx, stats));
        Appends { queue }
    }

    /// Sends `request` in the next batch and waits for its own answer.
    pub async fn send(&self, request: pb::WriteRequest) -> Reply {
        let (reply, answer) = oneshot::channel();
        let stopped = || tonic::Status::unavailable("the gateway's append batcher stopped");
        let stream = stream_of(&request);
        self.queue.send(Item { request, reply, stream }).map_err(|_| stopped())?;
        answer.await.map_err(|_| tonic::Status::internal("an append batch was dropped"))?
    }
}

async fn run(client: Client, mut rx: mpsc::UnboundedReceiver<Item>, stats: Arc<BatchStats>) {
    let mut calls = InFlight::default();
    let mut carried: Option<Item> = None;
    loop {
        // What queues while the calls are out makes the next one fuller.
        while calls.len() >= MAX_CALLS_IN_FLIGHT {
            calls.finish_one().await;
        }
        let first = match carried.take() {
            Some(item) => item,
            None => tokio::select! {
                item = rx.recv() => match item {
                    Some(item) => item,
                    None => break,
                },
                () = calls.finish_one(), if calls.len() > 0 => continue,
            },
        };
        // A stream's appends reach the voter in the order they came: one
        // whose stream is in a call out waits for that call.
        while calls.holds(first.stream) {
            calls.finish_one().await;
        }
        let mut bytes = first.request.encoded_command.len();
        let mut items = vec![first];
        while items.len() < MAX_BATCH {
            let Ok(item) = rx.try_recv() else { break };
            let len = item.request.encoded_command.len();
            if bytes.saturating_add(len) > MAX_BATCH_BYTES || calls.holds(item.stream) {
                carried = Some(item);
                break;
            }
            bytes += len;
            items.push(item);
        }
        stats.calls.fetch_add(1, Relaxed);
        stats.appends.fetch_add(items.len() as u64, Relaxed);
        calls.start(client.clone(), items);
    }
    while calls.len() > 0 {
        calls.finish_one().await;
    }
}

/// The batch calls out to one voter and the streams they carry.
#[derive(Default)]
struct InFlight {
    calls: FuturesUnordered<BoxFuture<'static, Vec<u64>>>,
    streams: HashSet<u64>,
}

impl InFlight {
    fn len(&self) -> usize {
        self.calls.len()
    }

    fn holds(&self, stream: u64) -> bool {
        self.streams.contains(&stream)
    }

    fn start(&mut self, client: Client, items: Vec<Item>) {
        let streams: Vec<u64> = items.iter().map(|i| i.stream).collect();
        self.streams.extend(streams.iter().copied());
        self.calls.push(Box::pin(call(client, items).map(move |()| streams)));
    }

    /// Waits for a call to finish (forever when none is out).
    async fn finish_one(&mut self) {
        match self.calls.next().await {
            Some(streams) => {
                for stream in &streams {
                    self.streams.remove(stream);
                }
            }
            None => std::future::pending().await,
        }
    }
}

/// A stream's identity within one voter's calls.
fn stream_of(request: &pb::WriteRequest) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    if let Some(t) = &request.target {
        (&t.bucket, &t.stream).hash(&mut hasher);
    }
    hasher.finish()
}

async fn call(mut client: Client, items: Vec<Item>) {
    let (requests, waiters): (Vec<_>, Vec<_>) = items.into_iter().map(|i| (i.request, i.reply)).unzip();
    let answered = match client.append_batch(pb::WriteBatchRequest { requests }).await {
        Ok(reply) => reply.into_inner().replies,
        Err(status) => {
            waiters.into_iter().for_each(|w| drop(w.send(Err(status.clone()))));
            return;
        }
    };
    if answered.len() != waiters.len() {
        let why = tonic::Status::internal(format!(
            "an upstream answered {} of {} batched appends",
            answered.len(),
            waiters.len()
        ));
        waiters.into_iter().for_each(|w| drop(w.send(Err(why.clone()))));
        return;
    }
    for (waiter, reply) in waiters.into_iter().zip(answered) {
        let _ = waiter.send(Ok(reply));
    }
}
