//! `PUT /{bucket}/{stream}` (base protocol §5.1, spec/26-create-stream.md).

use super::{StreamState, StreamStore, Writers};
use crate::command::{ApplyCtx, Body, CreateStream};
use crate::data::StreamData;
use crate::incarnation::Incarnation;
use crate::lifetime::{Lifetime, LifetimeClock};
use crate::offset::Offset;
use crate::outcome::{CreateOk, Rejection};

impl StreamStore {
    pub(super) fn create(&mut self, cmd: CreateStream, ctx: ApplyCtx) -> Result<CreateOk, Rejection> {
        if let Some(existing) = self.live(&cmd.key, ctx.now_ms) {
            // An existing stream answers 200 only when its configuration,
            // closure included, is what this create asks for; the body and
            // `Stream-Seq` of such a PUT are ignored.
            let same = existing.content_type == cmd.content_type
                && existing.clock.lifetime.same_as(&cmd.lifetime)
                && existing.closed == cmd.closed;
            if !same {
                return Err(Rejection::StreamExistsConflict);
            }
            existing.check_expect(cmd.expect)?;
            return Ok(CreateOk { created: false, info: existing.info() });
        }
        if let Lifetime::ExpiresAt { at_ms } = cmd.lifetime
            && at_ms <= ctx.now_ms
        {
            return Err(Rejection::ExpiryNotInFuture);
        }
        if cmd.expect.is_some() {
            // A create that names an incarnation never creates one.
            return Err(Rejection::IncarnationMismatch { current: None });
        }
        let mut data = StreamData::default();
        match cmd.body {
            Body::Empty => {}
            Body::Bytes(bytes) => {
                if cmd.content_type.is_json() {
                    // A JSON stream stores only normalized messages.
                    return Err(Rejection::ContentTypeMismatch);
                }
                data.push(bytes, ctx.now_ms);
            }
            Body::Json(Ok(batch)) => data.push(batch.text, ctx.now_ms),
            Body::Json(Err(e)) => return Err(Rejection::InvalidJson(e)),
        }
        let stream = StreamState {
            incarnation: Incarnation::derive(self.history_id, &cmd.key, ctx.log_index, ctx.now_ms),
            content_type: cmd.content_type,
            clock: LifetimeClock::start(cmd.lifetime, ctx.now_ms),
            closed: cmd.closed,
            data,
            writers: cmd.stream_seq.map(|seq| Box::new(Writers { stream_seq: Some(seq), ..Writers::default() })),
            snapshot: None,
            retained: Offset::ZERO,
        };
        let info = stream.info();
        self.insert(cmd.key, stream);
        Ok(CreateOk { created: true, info })
    }
}
