//! Forks in the store: a source's reference, a fork's create, and the
//! release that collects a soft-deleted source (`crate::fork`).

use super::StreamStore;
use super::create::AtPath;
use crate::command::{ApplyCtx, Body};
use crate::data::StreamData;
use crate::fork::{CreateFork, ForkBase, ForkRef, ReferenceSource, ReleaseSource, SourceReferenced};
use crate::ids::StreamKey;
use crate::offset::Offset;
use crate::outcome::{CreateOk, ForkFault, Rejection};

impl StreamStore {
    /// Checks a fork's source and records the fork's reference on it, with
    /// the fork point resolved (offset, then sub-offset).
    pub(super) fn reference_source(
        &mut self,
        cmd: ReferenceSource,
        ctx: ApplyCtx,
    ) -> Result<SourceReferenced, Rejection> {
        if cmd.source.bucket != cmd.fork.bucket {
            return Err(Rejection::InvalidFork(ForkFault::OtherBucket));
        }
        let stream = match self.found_mut(&cmd.source, ctx.now_ms) {
            Ok(stream) => stream,
            Err(Rejection::StreamSoftDeleted) => return Err(Rejection::ForkSourceDeleted),
            Err(_) => return Err(Rejection::ForkSourceNotFound),
        };
        if let Some(asked) = &cmd.content_type
            && *asked != stream.content_type
        {
            return Err(Rejection::ContentTypeMismatch);
        }
        let tail = stream.data.tail();
        let at = cmd.offset.unwrap_or(tail);
        if at > tail {
            return Err(Rejection::InvalidFork(ForkFault::OffsetBeyondTail));
        }
        if at < stream.retained {
            return Err(Rejection::StreamGone { retained: stream.retained, incarnation: stream.incarnation });
        }
        // Below a fork's own data the bytes are its source's: their
        // boundaries were checked when that fork was taken.
        if at.bytes() >= stream.data.first() {
            stream.json_boundary(at)?;
        }
        let offset = sub_offset_end(&stream.data, stream.content_type.is_json(), at, cmd.sub_offset)?;
        let base = ForkBase { source: cmd.source, incarnation: stream.incarnation, offset, reference: ctx.log_index };
        let taken = ForkRef { fork: cmd.fork, taken_ms: ctx.now_ms };
        stream.fork.get_or_insert_with(Default::default).forks.insert(ctx.log_index, taken);
        Ok(SourceReferenced {
            base,
            content_type: stream.content_type.clone(),
            lifetime: stream.clock.lifetime.clone(),
            deadline_ms: stream.clock.deadline_ms,
        })
    }

    /// Creates a fork on the reference its source gave, or answers for the
    /// stream already at its path (the shell then releases the reference).
    pub(super) fn create_fork(&mut self, cmd: CreateFork, ctx: ApplyCtx) -> Result<CreateOk, Rejection> {
        let CreateFork { mut create, base, offset_named } = cmd;
        if let AtPath::Same(ok) = self.at_path(&create, Some((&base, offset_named)), ctx.now_ms)? {
            return Ok(ok);
        }
        let body = std::mem::replace(&mut create.body, Body::Empty);
        let key = create.key.clone();
        let data = StreamData::starting_at(base.offset);
        let stream = self.new_stream(create, body, data, Some(base), ctx)?;
        let info = stream.info();
        self.insert(key, stream);
        Ok(CreateOk { created: true, info })
    }

    /// The references of this group's streams taken before `before_ms`, as
    /// (source, reference id, fork): the shell checks each against its fork.
    pub fn fork_references(&self, before_ms: u64) -> Vec<(StreamKey, u64, StreamKey)> {
        let mut out = Vec::new();
        for (bucket, streams) in &self.streams {
            for (id, stream) in streams {
                let Some(links) = stream.fork.as_ref() else { continue };
                for (reference, taken) in links.forks.iter().filter(|(_, t)| t.taken_ms < before_ms) {
                    let source = StreamKey { bucket: bucket.clone(), stream: id.clone() };
                    out.push((source, *reference, taken.fork.clone()));
                }
            }
        }
        out
    }

    /// Whether the stream at `fork` holds reference `reference` on `source`.
    pub fn holds_reference(&self, fork: &StreamKey, source: &StreamKey, reference: u64) -> bool {
        self.stored(fork).and_then(|s| s.fork_base()).is_some_and(|b| b.source == *source && b.reference == reference)
    }

    /// Drops a reference; a source deleted or expired meanwhile goes with
    /// its last one, and hands back its own base to release in turn.
    pub(super) fn release_source(&mut self, cmd: &ReleaseSource, ctx: ApplyCtx) -> Option<ForkBase> {
        let stream = self.stored_mut(&cmd.source)?;
        let links = stream.fork.as_mut()?;
        links.forks.remove(&cmd.reference)?;
        if !links.forks.is_empty() {
            return None;
        }
        if links.soft_deleted || stream.clock.expired(ctx.now_ms) {
            let gone = self.streams.get_mut(&cmd.source.bucket)?.remove(&cmd.source.stream)?;
            return gone.fork.and_then(|f| f.base);
        }
        if links.is_empty() {
            stream.fork = None;
        }
        None
    }
}

/// The fork point `sub_offset` bytes (or JSON messages) into the append
/// that starts at `at` (upstream "Sub-offset addressing"); past that
/// append's end is a `400`.
fn sub_offset_end(data: &StreamData, json: bool, at: Offset, sub_offset: u64) -> Result<Offset, Rejection> {
    if sub_offset == 0 {
        return Ok(at);
    }
    let beyond = Rejection::InvalidFork(ForkFault::SubOffsetBeyondAppend);
    let Some(chunk) = data.chunk_at(at.bytes()) else {
        // In the cold tier appends' edges are not kept: a byte count may
        // reach the tail; messages cannot be counted without the bytes.
        if at.bytes() < data.hot_start() && !json {
            let end = at.bytes().saturating_add(sub_offset);
            return if end <= data.tail().bytes() { Ok(Offset(end)) } else { Err(beyond) };
        }
        return Err(if at.bytes() < data.hot_start() { Rejection::JsonBoundaryUnverified } else { beyond });
    };
    if !json {
        return if sub_offset <= chunk.len() as u64 { Ok(at.advance(sub_offset)) } else { Err(beyond) };
    }
    let mut ends = chunk.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i as u64 + 1);
    match ends.nth(usize::try_from(sub_offset - 1).unwrap_or(usize::MAX)) {
        Some(end) => Ok(at.advance(end)),
        None => Err(beyond),
    }
}
