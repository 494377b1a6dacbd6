//! `PUT /{bucket}/{stream}` (base protocol §5.1, spec/26-create-stream.md).

use super::{StreamState, StreamStore, Writers};
use crate::command::{ApplyCtx, Body, CreateStream};
use crate::data::StreamData;
use crate::fork::{ForkBase, ForkLinks};
use crate::incarnation::Incarnation;
use crate::lifetime::{Lifetime, LifetimeClock};
use crate::offset::Offset;
use crate::outcome::{CreateOk, Rejection};

/// What an existing stream at a create's path means for it.
pub(super) enum AtPath {
    /// Nothing there (or a stream whose lifetime ended): create.
    Free,
    /// The same configuration: `200`, nothing changes.
    Same(CreateOk),
}

impl StreamStore {
    pub(super) fn create(&mut self, mut cmd: CreateStream, ctx: ApplyCtx) -> Result<CreateOk, Rejection> {
        if let AtPath::Same(ok) = self.at_path(&cmd, None, ctx.now_ms)? {
            return Ok(ok);
        }
        let body = std::mem::replace(&mut cmd.body, Body::Empty);
        let key = cmd.key.clone();
        let stream = self.new_stream(cmd, body, StreamData::default(), None, ctx)?;
        let info = stream.info();
        self.insert(key, stream);
        Ok(CreateOk { created: true, info })
    }

    /// An existing stream answers 200 only when its configuration, closure
    /// and fork base included, is what this create asks for (`fork`: the
    /// base, and whether the request named its offset); the body and
    /// `Stream-Seq` of such a PUT are ignored. A stream kept for its forks
    /// blocks its path.
    pub(super) fn at_path(
        &self,
        cmd: &CreateStream,
        fork: Option<(&ForkBase, bool)>,
        now_ms: u64,
    ) -> Result<AtPath, Rejection> {
        let Some(existing) = self.stored(&cmd.key) else { return Ok(AtPath::Free) };
        if existing.soft_deleted() || (existing.clock.expired(now_ms) && existing.referenced()) {
            return Err(Rejection::StreamExistsConflict);
        }
        if existing.clock.expired(now_ms) {
            return Ok(AtPath::Free);
        }
        let same_base = match (existing.fork_base(), fork) {
            (None, None) => true,
            (Some(have), Some((asked, offset_named))) => {
                have.source == asked.source && (!offset_named || have.offset == asked.offset)
            }
            _ => false,
        };
        let same = same_base
            && existing.content_type == cmd.content_type
            && existing.clock.lifetime.same_as(&cmd.lifetime)
            && existing.closed == cmd.closed;
        if !same {
            return Err(Rejection::StreamExistsConflict);
        }
        existing.check_expect(cmd.expect)?;
        Ok(AtPath::Same(CreateOk { created: false, info: existing.info() }))
    }

    /// A new stream for `config` over `data` (empty, or a fork's start),
    /// with `body` appended.
    pub(super) fn new_stream(
        &self,
        config: CreateStream,
        body: Body,
        mut data: StreamData,
        fork: Option<ForkBase>,
        ctx: ApplyCtx,
    ) -> Result<StreamState, Rejection> {
        if let Lifetime::ExpiresAt { at_ms } = config.lifetime
            && at_ms <= ctx.now_ms
        {
            return Err(Rejection::ExpiryNotInFuture);
        }
        if config.expect.is_some() {
            // A create that names an incarnation never creates one.
            return Err(Rejection::IncarnationMismatch { current: None });
        }
        match body {
            Body::Empty => {}
            Body::Bytes(bytes) => {
                if config.content_type.is_json() {
                    // A JSON stream stores only normalized messages.
                    return Err(Rejection::ContentTypeMismatch);
                }
                data.push(bytes, ctx.now_ms);
            }
            Body::Json(Ok(batch)) => data.push(batch.text, ctx.now_ms),
            Body::Json(Err(e)) => return Err(Rejection::InvalidJson(e)),
        }
        Ok(StreamState {
            incarnation: Incarnation::derive(self.history_id, &config.key, ctx.log_index, ctx.now_ms),
            content_type: config.content_type,
            clock: LifetimeClock::start(config.lifetime, ctx.now_ms),
            closed: config.closed,
            data,
            writers: config.stream_seq.map(|seq| Box::new(Writers { stream_seq: Some(seq), ..Writers::default() })),
            snapshot: None,
            retained: Offset::ZERO,
            fork: fork.map(|base| Box::new(ForkLinks { base: Some(base), ..ForkLinks::default() })),
        })
    }
}
