//! Catch-up reads, `HEAD` and bootstrap: pure queries over the store. A
//! read that should renew a sliding TTL says so; the shell proposes the
//! renewal. The `Stream-Incarnation` precondition of a read is compared by
//! the caller against the `StreamInfo` of the state that served it.

use super::{StreamState, StreamStore};
use crate::boundary::Boundary;
use crate::data::ReadPlan;
use crate::fork::ForkPrefix;
use crate::ids::StreamKey;
use crate::offset::{Offset, ReadFrom};
use crate::outcome::{BootstrapView, ReadView, Rejection, StreamInfo};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadQuery {
    pub from: ReadFrom,
    pub max_bytes: u64,
    /// Where a read of a non-JSON stream may stop.
    pub boundary: Boundary,
    /// On a JSON stream, stop only at message boundaries (whole messages).
    pub whole_json_messages: bool,
}

/// The read of `stream` from `start` up to `end` (its tail, or the fork
/// point of a fork of it); on a fork, the bytes below its fork point are
/// left to the shell (`ReadView::prefix`) and count against the budget.
fn view_of(stream: &StreamState, start: Offset, end: Offset, query: ReadQuery) -> ReadView {
    let boundary =
        if stream.content_type.is_json() && query.whole_json_messages { Boundary::Message } else { query.boundary };
    let (own_from, prefix) = match stream.fork_base() {
        Some(base) if start < base.offset => {
            // A fork of this fork may end inside its inherited bytes.
            let to = base.offset.min(end);
            let prefix = ForkPrefix {
                source: base.source.clone(),
                incarnation: base.incarnation,
                from: start,
                to,
                reference: base.reference,
            };
            (to, Some(prefix))
        }
        _ => (start, None),
    };
    let budget = query.max_bytes.saturating_sub(own_from.bytes() - start.bytes());
    let room = end.bytes().saturating_sub(own_from.bytes());
    let at = own_from.bytes();
    let nothing = ReadPlan { cold: Vec::new(), cut: None, hot_from: at, end: at, ahead: Vec::new() };
    let plan = if room == 0 || (prefix.is_some() && budget == 0) {
        nothing
    } else if budget >= room {
        // Everything up to `end`, itself a place a read may stop.
        stream.data.read_plan(own_from.bytes(), room, Boundary::Byte)
    } else {
        let plan = stream.data.read_plan(own_from.bytes(), budget, boundary);
        // A boundary search may not carry a read past a fork point.
        if plan.end > end.bytes() { stream.data.read_plan(own_from.bytes(), room, Boundary::Byte) } else { plan }
    };
    let next = Offset(plan.end);
    let tail = stream.data.tail();
    ReadView {
        info: stream.info(),
        start,
        next,
        chunks: stream.data.slice(plan.hot_from, plan.end),
        cold: plan.cold,
        cold_cut: plan.cut,
        cold_ahead: plan.ahead,
        up_to_date: next == tail,
        closed_at_end: stream.closed && next == tail,
        wants_renewal: false,
        prefix,
    }
}

impl StreamStore {
    pub fn read(&self, key: &StreamKey, query: ReadQuery, now_ms: u64) -> Result<ReadView, Rejection> {
        let stream = self.found(key, now_ms)?;
        let tail = stream.data.tail();
        let gone = || Rejection::StreamGone { retained: stream.retained, incarnation: stream.incarnation };
        let start = match query.from {
            // `-1` names the stream's first byte; once trimmed, it is gone.
            ReadFrom::Start if stream.retained > Offset::ZERO => return Err(gone()),
            ReadFrom::Start => Offset::ZERO,
            ReadFrom::Tail => tail,
            ReadFrom::At(offset) if offset < stream.retained => return Err(gone()),
            ReadFrom::At(offset) if offset > tail => {
                return Err(Rejection::OffsetBeyondTail { tail, incarnation: stream.incarnation });
            }
            ReadFrom::At(offset) => offset,
        };
        let mut view = view_of(stream, start, tail, query);
        view.wants_renewal = stream.clock.read_wants_renewal(now_ms);
        Ok(view)
    }

    /// A fork's inherited bytes `[prefix.from, prefix.to)` read from its
    /// source, deleted or expired or not; never a renewal. The source may be
    /// a fork itself: the view then has a prefix of its own.
    pub fn read_fork_prefix(&self, prefix: &ForkPrefix, query: ReadQuery) -> Result<ReadView, Rejection> {
        let stream = self
            .stored(&prefix.source)
            .filter(|s| s.incarnation == prefix.incarnation)
            .ok_or(Rejection::ForkSourceNotFound)?;
        if prefix.from < stream.retained {
            return Err(Rejection::StreamGone { retained: stream.retained, incarnation: stream.incarnation });
        }
        Ok(view_of(stream, prefix.from, prefix.to, query))
    }

    /// `HEAD`: metadata only, and no renewal.
    pub fn head(&self, key: &StreamKey, now_ms: u64) -> Result<StreamInfo, Rejection> {
        let stream = self.found(key, now_ms)?;
        Ok(StreamInfo { previous: self.inherited(key, stream.incarnation), ..stream.info() })
    }

    /// `/bootstrap` (extensions §3): the snapshot, then the updates from the
    /// snapshot point. A JSON stream stops at the last message boundary
    /// within `max_bytes` (at least one message); another stream returns all
    /// updates when they fit and none (a partial answer) otherwise.
    pub fn bootstrap(&self, key: &StreamKey, max_bytes: u64, now_ms: u64) -> Result<BootstrapView, Rejection> {
        let stream = self.found(key, now_ms)?;
        let start = stream.snapshot.as_ref().map_or(stream.retained, |s| s.offset);
        if stream.fork_base().is_some_and(|base| start < base.offset) {
            return Ok(fork_bootstrap(stream, start, max_bytes));
        }
        let tail = stream.data.tail().bytes();
        let plan = if stream.content_type.is_json() {
            stream.data.read_plan(start.bytes(), max_bytes, Boundary::Message)
        } else if tail - start.bytes() <= max_bytes {
            stream.data.read_plan(start.bytes(), tail - start.bytes(), Boundary::Byte)
        } else {
            stream.data.read_plan(start.bytes(), 0, Boundary::Byte)
        };
        Ok(BootstrapView {
            info: stream.info(),
            snapshot: stream.snapshot.as_deref().cloned(),
            start,
            next: Offset(plan.end),
            updates: stream.data.slice(plan.hot_from, plan.end),
            cold: plan.cold,
            cold_cut: plan.cut,
            prefix: None,
        })
    }
}

/// The bootstrap of a fork from below its fork point: its updates are a
/// read with the bootstrap's rule (a JSON stream whole messages within
/// `max_bytes`, another all or nothing) whose source part the shell reads.
fn fork_bootstrap(stream: &StreamState, start: Offset, max_bytes: u64) -> BootstrapView {
    let tail = stream.data.tail();
    let budget = if stream.content_type.is_json() || tail.bytes() - start.bytes() <= max_bytes { max_bytes } else { 0 };
    let query =
        ReadQuery { from: ReadFrom::At(start), max_bytes: budget, boundary: Boundary::Byte, whole_json_messages: true };
    let view = view_of(stream, start, tail, query);
    BootstrapView {
        info: stream.info(),
        snapshot: stream.snapshot.as_deref().cloned(),
        start,
        next: view.next,
        updates: view.chunks,
        cold: view.cold,
        cold_cut: view.cold_cut,
        prefix: view.prefix.map(|prefix| (prefix, query)),
    }
}
