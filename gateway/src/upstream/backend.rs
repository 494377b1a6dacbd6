//! `GatewayBackend`: the HTTP layer's `Backend` over the voters'
//! `StreamService`. Every call goes to the stream's group leader (so a read
//! after a write sees it, and a leader read is one ReadIndex round there);
//! the gateway never answers a `307`: it follows the voters' hints itself.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
use ursula_http::wire::{self, pb};
use ursula_http::{
    Backend, BackendError, ForkStream, Metrics, Operations, PartAdmission, PartStaged, PartsCommit, PartsDiscard,
    ReadBootstrap, ReadRest, ReadSnapshot, ReadStream, Readiness, SnapshotParts, StagedPart, Streams, WaitOutcome,
    WaitStream, WriteRoute,
};
use ursula_proto::read_wire::ReadAnswer;
use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, CreateOk, CreateStream, DeleteStream, PublishSnapshot,
    ReadView, SnapshotOk, SnapshotView, StreamInfo, StreamKey,
};

use super::{Broken, CallError, Client, Upstreams};

pub struct GatewayBackend {
    pub upstreams: Arc<Upstreams>,
}

fn refused(f: pb::Failure) -> CallError {
    CallError::Refused(wire::refused(f))
}

/// A `StreamService` reply: a value in the state machine's encoding, or a
/// typed failure.
trait Reply {
    fn into_result(self) -> Option<Result<Bytes, pb::Failure>>;
}

macro_rules! encoded_reply {
    ($reply:ty, $module:ident, $value:ident) => {
        impl Reply for $reply {
            fn into_result(self) -> Option<Result<Bytes, pb::Failure>> {
                self.result.map(|r| match r {
                    pb::$module::Result::$value(bytes) => Ok(bytes),
                    pb::$module::Result::Failure(f) => Err(f),
                })
            }
        }
    };
}

encoded_reply!(pb::WriteReply, write_reply, EncodedOutcome);
encoded_reply!(pb::HeadReply, head_reply, EncodedInfo);
encoded_reply!(pb::SnapshotReply, snapshot_reply, EncodedView);
encoded_reply!(pb::BootstrapReply, bootstrap_reply, EncodedView);

/// An upstream's answer, decoded.
fn decoded<P: Reply, T: DeserializeOwned>(reply: P) -> Result<T, CallError> {
    match reply.into_result() {
        Some(Ok(bytes)) => Ok(wire::decode("an upstream answer", &bytes)?),
        Some(Err(f)) => Err(refused(f)),
        None => Err(CallError::Broken(Broken::Empty)),
    }
}

impl GatewayBackend {
    /// Sends `request` to the leader of `key`'s group and decodes its
    /// answer. `resend`: whether a call that may have reached a voter may go
    /// again (reads), or not (writes).
    async fn call<R, P, T, F, Fut>(&self, key: &StreamKey, resend: bool, request: R, send: F) -> Result<T, BackendError>
    where
        R: Clone,
        P: Reply,
        T: DeserializeOwned,
        F: Fn(Client, R) -> Fut,
        Fut: Future<Output = Result<tonic::Response<P>, tonic::Status>>,
    {
        self.upstreams
            .on_leader(key, resend, |c| {
                let sent = send(c, request.clone());
                async move { decoded(sent.await?.into_inner()) }
            })
            .await
    }

    /// A write: its command travels as the RPC's payload, never resent.
    async fn write<C, T, F, Fut>(&self, key: &StreamKey, command: &C, send: F) -> Result<T, BackendError>
    where
        C: Serialize,
        T: DeserializeOwned,
        F: Fn(Client, pb::WriteRequest) -> Fut,
        Fut: Future<Output = Result<tonic::Response<pb::WriteReply>, tonic::Status>>,
    {
        self.call(key, false, self.write_request(key, command), send).await
    }

    /// A write's RPC payload: its command for `key`'s stream.
    fn write_request(&self, key: &StreamKey, command: &impl Serialize) -> pb::WriteRequest {
        pb::WriteRequest { target: Some(self.upstreams.target(key)), encoded_command: wire::encode(command) }
    }

    async fn head_at(&self, key: &StreamKey, leader: bool) -> Result<StreamInfo, BackendError> {
        let request = pb::HeadRequest { target: Some(self.upstreams.target(key)), leader };
        self.call(key, true, request, |mut c, r| async move { c.head(r).await }).await
    }
}

impl Backend for GatewayBackend {
    type Parts = Self;

    /// The voters' capability: they report `Ursula-Max-Snapshot-Bytes`
    /// only with a cold backend.
    fn parts(&self) -> Option<&Self> {
        (self.upstreams.max_snapshot_bytes > 0).then_some(self)
    }
}

impl Streams for GatewayBackend {
    async fn create(&self, cmd: CreateStream) -> Result<CreateOk, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.create(r).await }).await
    }

    async fn fork(&self, cmd: ForkStream) -> Result<CreateOk, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.fork(r).await }).await
    }

    async fn append(&self, cmd: AppendStream) -> Result<AppendOk, BackendError> {
        let request = self.write_request(&cmd.key, &cmd);
        let alone = request.encoded_command.len() >= super::appends::ALONE_FROM_BYTES
            || ursula_http::telemetry::current_trace_sampled();
        if alone {
            return self.call(&cmd.key, false, request, |mut c, r| async move { c.append(r).await }).await;
        }
        self.upstreams
            .append_on_leader(&cmd.key, |appends| {
                let request = request.clone();
                async move { decoded(appends.send(request).await?) }
            })
            .await
    }

    async fn delete(&self, cmd: DeleteStream) -> Result<(), BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.delete(r).await }).await
    }

    async fn publish_snapshot(&self, cmd: PublishSnapshot) -> Result<SnapshotOk, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.publish_snapshot(r).await }).await
    }

    async fn advance_retention(&self, cmd: AdvanceRetention) -> Result<StreamInfo, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.advance_retention(r).await }).await
    }

    async fn head(&self, key: StreamKey) -> Result<StreamInfo, BackendError> {
        self.head_at(&key, false).await
    }

    async fn read(&self, req: ReadStream) -> Result<ReadView, BackendError> {
        let request = read_request(&self.upstreams, &req);
        self.upstreams
            .read_on_leader(&req.key, |channel| {
                let request = &request;
                async move { view_of(super::reads::read(channel, request).await?) }
            })
            .await
    }

    async fn read_streamed(&self, req: ReadStream) -> Result<(ReadView, Option<ReadRest>), BackendError> {
        let request = read_request(&self.upstreams, &req);
        // A JSON answer is rendered from whole chunks: it waits for all of them.
        let streamed =
            |view: &[u8]| wire::decode::<ReadView>("a read view", view).ok().filter(|v| !v.info.content_type.is_json());
        self.upstreams
            .read_on_leader(&req.key, |channel| {
                let request = &request;
                async move {
                    match super::reads::read_streamed(channel, request, streamed).await? {
                        Ok((view, first, rest)) => Ok((ReadView { chunks: first, ..view }, Some(rest))),
                        Err(answer) => Ok((view_of(answer)?, None)),
                    }
                }
            })
            .await
    }

    async fn snapshot(&self, req: ReadSnapshot) -> Result<SnapshotView, BackendError> {
        let target = Some(self.upstreams.target(&req.key));
        let request = pb::SnapshotRequest { target, leader: false, offset: req.offset.bytes() };
        self.call(&req.key, true, request, |mut c, r| async move { c.snapshot(r).await }).await
    }

    async fn bootstrap(&self, req: ReadBootstrap) -> Result<BootstrapView, BackendError> {
        let target = Some(self.upstreams.target(&req.key));
        let request = pb::BootstrapRequest { target, leader: false, max_bytes: req.max_bytes };
        self.call(&req.key, true, request, |mut c, r| async move { c.bootstrap(r).await }).await
    }

    /// Waits on the stream's shared upstream watch.
    async fn wait(&self, req: WaitStream) -> Result<WaitOutcome, BackendError> {
        super::watches::Watches::wait(&self.upstreams, req).await
    }

    /// A ReadIndex round on the group's leader, where the read then goes.
    async fn linearize(&self, key: &StreamKey) -> Result<(), BackendError> {
        match self.head_at(key, true).await {
            Ok(_) | Err(BackendError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every read of a gateway is served by the group's leader, which
    /// confirms its own tail.
    async fn confirm_tail(&self, _key: &StreamKey) -> Result<(), BackendError> {
        Ok(())
    }

    /// A gateway never redirects: it follows the voters' hints itself.
    fn leader_route(&self, _key: &StreamKey) -> WriteRoute {
        WriteRoute::Local
    }
}

impl SnapshotParts for GatewayBackend {
    fn max_snapshot_bytes(&self) -> u64 {
        self.upstreams.max_snapshot_bytes
    }

    async fn admit_part(&self, req: PartAdmission) -> Result<(), BackendError> {
        self.write(&req.key, &req, |mut c, r| async move { c.admit_part(r).await }).await
    }

    async fn stage_part(&self, part: StagedPart) -> Result<PartStaged, BackendError> {
        self.write(&part.key, &part, |mut c, r| async move { c.stage_part(r).await }).await
    }

    async fn commit_parts(&self, commit: PartsCommit) -> Result<SnapshotOk, BackendError> {
        self.write(&commit.key, &commit, |mut c, r| async move { c.commit_parts(r).await }).await
    }

    async fn discard_parts(&self, req: PartsDiscard) -> Result<StreamInfo, BackendError> {
        self.write(&req.key, &req, |mut c, r| async move { c.discard_parts(r).await }).await
    }
}

impl Operations for GatewayBackend {
    async fn usage(&self) -> Option<serde_json::Value> {
        // A gateway holds no streams: each voter reports its own (spec/35).
        None
    }

    async fn metrics(&self) -> Metrics {
        let s = &self.upstreams.stats;
        let mut m = Metrics::new();
        m.text("engine", "gateway");
        m.count("group_count", u64::from(self.upstreams.group_count));
        m.count("upstream_calls", s.calls.load(Relaxed));
        m.count("routing_hops", s.hops.load(Relaxed));
        m.count("upstream_errors", s.upstream_errors.load(Relaxed));
        m.count("routing_exhausted", s.exhausted.load(Relaxed));
        m.count("append_batch_calls", s.batches.calls.load(Relaxed));
        m.count("batched_appends", s.batches.appends.load(Relaxed));
        m.count("append_streams_opened", s.batches.streams_opened.load(Relaxed));
        m.count("append_streams_closed", s.batches.streams_closed.load(Relaxed));
        m.count("append_streams_lost", s.batches.streams_lost.load(Relaxed));
        let w = &self.upstreams.watches;
        m.count("live_readers", w.live_readers.load(Relaxed));
        m.count("upstream_watches", w.upstream_watches.load(Relaxed));
        m.count("shared_watch_waits", w.shared_waits.load(Relaxed));
        let health = &self.upstreams.health;
        m.count("upstream_ejections", health.ejections.load(Relaxed));
        m.count("upstream_ejected", health.ejected_now(std::time::Instant::now()) as u64);
        m
    }

    fn readiness(&self) -> Readiness {
        match self.upstreams.readiness() {
            Ok(()) => Readiness::ready(),
            Err(reason) => Readiness::unready(reason),
        }
    }
}

fn read_request(upstreams: &Upstreams, req: &ReadStream) -> pb::ReadRequest {
    pb::ReadRequest { target: Some(upstreams.target(&req.key)), leader: false, encoded_query: wire::encode(&req.query) }
}

/// The view of a read's reply, its chunks whole.
fn view_of(answer: ReadAnswer) -> Result<ReadView, CallError> {
    match answer.into_reply().result {
        Some(pb::read_reply::Result::View(chunk)) => Ok(wire::read_view(chunk)?),
        Some(pb::read_reply::Result::Failure(f)) => Err(refused(f)),
        None => Err(CallError::Broken(Broken::Empty)),
    }
}
