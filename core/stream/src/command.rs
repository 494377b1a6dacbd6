//! Commands: the writes the state machine applies, each stamped by the
//! proposer with the time and log position it applies at.

use bytes::Bytes;

use crate::content_type::ContentType;
use crate::ids::StreamKey;
use crate::incarnation::Incarnation;
use crate::json_text::{self, JsonTextError};
use crate::lifetime::Lifetime;
use crate::offset::Offset;
use crate::producer::ProducerHeaders;
use crate::snapshot::SnapshotDigest;
use crate::stream_seq::StreamSeq;

/// What the proposer stamps on every command: time never comes from a clock
/// inside the state machine, so every replica applies the same log the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyCtx {
    /// Milliseconds since the Unix epoch, as the proposer read its clock.
    pub now_ms: u64,
    /// Position of the command in its group's log; unique and increasing.
    pub log_index: u64,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub enum Command {
    Create(CreateStream),
    Append(AppendStream),
    Delete(DeleteStream),
    PublishSnapshot(PublishSnapshot),
    AdvanceRetention(AdvanceRetention),
    Renew(RenewStream),
    /// Removes every stream whose lifetime ended (before `ExpireStreams`;
    /// kept so that logs that hold it still apply).
    Sweep,
    /// Publishes ranges uploaded to the cold tier and drops them from memory.
    CommitCold(crate::cold::CommitCold),
    /// Removes every stream of a bucket and fences the bucket for good
    /// (spec/35 "Tenant offboarding").
    PurgeBucket(PurgeBucket),
    /// Replaces an empty group's state with a backup's, as a new history
    /// (spec/35 "Backup and disaster recovery").
    Import(ImportGroup),
    /// A fork's first step, in its source's group (`fork`).
    ReferenceSource(crate::fork::ReferenceSource),
    /// A fork's second step, in its own group.
    CreateFork(crate::fork::CreateFork),
    /// Drops a fork's reference on its source.
    ReleaseSource(crate::fork::ReleaseSource),
    /// Removes up to `max` streams that expired a second or more before
    /// the proposer's clock, earliest expiry first (spec/35 "Deleted data").
    ExpireStreams(ExpireStreams),
    /// An operator accepted the loss of acknowledged writes after a crash
    /// (spec/35 "Recovering after a host crash"): the group starts a new
    /// history in place, the first entry its recovery plan's leader commits.
    AcceptLoss(AcceptLoss),
    /// Moves a stream's cold spans into one compacted object (last: the
    /// variants before keep their positions in logs written earlier).
    CompactCold(crate::cold::CompactCold),
}

/// `POST /__ursula/raft/{group}/recovery/accept-unsynced-loss`: the history event.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLoss {
    /// The history the group starts, derived from the plan by its leader.
    pub history_id: u64,
    /// The term the plan's leader proposed it in: above the plan term, so a
    /// replica that holds the plan knows the event of a leader elected under it.
    pub term: u64,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpireStreams {
    pub max: u32,
}

/// `POST /__ursula/backup/group/{group}/import`, one replicated write.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct ImportGroup {
    pub store: Box<crate::store::StreamStore>,
    /// BLAKE3 of the backup object: a repeat of an applied import is known by it.
    pub digest: [u8; 32],
    /// The history the group starts; the proposer derives it from the digest,
    /// so every attempt at one restore starts the same one.
    pub history_id: u64,
}

/// `DELETE /__ursula/purge/{bucket}`, one group's part.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct PurgeBucket {
    pub bucket: crate::ids::BucketId,
}

/// `PUT /{bucket}/{stream}`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct CreateStream {
    pub key: StreamKey,
    pub content_type: ContentType,
    pub lifetime: Lifetime,
    pub closed: bool,
    pub stream_seq: Option<StreamSeq>,
    pub body: Body,
    /// `Stream-Incarnation` precondition.
    pub expect: Option<Incarnation>,
}

/// `POST /{bucket}/{stream}`: an append, a close, or both.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct AppendStream {
    pub key: StreamKey,
    /// The request's content type, when it sent one.
    pub content_type: Option<ContentType>,
    pub body: Body,
    pub close: bool,
    pub stream_seq: Option<StreamSeq>,
    pub producer: Option<ProducerHeaders>,
    /// `Stream-Incarnation` precondition, compared when the write applies.
    pub expect: Option<Incarnation>,
}

/// `DELETE /{bucket}/{stream}`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct DeleteStream {
    pub key: StreamKey,
    pub expect: Option<Incarnation>,
}

/// `PUT /{bucket}/{stream}/snapshot/{offset}` (extensions §2.2). The
/// proposer computes the digest once.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct PublishSnapshot {
    pub key: StreamKey,
    pub offset: Offset,
    pub content_type: ContentType,
    pub body: Bytes,
    pub digest: SnapshotDigest,
    pub expect: Option<Incarnation>,
    /// The body already stored in the cold tier (then `body` is empty).
    pub cold: Option<crate::snapshot::ColdBody>,
}

/// `PUT /{bucket}/{stream}/retention/{offset}` (extensions §2.2, Retention Effect).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct AdvanceRetention {
    pub key: StreamKey,
    pub offset: Offset,
    pub expect: Option<Incarnation>,
}

/// A read's renewal of a sliding TTL; applies only to the incarnation read.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct RenewStream {
    pub key: StreamKey,
    pub incarnation: Incarnation,
}

/// A request body, prepared before it is proposed: a JSON body is validated
/// and normalized once by the proposer, so applying it is a copy.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub enum Body {
    Empty,
    Bytes(Bytes),
    Json(Result<JsonBatch, JsonTextError>),
}

/// The normalized messages of a JSON body (JSON Message Text rule).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct JsonBatch {
    /// Each message's stored text followed by one LF.
    pub text: Bytes,
    pub count: usize,
}

impl Body {
    /// Prepares a raw body sent with `content_type`.
    pub fn prepare(content_type: Option<&ContentType>, raw: Bytes) -> Body {
        if raw.is_empty() {
            return Body::Empty;
        }
        match content_type {
            Some(ct) if ct.is_json() => Body::Json(
                json_text::normalize_body(&raw).map(|m| JsonBatch { text: Bytes::from(m.text), count: m.count }),
            ),
            _ => Body::Bytes(raw),
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Body::Empty)
    }

    /// Bytes the body adds to a stream (0 when empty or refused).
    pub fn len(&self) -> usize {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len(),
            Body::Json(Ok(batch)) => batch.text.len(),
            Body::Json(Err(_)) => 0,
        }
    }

    /// The stored bytes, which a log may point at its own copy of them.
    fn bytes_mut(&mut self) -> Option<&mut Bytes> {
        match self {
            Body::Bytes(b) => Some(b),
            Body::Json(Ok(batch)) => Some(&mut batch.text),
            Body::Empty | Body::Json(Err(_)) => None,
        }
    }
}

impl Command {
    /// The bytes this command carries to every replica (a body or a
    /// snapshot): a Raft log that encoded them points them at its record,
    /// so one copy serves the log, its peers and the stream.
    pub fn payload_mut(&mut self) -> Option<&mut Bytes> {
        match self {
            Command::Create(c) => c.body.bytes_mut(),
            Command::Append(a) => a.body.bytes_mut(),
            Command::PublishSnapshot(p) => Some(&mut p.body),
            _ => None,
        }
    }
}
