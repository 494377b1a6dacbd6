//! The stream store: every stream of one group, and the only place their
//! state changes. `apply` is deterministic: the same commands with the same
//! `ApplyCtx` give the same state and outcomes on every replica.
//!
//! Module map:
//! - `create`: `PUT` semantics (idempotent create, config match).
//! - `append`: `POST` semantics (producer rules, closure, content, `Stream-Seq`).
//! - `snapshot`: publishing and reading the latest snapshot, and retention.
//! - `read`: catch-up reads, `HEAD`, immutable chunks and bootstrap, as pure queries.
//! - `history`: a restore's import, a new history with what survived it.

mod append;
mod create;
mod expiry;
mod fork;
mod gauges;
mod history;
mod legacy;
mod read;
mod snapshot;

pub use gauges::StateGauges;
pub use history::{HistoryEvent, ImportTarget, Imported, Rewrite};
pub use legacy::{
    LegacyStreamStore, StoreWithoutFences, StoreWithoutForks, StoreWithoutHistoryEvent, StoreWithoutRewrites,
};

use std::collections::BTreeMap;

pub use read::ReadQuery;

use crate::command::Body;
use crate::command::{ApplyCtx, Command};
use crate::content_type::ContentType;
use crate::data::StreamData;
use crate::fork::{ForkBase, ForkLinks};
use crate::ids::{BucketId, StreamId, StreamKey};
use crate::incarnation::Incarnation;
use crate::lifetime::LifetimeClock;
use crate::offset::Offset;
use crate::outcome::{AppendKind, AppendOk, CreateOk, Rejection, SnapshotOk, StreamInfo};
use crate::producer::ProducerState;
use crate::snapshot::Snapshot;
use crate::stream_seq::StreamSeq;
use crate::usage::{BucketUsage, CommittedUsage, WRITE_UNIT_BYTES};

/// One incarnation of a stream.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StreamState {
    pub incarnation: Incarnation,
    pub content_type: ContentType,
    pub clock: LifetimeClock,
    pub closed: bool,
    pub data: StreamData,
    /// Boxed: most streams have no `Stream-Seq` and no producers.
    pub writers: Option<Box<Writers>>,
    /// Boxed: most streams never publish one.
    pub snapshot: Option<Box<Snapshot>>,
    /// Reads below it answer 410.
    pub retained: Offset,
    /// Boxed: most streams are neither forks nor forked. Persisted last
    /// (snapshot format 5).
    pub fork: Option<Box<ForkLinks>>,
}

/// The state of conditional and idempotent writers of a stream.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct Writers {
    pub stream_seq: Option<StreamSeq>,
    /// Keyed by `Producer-Id`; a `BTreeMap` so iteration order is deterministic.
    pub producers: BTreeMap<String, ProducerState>,
    /// The highest epoch of any producer state the stream discarded (extensions §5.4).
    pub epoch_floor: Option<u64>,
}

static NO_PRODUCERS: BTreeMap<String, ProducerState> = BTreeMap::new();

impl StreamState {
    pub fn producers(&self) -> &BTreeMap<String, ProducerState> {
        self.writers.as_ref().map_or(&NO_PRODUCERS, |w| &w.producers)
    }

    pub fn stream_seq(&self) -> Option<&StreamSeq> {
        self.writers.as_ref().and_then(|w| w.stream_seq.as_ref())
    }

    pub fn epoch_floor(&self) -> Option<u64> {
        self.writers.as_ref().and_then(|w| w.epoch_floor)
    }

    /// Deleted while forks reference it.
    pub fn soft_deleted(&self) -> bool {
        self.fork.as_ref().is_some_and(|f| f.soft_deleted)
    }

    /// Forks reference it: it stays until they go.
    pub fn referenced(&self) -> bool {
        self.fork.as_ref().is_some_and(|f| !f.forks.is_empty())
    }

    /// Where a fork's inherited bytes end; `None` for a stream of its own.
    pub fn fork_base(&self) -> Option<&ForkBase> {
        self.fork.as_ref().and_then(|f| f.base.as_ref())
    }

    fn serves(&self, now_ms: u64) -> bool {
        !self.clock.expired(now_ms) && !self.soft_deleted()
    }

    fn writers_mut(&mut self) -> &mut Writers {
        self.writers.get_or_insert_with(Default::default)
    }

    pub fn info(&self) -> StreamInfo {
        StreamInfo {
            incarnation: self.incarnation,
            content_type: self.content_type.clone(),
            lifetime: self.clock.lifetime.clone(),
            tail: self.data.tail(),
            closed: self.closed,
            retained: self.retained,
            snapshot: self.snapshot.as_deref().map(Snapshot::meta),
            previous: None,
        }
    }

    /// The `Stream-Incarnation` precondition, evaluated once everything else
    /// about the request passed (RFC 9110 §13.2).
    fn check_expect(&self, expect: Option<Incarnation>) -> Result<(), Rejection> {
        match expect {
            Some(expected) if expected != self.incarnation => {
                Err(Rejection::IncarnationMismatch { current: Some(self.incarnation) })
            }
            _ => Ok(()),
        }
    }

    /// On a JSON stream, that `offset` is a message boundary.
    fn json_boundary(&self, offset: Offset) -> Result<(), Rejection> {
        if !self.content_type.is_json() || offset == self.retained {
            return Ok(());
        }
        match self.data.is_message_boundary(offset.bytes()) {
            Some(true) => Ok(()),
            Some(false) => Err(Rejection::NotJsonBoundary),
            None => Err(Rejection::JsonBoundaryUnverified),
        }
    }
}

/// What applying one command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Create(Result<CreateOk, Rejection>),
    Append(Result<AppendOk, Rejection>),
    /// A fork that went hands back its base: the shell releases it.
    Delete(Result<Option<ForkBase>, Rejection>),
    PublishSnapshot(Result<SnapshotOk, Rejection>),
    AdvanceRetention(Result<StreamInfo, Rejection>),
    Renew,
    Sweep {
        removed: usize,
        /// The bases of the forks removed, for the shell to release.
        released: Vec<ForkBase>,
    },
    /// How many pieces of a `CommitCold` moved hot bytes to the cold tier
    /// (the others went stale: deleted, replaced, trimmed or already moved).
    CommitCold {
        frozen: usize,
    },
    /// How many spans a `CompactCold` moved into its object (0: it went
    /// stale, and the shell deletes the object).
    CompactCold {
        moved: usize,
    },
    /// The streams a purge removed from the group (0 when it ran before).
    PurgeBucket {
        removed: usize,
    },
    Import(Result<Imported, Rejection>),
    /// An accepted loss gave every stream of the group a new token.
    AcceptLoss {
        streams: usize,
    },
    ReferenceSource(Result<crate::fork::SourceReferenced, Rejection>),
    /// A source collected with its last reference hands back its own base.
    ReleaseSource {
        released: Option<ForkBase>,
    },
}

/// One bucket's streams. Each state is boxed: a B-tree node holds eleven
/// entries and is about two thirds full when ids arrive in order, so an
/// inline 176-byte state left ~100 bytes of empty slots per stream; a box
/// leaves 8 (issue 4's memory per idle stream). A box serializes as what
/// it holds, so snapshots are unchanged.
pub type Streams = BTreeMap<StreamId, Box<StreamState>>;

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamStore {
    /// Drawn at random when this store's history began; seeds tokens.
    history_id: u64,
    /// Streams by bucket, so a bucket id is held once, not once per stream.
    /// A bucket stays when its last stream goes: it is how the store knows
    /// which buckets ever held a stream here (`BUCKET_NOT_FOUND` is for the
    /// others, extensions §11).
    streams: BTreeMap<BucketId, Streams>,
    /// What each bucket committed in this group (spec/35): monotonic, kept
    /// when streams go. Persisted after `streams`: a snapshot from before
    /// it decodes as `LegacyStreamStore`.
    usage: BTreeMap<BucketId, CommittedUsage>,
    /// The unit of `write_units` these counters were kept in.
    write_unit_bytes: u64,
    /// Purged buckets: creates and appends in them answer `BUCKET_ERASED`
    /// for good. Persisted after `write_unit_bytes` (snapshot format 3).
    erased: std::collections::BTreeSet<BucketId>,
    /// Per stream, what survived the group's last history rewrite. Persisted
    /// after `erased` (snapshot format 4), as is `imported`.
    #[serde(default)]
    rewrites: BTreeMap<BucketId, BTreeMap<StreamId, Rewrite>>,
    /// BLAKE3 of the backup object this history was imported from.
    #[serde(default)]
    imported: Option<[u8; 32]>,
    /// The last accepted loss this group applied (snapshot format 6).
    #[serde(default)]
    history_event: Option<HistoryEvent>,
}

impl StreamStore {
    pub fn new(history_id: u64) -> StreamStore {
        StreamStore {
            history_id,
            streams: BTreeMap::new(),
            usage: BTreeMap::new(),
            write_unit_bytes: WRITE_UNIT_BYTES,
            erased: Default::default(),
            rewrites: BTreeMap::new(),
            imported: None,
            history_event: None,
        }
    }

    /// The write unit the counters are kept in (a restore refuses another).
    pub fn write_unit_bytes(&self) -> u64 {
        self.write_unit_bytes
    }

    /// Per bucket: the committed counters and the current gauges.
    pub fn usage_report(&self, now_ms: u64) -> BTreeMap<BucketId, BucketUsage> {
        let mut report: BTreeMap<BucketId, BucketUsage> = BTreeMap::new();
        for (bucket, c) in &self.usage {
            let line = report.entry(bucket.clone()).or_default();
            line.committed_append_bytes = c.append_bytes;
            line.committed_records = c.records;
            line.committed_write_units = c.write_units;
        }
        for (bucket, streams) in &self.streams {
            for stream in streams.values().filter(|s| !s.clock.expired(now_ms)) {
                let line = report.entry(bucket.clone()).or_default();
                line.stream_count += 1;
                line.retained_bytes += stream.data.tail().0.saturating_sub(stream.retained.0);
            }
        }
        report
    }

    /// Counts a committed write of `bytes` and `records` for `bucket`.
    fn count(&mut self, bucket: &BucketId, bytes: u64, records: u64) {
        match self.usage.get_mut(bucket) {
            Some(usage) => usage.record(bytes, records),
            None => self.usage.entry(bucket.clone()).or_default().record(bytes, records),
        }
    }

    pub fn apply(&mut self, command: Command, ctx: ApplyCtx) -> Outcome {
        match command {
            Command::Create(cmd) if self.erased.contains(&cmd.key.bucket) => {
                Outcome::Create(Err(Rejection::BucketErased))
            }
            Command::Append(cmd) if self.erased.contains(&cmd.key.bucket) => {
                Outcome::Append(Err(Rejection::BucketErased))
            }
            Command::PurgeBucket(cmd) => {
                let removed = self.streams.remove(&cmd.bucket).map_or(0, |s| s.len());
                self.rewrites.remove(&cmd.bucket);
                self.erased.insert(cmd.bucket);
                Outcome::PurgeBucket { removed }
            }
            Command::Create(cmd) => {
                let (bucket, records) = (cmd.key.bucket.clone(), records_in(&cmd.body));
                let created = self.create(cmd, ctx);
                if let Ok(ok) = &created
                    && ok.created
                {
                    self.count(&bucket, ok.info.tail.0, records);
                }
                Outcome::Create(created)
            }
            Command::Append(cmd) => {
                let (bucket, records) = (cmd.key.bucket.clone(), records_in(&cmd.body));
                let appended = self.append(cmd, ctx);
                if let Ok(ok) = &appended
                    && ok.kind == AppendKind::Applied
                {
                    let bytes = ok.receipt.map_or(0, |r| r.next.0.saturating_sub(r.start.0));
                    self.count(&bucket, bytes, records);
                }
                Outcome::Append(appended)
            }
            Command::Delete(cmd) => Outcome::Delete(self.delete(&cmd.key, cmd.expect, ctx)),
            Command::ReferenceSource(cmd) => Outcome::ReferenceSource(self.reference_source(cmd, ctx)),
            Command::CreateFork(cmd) if self.erased.contains(&cmd.create.key.bucket) => {
                Outcome::Create(Err(Rejection::BucketErased))
            }
            Command::CreateFork(cmd) => {
                let (bucket, records) = (cmd.create.key.bucket.clone(), records_in(&cmd.create.body));
                let offset = cmd.base.offset;
                let created = self.create_fork(cmd, ctx);
                if let Ok(ok) = &created
                    && ok.created
                {
                    self.count(&bucket, ok.info.tail.0.saturating_sub(offset.0), records);
                }
                Outcome::Create(created)
            }
            Command::ReleaseSource(cmd) => Outcome::ReleaseSource { released: self.release_source(&cmd, ctx) },
            Command::PublishSnapshot(cmd) => Outcome::PublishSnapshot(self.publish_snapshot(cmd, ctx)),
            Command::AdvanceRetention(cmd) => Outcome::AdvanceRetention(self.advance_retention(cmd, ctx)),
            Command::Renew(cmd) => {
                if let Some(stream) = self.live_mut(&cmd.key, ctx.now_ms)
                    && stream.incarnation == cmd.incarnation
                {
                    stream.clock.renew(ctx.now_ms);
                }
                Outcome::Renew
            }
            Command::CommitCold(cmd) => Outcome::CommitCold { frozen: self.commit_cold(cmd, ctx) },
            Command::CompactCold(cmd) => Outcome::CompactCold { moved: self.compact_cold(cmd, ctx) },
            Command::Sweep => {
                let before = self.len();
                let mut released = Vec::new();
                for bucket in self.streams.values_mut() {
                    bucket.retain(|_, s| {
                        // An expired stream that forks reference stays for them.
                        if !s.clock.expired(ctx.now_ms) || s.referenced() {
                            return true;
                        }
                        released.extend(s.fork.as_ref().and_then(|f| f.base.clone()));
                        false
                    });
                }
                self.forget_stale_rewrites();
                Outcome::Sweep { removed: before - self.len(), released }
            }
            Command::Import(cmd) => Outcome::Import(self.import(cmd)),
            Command::ExpireStreams(cmd) => self.expire(cmd.max, ctx),
            Command::AcceptLoss(cmd) => Outcome::AcceptLoss { streams: self.accept_loss(cmd, ctx) },
        }
    }

    /// Removes the stream, or soft-deletes it while forks reference it.
    fn delete(
        &mut self,
        key: &StreamKey,
        expect: Option<Incarnation>,
        ctx: ApplyCtx,
    ) -> Result<Option<ForkBase>, Rejection> {
        let stream = self.found_mut(key, ctx.now_ms)?;
        stream.check_expect(expect)?;
        if let Some(links) = stream.fork.as_mut()
            && !links.forks.is_empty()
        {
            links.soft_deleted = true;
            return Ok(None);
        }
        let removed = self.streams.get_mut(&key.bucket).and_then(|bucket| bucket.remove(&key.stream));
        Ok(removed.and_then(|s| s.fork).and_then(|f| f.base))
    }

    fn commit_cold(&mut self, cmd: crate::cold::CommitCold, ctx: ApplyCtx) -> usize {
        let mut frozen = 0;
        for piece in cmd.pieces {
            // A stream kept for its forks (soft-deleted or expired) still
            // moves its bytes out of memory.
            let Some(stream) = self.stored_mut(&piece.key).filter(|s| s.serves(ctx.now_ms) || s.referenced()) else {
                continue;
            };
            if stream.incarnation != piece.incarnation {
                continue;
            }
            let span = crate::cold::ColdSpan {
                start: piece.start.bytes(),
                len: piece.len,
                object: cmd.object.clone(),
                object_offset: piece.object_offset,
                digest: piece.digest,
            };
            frozen += usize::from(stream.data.freeze(span, ctx.now_ms));
        }
        frozen
    }

    fn compact_cold(&mut self, cmd: crate::cold::CompactCold, ctx: ApplyCtx) -> usize {
        let Some(stream) = self.stored_mut(&cmd.key).filter(|s| s.serves(ctx.now_ms) || s.referenced()) else {
            return 0;
        };
        if stream.incarnation != cmd.incarnation {
            return 0;
        }
        cmd.moves.iter().filter(|m| stream.data.move_span(m, &cmd.object)).count()
    }

    /// Every cold object a stream of the group references (expired streams
    /// not yet swept included), for garbage collection.
    pub fn cold_objects(&self) -> std::collections::HashSet<String> {
        self.streams
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(|s| {
                let snapshot = s.snapshot.as_ref().and_then(|snap| snap.cold.as_ref()).map(|c| c.object.clone());
                s.data.cold_spans().iter().map(|span| span.object.clone()).chain(snapshot)
            })
            .collect()
    }

    /// Bytes of the group held in memory (the hot ring), for backpressure.
    pub fn hot_bytes(&self) -> u64 {
        self.streams.values().flat_map(BTreeMap::values).map(|s| s.data.hot_bytes()).sum()
    }

    /// Every live stream, or one kept for its forks, with hot bytes that `pick` takes, with its key
    /// (keys are built only for the streams picked).
    pub fn hot_streams<'a>(
        &'a self,
        now_ms: u64,
        pick: impl Fn(&StreamState) -> bool + Copy + 'a,
    ) -> impl Iterator<Item = (StreamKey, &'a StreamState)> {
        self.streams_where(now_ms, move |s| s.data.hot_bytes() > 0 && pick(s))
    }

    /// Every live stream, or one kept for its forks, that `pick` takes, with
    /// its key (keys are built only for the streams picked).
    pub fn streams_where<'a>(
        &'a self,
        now_ms: u64,
        pick: impl Fn(&StreamState) -> bool + Copy + 'a,
    ) -> impl Iterator<Item = (StreamKey, &'a StreamState)> {
        self.streams.iter().flat_map(move |(bucket, streams)| {
            streams
                .iter()
                .filter(move |(_, s)| (!s.clock.expired(now_ms) || s.referenced()) && pick(s))
                .map(move |(id, s)| (StreamKey { bucket: bucket.clone(), stream: id.clone() }, &**s))
        })
    }

    fn insert(&mut self, key: StreamKey, stream: StreamState) {
        self.streams.entry(key.bucket).or_default().insert(key.stream, Box::new(stream));
    }

    /// The stream at `key` unless it does not exist, its lifetime ended or
    /// it was deleted while forks reference it.
    pub fn live(&self, key: &StreamKey, now_ms: u64) -> Option<&StreamState> {
        self.stored(key).filter(|s| s.serves(now_ms))
    }

    fn live_mut(&mut self, key: &StreamKey, now_ms: u64) -> Option<&mut StreamState> {
        self.stored_mut(key).filter(|s| s.serves(now_ms))
    }

    /// The stream a client may use at `key`, or why not: `404`, or `410`
    /// for one deleted while forks reference it.
    pub fn found(&self, key: &StreamKey, now_ms: u64) -> Result<&StreamState, Rejection> {
        match self.stored(key) {
            Some(s) if s.soft_deleted() => Err(Rejection::StreamSoftDeleted),
            Some(s) if !s.clock.expired(now_ms) => Ok(s),
            _ => Err(Rejection::StreamNotFound),
        }
    }

    fn found_mut(&mut self, key: &StreamKey, now_ms: u64) -> Result<&mut StreamState, Rejection> {
        match self.stored_mut(key) {
            Some(s) if s.soft_deleted() => Err(Rejection::StreamSoftDeleted),
            Some(s) if !s.clock.expired(now_ms) => Ok(s),
            _ => Err(Rejection::StreamNotFound),
        }
    }

    /// The stream held at `key`, expired or soft-deleted ones included.
    pub fn stored(&self, key: &StreamKey) -> Option<&StreamState> {
        self.streams.get(&key.bucket)?.get(&key.stream).map(|s| &**s)
    }

    fn stored_mut(&mut self, key: &StreamKey) -> Option<&mut StreamState> {
        self.streams.get_mut(&key.bucket)?.get_mut(&key.stream).map(|s| &mut **s)
    }

    /// Whether `bucket` was purged (its fence is installed in this group).
    pub fn erased(&self, bucket: &BucketId) -> bool {
        self.erased.contains(bucket)
    }

    /// Every bucket that ever held a stream here, purged ones included:
    /// where the group's cold objects may be.
    pub fn buckets(&self) -> impl Iterator<Item = &BucketId> {
        self.streams.keys().chain(self.erased.iter())
    }

    /// Whether a stream of `bucket` was ever created in this group (buckets
    /// are implicit: a bucket exists once a stream was created in it).
    pub fn knows_bucket(&self, bucket: &BucketId) -> bool {
        self.streams.contains_key(bucket)
    }

    pub fn len(&self) -> usize {
        self.streams.values().map(BTreeMap::len).sum()
    }

    /// Buckets with at least one stream.
    pub fn bucket_count(&self) -> usize {
        self.streams.values().filter(|s| !s.is_empty()).count()
    }

    /// No streams (buckets they left behind do not count).
    pub fn is_empty(&self) -> bool {
        self.streams.values().all(BTreeMap::is_empty)
    }
}

/// The messages a write's body holds: a JSON batch's count, else one for
/// any bytes.
fn records_in(body: &Body) -> u64 {
    match body {
        Body::Empty => 0,
        Body::Bytes(b) => u64::from(!b.is_empty()),
        Body::Json(Ok(batch)) => batch.count as u64,
        Body::Json(Err(_)) => 0,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cold;
#[cfg(test)]
mod tests_expiry;
#[cfg(test)]
mod tests_ext;
#[cfg(test)]
mod tests_fork;
#[cfg(test)]
mod tests_history;
