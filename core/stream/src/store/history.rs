//! History rewrites (extensions §2.4, §5.3; spec/35 "Backup and disaster
//! recovery", "Recovering after a host crash"). A restore imports a
//! backup's group state into an empty group as a new history, and an
//! accepted loss starts one in place: every stream gets a new `Stream-Incarnation`,
//! remembers the token and tail it inherited, and every producer epoch
//! claimed before the rewrite is closed.

use std::collections::BTreeMap;

use super::{StreamState, StreamStore};
use crate::command::{AcceptLoss, ImportGroup};
use crate::ids::StreamKey;
use crate::incarnation::Incarnation;
use crate::offset::Offset;
use crate::outcome::{Inherited, Rejection};
use crate::producer::ClosedEpoch;

/// What a stream kept of its history before the group's last rewrite.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// The token the rewrite gave the stream: the record is void once
    /// another stream (a recreate) holds the key.
    pub incarnation: Incarnation,
    pub previous: Incarnation,
    /// The bytes below it are the ones served under `previous`.
    pub inherited: Offset,
    /// Per producer: the epoch the rewrite closed and its last seq that survived.
    pub closed: BTreeMap<String, ClosedEpoch>,
}

/// Where a group's last accepted loss applied (spec/35): its log index and
/// the term its leader proposed it in.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryEvent {
    pub log_index: u64,
    pub term: u64,
}

/// What a group would make of an import.
#[derive(serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ImportTarget {
    Empty,
    /// This very object was imported: a repeat answers `already`.
    Imported,
    /// The group holds or held data: the import is refused.
    HoldsData,
}

/// What an import did.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// The same backup object had been imported already: nothing changed.
    pub already: bool,
    pub buckets: u64,
    pub streams: u64,
}

impl StreamStore {
    /// Replaces an empty group's state with `cmd.store` under the history
    /// `cmd.history_id`. A repeat of the import that applied answers
    /// `already`; any other import into a group that holds or held data
    /// is refused, so a restore never merges two histories.
    pub(super) fn import(&mut self, cmd: ImportGroup) -> Result<Imported, Rejection> {
        match self.import_target(&cmd.digest) {
            ImportTarget::Imported => {
                let (buckets, streams) = (self.bucket_count() as u64, self.len() as u64);
                return Ok(Imported { already: true, buckets, streams });
            }
            ImportTarget::HoldsData => return Err(Rejection::ImportConflict),
            ImportTarget::Empty => {}
        }
        let mut source = *cmd.store;
        let mut rewrites: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
        for (bucket, streams) in &mut source.streams {
            let earlier = source.rewrites.get(bucket);
            for (id, stream) in streams.iter_mut() {
                let key = StreamKey { bucket: bucket.clone(), stream: id.clone() };
                let rewrite = rewrite(stream, earlier.and_then(|r| r.get(id)), &key, cmd.history_id);
                rewrites.entry(bucket.clone()).or_default().insert(id.clone(), rewrite);
            }
        }
        self.history_id = cmd.history_id;
        self.streams = source.streams;
        self.usage = source.usage;
        self.erased = source.erased;
        self.rewrites = rewrites;
        self.imported = Some(cmd.digest);
        Ok(Imported { already: false, buckets: self.bucket_count() as u64, streams: self.len() as u64 })
    }

    /// Starts a new history in place: every stream keeps its bytes under a
    /// new token, names its token and tail before the loss, and every
    /// producer epoch claimed before is closed. Returns the streams rewritten.
    pub(super) fn accept_loss(&mut self, cmd: AcceptLoss, ctx: crate::command::ApplyCtx) -> usize {
        // The same event again (a proposal repeated after a lost answer)
        // changes nothing: the history it starts is already this one.
        if self.history_id == cmd.history_id {
            return 0;
        }
        let history_id = cmd.history_id;
        self.history_event = Some(HistoryEvent { log_index: ctx.log_index, term: cmd.term });
        let mut rewrites: BTreeMap<_, BTreeMap<_, _>> = BTreeMap::new();
        let mut count = 0;
        for (bucket, streams) in &mut self.streams {
            let earlier = self.rewrites.get(bucket);
            for (id, stream) in streams.iter_mut() {
                let key = StreamKey { bucket: bucket.clone(), stream: id.clone() };
                let rewrite = rewrite(stream, earlier.and_then(|r| r.get(id)), &key, history_id);
                rewrites.entry(bucket.clone()).or_default().insert(id.clone(), rewrite);
                count += 1;
            }
        }
        self.history_id = history_id;
        self.rewrites = rewrites;
        count
    }

    /// The history this store's tokens are drawn from: a rewrite changes it.
    pub fn history_id(&self) -> u64 {
        self.history_id
    }

    /// The last accepted loss this group applied.
    pub fn history_event(&self) -> Option<HistoryEvent> {
        self.history_event
    }

    /// Whether an import of the object with BLAKE3 `digest` would apply
    /// (`Empty`), repeat (`Imported`) or be refused (`HoldsData`).
    pub fn import_target(&self, digest: &[u8; 32]) -> ImportTarget {
        if self.imported.as_ref() == Some(digest) {
            ImportTarget::Imported
        } else if !self.streams.is_empty() || !self.erased.is_empty() || self.imported.is_some() {
            ImportTarget::HoldsData
        } else {
            ImportTarget::Empty
        }
    }

    /// Whether any stream of the group holds a rewrite record.
    pub(super) fn rewritten(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// The rewrite record of the stream at `key` while it is `incarnation`.
    fn rewrite_of(&self, key: &StreamKey, incarnation: Incarnation) -> Option<&Rewrite> {
        self.rewrites.get(&key.bucket)?.get(&key.stream).filter(|r| r.incarnation == incarnation)
    }

    /// `Stream-Previous-Incarnation` and `Stream-Inherited-Offset` of a `HEAD`.
    pub(super) fn inherited(&self, key: &StreamKey, incarnation: Incarnation) -> Option<Inherited> {
        self.rewrite_of(key, incarnation).map(|r| Inherited { incarnation: r.previous, offset: r.inherited })
    }

    /// The epoch of producer `id` a rewrite closed, while the producer has
    /// not claimed another.
    pub(super) fn closed_by_history(
        &self,
        key: &StreamKey,
        stream: &StreamState,
        id: &str,
        epoch: u64,
    ) -> Option<ClosedEpoch> {
        let closed = *self.rewrite_of(key, stream.incarnation)?.closed.get(id)?;
        let current = stream.producers().get(id)?;
        (closed.epoch == epoch && current.epoch == epoch).then_some(closed)
    }

    /// Drops the records of streams deleted or recreated since the rewrite.
    pub(super) fn forget_stale_rewrites(&mut self) {
        let streams = &self.streams;
        for (bucket, records) in &mut self.rewrites {
            let live = streams.get(bucket);
            records.retain(|id, r| live.and_then(|s| s.get(id)).is_some_and(|s| s.incarnation == r.incarnation));
        }
        self.rewrites.retain(|_, records| !records.is_empty());
    }
}

/// Gives `stream` its token in the new history and records what it inherits:
/// its own token and tail, or, when nothing was written since the
/// source's own rewrite, what that rewrite recorded (one predecessor, no chain).
fn rewrite(stream: &mut StreamState, earlier: Option<&Rewrite>, key: &StreamKey, history_id: u64) -> Rewrite {
    let tail = stream.data.tail();
    let (previous, inherited) = match earlier {
        Some(r) if r.incarnation == stream.incarnation && r.inherited == tail => (r.previous, r.inherited),
        _ => (stream.incarnation, tail),
    };
    let mut seed = stream.incarnation.value();
    let mut next = Incarnation::derive(history_id, key, seed, 0);
    while next == previous || next == stream.incarnation {
        seed = seed.wrapping_add(1);
        next = Incarnation::derive(history_id, key, seed, 0);
    }
    stream.incarnation = next;
    let closed = stream
        .producers()
        .iter()
        .map(|(id, p)| (id.clone(), ClosedEpoch { epoch: p.epoch, seq: p.last_seq }))
        .collect();
    Rewrite { incarnation: next, previous, inherited, closed }
}
