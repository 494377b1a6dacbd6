//! `PUT /{bucket}/{stream}` (base protocol §5.1, spec/26-create-stream.md).

use super::{StreamState, StreamStore};
use crate::command::{ApplyCtx, Body, CreateStream};
use crate::data::StreamData;
use crate::lifetime::LifetimeClock;
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
            return if same {
                Ok(CreateOk { created: false, info: existing.info() })
            } else {
                Err(Rejection::StreamExistsConflict)
            };
        }
        let mut data = StreamData::default();
        match cmd.body {
            Body::Empty => {}
            Body::Bytes(bytes) => {
                if cmd.content_type.is_json() {
                    // A JSON stream stores only normalized messages.
                    return Err(Rejection::ContentTypeMismatch);
                }
                data.push(bytes);
            }
            Body::Json(Ok(batch)) => data.push(batch.text),
            Body::Json(Err(e)) => return Err(Rejection::InvalidJson(e)),
        }
        let stream = StreamState {
            incarnation: ctx.log_index,
            content_type: cmd.content_type,
            clock: LifetimeClock::start(cmd.lifetime, ctx.now_ms),
            closed: cmd.closed,
            stream_seq: cmd.stream_seq,
            data,
            producers: Default::default(),
        };
        let info = stream.info();
        self.streams.insert(cmd.key, stream);
        Ok(CreateOk { created: true, info })
    }
}
