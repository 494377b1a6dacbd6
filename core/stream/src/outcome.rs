//! What applying a command or answering a query produced. Refusals are
//! values (`Rejection`), not errors: they are deterministic results that a
//! replicated log reproduces on every replica.

use crate::ErrorCode;
use crate::content_type::ContentType;
use crate::incarnation::Incarnation;
use crate::json_text::JsonTextError;
use crate::lifetime::Lifetime;
use crate::offset::Offset;
use crate::producer::{ClosedEpoch, Receipt};
use crate::snapshot::{Snapshot, SnapshotMeta};
use crate::stream_seq::StreamSeq;

/// The stream-level facts most answers carry.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Changes when the stream is recreated at the same key.
    pub incarnation: Incarnation,
    pub content_type: ContentType,
    pub lifetime: Lifetime,
    pub tail: Offset,
    pub closed: bool,
    /// The earliest readable offset.
    pub retained: Offset,
    pub snapshot: Option<SnapshotMeta>,
    /// What survived the stream's last history rewrite (extensions §2.4);
    /// only `HEAD` reports it.
    pub previous: Option<Inherited>,
}

/// `Stream-Previous-Incarnation` and `Stream-Inherited-Offset`: the bytes
/// below `offset` are the ones served under `incarnation`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inherited {
    pub incarnation: Incarnation,
    pub offset: Offset,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct CreateOk {
    /// `false` when an identical stream already existed.
    pub created: bool,
    pub info: StreamInfo,
}

/// How an append was answered.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendKind {
    /// New bytes (or a new close) applied now.
    Applied,
    /// A close-only request on a stream that was already closed.
    AlreadyClosed,
    /// A producer write that applied earlier.
    Duplicate,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProducerAck {
    pub epoch: u64,
    /// The epoch's highest applied seq.
    pub highest_seq: u64,
    /// Set on a claim (and its repeats) that closed an earlier epoch.
    pub closed_epoch: Option<ClosedEpoch>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct AppendOk {
    pub kind: AppendKind,
    /// The write's own range; `None` for a repeat of an older producer write.
    pub receipt: Option<Receipt>,
    pub producer: Option<ProducerAck>,
    pub info: StreamInfo,
}

/// A deterministic refusal, with the context its answer needs.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    StreamNotFound,
    /// No stream was ever created in the bucket, in any group (extensions
    /// §11): the node decides it across its groups when one of them has no
    /// such stream.
    BucketNotFound,
    StreamExistsConflict,
    StreamClosed {
        tail: Offset,
    },
    ContentTypeMismatch,
    MissingContentType,
    EmptyAppend,
    EmptyJsonArray,
    InvalidJson(JsonTextError),
    StreamSeqConflict {
        last: StreamSeq,
        tail: Offset,
    },
    ProducerStaleEpoch {
        current: u64,
        closed_by_claim: Option<ClosedEpoch>,
    },
    ProducerEpochNotClaimed,
    ProducerSeqGap {
        expected: u64,
        received: u64,
    },
    ProducerKeyConflict {
        current: u64,
    },
    ProducerDigestMismatch,
    /// A write with `Stream-Incarnation` that could reach a forgotten epoch.
    ProducerExpired {
        floor: u64,
    },
    /// The stream holds as many producers as it may, none idle enough to evict.
    ProducerLimit,
    /// `Stream-Incarnation` named another incarnation (or none exists).
    IncarnationMismatch {
        current: Option<Incarnation>,
    },
    /// The stream was deleted while forks reference it (`410`).
    StreamSoftDeleted,
    /// A fork's source does not exist (`404`).
    ForkSourceNotFound,
    /// A fork's source was deleted while forks reference it (`409`).
    ForkSourceDeleted,
    /// A fork request the source cannot satisfy (`400`): its offset or
    /// sub-offset beyond the source's data, or a source in another bucket.
    InvalidFork(ForkFault),
    /// A read below the retained offset.
    StreamGone {
        retained: Offset,
        incarnation: Incarnation,
    },
    /// A read beyond the tail.
    OffsetBeyondTail {
        tail: Offset,
        incarnation: Incarnation,
    },
    /// No snapshot at that offset is the latest one.
    SnapshotNotFound {
        incarnation: Incarnation,
    },
    /// Another snapshot is the latest: newer, or different at the same offset.
    SnapshotConflict {
        latest: SnapshotMeta,
    },
    /// A snapshot offset beyond the tail.
    SnapshotBeyondTail,
    /// On a JSON stream, an offset inside a message.
    NotJsonBoundary,
    /// The offset lies inside bytes already in the cold tier: the state
    /// machine cannot tell whether a JSON message ends there.
    JsonBoundaryUnverified,
    /// A retention boundary beyond the tail or newer than the latest snapshot.
    InvalidRetention,
    /// A create whose `Stream-Expires-At` is not after the time it applies
    /// at: the stream would be born expired.
    ExpiryNotInFuture,
    /// The bucket was purged: its namespace is fenced for good (spec/35).
    BucketErased,
    /// A write of an epoch a history rewrite closed (extensions §5.3):
    /// every seq up to `seq` survived, no later one ever applies.
    ProducerClosedByHistory {
        closed: ClosedEpoch,
    },
    /// A restore's import into a group that already holds data.
    ImportConflict,
}

impl Rejection {
    /// The incarnation a read refusal was decided against, so a live read
    /// can tell "its" stream's refusal from a replacement's.
    pub fn read_incarnation(&self) -> Option<Incarnation> {
        match self {
            Rejection::StreamGone { incarnation, .. }
            | Rejection::OffsetBeyondTail { incarnation, .. }
            | Rejection::SnapshotNotFound { incarnation } => Some(*incarnation),
            _ => None,
        }
    }
}

/// The stable error code of each refusal (extensions §11).
impl Rejection {
    pub fn code(&self) -> ErrorCode {
        match self {
            Rejection::StreamNotFound => ErrorCode::StreamNotFound,
            Rejection::BucketNotFound => ErrorCode::BucketNotFound,
            Rejection::BucketErased => ErrorCode::BucketErased,
            Rejection::StreamExistsConflict => ErrorCode::StreamAlreadyExistsConflict,
            Rejection::StreamClosed { .. } => ErrorCode::StreamClosed,
            Rejection::ContentTypeMismatch => ErrorCode::ContentTypeMismatch,
            Rejection::MissingContentType => ErrorCode::MissingContentType,
            Rejection::EmptyAppend | Rejection::EmptyJsonArray => ErrorCode::EmptyAppend,
            Rejection::InvalidJson(_) => ErrorCode::InvalidRequest,
            Rejection::StreamSeqConflict { .. } => ErrorCode::StreamSeqConflict,
            Rejection::ProducerStaleEpoch { closed_by_claim: Some(_), .. } => ErrorCode::ProducerEpochClosed,
            Rejection::ProducerStaleEpoch { .. } => ErrorCode::ProducerEpochStale,
            Rejection::ProducerEpochNotClaimed => ErrorCode::InvalidProducer,
            Rejection::ProducerSeqGap { .. } => ErrorCode::ProducerSeqConflict,
            Rejection::ProducerKeyConflict { .. } => ErrorCode::ProducerKeyConflict,
            Rejection::ProducerDigestMismatch => ErrorCode::ProducerDigestMismatch,
            Rejection::ProducerExpired { .. } => ErrorCode::ProducerExpired,
            Rejection::ProducerLimit => ErrorCode::ProducerLimit,
            Rejection::IncarnationMismatch { .. } => ErrorCode::IncarnationMismatch,
            Rejection::StreamGone { .. } => ErrorCode::StreamGone,
            Rejection::StreamSoftDeleted => ErrorCode::StreamDeleted,
            Rejection::ForkSourceNotFound => ErrorCode::StreamNotFound,
            Rejection::ForkSourceDeleted => ErrorCode::StreamDeleted,
            Rejection::InvalidFork(_) => ErrorCode::InvalidFork,
            Rejection::OffsetBeyondTail { .. } => ErrorCode::OffsetOutOfRange,
            Rejection::SnapshotNotFound { .. } => ErrorCode::SnapshotNotFound,
            Rejection::SnapshotConflict { .. } | Rejection::SnapshotBeyondTail => ErrorCode::SnapshotConflict,
            Rejection::NotJsonBoundary => ErrorCode::NotJsonBoundary,
            Rejection::JsonBoundaryUnverified => ErrorCode::JsonBoundaryUnverified,
            Rejection::InvalidRetention => ErrorCode::InvalidRetention,
            Rejection::ExpiryNotInFuture => ErrorCode::InvalidHeader,
            Rejection::ProducerClosedByHistory { .. } => ErrorCode::ProducerEpochClosed,
            Rejection::ImportConflict => ErrorCode::ImportConflict,
        }
    }
}

/// A published (or repeated) snapshot.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOk {
    pub snapshot: SnapshotMeta,
    pub info: StreamInfo,
}

/// The latest snapshot, body included, with the stream it belongs to.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SnapshotView {
    pub snapshot: Snapshot,
    pub info: StreamInfo,
}

/// A `/bootstrap` answer: the snapshot, then the updates `[start, next)`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BootstrapView {
    pub info: StreamInfo,
    pub snapshot: Option<Snapshot>,
    /// The snapshot point: the snapshot's offset, else the retained offset.
    pub start: Offset,
    pub next: Offset,
    pub updates: Vec<bytes::Bytes>,
    /// Updates still in the cold tier, before `updates`; the shell fetches
    /// them (and cuts at `cold_cut`) before anyone sees the view.
    pub cold: Vec<crate::cold::ColdSlice>,
    pub cold_cut: Option<crate::cold::ColdCut>,
    /// On a fork, the updates' source part and the read that takes it: the
    /// shell reads it and puts it before `cold` and `updates`.
    pub prefix: Option<(crate::fork::ForkPrefix, crate::store::ReadQuery)>,
}

/// A catch-up read's answer: the bytes of `[start, next)`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ReadView {
    pub info: StreamInfo,
    pub start: Offset,
    pub next: Offset,
    pub chunks: Vec<bytes::Bytes>,
    /// Bytes still in the cold tier, before `chunks`; the shell fetches
    /// them (and cuts at `cold_cut`) before anyone sees the view.
    pub cold: Vec<crate::cold::ColdSlice>,
    pub cold_cut: Option<crate::cold::ColdCut>,
    /// The cold spans a sequential reader takes next (`ReadPlan::ahead`),
    /// for the shell to fetch ahead; never sent on the wire.
    #[serde(skip)]
    pub cold_ahead: Vec<crate::cold::ColdSpan>,
    /// `next` is the tail.
    pub up_to_date: bool,
    /// The stream is closed and `next` is its final offset.
    pub closed_at_end: bool,
    /// The read should renew the stream's sliding TTL.
    pub wants_renewal: bool,
    /// On a fork, the bytes from `start` that are its source's: the shell
    /// reads them and puts them before `cold` and `chunks`.
    pub prefix: Option<crate::fork::ForkPrefix>,
}

impl ReadView {
    pub fn len(&self) -> u64 {
        self.next.bytes().saturating_sub(self.start.bytes())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a fork request cannot be satisfied (`400`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkFault {
    OffsetBeyondTail,
    SubOffsetBeyondAppend,
    OtherBucket,
}

impl ForkFault {
    pub fn message(self) -> &'static str {
        match self {
            ForkFault::OffsetBeyondTail => "the fork offset is beyond the source's tail",
            ForkFault::SubOffsetBeyondAppend => "the fork sub-offset is beyond the append at the fork offset",
            ForkFault::OtherBucket => "a fork and its source must be in the same bucket",
        }
    }
}
