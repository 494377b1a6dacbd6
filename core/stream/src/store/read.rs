//! Catch-up reads, `HEAD` and bootstrap: pure queries over the store. A
//! read that should renew a sliding TTL says so; the shell proposes the
//! renewal. The `Stream-Incarnation` precondition of a read is compared by
//! the caller against the `StreamInfo` of the state that served it.

use super::StreamStore;
use crate::boundary::Boundary;
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

impl StreamStore {
    pub fn read(&self, key: &StreamKey, query: ReadQuery, now_ms: u64) -> Result<ReadView, Rejection> {
        let stream = self.live(key, now_ms).ok_or(Rejection::StreamNotFound)?;
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
        let boundary =
            if stream.content_type.is_json() && query.whole_json_messages { Boundary::Message } else { query.boundary };
        let plan = stream.data.read_plan(start.bytes(), query.max_bytes, boundary);
        let next = Offset(plan.end);
        Ok(ReadView {
            info: stream.info(),
            start,
            next,
            chunks: stream.data.slice(plan.hot_from, plan.end),
            cold: plan.cold,
            cold_cut: plan.cut,
            up_to_date: next == tail,
            closed_at_end: stream.closed && next == tail,
            wants_renewal: stream.clock.read_wants_renewal(now_ms),
        })
    }

    /// `HEAD`: metadata only, and no renewal.
    pub fn head(&self, key: &StreamKey, now_ms: u64) -> Result<StreamInfo, Rejection> {
        let stream = self.live(key, now_ms).ok_or(Rejection::StreamNotFound)?;
        Ok(StreamInfo { previous: self.inherited(key, stream.incarnation), ..stream.info() })
    }

    /// `/bootstrap` (extensions §3): the snapshot, then the updates from the
    /// snapshot point. A JSON stream stops at the last message boundary
    /// within `max_bytes` (at least one message); another stream returns all
    /// updates when they fit and none (a partial answer) otherwise.
    pub fn bootstrap(&self, key: &StreamKey, max_bytes: u64, now_ms: u64) -> Result<BootstrapView, Rejection> {
        let stream = self.live(key, now_ms).ok_or(Rejection::StreamNotFound)?;
        let start = stream.snapshot.as_ref().map_or(stream.retained, |s| s.offset);
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
        })
    }
}
