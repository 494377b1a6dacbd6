//! Snapshots and retention (extensions §2.2, §2.5): publishing the latest
//! snapshot, reading it, and advancing the retained offset.

use super::StreamStore;
use crate::command::{AdvanceRetention, ApplyCtx, PublishSnapshot};
use crate::ids::StreamKey;
use crate::offset::Offset;
use crate::outcome::{Rejection, SnapshotOk, SnapshotView, StreamInfo};
use crate::snapshot::Snapshot;

impl StreamStore {
    /// Checks run in the order the answers take precedence: the stream, the
    /// offset against the tail and the retained offset, the JSON boundary,
    /// the latest snapshot, then the precondition.
    pub(super) fn publish_snapshot(&mut self, cmd: PublishSnapshot, ctx: ApplyCtx) -> Result<SnapshotOk, Rejection> {
        let stream = self.found_mut(&cmd.key, ctx.now_ms)?;
        if cmd.offset > stream.data.tail() {
            return Err(Rejection::SnapshotBeyondTail);
        }
        if cmd.offset < stream.retained {
            return Err(Rejection::StreamGone { retained: stream.retained, incarnation: stream.incarnation });
        }
        stream.json_boundary(cmd.offset)?;
        if let Some(latest) = &stream.snapshot {
            let repeat = latest.offset == cmd.offset && latest.digest == cmd.digest;
            if !repeat && cmd.offset <= latest.offset {
                return Err(Rejection::SnapshotConflict { latest: latest.meta() });
            }
            if repeat {
                stream.check_expect(cmd.expect)?;
                return Ok(SnapshotOk { snapshot: latest.meta(), info: stream.info() });
            }
        }
        stream.check_expect(cmd.expect)?;
        let snapshot = Snapshot {
            offset: cmd.offset,
            content_type: cmd.content_type,
            body: cmd.body,
            digest: cmd.digest,
            cold: cmd.cold,
        };
        let meta = snapshot.meta();
        stream.snapshot = Some(Box::new(snapshot));
        Ok(SnapshotOk { snapshot: meta, info: stream.info() })
    }

    /// A commit of parts checks its key before it resolves them (spec/30):
    /// `Ok(Some)` for a repeat of the published snapshot, `Err` for a
    /// missing stream, a mismatched precondition or a `409` naming the
    /// latest; `Ok(None)` when the parts must be assembled.
    pub fn check_parts_commit(
        &self,
        key: &StreamKey,
        offset: Offset,
        digest: crate::snapshot::SnapshotDigest,
        expect: Option<crate::incarnation::Incarnation>,
        now_ms: u64,
    ) -> Result<Option<SnapshotOk>, Rejection> {
        let stream = self.found(key, now_ms)?;
        if let Some(latest) = &stream.snapshot {
            let repeat = latest.offset == offset && latest.digest == digest;
            if !repeat && offset <= latest.offset {
                return Err(Rejection::SnapshotConflict { latest: latest.meta() });
            }
            if repeat {
                stream.check_expect(expect)?;
                return Ok(Some(SnapshotOk { snapshot: latest.meta(), info: stream.info() }));
            }
        }
        stream.check_expect(expect)?;
        Ok(None)
    }

    /// Retention only moves forward, exactly to the requested offset, and
    /// never past the latest snapshot.
    pub(super) fn advance_retention(&mut self, cmd: AdvanceRetention, ctx: ApplyCtx) -> Result<StreamInfo, Rejection> {
        let stream = self.found_mut(&cmd.key, ctx.now_ms)?;
        if cmd.offset > stream.data.tail() {
            return Err(Rejection::InvalidRetention);
        }
        if cmd.offset <= stream.retained {
            stream.check_expect(cmd.expect)?;
            return Ok(stream.info());
        }
        stream.json_boundary(cmd.offset)?;
        if stream.snapshot.as_ref().is_none_or(|s| cmd.offset > s.offset) {
            return Err(Rejection::InvalidRetention);
        }
        stream.check_expect(cmd.expect)?;
        stream.retained = cmd.offset;
        stream.data.trim_before(cmd.offset.bytes());
        Ok(stream.info())
    }

    /// The latest snapshot, when it is the one at `offset`.
    pub fn snapshot(&self, key: &StreamKey, offset: Offset, now_ms: u64) -> Result<SnapshotView, Rejection> {
        let stream = self.found(key, now_ms)?;
        match &stream.snapshot {
            Some(s) if s.offset == offset => Ok(SnapshotView { snapshot: (**s).clone(), info: stream.info() }),
            _ => Err(Rejection::SnapshotNotFound { incarnation: stream.incarnation }),
        }
    }
}
