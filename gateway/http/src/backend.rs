//! The seam between the HTTP layer and whatever holds the streams: an
//! in-process engine on a node, or a gRPC client of the voters in a gateway.
//! Split by job: `Streams` (data and consistency), `SnapshotParts` (a
//! capability a backend may lack) and `Operations` (metrics, readiness).
//! Each method takes one request struct, the one that travels on the wire.

use std::future::Future;
use std::time::Duration;

use crate::ops::{Metrics, Readiness};

use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, CreateOk, CreateStream, DeleteStream, ErrorCode,
    Incarnation, Offset, PublishSnapshot, ReadQuery, ReadView, Rejection, SnapshotOk, SnapshotView, StreamInfo,
    StreamKey,
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
    /// The shell refused a snapshot upload in parts (its bounds, its commit
    /// slots, what the parts hold); nothing was published.
    #[error("parts refused: {}", .0.code())]
    Parts(PartsRefusal),
    /// A read needed the cold tier and the cold store failed it (a
    /// missing or damaged object is never served as bytes).
    #[error("cold store failed: {0}")]
    ColdStoreFailed(String),
    /// A fault of the backend; a write's outcome is unknown.
    #[error("internal: {0}")]
    Internal(String),
    /// An intermediary (a gateway) reached no voter; nothing was forwarded
    /// or, for a read, it may be asked again. Never sent by a node.
    #[error("no upstream: {0:?}")]
    Upstream(UpstreamFailure),
}

/// A refusal of a snapshot upload in parts, decided by the shell around
/// the state machine (the cold store holds the parts), not by `apply`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PartsRefusal {
    /// A commit named a part that is not staged for this stream incarnation.
    UnknownPart,
    /// The assembled snapshot's digest differs from `Stream-Snapshot-Digest`.
    DigestMismatch,
    /// The assembled snapshot is above `Ursula-Max-Snapshot-Bytes`.
    TooLarge { limit: u64 },
    /// The stream holds as many unused staged parts as it may (`bytes`: the
    /// byte bound); `limit` is the bound it met.
    StagedLimit { incarnation: Incarnation, bytes: bool, limit: u64 },
    /// Every commit copy slot of the node is taken.
    CommitsBusy,
    /// A commit of this stream incarnation runs now.
    CommitInProgress,
}

impl PartsRefusal {
    pub fn code(&self) -> ErrorCode {
        match self {
            PartsRefusal::UnknownPart => ErrorCode::UnknownPart,
            PartsRefusal::DigestMismatch => ErrorCode::SnapshotDigestMismatch,
            PartsRefusal::TooLarge { .. } => ErrorCode::SnapshotTooLarge,
            PartsRefusal::StagedLimit { .. } => ErrorCode::StagedPartsLimit,
            PartsRefusal::CommitsBusy => ErrorCode::SnapshotCommitsBusy,
            PartsRefusal::CommitInProgress => ErrorCode::SnapshotCommitInProgress,
        }
    }
}

impl From<PartsRefusal> for BackendError {
    fn from(r: PartsRefusal) -> Self {
        BackendError::Parts(r)
    }
}

/// Why a gateway could not reach the voters (extensions §11, an
/// intermediary's `503`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// The cluster was never found: no upstream has answered yet.
    NoUpstream,
    /// Every upstream tried was unreachable.
    Unreachable,
    /// The voter sent no answer's headers within the gateway's
    /// `--response-header-timeout`; a write may have applied.
    TimedOut,
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
    /// The write bodies in flight leave too little of `server.http_inflight_body_size`.
    IngressBodyBytes,
    /// The group's proposed, unapplied bytes would exceed `raft.max_uncommitted_size_per_group`.
    RaftUncommitted,
    /// The node's live-read waiters are at `runtime.live_read_max_waiters_per_core`.
    LiveReads,
    /// The node's unsnapshotted Raft log is over twice `raft.snapshot_log_budget`.
    RaftLogPressure,
    /// A committed command failed to apply and stopped the group on this replica.
    ApplyStopped,
    /// The group holds a recovery plan whose history event has not applied (spec/35).
    HistoryPending,
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

/// `GET …/snapshot/{offset}`: the latest snapshot, when it is the one at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSnapshot {
    pub key: StreamKey,
    pub offset: Offset,
}

/// `GET …/bootstrap`: the latest snapshot and the updates after it, up to
/// `max_bytes` of updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBootstrap {
    pub key: StreamKey,
    pub max_bytes: u64,
}

/// A catch-up read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadStream {
    pub key: StreamKey,
    pub query: ReadQuery,
}

/// A wait until the stream moves past `offset`, closes, or is deleted or
/// replaced (`incarnation` no longer current), or until `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitStream {
    pub key: StreamKey,
    pub incarnation: Incarnation,
    pub offset: Offset,
    pub timeout: Duration,
}

/// A staged part's id, with the stream it was staged for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartStaged {
    pub id: String,
    pub info: StreamInfo,
}

/// The streams: their data and the consistency of reading them. Every
/// backend decides every method (no default bodies).
/// `PUT` with `Stream-Forked-From` (upstream "Stream forking"); what the
/// request left out (content type, lifetime) the fork inherits.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ForkStream {
    pub key: StreamKey,
    pub source: StreamKey,
    pub offset: Option<ursula_stream::Offset>,
    pub sub_offset: u64,
    pub content_type: Option<ursula_stream::ContentType>,
    pub lifetime: Option<ursula_stream::Lifetime>,
    pub closed: bool,
    pub stream_seq: Option<ursula_stream::StreamSeq>,
    /// The raw body, prepared once the content type is known.
    pub body: bytes::Bytes,
    pub expect: Option<ursula_stream::Incarnation>,
}

/// The bytes of a read still arriving after its view, in order; an `Err`
/// means the read broke off before its end.
pub type ReadRest = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, ()>> + Send>>;

pub trait Streams: Send + Sync + 'static {
    fn create(&self, cmd: CreateStream) -> impl Future<Output = Result<CreateOk, BackendError>> + Send;
    fn fork(&self, req: ForkStream) -> impl Future<Output = Result<CreateOk, BackendError>> + Send;
    fn append(&self, cmd: AppendStream) -> impl Future<Output = Result<AppendOk, BackendError>> + Send;
    fn delete(&self, cmd: DeleteStream) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn publish_snapshot(&self, cmd: PublishSnapshot) -> impl Future<Output = Result<SnapshotOk, BackendError>> + Send;
    fn advance_retention(&self, cmd: AdvanceRetention)
    -> impl Future<Output = Result<StreamInfo, BackendError>> + Send;
    fn head(&self, key: StreamKey) -> impl Future<Output = Result<StreamInfo, BackendError>> + Send;
    /// A catch-up read; it renews a sliding TTL as the state machine asks.
    fn read(&self, req: ReadStream) -> impl Future<Output = Result<ReadView, BackendError>> + Send;
    /// `read`, whose answer may start before all of its bytes are here (a
    /// gateway's read, as its voter sends it): the view with the chunks
    /// that have arrived, and the rest as it comes. Only a stream whose
    /// answer is its bytes as they are (not JSON) comes in a rest.
    fn read_streamed(
        &self,
        req: ReadStream,
    ) -> impl Future<Output = Result<(ReadView, Option<ReadRest>), BackendError>> + Send {
        async move { Ok((self.read(req).await?, None)) }
    }
    fn snapshot(&self, req: ReadSnapshot) -> impl Future<Output = Result<SnapshotView, BackendError>> + Send;
    fn bootstrap(&self, req: ReadBootstrap) -> impl Future<Output = Result<BootstrapView, BackendError>> + Send;
    fn wait(&self, req: WaitStream) -> impl Future<Output = Result<WaitOutcome, BackendError>> + Send;
    /// Confirms, on the leader of `key`'s group, that it still leads and has
    /// applied everything committed (Raft ReadIndex), so a read served next
    /// is linearizable. A single node has nothing to confirm.
    fn linearize(&self, key: &StreamKey) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// Brings the serving replica of `key`'s group up to what a
    /// quorum-confirmed leader read would see, so a follower can mark
    /// `Stream-Up-To-Date` or refuse a cursor with `416` truthfully.
    fn confirm_tail(&self, key: &StreamKey) -> impl Future<Output = Result<(), BackendError>> + Send;
    /// Where a write (or a read that must see the leader) of `key` goes.
    fn leader_route(&self, key: &StreamKey) -> WriteRoute;
}

/// Snapshot upload in parts (spec/30): a capability of a backend with a
/// cold store, which `Backend::parts` offers or not.
pub trait SnapshotParts: Send + Sync + 'static {
    /// The largest snapshot taken in parts (`Ursula-Max-Snapshot-Bytes`).
    fn max_snapshot_bytes(&self) -> u64;
    /// Refuses a part past the stream's staged-parts bounds before its body
    /// is read (`declared`: its `Content-Length`, or the request limit).
    fn admit_part(&self, req: PartAdmission) -> impl Future<Output = Result<(), BackendError>> + Send;
    fn stage_part(&self, part: StagedPart) -> impl Future<Output = Result<PartStaged, BackendError>> + Send;
    /// Publishes the snapshot assembled from staged parts, in order.
    fn commit_parts(&self, commit: PartsCommit) -> impl Future<Output = Result<SnapshotOk, BackendError>> + Send;
    /// Deletes every staged part of the stream's current incarnation.
    fn discard_parts(&self, req: PartsDiscard) -> impl Future<Output = Result<StreamInfo, BackendError>> + Send;
}

/// What operators read: `/__ursula/metrics` and `/__ursula/ready`.
pub trait Operations: Send + Sync + 'static {
    fn metrics(&self) -> impl Future<Output = Metrics> + Send;
    fn readiness(&self) -> Readiness;
    /// `/__ursula/usage` (spec/35 "Usage export"): a voter's committed
    /// usage from its replicated state; `None` where there is none (a
    /// gateway, which holds no streams).
    fn usage(&self) -> impl Future<Output = Option<serde_json::Value>> + Send;
}

/// Everything the HTTP layer needs from whatever holds the streams.
pub trait Backend: Streams + Operations {
    type Parts: SnapshotParts;
    /// Snapshot upload in parts, when this backend has a cold store.
    fn parts(&self) -> Option<&Self::Parts>;
}
