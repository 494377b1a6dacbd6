//! `GatewayBackend`: the HTTP layer's `Backend` over the voters'
//! `StreamService`. Every call goes to the stream's group leader (so a read
//! after a write sees it, and a leader read is one ReadIndex round there);
//! the gateway never answers a `307`: it follows the voters' hints itself.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use ursula_gateway::wire::{self, pb};
use ursula_gateway::{
    Backend, BackendError, PartAdmission, PartsCommit, PartsDiscard, Readiness, StagedPart, WaitOutcome,
};
use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, CreateOk, CreateStream, DeleteStream, Incarnation, Offset,
    PublishSnapshot, ReadQuery, ReadView, SnapshotOk, SnapshotView, StreamInfo, StreamKey,
};

use super::{CallError, Client, Upstreams};

pub struct GatewayBackend {
    pub upstreams: Arc<Upstreams>,
}

fn decoded<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CallError> {
    wire::decode("an upstream answer", bytes).map_err(|e| CallError::Broken(e.to_string()))
}

fn refused(f: pb::Failure) -> CallError {
    CallError::Refused(wire::refused(f))
}

fn empty() -> CallError {
    CallError::Broken("an empty answer".into())
}

impl GatewayBackend {
    fn write_request<C: Serialize>(&self, key: &StreamKey, command: &C) -> pb::WriteRequest {
        pb::WriteRequest { target: Some(self.upstreams.target(key)), encoded_command: wire::encode(command) }
    }

    async fn write<C, T, F, Fut>(&self, key: &StreamKey, command: &C, call: F) -> Result<T, BackendError>
    where
        C: Serialize,
        T: DeserializeOwned,
        F: Fn(Client, pb::WriteRequest) -> Fut,
        Fut: Future<Output = Result<tonic::Response<pb::WriteReply>, tonic::Status>>,
    {
        let request = self.write_request(key, command);
        self.upstreams
            .on_leader(key, false, |c| {
                let sent = call(c, request.clone());
                async move {
                    match sent.await?.into_inner().result {
                        Some(pb::write_reply::Result::EncodedOutcome(bytes)) => decoded(&bytes),
                        Some(pb::write_reply::Result::Failure(f)) => Err(refused(f)),
                        None => Err(empty()),
                    }
                }
            })
            .await
    }

    async fn read_view(&self, key: &StreamKey, query: ReadQuery) -> Result<ReadView, BackendError> {
        let request = pb::ReadRequest {
            target: Some(self.upstreams.target(key)),
            leader: false,
            encoded_query: wire::encode(&query),
        };
        self.upstreams
            .on_leader(key, true, |mut c| {
                let request = request.clone();
                async move {
                    match c.read(request).await?.into_inner().result {
                        Some(pb::read_reply::Result::View(chunk)) => {
                            wire::read_view(chunk).map_err(|e| CallError::Broken(e.to_string()))
                        }
                        Some(pb::read_reply::Result::Failure(f)) => Err(refused(f)),
                        None => Err(empty()),
                    }
                }
            })
            .await
    }

    async fn head_at(&self, key: &StreamKey, leader: bool) -> Result<StreamInfo, BackendError> {
        let request = pb::HeadRequest { target: Some(self.upstreams.target(key)), leader };
        self.upstreams
            .on_leader(key, true, |mut c| {
                let request = request.clone();
                async move {
                    match c.head(request).await?.into_inner().result {
                        Some(pb::head_reply::Result::EncodedInfo(bytes)) => decoded(&bytes),
                        Some(pb::head_reply::Result::Failure(f)) => Err(refused(f)),
                        None => Err(empty()),
                    }
                }
            })
            .await
    }
}

impl Backend for GatewayBackend {
    async fn create(&self, cmd: CreateStream) -> Result<CreateOk, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.create(r).await }).await
    }

    async fn append(&self, cmd: AppendStream) -> Result<AppendOk, BackendError> {
        self.write(&cmd.key, &cmd, |mut c, r| async move { c.append(r).await }).await
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

    fn max_snapshot_bytes(&self) -> Option<u64> {
        Some(self.upstreams.max_snapshot_bytes).filter(|m| *m > 0)
    }

    async fn admit_part(
        &self,
        key: &StreamKey,
        expect: Option<Incarnation>,
        declared: u64,
    ) -> Result<(), BackendError> {
        let cmd = PartAdmission { key: key.clone(), expect, declared };
        self.write(key, &cmd, |mut c, r| async move { c.admit_part(r).await }).await
    }

    async fn stage_part(
        &self,
        key: StreamKey,
        expect: Option<Incarnation>,
        body: bytes::Bytes,
    ) -> Result<(String, StreamInfo), BackendError> {
        let cmd = StagedPart { key: key.clone(), expect, body };
        self.write(&key, &cmd, |mut c, r| async move { c.stage_part(r).await }).await
    }

    async fn publish_parts(&self, commit: PartsCommit) -> Result<SnapshotOk, BackendError> {
        let key = commit.key.clone();
        self.write(&key, &commit, |mut c, r| async move { c.commit_parts(r).await }).await
    }

    async fn discard_parts(&self, key: StreamKey, expect: Option<Incarnation>) -> Result<StreamInfo, BackendError> {
        let cmd = PartsDiscard { key: key.clone(), expect };
        self.write(&key, &cmd, |mut c, r| async move { c.discard_parts(r).await }).await
    }

    async fn snapshot(&self, key: StreamKey, offset: Offset) -> Result<SnapshotView, BackendError> {
        let request =
            pb::SnapshotRequest { target: Some(self.upstreams.target(&key)), leader: false, offset: offset.bytes() };
        self.upstreams
            .on_leader(&key, true, |mut c| {
                let request = request.clone();
                async move {
                    match c.snapshot(request).await?.into_inner().result {
                        Some(pb::snapshot_reply::Result::EncodedView(bytes)) => decoded(&bytes),
                        Some(pb::snapshot_reply::Result::Failure(f)) => Err(refused(f)),
                        None => Err(empty()),
                    }
                }
            })
            .await
    }

    async fn bootstrap(&self, key: StreamKey, max_bytes: u64) -> Result<BootstrapView, BackendError> {
        let request = pb::BootstrapRequest { target: Some(self.upstreams.target(&key)), leader: false, max_bytes };
        self.upstreams
            .on_leader(&key, true, |mut c| {
                let request = request.clone();
                async move {
                    match c.bootstrap(request).await?.into_inner().result {
                        Some(pb::bootstrap_reply::Result::EncodedView(bytes)) => decoded(&bytes),
                        Some(pb::bootstrap_reply::Result::Failure(f)) => Err(refused(f)),
                        None => Err(empty()),
                    }
                }
            })
            .await
    }

    async fn head(&self, key: StreamKey) -> Result<StreamInfo, BackendError> {
        self.head_at(&key, false).await
    }

    async fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        let s = &self.upstreams.stats;
        let mut m = serde_json::Map::new();
        m.insert("engine".into(), "gateway".into());
        m.insert("group_count".into(), self.upstreams.group_count.into());
        m.insert("upstream_calls".into(), s.calls.load(Relaxed).into());
        m.insert("routing_hops".into(), s.hops.load(Relaxed).into());
        m.insert("upstream_errors".into(), s.upstream_errors.load(Relaxed).into());
        m.insert("routing_exhausted".into(), s.exhausted.load(Relaxed).into());
        let w = &self.upstreams.watches;
        m.insert("live_readers".into(), w.live_readers.load(Relaxed).into());
        m.insert("upstream_watches".into(), w.upstream_watches.load(Relaxed).into());
        m.insert("shared_watch_waits".into(), w.shared_waits.load(Relaxed).into());
        let health = &self.upstreams.health;
        m.insert("upstream_ejections".into(), health.ejections.load(Relaxed).into());
        m.insert("upstream_ejected".into(), health.ejected_now(std::time::Instant::now()).into());
        m
    }

    fn readiness(&self) -> Readiness {
        match self.upstreams.readiness() {
            Ok(()) => Readiness::Ready,
            Err(reason) => Readiness::Unready(reason),
        }
    }

    /// A ReadIndex round on the group's leader, where the read then goes.
    async fn linearize(&self, key: &StreamKey) -> Result<(), BackendError> {
        match self.head_at(key, true).await {
            Ok(_) | Err(BackendError::Rejected(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn read(&self, key: StreamKey, query: ReadQuery) -> Result<ReadView, BackendError> {
        self.read_view(&key, query).await
    }

    /// Waits on the stream's shared upstream watch.
    async fn wait(
        &self,
        key: StreamKey,
        incarnation: Incarnation,
        offset: Offset,
        timeout: Duration,
    ) -> Result<WaitOutcome, BackendError> {
        super::watches::Watches::wait(&self.upstreams, key, incarnation, offset, timeout).await
    }
}
