//! `StreamService` on a node: the private data plane a gateway calls,
//! served on the client plane over the same backend as the HTTP surface.
//! A write, a leader read or a watch of a group this node does not lead
//! answers a typed `not_leader` (or `no_leader`) before anything runs, so
//! the caller may always resend it elsewhere.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::{Request, Response, Status};
use ursula_http::wire::{self, pb};
use ursula_http::{
    Backend, BackendError, ForkStream, Operations, PartAdmission, PartsCommit, PartsDiscard, ReadBootstrap,
    ReadSnapshot, ReadStream, Readiness, Ready, SnapshotParts, StagedPart, Streams, WaitOutcome, WaitStream,
};
use ursula_proto::stream::v1::stream_service_server::{StreamService, StreamServiceServer};
use ursula_stream::{
    AdvanceRetention, AppendStream, CreateStream, DeleteStream, Incarnation, Offset, PublishSnapshot, ReadFrom,
    ReadQuery, Rejection, StreamKey,
};

use crate::backend::NodeBackend;
use crate::engine::{GroupEngine, Leadership};
use ursula_http::handlers::read::needs_leader_confirmation;
use ursula_http::inflight::InflightBodies;
use ursula_stream::routing::{GroupId, group_of};

pub struct StreamPlane<E> {
    backend: Arc<NodeBackend<E>>,
    cluster_id: String,
    node_id: u64,
    /// This node's own client plane, named when it leads a group.
    client_url: String,
    /// The node's write body budget, shared with its client plane.
    inflight: Arc<InflightBodies>,
    /// Turns true when the node stops: append streams stop taking appends.
    stopping: tokio::sync::watch::Receiver<bool>,
}

type Answer<T> = Result<T, pb::Failure>;

/// A handle on the same plane, for the futures of a call that outlive it
/// (the appends of an `AppendStream`).
impl<E> Clone for StreamPlane<E> {
    fn clone(&self) -> Self {
        StreamPlane {
            backend: self.backend.clone(),
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            client_url: self.client_url.clone(),
            inflight: self.inflight.clone(),
            stopping: self.stopping.clone(),
        }
    }
}

impl<E: GroupEngine> StreamPlane<E> {
    pub fn new(
        backend: Arc<NodeBackend<E>>,
        cluster_id: String,
        node_id: u64,
        client_url: String,
        inflight: Arc<InflightBodies>,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        StreamPlane { backend, cluster_id, node_id, client_url, inflight, stopping }
    }

    pub fn service(self) -> StreamServiceServer<Self> {
        StreamServiceServer::new(self)
            .max_decoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
    }

    fn check(&self, cluster_id: &str) -> Answer<()> {
        match cluster_id == self.cluster_id {
            true => Ok(()),
            false => Err(wire::cluster_mismatch(&self.cluster_id, self.node_id)),
        }
    }

    fn target(&self, target: Option<&pb::Target>) -> Answer<StreamKey> {
        let t = target.ok_or_else(|| wire::invalid("the request names no target"))?;
        self.check(&t.cluster_id)?;
        StreamKey::parse(&t.bucket, &t.stream).map_err(|e| wire::invalid(e.to_string()))
    }

    fn group(&self, key: &StreamKey) -> u32 {
        group_of(key, self.backend.engine().group_count()).0
    }

    /// Refuses, with the route to take, a call this node does not lead.
    fn on_leader(&self, key: &StreamKey) -> Answer<()> {
        wire::not_leading(&self.backend.leader_route(key)).map_or(Ok(()), Err)
    }

    async fn write<C, T, Fut>(
        &self,
        req: pb::WriteRequest,
        key_of: fn(&C) -> &StreamKey,
        run: impl FnOnce(Arc<NodeBackend<E>>, C) -> Fut,
    ) -> Result<Response<pb::WriteReply>, Status>
    where
        C: DeserializeOwned,
        T: Serialize,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        Ok(Response::new(self.write_reply(req, key_of, run).await))
    }

    async fn write_reply<C, T, Fut>(
        &self,
        req: pb::WriteRequest,
        key_of: fn(&C) -> &StreamKey,
        run: impl FnOnce(Arc<NodeBackend<E>>, C) -> Fut,
    ) -> pb::WriteReply
    where
        C: DeserializeOwned,
        T: Serialize,
        Fut: Future<Output = Result<T, BackendError>>,
    {
        use pb::write_reply::Result as R;
        let result = async {
            let key = self.target(req.target.as_ref())?;
            let command: C =
                wire::decode("a command", &req.encoded_command).map_err(|e| wire::invalid(e.to_string()))?;
            if key_of(&command) != &key {
                return Err(wire::invalid("the command names another stream than the target"));
            }
            self.on_leader(&key)?;
            let group = self.group(&key);
            // A gateway's write holds the node's body budget as one from a client would.
            let _share =
                self.inflight.reserve(req.encoded_command.len() as u64).map_err(|e| wire::failure(group, &e))?;
            run(self.backend.clone(), command).await.map_err(|e| wire::failure(group, &e))
        }
        .await;
        let result = match result {
            Ok(value) => R::EncodedOutcome(wire::encode(&value)),
            Err(f) => R::Failure(f),
        };
        pb::WriteReply { result: Some(result) }
    }

    async fn append_reply(&self, request: pb::WriteRequest) -> pb::WriteReply {
        let key_of: fn(&AppendStream) -> &StreamKey = |c| &c.key;
        self.write_reply(request, key_of, |b, c| async move { b.append(c).await }).await
    }

    /// A read from this replica's applied state, or, with `leader`, on the
    /// group's leader after a ReadIndex round (linearizable).
    async fn read<T, Fut>(
        &self,
        target: Option<&pb::Target>,
        leader: bool,
        run: impl FnOnce(Arc<NodeBackend<E>>, StreamKey) -> Fut,
    ) -> Answer<T>
    where
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let key = self.target(target)?;
        let group = self.group(&key);
        if leader {
            self.on_leader(&key)?;
            self.backend.linearize(&key).await.map_err(|e| wire::failure(group, &e))?;
        }
        run(self.backend.clone(), key).await.map_err(|e| wire::failure(group, &e))
    }

    /// A `Read`'s view, or the failure its caller gets instead; tonic's
    /// `Read` and the mux's copy-free one (`raw_read`) both answer it.
    pub(crate) async fn read_chunk(&self, req: pb::ReadRequest) -> Answer<pb::ReadChunk> {
        let query = decode_query(&req.encoded_query)?;
        let read = |b: Arc<NodeBackend<E>>, key: StreamKey| async move {
            let read = b.read(ReadStream { key: key.clone(), query }).await;
            // A gateway reads where it last saw the leader: a replica that
            // does not lead (any more) confirms through the leader what
            // its own state may not show yet, as the HTTP read does.
            if req.leader || !needs_leader_confirmation(&*b, &key, read.as_ref()) {
                return read;
            }
            b.confirm_tail(&key).await?;
            b.read(ReadStream { key, query }).await
        };
        self.read(req.target.as_ref(), req.leader, read).await.map(wire::read_chunk)
    }

    fn leader_of(&self, group: u32) -> Option<pb::LeaderHint> {
        match self.backend.engine().leadership(GroupId(group)) {
            Leadership::Local { term } => {
                Some(pb::LeaderHint { node_id: self.node_id, client_url: self.client_url.clone(), term })
            }
            Leadership::Peer { id, term, client_url } => Some(pb::LeaderHint { node_id: id, client_url, term }),
            Leadership::Unknown => None,
        }
    }
}

/// The node's snapshot-parts capability, or the typed refusal without it.
fn parts<E: GroupEngine>(backend: &NodeBackend<E>) -> Result<&NodeBackend<E>, BackendError> {
    backend.parts().ok_or(BackendError::NoColdStore)
}

fn encoded<T: Serialize>(answer: Answer<T>) -> Result<bytes::Bytes, pb::Failure> {
    answer.map(|v| wire::encode(&v))
}

fn decode_query(bytes: &[u8]) -> Answer<ReadQuery> {
    wire::decode("a read query", bytes).map_err(|e| wire::invalid(e.to_string()))
}

type WatchEvents = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;
type NumberedReplies = Pin<Box<dyn Stream<Item = Result<pb::NumberedReplies, Status>> + Send>>;

/// The answers of an `AppendStream`: every append it carries runs as
/// `Append` would, concurrently, and is answered by its number once it
/// commits; answers ready together go in one message. When the node
/// stops (after its leaderships were handed off) it tells the caller
/// (`closing`), which ends its side once its appends are answered: the
/// connection can then drain. The stream ends when the caller's side has
/// ended and every append is answered.
fn numbered_replies<E: GroupEngine>(
    plane: Arc<StreamPlane<E>>,
    inbound: tonic::Streaming<pb::NumberedWrites>,
) -> impl Stream<Item = Result<pb::NumberedReplies, Status>> + Send {
    use futures_util::{FutureExt, StreamExt};
    type Answering =
        futures_util::stream::FuturesUnordered<futures_util::future::BoxFuture<'static, pb::NumberedReply>>;
    /// The caller's side (until it ends), the appends being answered, the
    /// node's stop and whether the caller was told of it.
    type State = (Option<tonic::Streaming<pb::NumberedWrites>>, Answering, tokio::sync::watch::Receiver<bool>, bool);
    let start: State = (Some(inbound), Answering::new(), plane.stopping.clone(), false);
    futures_util::stream::unfold(start, move |(mut inbound, mut answering, mut stopping, mut told)| {
        let plane = plane.clone();
        async move {
            loop {
                tokio::select! {
                    biased;
                    Some(first) = answering.next(), if !answering.is_empty() => {
                        let mut replies = vec![first];
                        while let Some(Some(more)) = answering.next().now_or_never() {
                            replies.push(more);
                        }
                        let message = pb::NumberedReplies { replies, closing: false };
                        return Some((Ok(message), (inbound, answering, stopping, told)));
                    }
                    received = next_writes(&mut inbound), if inbound.is_some() => match received {
                        Some(writes) => {
                            for write in writes.writes {
                                let plane = plane.clone();
                                answering.push(Box::pin(async move {
                                    let reply = plane.append_reply(write.request.unwrap_or_default()).await;
                                    pb::NumberedReply { id: write.id, reply: Some(reply) }
                                }));
                            }
                        }
                        // The caller is done sending (or gone): answer what is out.
                        None => inbound = None,
                    },
                    // The node stops: the caller ends its side and opens another stream.
                    () = stopped(&mut stopping), if !told && inbound.is_some() => {
                        told = true;
                        let notice = pb::NumberedReplies { replies: Vec::new(), closing: true };
                        return Some((Ok(notice), (inbound, answering, stopping, told)));
                    }
                    else => return None,
                }
            }
        }
    })
}

/// Resolves once the node stops (or its stop can no longer be seen).
async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// The caller's next message; `None` once it ended or failed.
async fn next_writes(inbound: &mut Option<tonic::Streaming<pb::NumberedWrites>>) -> Option<pb::NumberedWrites> {
    match inbound {
        Some(inbound) => inbound.message().await.ok().flatten(),
        None => None,
    }
}

#[tonic::async_trait]
impl<E: GroupEngine> StreamService for StreamPlane<E> {
    async fn describe(&self, request: Request<pb::DescribeRequest>) -> Result<Response<pb::DescribeReply>, Status> {
        let req = request.into_inner();
        if !req.cluster_id.is_empty()
            && let Err(failure) = self.check(&req.cluster_id)
        {
            return Ok(Response::new(pb::DescribeReply { failure: Some(failure), ..Default::default() }));
        }
        let group_count = self.backend.engine().group_count();
        let groups = (0..group_count).map(|g| pb::GroupLeader { group: g, leader: self.leader_of(g) }).collect();
        let unready_reason = match self.backend.readiness() {
            Readiness { ready: Ready::Ready, .. } => String::new(),
            Readiness { ready: Ready::Unready(reason), .. } => reason.to_string(),
        };
        Ok(Response::new(pb::DescribeReply {
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            group_count,
            groups,
            unready_reason,
            failure: None,
            max_snapshot_bytes: self.backend.parts().map_or(0, SnapshotParts::max_snapshot_bytes),
        }))
    }

    async fn create(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&CreateStream) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { b.create(c).await }).await
    }

    async fn fork(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&ForkStream) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { b.fork(c).await }).await
    }

    async fn append(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        Ok(Response::new(self.append_reply(request.into_inner()).await))
    }

    async fn append_batch(
        &self,
        request: Request<pb::WriteBatchRequest>,
    ) -> Result<Response<pb::WriteBatchReply>, Status> {
        let appends = request.into_inner().requests.into_iter().map(|r| self.append_reply(r));
        Ok(Response::new(pb::WriteBatchReply { replies: futures_util::future::join_all(appends).await }))
    }

    type AppendStreamStream = NumberedReplies;

    async fn append_stream(
        &self,
        request: Request<tonic::Streaming<pb::NumberedWrites>>,
    ) -> Result<Response<NumberedReplies>, Status> {
        Ok(Response::new(Box::pin(numbered_replies(Arc::new(self.clone()), request.into_inner()))))
    }

    async fn delete(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&DeleteStream) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { b.delete(c).await }).await
    }

    async fn publish_snapshot(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&PublishSnapshot) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { b.publish_snapshot(c).await }).await
    }

    async fn advance_retention(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&AdvanceRetention) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { b.advance_retention(c).await }).await
    }

    async fn admit_part(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&PartAdmission) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { parts(&b)?.admit_part(c).await }).await
    }

    async fn stage_part(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&StagedPart) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { parts(&b)?.stage_part(c).await }).await
    }

    async fn commit_parts(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&PartsCommit) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { parts(&b)?.commit_parts(c).await }).await
    }

    async fn discard_parts(&self, request: Request<pb::WriteRequest>) -> Result<Response<pb::WriteReply>, Status> {
        let key_of: fn(&PartsDiscard) -> &StreamKey = |c| &c.key;
        self.write(request.into_inner(), key_of, |b, c| async move { parts(&b)?.discard_parts(c).await }).await
    }

    async fn head(&self, request: Request<pb::HeadRequest>) -> Result<Response<pb::HeadReply>, Status> {
        use pb::head_reply::Result as R;
        let req = request.into_inner();
        let answer = self.read(req.target.as_ref(), req.leader, |b, key| async move { b.head(key).await }).await;
        let result = encoded(answer).map_or_else(R::Failure, R::EncodedInfo);
        Ok(Response::new(pb::HeadReply { result: Some(result) }))
    }

    async fn read(&self, request: Request<pb::ReadRequest>) -> Result<Response<pb::ReadReply>, Status> {
        use pb::read_reply::Result as R;
        let result = self.read_chunk(request.into_inner()).await.map_or_else(R::Failure, R::View);
        Ok(Response::new(pb::ReadReply { result: Some(result) }))
    }

    async fn snapshot(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::SnapshotReply>, Status> {
        use pb::snapshot_reply::Result as R;
        let req = request.into_inner();
        let offset = Offset(req.offset);
        let read = |b: Arc<NodeBackend<E>>, key| async move { b.snapshot(ReadSnapshot { key, offset }).await };
        let answer = self.read(req.target.as_ref(), req.leader, read).await;
        let result = encoded(answer).map_or_else(R::Failure, R::EncodedView);
        Ok(Response::new(pb::SnapshotReply { result: Some(result) }))
    }

    async fn bootstrap(&self, request: Request<pb::BootstrapRequest>) -> Result<Response<pb::BootstrapReply>, Status> {
        use pb::bootstrap_reply::Result as R;
        let req = request.into_inner();
        let max_bytes = req.max_bytes;
        let read = |b: Arc<NodeBackend<E>>, key| async move { b.bootstrap(ReadBootstrap { key, max_bytes }).await };
        let answer = self.read(req.target.as_ref(), req.leader, read).await;
        let result = encoded(answer).map_or_else(R::Failure, R::EncodedView);
        Ok(Response::new(pb::BootstrapReply { result: Some(result) }))
    }

    type WatchStream = WatchEvents;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> Result<Response<WatchEvents>, Status> {
        let req = request.into_inner();
        let opened = (|| {
            let key = self.target(req.target.as_ref())?;
            let incarnation =
                Incarnation::from_value(req.incarnation).ok_or_else(|| wire::invalid("no such incarnation"))?;
            let query = decode_query(&req.encoded_query)?;
            Ok(Watch {
                backend: self.backend.clone(),
                group: self.group(&key),
                key,
                incarnation,
                offset: Offset(req.offset),
                query,
                timeout: Duration::from_millis(req.timeout_ms),
                positions_only: req.positions_only,
                done: false,
            })
        })();
        let state = match opened {
            Ok(watch) => WatchState::Open(watch),
            Err(f) => WatchState::Failed(f),
        };
        let events = futures_util::stream::unfold(state, |state| async move {
            match state {
                WatchState::Done => None,
                WatchState::Failed(f) => Some((Ok(event(Event::Failure(f))), WatchState::Done)),
                WatchState::Open(mut w) => {
                    let e = w.next_event().await;
                    Some((Ok(event(e)), if w.done { WatchState::Done } else { WatchState::Open(w) }))
                }
            }
        });
        Ok(Response::new(Box::pin(events)))
    }
}

use pb::watch_event::Event;

fn event(e: Event) -> pb::WatchEvent {
    pb::WatchEvent { event: Some(e) }
}

enum WatchState<E> {
    Open(Watch<E>),
    Failed(pb::Failure),
    Done,
}

/// One live read: each event carries what committed past the cursor.
struct Watch<E> {
    backend: Arc<NodeBackend<E>>,
    key: StreamKey,
    group: u32,
    incarnation: Incarnation,
    offset: Offset,
    query: ReadQuery,
    timeout: Duration,
    positions_only: bool,
    done: bool,
}

impl<E: GroupEngine> Watch<E> {
    fn fail(&mut self, e: &BackendError) -> Event {
        self.done = true;
        Event::Failure(wire::failure(self.group, e))
    }

    /// The next bytes past the cursor, once they commit; or the end.
    async fn next_event(&mut self) -> Event {
        loop {
            // Live reads follow the leader (spec/21): a watch ends when
            // this node stops leading, and the caller resumes elsewhere.
            if let Some(f) = wire::not_leading(&self.backend.leader_route(&self.key)) {
                self.done = true;
                return Event::Failure(f);
            }
            let mut query = ReadQuery { from: ReadFrom::At(self.offset), ..self.query };
            if self.positions_only {
                // Everything up to the tail at once: only its position travels.
                query.max_bytes = ursula_http::limits::MAX_RESPONSE_BYTES;
            }
            let view = match self.backend.read(ReadStream { key: self.key.clone(), query }).await {
                Ok(view) => view,
                // Refused by a replacement whose tail is short of the cursor.
                Err(BackendError::Rejected(r)) if r.read_incarnation().is_some_and(|c| c != self.incarnation) => {
                    let current = r.read_incarnation();
                    return self.fail(&BackendError::Rejected(Rejection::IncarnationMismatch { current }));
                }
                Err(e) => return self.fail(&e),
            };
            if view.info.incarnation != self.incarnation {
                let current = Some(view.info.incarnation);
                return self.fail(&BackendError::Rejected(Rejection::IncarnationMismatch { current }));
            }
            if !view.is_empty() || view.closed_at_end {
                self.offset = view.next;
                self.done = view.closed_at_end;
                let mut view = view;
                if self.positions_only {
                    view.chunks.clear();
                }
                return Event::Data(wire::read_chunk(view));
            }
            let wait = WaitStream {
                key: self.key.clone(),
                incarnation: self.incarnation,
                offset: self.offset,
                timeout: self.timeout,
            };
            match self.backend.wait(wait).await {
                Ok(WaitOutcome::Changed) => continue,
                Ok(WaitOutcome::TimedOut | WaitOutcome::Ended) => {
                    self.done = true;
                    return Event::TimedOut(pb::TimedOut {});
                }
                Err(e) => return self.fail(&e),
            }
        }
    }
}
