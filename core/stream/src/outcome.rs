//! What applying a command or answering a query produced. Refusals are
//! values (`Rejection`), not errors: they are deterministic results that a
//! replicated log reproduces on every replica.

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
    /// A commit of parts named a part that is not staged for this stream
    /// incarnation.
    UnknownPart,
    /// A commit of parts whose manifest does not match `Stream-Snapshot-Parts`.
    InvalidPartsCommit,
    /// The assembled snapshot's digest differs from `Stream-Snapshot-Digest`.
    SnapshotDigestMismatch,
    /// The assembled snapshot is above `Ursula-Max-Snapshot-Bytes`.
    SnapshotTooLarge {
        limit: u64,
    },
    /// The offset lies inside bytes already in the cold tier: the state
    /// machine cannot tell whether a JSON message ends there.
    JsonBoundaryUnverified,
    /// A retention boundary beyond the tail or newer than the latest snapshot.
    InvalidRetention,
    /// The stream holds as many unused staged parts as it may (`bytes`:
    /// the byte bound); `limit` is the bound it met.
    StagedPartsLimit {
        incarnation: Incarnation,
        bytes: bool,
        limit: u64,
    },
    /// Every commit copy slot of the node is taken.
    SnapshotCommitsBusy,
    /// A commit of this stream incarnation runs now.
    SnapshotCommitInProgress,
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
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::StreamNotFound => "STREAM_NOT_FOUND",
            Rejection::StreamExistsConflict => "STREAM_ALREADY_EXISTS_CONFLICT",
            Rejection::StreamClosed { .. } => "STREAM_CLOSED",
            Rejection::ContentTypeMismatch => "CONTENT_TYPE_MISMATCH",
            Rejection::MissingContentType => "MISSING_CONTENT_TYPE",
            Rejection::EmptyAppend | Rejection::EmptyJsonArray => "EMPTY_APPEND",
            Rejection::InvalidJson(_) => "INVALID_REQUEST",
            Rejection::StreamSeqConflict { .. } => "STREAM_SEQ_CONFLICT",
            Rejection::ProducerStaleEpoch { closed_by_claim: Some(_), .. } => "PRODUCER_EPOCH_CLOSED",
            Rejection::ProducerStaleEpoch { .. } => "PRODUCER_EPOCH_STALE",
            Rejection::ProducerEpochNotClaimed => "INVALID_PRODUCER",
            Rejection::ProducerSeqGap { .. } => "PRODUCER_SEQ_CONFLICT",
            Rejection::ProducerKeyConflict { .. } => "PRODUCER_KEY_CONFLICT",
            Rejection::ProducerDigestMismatch => "PRODUCER_DIGEST_MISMATCH",
            Rejection::ProducerExpired { .. } => "PRODUCER_EXPIRED",
            Rejection::ProducerLimit => "PRODUCER_LIMIT",
            Rejection::IncarnationMismatch { .. } => "INCARNATION_MISMATCH",
            Rejection::StreamGone { .. } => "STREAM_GONE",
            Rejection::OffsetBeyondTail { .. } => "OFFSET_OUT_OF_RANGE",
            Rejection::SnapshotNotFound { .. } => "SNAPSHOT_NOT_FOUND",
            Rejection::SnapshotConflict { .. } | Rejection::SnapshotBeyondTail => "SNAPSHOT_CONFLICT",
            Rejection::NotJsonBoundary => "NOT_JSON_BOUNDARY",
            Rejection::JsonBoundaryUnverified => "JSON_BOUNDARY_UNVERIFIED",
            Rejection::UnknownPart => "UNKNOWN_PART",
            Rejection::InvalidPartsCommit => "INVALID_PARTS_COMMIT",
            Rejection::SnapshotDigestMismatch => "SNAPSHOT_DIGEST_MISMATCH",
            Rejection::SnapshotTooLarge { .. } => "REQUEST_TOO_LARGE",
            Rejection::InvalidRetention => "INVALID_RETENTION",
            Rejection::StagedPartsLimit { .. } => "STAGED_PARTS_LIMIT",
            Rejection::SnapshotCommitsBusy => "SNAPSHOT_COMMITS_BUSY",
            Rejection::SnapshotCommitInProgress => "SNAPSHOT_COMMIT_IN_PROGRESS",
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
    /// `next` is the tail.
    pub up_to_date: bool,
    /// The stream is closed and `next` is its final offset.
    pub closed_at_end: bool,
    /// The read should renew the stream's sliding TTL.
    pub wants_renewal: bool,
}

impl ReadView {
    pub fn len(&self) -> u64 {
        self.next.bytes().saturating_sub(self.start.bytes())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
