//! The stream state machine of Ursula: pure and deterministic, no I/O, no
//! clock, no async. Time and log position come in with each command
//! (`ApplyCtx`), so a replicated log gives the same state on every replica.
//!
//! Module map:
//! - `ids`, `offset`, `content_type`, `stream_seq`, `lifetime`: validated
//!   protocol values.
//! - `json_text`: the JSON Message Text rule (validate, strip, flatten).
//! - `producer`: idempotent producer state and decisions.
//! - `incarnation`, `snapshot`: stream tokens and application snapshots.
//! - `command`, `outcome`: what goes in and what comes out.
//! - `error_code`: the protocol's error codes, spelled once.
//! - `boundary`: where a read may stop.
//! - `data`: a stream's bytes as shared chunks.
//! - `cold`: references into the cold tier, and cutting fetched cold bytes.
//! - `fork`: forks, a stream's history shared by reference.
//! - `store`: the streams of one group and `apply`.
//! - `routing`: which group owns a stream; the voters and the gateway both
//!   take it from here, so they cannot drift apart.

pub mod backup;
pub mod boundary;
pub mod cold;
pub mod command;
pub mod content_type;
pub mod data;
pub mod error_code;
pub mod fork;
pub mod ids;
pub mod incarnation;
pub mod json_text;
pub mod lifetime;
pub mod offset;
pub mod outcome;
pub mod producer;
pub mod routing;
pub mod snapshot;
pub mod store;
pub mod stream_seq;
pub mod usage;

pub use boundary::Boundary;
pub use cold::{ColdCut, ColdMove, ColdPiece, ColdSlice, ColdSpan, CommitCold, CompactCold};
pub use command::{
    AcceptLoss, AdvanceRetention, AppendStream, ApplyCtx, Body, Command, CreateStream, DeleteStream, ExpireStreams,
    ImportGroup, PublishSnapshot, PurgeBucket, RenewStream,
};
pub use content_type::ContentType;
pub use error_code::ErrorCode;
pub use fork::{
    CreateFork, ForkBase, ForkLinks, ForkPrefix, ForkRef, ForkStep, ReferenceSource, ReleaseSource, SourceReferenced,
};
pub use ids::{BucketId, IdError, StreamId, StreamKey};
pub use incarnation::Incarnation;
pub use lifetime::Lifetime;
pub use offset::{Offset, ReadFrom};
pub use outcome::{
    AppendKind, AppendOk, BootstrapView, CreateOk, Inherited, ProducerAck, ReadView, Rejection, SnapshotOk,
    SnapshotView, StreamInfo,
};
pub use producer::{ProducerHeaders, Receipt};
pub use snapshot::{ColdBody, Snapshot, SnapshotDigest, SnapshotMeta};
pub use store::{Imported, Outcome, ReadQuery, StreamStore};
pub use stream_seq::StreamSeq;
