//! `POST /{bucket}/{stream}` (base protocol §5.2, §5.2.1, §5.3; extensions §5.3).
//!
//! A write is decided in one order, and the first step that refuses it
//! decides the answer: the stream exists; the producer rules (a repeat gets
//! its receipt whatever its body); closure; content; `Stream-Seq`.

use super::{StreamState, StreamStore};
use crate::command::{AppendStream, ApplyCtx, Body};
use crate::outcome::{AppendKind, AppendOk, ProducerAck, Rejection};
use crate::producer::{self, ProducerDecision, Receipt};

impl StreamStore {
    pub(super) fn append(&mut self, cmd: AppendStream, ctx: ApplyCtx) -> Result<AppendOk, Rejection> {
        let stream = self.live_mut(&cmd.key, ctx.now_ms).ok_or(Rejection::StreamNotFound)?;

        let mut claim = false;
        if let Some(write) = &cmd.producer {
            let state = stream.producers.get(&write.id);
            match producer::decide(state, write) {
                ProducerDecision::Proceed { claim: c } => claim = c,
                ProducerDecision::Duplicate { receipt } => {
                    let state = state.ok_or(Rejection::StreamNotFound)?;
                    let ack = ProducerAck {
                        epoch: state.epoch,
                        highest_seq: state.last_seq,
                        closed_epoch: if write.seq == 0 { state.closed_epoch } else { None },
                    };
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

        if let (Some(seq), Some(last)) = (&cmd.stream_seq, &stream.stream_seq)
            && seq <= last
        {
            return Err(Rejection::StreamSeqConflict { last: last.clone(), tail: stream.data.tail() });
        }

        // Everything is checked: apply.
        let start = stream.data.tail();
        if let Some(bytes) = bytes {
            stream.data.push(bytes);
        }
        if cmd.close {
            stream.closed = true;
        }
        if let Some(seq) = cmd.stream_seq {
            stream.stream_seq = Some(seq);
        }
        stream.clock.renew(ctx.now_ms);
        let receipt = Receipt { start, next: stream.data.tail(), closed: cmd.close };
        let producer = cmd.producer.as_ref().map(|write| {
            let next = producer::record(stream.producers.get(&write.id), write, receipt, ctx.now_ms);
            let ack = ProducerAck {
                epoch: next.epoch,
                highest_seq: next.last_seq,
                closed_epoch: if claim { next.closed_epoch } else { None },
            };
            stream.producers.insert(write.id.clone(), next);
            ack
        });
        Ok(AppendOk { kind: AppendKind::Applied, receipt: Some(receipt), producer, info: stream.info() })
    }
}

/// Step 5: the request's content, for a write that would apply. Returns the
/// bytes to store, `None` for a close without data.
fn check_content(stream: &StreamState, cmd: &AppendStream) -> Result<Option<bytes::Bytes>, Rejection> {
    if cmd.body.is_empty() {
        if cmd.producer.as_ref().and_then(|p| p.digest).is_some_and(|d| !d.matches_body) {
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
    if cmd.producer.as_ref().and_then(|p| p.digest).is_some_and(|d| !d.matches_body) {
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
