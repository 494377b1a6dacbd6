//! Appends to one voter in batches: what clients append while a batch call
//! is out goes in the next one (`AppendBatch`), so 32 writers cost a few
//! calls per round trip instead of 32, which is where the gateway's CPU per
//! small append went (an HTTP/2 stream, its frames and a task per call).
//! An idle gateway pays no delay: a lone append goes at once. Each request
//! keeps its own answer, refusal and routing, as if it went alone. A large
//! append, and one in a sampled trace (whose context a batch call cannot
//! carry for each of its requests), takes the plain `Append` call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::sync::{mpsc, oneshot};
use ursula_http::wire::pb;

use super::Client;

/// Requests in one call.
const MAX_BATCH: usize = 256;
/// Bytes of requests in one call; an append this large goes alone, on the
/// plain `Append` call.
const MAX_BATCH_BYTES: usize = 1024 * 1024;
pub const ALONE_FROM_BYTES: usize = 256 * 1024;

type Reply = Result<pb::WriteReply, tonic::Status>;

struct Item {
    request: pb::WriteRequest,
    reply: oneshot::Sender<Reply>,
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
        self.queue.send(Item { request, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| tonic::Status::internal("an append batch was dropped"))?
    }
}

async fn run(client: Client, mut rx: mpsc::UnboundedReceiver<Item>, stats: Arc<BatchStats>) {
    let mut carried: Option<Item> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        let mut bytes = first.request.encoded_command.len();
        let mut items = vec![first];
        while items.len() < MAX_BATCH {
            let Ok(item) = rx.try_recv() else { break };
            let len = item.request.encoded_command.len();
            if bytes.saturating_add(len) > MAX_BATCH_BYTES {
                carried = Some(item);
                break;
            }
            bytes += len;
            items.push(item);
        }
        stats.calls.fetch_add(1, Relaxed);
        stats.appends.fetch_add(items.len() as u64, Relaxed);
        // One call out at a time: what queues meanwhile makes the next one fuller.
        call(client.clone(), items).await;
    }
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
