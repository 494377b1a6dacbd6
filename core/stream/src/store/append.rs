//! `POST /{bucket}/{stream}` (base protocol §5.2, §5.2.1, §5.3; extensions §5.3, §5.4).
//!
//! A write is decided in one order, and the first step that refuses it
//! decides the answer: the stream exists; the producer rules (a repeat gets
//! its receipt whatever its body); closure; content; `Stream-Seq`; and
//! last the `Stream-Incarnation` precondition, before anything applies.

use super::{StreamState, StreamStore};
use crate::command::{AppendStream, ApplyCtx, Body};
use crate::outcome::{AppendKind, AppendOk, ProducerAck, Rejection};
use crate::producer::{self, ProducerDecision, ProducerHeaders, Receipt};

/// A producer idle this long is forgotten.
pub const PRODUCER_IDLE_FORGET_MS: u64 = 7 * 24 * 3600 * 1000;
/// A stream holds at most this many producers...
pub const MAX_PRODUCERS: usize = 4096;
/// ...and evicts one for a newcomer only when it was idle this long.
pub const PRODUCER_EVICTABLE_IDLE_MS: u64 = 3600 * 1000;

impl StreamStore {
    pub(super) fn append(&mut self, cmd: AppendStream, ctx: ApplyCtx) -> Result<AppendOk, Rejection> {
        // Only a group whose history was rewritten has closed epochs: the
        // common write skips the second lookup.
        let history_closed = match &cmd.producer {
            Some(write) if self.rewritten() => self
                .live(&cmd.key, ctx.now_ms)
                .and_then(|stream| self.closed_by_history(&cmd.key, stream, &write.id, write.epoch)),
            _ => None,
        };
        let stream = self.found_mut(&cmd.key, ctx.now_ms)?;

        let mut claim = false;
        let mut evict = None;
        if let Some(write) = &cmd.producer {
            forget_idle_producers(stream, ctx.now_ms);
            evict = admit_producer(stream, write, cmd.expect.is_some(), ctx.now_ms)?;
            let state = stream.producers().get(&write.id);
            // A rewrite closed this epoch: only a repeat of a write that survived it applies.
            if let Some(closed) = history_closed
                && write.seq > closed.seq
            {
                return Err(Rejection::ProducerClosedByHistory { closed });
            }
            match producer::decide(state, write) {
                ProducerDecision::Proceed { claim: c } => claim = c,
                ProducerDecision::Duplicate { receipt } => {
                    let state = state.ok_or(Rejection::StreamNotFound)?;
                    let ack = ProducerAck {
                        epoch: state.epoch,
                        highest_seq: state.last_seq,
                        closed_epoch: if write.seq == 0 { state.closed_epoch } else { None },
                    };
                    stream.check_expect(cmd.expect)?;
                    return Ok(AppendOk {
                        kind: AppendKind::Duplicate,
                        receipt,
                        producer: Some(ack),
                        info: stream.info(),
                    });
                }
                ProducerDecision::StaleEpoch { current, closed_by_claim } => {
                    return Err(Rejection::ProducerStaleEpoch { current, closed_by_claim });
                }
                ProducerDecision::EpochNotClaimed => return Err(Rejection::ProducerEpochNotClaimed),
                ProducerDecision::SeqGap { expected, received } => {
                    return Err(Rejection::ProducerSeqGap { expected, received });
                }
                ProducerDecision::KeyConflict { current } => return Err(Rejection::ProducerKeyConflict { current }),
            }
        }

        if stream.closed {
            if cmd.body.is_empty() && cmd.close && cmd.producer.is_none() {
                // A close-only request is idempotent.
                stream.check_expect(cmd.expect)?;
                let tail = stream.data.tail();
                return Ok(AppendOk {
                    kind: AppendKind::AlreadyClosed,
                    receipt: Some(Receipt { start: tail, next: tail, closed: true }),
                    producer: None,
                    info: stream.info(),
                });
            }
            return Err(Rejection::StreamClosed { tail: stream.data.tail() });
        }

        let bytes = check_content(stream, &cmd)?;

        if let (Some(seq), Some(last)) = (&cmd.stream_seq, stream.stream_seq())
            && seq <= last
        {
            return Err(Rejection::StreamSeqConflict { last: last.clone(), tail: stream.data.tail() });
        }
        stream.check_expect(cmd.expect)?;

        // Everything is checked: apply.
        let start = stream.data.tail();
        if let Some(bytes) = bytes {
            stream.data.push(bytes, ctx.now_ms);
        }
        if cmd.close {
            stream.closed = true;
        }
        if let Some(seq) = cmd.stream_seq {
            stream.writers_mut().stream_seq = Some(seq);
        }
        stream.clock.renew(ctx.now_ms);
        let receipt = Receipt { start, next: stream.data.tail(), closed: cmd.close };
        if let Some(victim) = evict {
            forget_producer(stream, &victim);
        }
        let producer = cmd.producer.as_ref().map(|write| {
            let previous = stream.producers().get(&write.id);
            let next = producer::record(previous, write, receipt, ctx.now_ms, stream.epoch_floor());
            let ack = ProducerAck {
                epoch: next.epoch,
                highest_seq: next.last_seq,
                closed_epoch: if claim { next.closed_epoch } else { None },
            };
            stream.writers_mut().producers.insert(write.id.clone(), next);
            ack
        });
        Ok(AppendOk { kind: AppendKind::Applied, receipt: Some(receipt), producer, info: stream.info() })
    }
}

/// Discards the state of a producer, raising the epoch floor to its epoch.
fn forget_producer(stream: &mut StreamState, id: &str) {
    let writers = stream.writers_mut();
    if let Some(state) = writers.producers.remove(id) {
        writers.epoch_floor = Some(writers.epoch_floor.map_or(state.epoch, |f| f.max(state.epoch)));
    }
}

/// Producers that wrote nothing for 7 days are forgotten.
fn forget_idle_producers(stream: &mut StreamState, now_ms: u64) {
    let idle: Vec<String> = stream
        .producers()
        .iter()
        .filter(|(_, p)| now_ms.saturating_sub(p.last_seen_ms) >= PRODUCER_IDLE_FORGET_MS)
        .map(|(id, _)| id.clone())
        .collect();
    for id in idle {
        forget_producer(stream, &id);
    }
}

/// The epoch floor and the producer cap (extensions §5.4, spec/17). Returns
/// the producer to evict if the write applies.
fn admit_producer(
    stream: &StreamState,
    write: &ProducerHeaders,
    with_incarnation: bool,
    now_ms: u64,
) -> Result<Option<String>, Rejection> {
    let floor = stream.epoch_floor();
    let expired = || Rejection::ProducerExpired { floor: floor.unwrap_or(0) };
    if let Some(state) = stream.producers().get(&write.id) {
        let claims_above_floor = write.seq == 0 && floor.is_none_or(|f| write.epoch > f);
        if with_incarnation && !state.opened_above_floor && !claims_above_floor {
            return Err(expired());
        }
        return Ok(None);
    }
    if with_incarnation && floor.is_some_and(|f| write.epoch <= f) {
        return Err(expired());
    }
    if stream.producers().len() < MAX_PRODUCERS {
        return Ok(None);
    }
    // Deterministic choice: the least recently seen, ties by id.
    let victim = stream
        .producers()
        .iter()
        .filter(|(_, p)| now_ms.saturating_sub(p.last_seen_ms) >= PRODUCER_EVICTABLE_IDLE_MS)
        .min_by_key(|(id, p)| (p.last_seen_ms, id.as_str()))
        .map(|(id, _)| id.clone());
    victim.map(Some).ok_or(Rejection::ProducerLimit)
}

/// Step 5: the request's content, for a write that would apply. Returns the
/// bytes to store, `None` for a close without data.
fn check_content(stream: &StreamState, cmd: &AppendStream) -> Result<Option<bytes::Bytes>, Rejection> {
    let digest_mismatch = cmd.producer.as_ref().and_then(|p| p.digest).is_some_and(|d| !d.matches_body);
    if cmd.body.is_empty() {
        if digest_mismatch {
            return Err(Rejection::ProducerDigestMismatch);
        }
        return if cmd.close { Ok(None) } else { Err(Rejection::EmptyAppend) };
    }
    let Some(content_type) = &cmd.content_type else {
        return Err(Rejection::MissingContentType);
    };
    if *content_type != stream.content_type {
        return Err(Rejection::ContentTypeMismatch);
    }
    if digest_mismatch {
        return Err(Rejection::ProducerDigestMismatch);
    }
    match &cmd.body {
        Body::Empty => Ok(None),
        Body::Bytes(bytes) if !stream.content_type.is_json() => Ok(Some(bytes.clone())),
        Body::Bytes(_) => Err(Rejection::ContentTypeMismatch),
        Body::Json(Err(e)) => Err(Rejection::InvalidJson(*e)),
        Body::Json(Ok(batch)) if batch.count == 0 => Err(Rejection::EmptyJsonArray),
        Body::Json(Ok(batch)) => Ok(Some(batch.text.clone())),
    }
}
