//! Catch-up reads and `HEAD`: pure queries over the store. A read that
//! should renew a sliding TTL says so; the shell proposes the renewal.

use super::StreamStore;
use crate::data::Boundary;
use crate::ids::StreamKey;
use crate::offset::{Offset, ReadFrom};
use crate::outcome::{ReadView, Rejection, StreamInfo};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        let start = match query.from {
            ReadFrom::Start => Offset::ZERO,
            ReadFrom::Tail => tail,
            ReadFrom::At(offset) if offset > tail => {
                return Err(Rejection::OffsetBeyondTail { tail });
            }
            ReadFrom::At(offset) => offset,
        };
        let boundary =
            if stream.content_type.is_json() && query.whole_json_messages { Boundary::Message } else { query.boundary };
        let end = stream.data.read_end(start.bytes(), query.max_bytes, boundary);
        let next = Offset(end);
        Ok(ReadView {
            info: stream.info(),
            start,
            next,
            chunks: stream.data.slice(start.bytes(), end),
            up_to_date: next == tail,
            closed_at_end: stream.closed && next == tail,
            wants_renewal: stream.clock.read_wants_renewal(now_ms),
        })
    }

    /// `HEAD`: metadata only, and no renewal.
    pub fn head(&self, key: &StreamKey, now_ms: u64) -> Result<StreamInfo, Rejection> {
        self.live(key, now_ms).map(|s| s.info()).ok_or(Rejection::StreamNotFound)
    }
}
