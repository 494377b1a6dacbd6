//! Small appends to one voter, many per message: what clients append
//! meanwhile travels together, so 32 writers cost a few messages per round
//! trip instead of 32 calls, which is where the gateway's CPU per small
//! append went (an HTTP/2 stream, its frames and a task per call). An idle
//! gateway pays no delay: a lone append goes at once. Each request keeps
//! its own answer, refusal and routing, as if it went alone.
//!
//! The appends go on one long-lived `AppendStream` per voter, numbered,
//! and each is answered as soon as it commits: a batch call is answered
//! when the slowest of its appends commits, and behind a three-voter
//! cluster, whose groups commit at different times, that wait was most of
//! what the gateway added to an append's latency. A voter that does not
//! serve the stream (an older version during a rolling upgrade) gets
//! `AppendBatch` calls (`batched`), and the stream is tried again later.
//!
//! A large append, and one in a sampled trace (whose context a shared
//! stream cannot carry for each of its requests), takes the plain `Append`
//! call (`backend`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

use tokio::sync::{mpsc, oneshot};
use tonic::Streaming;
use ursula_http::wire::pb;

use super::Client;

/// Requests in one message or call.
const MAX_BATCH: usize = 256;
/// Appends out to one voter on its stream at once; past it, new appends
/// wait in the queue for answers.
const MAX_PENDING: usize = 4096;
/// Batch calls out to one voter at once (without the stream). With one,
/// the gateway and the voter took turns, each idle while the other worked;
/// four gave 1.2x the appends at 8 writers (one node or three voters) and
/// 1.0-1.1x at 32, in A/Bs in one run.
const MAX_CALLS_IN_FLIGHT: usize = 4;
/// Bytes of requests in one message or call; an append this large goes
/// alone, on the plain `Append` call.
const MAX_BATCH_BYTES: usize = 1024 * 1024;
pub const ALONE_FROM_BYTES: usize = 256 * 1024;
/// How long appends may be out on a stream with no answer at all before
/// the stream is given up (a voter that hangs, or a path that drops
/// packets without a reset): its appends then fail as a broken call's do,
/// instead of holding their clients forever. Commits take milliseconds and
/// an election a few seconds.
pub const STREAM_STALL: Duration = Duration::from_secs(15);
/// How long a voter without the stream gets batch calls before the stream
/// is tried again (it may have been upgraded meanwhile).
const RETRY_STREAM_AFTER: Duration = Duration::from_secs(30);

type Reply = Result<pb::WriteReply, tonic::Status>;

struct Item {
    request: pb::WriteRequest,
    reply: oneshot::Sender<Reply>,
    /// `stream_of(&request)`, hashed once.
    stream: u64,
}

impl Item {
    fn fail(self, status: &tonic::Status) {
        let _ = self.reply.send(Err(status.clone()));
    }
}

/// What the batchers sent: messages or calls, and the appends in them;
/// and how their streams went (opened; ended by a voter that stops; given
/// up, failed or stalled, with appends out).
#[derive(Default)]
pub struct BatchStats {
    pub calls: AtomicU64,
    pub appends: AtomicU64,
    pub streams_opened: AtomicU64,
    pub streams_closed: AtomicU64,
    pub streams_lost: AtomicU64,
}

impl BatchStats {
    fn sent(&self, appends: usize) {
        self.calls.fetch_add(1, Relaxed);
        self.appends.fetch_add(appends as u64, Relaxed);
    }
}

/// The sending side of one upstream's batcher; its task ends with the last clone.
#[derive(Clone)]
pub struct Appends {
    queue: mpsc::UnboundedSender<Item>,
}

impl Appends {
    /// A batcher for `client`'s voter; `stall` is `STREAM_STALL` but in tests.
    pub fn start(client: Client, stats: Arc<BatchStats>, stall: Duration) -> Appends {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, rx, stats, stall));
        Appends { queue }
    }

    /// Sends `request` with the next appends and waits for its own answer.
    pub async fn send(&self, request: pb::WriteRequest) -> Reply {
        let (reply, answer) = oneshot::channel();
        let stopped = || tonic::Status::unavailable("the gateway's append batcher stopped");
        let stream = stream_of(&request);
        self.queue.send(Item { request, reply, stream }).map_err(|_| stopped())?;
        answer.await.map_err(|_| tonic::Status::internal("an append batch was dropped"))?
    }
}

/// The queue of appends not yet sent: the channel, and what was taken
/// from it but must wait (its stream has an append out, or it did not fit).
struct Queue {
    rx: mpsc::UnboundedReceiver<Item>,
    held: HashMap<u64, VecDeque<Item>>,
    carried: Option<Item>,
}

impl Queue {
    /// The next append: a carried one first, else from the channel
    /// (`None` once every sender is gone).
    async fn next(&mut self) -> Option<Item> {
        match self.carried.take() {
            Some(item) => Some(item),
            None => self.rx.recv().await,
        }
    }
}

async fn run(client: Client, rx: mpsc::UnboundedReceiver<Item>, stats: Arc<BatchStats>, stall: Duration) {
    let mut queue = Queue { rx, held: HashMap::new(), carried: None };
    // Opened when there is something to send, again after a loss.
    while let Some(first) = queue.next().await {
        match open(&client).await {
            Opened::Stream(link) => {
                stats.streams_opened.fetch_add(1, Relaxed);
                queue.carried = Some(first);
                streamed(link, &mut queue, &stats, stall).await;
            }
            Opened::Unsupported => {
                queue.carried = Some(first);
                batched(&client, &mut queue, &stats, Instant::now() + RETRY_STREAM_AFTER).await;
            }
            // Nothing was sent: the routing may take the append elsewhere.
            Opened::Failed(status) => first.fail(&status),
        }
    }
}

enum Opened {
    Stream(Box<Link>),
    Unsupported,
    Failed(tonic::Status),
}

struct Link {
    outbound: mpsc::UnboundedSender<pb::NumberedWrites>,
    replies: Streaming<pb::NumberedReplies>,
}

async fn open(client: &Client) -> Opened {
    let (outbound, queued) = mpsc::unbounded_channel();
    let messages =
        futures_util::stream::unfold(
            queued,
            |mut queued| async move { queued.recv().await.map(|writes| (writes, queued)) },
        );
    match client.clone().append_stream(messages).await {
        Ok(replies) => Opened::Stream(Box::new(Link { outbound, replies: replies.into_inner() })),
        Err(status) if status.code() == tonic::Code::Unimplemented => Opened::Unsupported,
        Err(status) => Opened::Failed(status),
    }
}

/// The appends out on a stream: whose answer each waits for, and the
/// streams they write (one append per stream is out at a time, so a
/// stream's appends apply in the order they came).
#[derive(Default)]
struct Pending {
    waiters: HashMap<u64, (oneshot::Sender<Reply>, u64)>,
    streams: HashSet<u64>,
    next_id: u64,
}

/// Sends the queue's appends on `link` and answers them, until the voter
/// says it stops and everything out is answered, until the stream ends
/// (then every append out is failed), or until the queue's senders are
/// gone and nothing is out. The caller opens another stream for what
/// comes next.
async fn streamed(mut link: Box<Link>, queue: &mut Queue, stats: &BatchStats, stall: Duration) {
    let mut pending = Pending::default();
    let mut receiving = true;
    // Since the last answer, or since appends went out on an idle stream.
    let mut heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(heard + stall), if !pending.waiters.is_empty() => {
                tracing::warn!(waiting = pending.waiters.len(), ?stall, "an upstream answered no append in time: its stream is given up");
                return lost(pending, queue, stats);
            }
            item = queue.next(), if receiving && pending.waiters.len() < MAX_PENDING => match item {
                Some(first) => {
                    if pending.waiters.is_empty() {
                        // The stall is counted from here, not from an idle spell.
                        heard = tokio::time::Instant::now();
                    }
                    let writes = take_batch(first, queue, &mut pending);
                    if !send(&link, writes, &mut pending, stats) {
                        return lost(pending, queue, stats);
                    }
                }
                None if pending.waiters.is_empty() => return,
                None => receiving = false,
            },
            message = link.replies.message() => {
                let Ok(Some(message)) = message else { return lost(pending, queue, stats) };
                heard = tokio::time::Instant::now();
                let mut next = Vec::new();
                for numbered in message.replies {
                    let Some((waiter, stream)) = pending.waiters.remove(&numbered.id) else { continue };
                    pending.streams.remove(&stream);
                    let reply = numbered.reply.ok_or_else(|| tonic::Status::internal("an append's answer was empty"));
                    let _ = waiter.send(reply);
                    // The stream's next append, held while this one was out.
                    if let Some(held) = queue.held.get_mut(&stream) {
                        if let Some(item) = held.pop_front() {
                            pending.streams.insert(stream);
                            next.push(item);
                        }
                        if held.is_empty() {
                            queue.held.remove(&stream);
                        }
                    }
                }
                if !next.is_empty() && !send(&link, next, &mut pending, stats) {
                    return lost(pending, queue, stats);
                }
                // The voter stops: nothing new goes on this stream (a stream's
                // held appends still follow their answers); once all is
                // answered the caller opens another, on a new connection.
                if message.closing {
                    stats.streams_closed.fetch_add(1, Relaxed);
                    receiving = false;
                }
                if !receiving && pending.waiters.is_empty() {
                    return;
                }
            }
        }
    }
}

/// `first` and what else queued, up to a batch: an append whose stream has
/// one out is held for later; one that does not fit is carried to the next.
fn take_batch(first: Item, queue: &mut Queue, pending: &mut Pending) -> Vec<Item> {
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut next = Some(first);
    while let Some(item) = next.take() {
        if pending.streams.contains(&item.stream) {
            queue.held.entry(item.stream).or_default().push_back(item);
        } else {
            let len = item.request.encoded_command.len();
            if !items.is_empty() && bytes.saturating_add(len) > MAX_BATCH_BYTES {
                queue.carried = Some(item);
                break;
            }
            bytes += len;
            pending.streams.insert(item.stream);
            items.push(item);
        }
        if items.len() >= MAX_BATCH || pending.waiters.len() + items.len() >= MAX_PENDING {
            break;
        }
        next = queue.rx.try_recv().ok();
    }
    items
}

/// Numbers `items` and sends them as one message, recording their
/// waiters; when the stream is gone they are failed as never sent (the
/// routing may send them elsewhere) and `false` says so.
fn send(link: &Link, items: Vec<Item>, pending: &mut Pending, stats: &BatchStats) -> bool {
    if items.is_empty() {
        return true;
    }
    let first_id = pending.next_id;
    pending.next_id += items.len() as u64;
    let (writes, waiters): (Vec<_>, Vec<_>) = items
        .into_iter()
        .zip(first_id..)
        .map(|(item, id)| (pb::NumberedWrite { id, request: Some(item.request) }, (id, item.reply, item.stream)))
        .unzip();
    if link.outbound.send(pb::NumberedWrites { writes }).is_err() {
        let unsent = tonic::Status::unavailable("the upstream's append stream ended before this append was sent");
        for (_, waiter, stream) in waiters {
            pending.streams.remove(&stream);
            let _ = waiter.send(Err(unsent.clone()));
        }
        return false;
    }
    stats.sent(waiters.len());
    for (id, waiter, stream) in waiters {
        pending.waiters.insert(id, (waiter, stream));
    }
    true
}

/// The stream ended: its appends out may or may not have applied (not to
/// be sent again), those held behind them never left (the routing may
/// send them anywhere).
fn lost(pending: Pending, queue: &mut Queue, stats: &BatchStats) {
    stats.streams_lost.fetch_add(1, Relaxed);
    let broken = tonic::Status::aborted("the upstream's append stream ended");
    for (waiter, _) in pending.waiters.into_values() {
        let _ = waiter.send(Err(broken.clone()));
    }
    let unsent = tonic::Status::unavailable("the upstream's append stream ended before this append was sent");
    for item in queue.held.drain().flat_map(|(_, held)| held) {
        item.fail(&unsent);
    }
}

/// Appends as `AppendBatch` calls, up to `MAX_CALLS_IN_FLIGHT` at once,
/// until `until` (then the caller tries the stream again) or until the
/// queue's senders are gone.
async fn batched(client: &Client, queue: &mut Queue, stats: &BatchStats, until: Instant) {
    let mut calls = InFlight::default();
    loop {
        // What queues while the calls are out makes the next one fuller.
        while calls.len() >= MAX_CALLS_IN_FLIGHT {
            calls.finish_one().await;
        }
        if Instant::now() >= until {
            break;
        }
        let first = tokio::select! {
            item = queue.next() => match item {
                Some(item) => item,
                None => break,
            },
            () = calls.finish_one(), if calls.len() > 0 => continue,
        };
        // A stream's appends reach the voter in the order they came: one
        // whose stream is in a call out waits for that call.
        while calls.holds(first.stream) {
            calls.finish_one().await;
        }
        let mut bytes = first.request.encoded_command.len();
        let mut items = vec![first];
        while items.len() < MAX_BATCH {
            let Ok(item) = queue.rx.try_recv() else { break };
            let len = item.request.encoded_command.len();
            if bytes.saturating_add(len) > MAX_BATCH_BYTES || calls.holds(item.stream) {
                queue.carried = Some(item);
                break;
            }
            bytes += len;
            items.push(item);
        }
        stats.sent(items.len());
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
