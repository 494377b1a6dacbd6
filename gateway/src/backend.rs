//! The seam between the HTTP layer and whatever holds the streams: an
//! in-process engine on a node, or a gRPC client of the voters in a gateway.

use std::future::Future;
use std::time::Duration;

use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, CreateOk, CreateStream, DeleteStream, Incarnation, Offset,
    PublishSnapshot, ReadQuery, ReadView, Rejection, SnapshotOk, SnapshotView, StreamInfo, StreamKey,
};

/// Why a backend could not answer with an outcome of the state machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The state machine refused the request.
    #[error("refused: {}", .0.code())]
    Rejected(Rejection),
    /// The backend cannot serve now; nothing was applied.
    #[error("unavailable: {reason:?}")]
    Unavailable { reason: Unavailable, retry_after_secs: u64 },
    /// The write was proposed and its leader lost the leadership (or the
    /// commit took too long) before the apply was seen: it may have applied.
    #[error("the outcome of the write is unknown")]
    OutcomeUnknown { retry_after_secs: u64 },
    /// The request needs a cold backend this node lacks (`501`).
    #[error("no cold store")]
    NoColdStore,
    /// A read needed the cold tier and the cold store failed it (a
    /// missing or damaged object is never served as bytes).
    #[error("cold store failed: {0}")]
    ColdStoreFailed(String),
    /// A fault of the backend; a write's outcome is unknown.
    #[error("internal: {0}")]
    Internal(String),
}

/// Why a backend refused to serve now (spec/27-append.md, `503`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// No leader is known for the stream's group.
    NoLeader,
    /// The WAL filesystem is below `raft.wal.min_available_size`.
    WalDiskPressure,
    /// The group's hot bytes are above `storage.cold.max_hot_size_per_group`.
    ColdBackpressure,
}

impl From<Rejection> for BackendError {
    fn from(r: Rejection) -> Self {
        BackendError::Rejected(r)
    }
}

/// `PUT …/snapshot/{offset}` with `Stream-Snapshot-Parts` (spec/30).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartsCommit {
    pub key: StreamKey,
    pub offset: Offset,
    pub content_type: ursula_stream::ContentType,
    pub digest: ursula_stream::SnapshotDigest,
    pub expect: Option<Incarnation>,
    /// The manifest's part ids, in order, distinct.
    pub parts: Vec<String>,
}

/// The staged-parts check of a part about to be sent (`declared` bytes).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartAdmission {
    pub key: StreamKey,
    pub expect: Option<Incarnation>,
    pub declared: u64,
}

/// One part of a snapshot upload.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StagedPart {
    pub key: StreamKey,
    pub expect: Option<Incarnation>,
    pub body: bytes::Bytes,
}

/// `DELETE …/snapshot/parts`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartsDiscard {
    pub key: StreamKey,
    pub expect: Option<Incarnation>,
}

/// How a wait for new data ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The stream changed: new bytes, closure, deletion or replacement.
    Changed,
    TimedOut,
    /// The live read behind the wait ended (a gateway's upstream leader
    /// changed): an SSE session ends cleanly and its client resumes from
    /// its last `streamNextOffset`; a long-poll waits again.
    Ended,
}

/// Where a write to a stream must go (extensions §5.7), decided before
/// its body is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteRoute {
    /// This node leads the stream's group (or there is no leader to find).
    Local,
    /// Another node leads it: redirect there.
    Leader(LeaderHint),
    /// No leader is known yet.
    NoLeader { group: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    /// The leader's client plane, e.g. `http://10.0.0.2:4437`.
    pub client_url: String,
    pub leader_id: u64,
    pub group: u32,
    pub term: u64,
}

/// Whether the node may serve (`/__ursula/ready`), else the first typed
/// reason of spec/38-troubleshooting.md that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    Unready(&'static str),
}

/// Everything the HTTP layer needs from the streams.
pub trait Backend: Send + Sync + 'static {
    fn create(&self, cmd: CreateStream) -> impl Future<Output = Result<CreateOk, BackendError>> + Send;
    fn append(&self, cmd: AppendStream) -> impl Future<Output = Result<AppendOk, BackendError>> + Send;
    fn delete(&self, cmd: DeleteStream) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn publish_snapshot(&self, cmd: PublishSnapshot) -> impl Future<Output = Result<SnapshotOk, BackendError>> + Send;
    fn advance_retention(&self, cmd: AdvanceRetention)
    -> impl Future<Output = Result<StreamInfo, BackendError>> + Send;
    /// The latest snapshot, when it is the one at `offset`.
    fn snapshot(
        &self,
        key: StreamKey,
        offset: Offset,
    ) -> impl Future<Output = Result<SnapshotView, BackendError>> + Send;
    fn bootstrap(
        &self,
        key: StreamKey,
        max_bytes: u64,
    ) -> impl Future<Output = Result<BootstrapView, BackendError>> + Send;
    fn head(&self, key: StreamKey) -> impl Future<Output = Result<StreamInfo, BackendError>> + Send;
    /// The JSON snapshot of `/__ursula/metrics`: fields at the top level.
    fn metrics(&self) -> impl Future<Output = serde_json::Map<String, serde_json::Value>> + Send;
    fn readiness(&self) -> Readiness;
    /// Fields `/__ursula/ready` adds whatever the readiness (such as
    /// `peer_cluster_mismatches`).
    fn readiness_details(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// Confirms, on the leader of `key`'s group, that it still leads and has
    /// applied everything committed (Raft ReadIndex), so a read served next
    /// is linearizable. A single node has nothing to confirm.
    fn linearize(&self, _key: &StreamKey) -> impl Future<Output = Result<(), BackendError>> + Send {
        async { Ok(()) }
    }
    /// Brings the serving replica of `key`'s group up to what a
    /// quorum-confirmed leader read would see, so a follower can mark
    /// `Stream-Up-To-Date` or refuse a cursor with `416` truthfully.
    fn confirm_tail(&self, _key: &StreamKey) -> impl Future<Output = Result<(), BackendError>> + Send {
        async { Ok(()) }
    }
    /// Where a write (or a read that must see the leader) of `key` goes; a
    /// single node always serves locally.
    fn leader_route(&self, _key: &StreamKey) -> WriteRoute {
        WriteRoute::Local
    }
    /// The largest snapshot taken in parts (`Ursula-Max-Snapshot-Bytes`);
    /// `None` without a cold backend.
    fn max_snapshot_bytes(&self) -> Option<u64> {
        None
    }
    /// Refuses a part past the stream's staged-parts bounds before its body
    /// is read (`declared`: its `Content-Length`, or the request limit).
    fn admit_part(
        &self,
        _key: &StreamKey,
        _expect: Option<Incarnation>,
        _declared: u64,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        async { Ok(()) }
    }
    /// Stages one part of a snapshot upload; returns its id.
    fn stage_part(
        &self,
        _key: StreamKey,
        _expect: Option<Incarnation>,
        _body: bytes::Bytes,
    ) -> impl Future<Output = Result<(String, StreamInfo), BackendError>> + Send {
        async { Err(BackendError::NoColdStore) }
    }
    /// Publishes the snapshot assembled from staged parts, in order.
    fn publish_parts(&self, _commit: PartsCommit) -> impl Future<Output = Result<SnapshotOk, BackendError>> + Send {
        async { Err(BackendError::NoColdStore) }
    }
    /// Deletes every staged part of the stream's current incarnation.
    fn discard_parts(
        &self,
        _key: StreamKey,
        _expect: Option<Incarnation>,
    ) -> impl Future<Output = Result<StreamInfo, BackendError>> + Send {
        async { Err(BackendError::NoColdStore) }
    }
    /// A catch-up read; it renews a sliding TTL as the state machine asks.
    fn read(&self, key: StreamKey, query: ReadQuery) -> impl Future<Output = Result<ReadView, BackendError>> + Send;
    /// Waits until the stream moves past `offset`, closes, or is deleted or
    /// replaced (`incarnation` no longer current), or until `timeout`.
    fn wait(
        &self,
        key: StreamKey,
        incarnation: Incarnation,
        offset: Offset,
        timeout: Duration,
    ) -> impl Future<Output = Result<WaitOutcome, BackendError>> + Send;
}
