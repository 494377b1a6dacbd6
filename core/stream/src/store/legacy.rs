//! Stores as older snapshot formats wrote them, and their upgrades.

use std::collections::BTreeMap;

use super::{StreamState, StreamStore, Writers};
use crate::content_type::ContentType;
use crate::data::StreamData;
use crate::ids::{BucketId, StreamId};
use crate::incarnation::Incarnation;
use crate::lifetime::LifetimeClock;
use crate::offset::Offset;
use crate::snapshot::Snapshot;
use crate::usage::CommittedUsage;

/// A stream as snapshot formats 1 to 4 wrote it, before forks existed.
#[derive(serde::Deserialize)]
pub struct StreamWithoutForks {
    incarnation: Incarnation,
    content_type: ContentType,
    clock: LifetimeClock,
    closed: bool,
    data: StreamData,
    writers: Option<Box<Writers>>,
    snapshot: Option<Box<Snapshot>>,
    retained: Offset,
}

pub type OldStreams = BTreeMap<BucketId, BTreeMap<StreamId, StreamWithoutForks>>;

fn upgrade(old: OldStreams) -> BTreeMap<BucketId, super::Streams> {
    let stream = |s: StreamWithoutForks| {
        Box::new(StreamState {
            incarnation: s.incarnation,
            content_type: s.content_type,
            clock: s.clock,
            closed: s.closed,
            data: s.data,
            writers: s.writers,
            snapshot: s.snapshot,
            retained: s.retained,
            fork: None,
        })
    };
    old.into_iter()
        .map(|(bucket, streams)| (bucket, streams.into_iter().map(|(id, s)| (id, stream(s))).collect()))
        .collect()
}

/// A store as snapshot formats 4 and 5 wrote it, before accepted losses
/// existed: format 4 (`S = OldStreams`) also before forks.
#[derive(serde::Deserialize)]
pub struct StoreBeforeHistoryEvents<S> {
    history_id: u64,
    streams: S,
    usage: BTreeMap<BucketId, CommittedUsage>,
    write_unit_bytes: u64,
    erased: std::collections::BTreeSet<BucketId>,
    rewrites: BTreeMap<BucketId, BTreeMap<StreamId, super::Rewrite>>,
    imported: Option<[u8; 32]>,
}

/// Format 5: every stream as this build keeps it.
pub type StoreWithoutHistoryEvent = StoreBeforeHistoryEvents<BTreeMap<BucketId, super::Streams>>;
/// Format 4: streams without fork links.
pub type StoreWithoutForks = StoreBeforeHistoryEvents<OldStreams>;

/// The streams of an older store, as this build keeps them.
pub trait IntoStreams {
    fn into_streams(self) -> BTreeMap<BucketId, super::Streams>;
}

impl IntoStreams for BTreeMap<BucketId, super::Streams> {
    fn into_streams(self) -> BTreeMap<BucketId, super::Streams> {
        self
    }
}

impl IntoStreams for OldStreams {
    fn into_streams(self) -> BTreeMap<BucketId, super::Streams> {
        upgrade(self)
    }
}

impl<S: IntoStreams> From<StoreBeforeHistoryEvents<S>> for StreamStore {
    fn from(old: StoreBeforeHistoryEvents<S>) -> StreamStore {
        StreamStore {
            history_id: old.history_id,
            streams: old.streams.into_streams(),
            usage: old.usage,
            write_unit_bytes: old.write_unit_bytes,
            erased: old.erased,
            rewrites: old.rewrites,
            imported: old.imported,
            history_event: None,
        }
    }
}

/// A store as snapshot format 3 wrote it, before history rewrites existed.
#[derive(serde::Deserialize)]
pub struct StoreWithoutRewrites {
    history_id: u64,
    streams: OldStreams,
    usage: BTreeMap<BucketId, CommittedUsage>,
    write_unit_bytes: u64,
    erased: std::collections::BTreeSet<BucketId>,
}

impl From<StoreWithoutRewrites> for StreamStore {
    fn from(old: StoreWithoutRewrites) -> StreamStore {
        StreamStore {
            history_id: old.history_id,
            streams: upgrade(old.streams),
            usage: old.usage,
            write_unit_bytes: old.write_unit_bytes,
            erased: old.erased,
            ..StreamStore::new(0)
        }
    }
}

/// A store as snapshot format 2 wrote it, before purge fences existed.
#[derive(serde::Deserialize)]
pub struct StoreWithoutFences {
    history_id: u64,
    streams: OldStreams,
    usage: BTreeMap<BucketId, CommittedUsage>,
    write_unit_bytes: u64,
}

impl From<StoreWithoutFences> for StreamStore {
    fn from(old: StoreWithoutFences) -> StreamStore {
        StreamStore {
            history_id: old.history_id,
            streams: upgrade(old.streams),
            usage: old.usage,
            write_unit_bytes: old.write_unit_bytes,
            ..StreamStore::new(0)
        }
    }
}

/// A store as snapshots wrote it before committed usage existed.
#[derive(serde::Deserialize)]
pub struct LegacyStreamStore {
    history_id: u64,
    streams: OldStreams,
}

impl From<LegacyStreamStore> for StreamStore {
    /// Its usage counters start at zero.
    fn from(legacy: LegacyStreamStore) -> StreamStore {
        StreamStore { history_id: legacy.history_id, streams: upgrade(legacy.streams), ..StreamStore::new(0) }
    }
}
