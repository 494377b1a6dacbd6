//! Forks (upstream Durable Streams, "Stream forking"): a stream whose
//! history up to an offset is another stream's, shared by reference.
//!
//! A fork is created in two steps, one in each stream's group:
//! `ReferenceSource` in the source's group checks the source and records a
//! reference; `CreateFork` in the fork's group creates the fork on it. The
//! shell releases the reference (`ReleaseSource`) when the create did not
//! take it, and when the fork goes. A source deleted or expired while
//! referenced is kept, soft-deleted, until its last fork goes (docs/forks.md).

use std::collections::BTreeMap;

use crate::command::CreateStream;
use crate::content_type::ContentType;
use crate::ids::StreamKey;
use crate::incarnation::Incarnation;
use crate::lifetime::Lifetime;
use crate::offset::Offset;

/// Where a fork's first bytes are: the source's below `offset`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ForkBase {
    pub source: StreamKey,
    /// The source's incarnation when the fork was taken.
    pub incarnation: Incarnation,
    /// The fork point: the fork's own bytes start here.
    pub offset: Offset,
    /// The source group's log index that took the reference: its id on the
    /// source, and the index a replica of that group must have applied to
    /// hold every byte below `offset`.
    pub reference: u64,
}

/// A reference a fork's create took on its source.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ForkRef {
    pub fork: StreamKey,
    /// When it was taken: a reference older than any create can take whose
    /// fork does not hold it was left by a create or release that failed.
    pub taken_ms: u64,
}

/// A stream's part in forks: the base it was forked from, and the forks
/// that reference it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct ForkLinks {
    pub base: Option<ForkBase>,
    /// Live references by id (`ForkBase::reference`).
    pub forks: BTreeMap<u64, ForkRef>,
    /// Deleted while referenced: kept for its forks, refused to clients.
    pub soft_deleted: bool,
}

impl ForkLinks {
    pub fn is_empty(&self) -> bool {
        self.base.is_none() && self.forks.is_empty() && !self.soft_deleted
    }
}

/// `PUT` with `Stream-Forked-From`, first step, applied in the source's group.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct ReferenceSource {
    pub source: StreamKey,
    pub fork: StreamKey,
    /// `Stream-Fork-Offset`; the source's tail when absent.
    pub offset: Option<Offset>,
    /// `Stream-Fork-Sub-Offset`: bytes (or JSON messages) of the append
    /// that starts at the fork offset, taken too.
    pub sub_offset: u64,
    /// The fork request's content type, when it sent one.
    pub content_type: Option<ContentType>,
}

/// What the source gave a fork: its reference and what the fork inherits.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SourceReferenced {
    pub base: ForkBase,
    pub content_type: ContentType,
    /// The source's lifetime as created, for a fork that names none.
    pub lifetime: Lifetime,
    /// The source's expiry, for a fork of a stream with `Stream-Expires-At`.
    pub deadline_ms: Option<u64>,
}

impl SourceReferenced {
    /// The fork's lifetime: its own when it asked for one; else the source's
    /// TTL as a fresh window of its own, or the source's fixed expiry.
    pub fn inherited_lifetime(&self, asked: Option<Lifetime>) -> Lifetime {
        match asked {
            Some(own) => own,
            None => match (&self.lifetime, self.deadline_ms) {
                (Lifetime::ExpiresAt { .. }, Some(at_ms)) => Lifetime::ExpiresAt { at_ms },
                (other, _) => other.clone(),
            },
        }
    }
}

/// `PUT` with `Stream-Forked-From`, second step, applied in the fork's group.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct CreateFork {
    pub create: CreateStream,
    pub base: ForkBase,
    /// Whether the request named the fork point (`Stream-Fork-Offset`): a
    /// repeat that did not matches any fork point of the same source.
    pub offset_named: bool,
}

/// Drops a reference a fork held, or one its create did not take.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct ReleaseSource {
    pub source: StreamKey,
    pub reference: u64,
}

/// The part of a fork's read that is its source's: the shell reads it from
/// the source's group (`StreamStore::read_fork_prefix`) and puts it before
/// the fork's own bytes.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ForkPrefix {
    pub source: StreamKey,
    pub incarnation: Incarnation,
    pub from: Offset,
    /// The fork point.
    pub to: Offset,
    /// The source group's log index a replica must have applied.
    pub reference: u64,
}

/// A fork step's outcome in a source's group, as its leader answers a node
/// that forwarded the step.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum ForkStep {
    Referenced(Result<SourceReferenced, crate::outcome::Rejection>),
    Released(Option<ForkBase>),
}

impl ForkStep {
    /// The step an outcome is; `None` for the outcome of another command.
    pub fn from_outcome(outcome: crate::store::Outcome) -> Option<ForkStep> {
        match outcome {
            crate::store::Outcome::ReferenceSource(r) => Some(ForkStep::Referenced(r)),
            crate::store::Outcome::ReleaseSource { released } => Some(ForkStep::Released(released)),
            _ => None,
        }
    }
}
