//! `GET /{bucket}/{stream}`: catch-up and long-poll reads (base protocol
//! §5.6, §5.7, §8), with ETags, `If-None-Match` and gzip of JSON reads.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Request, StatusCode};
use ursula_stream::{Incarnation, ReadFrom, ReadView, Rejection, StreamKey};

use super::bodies::{json_array, now_ms, query};
use super::head::check_expect;
use super::{Shared, sse};
use crate::backend::{Backend, BackendError, ReadRest, ReadStream, WaitOutcome, WaitStream, WriteRoute};
use crate::cursor::next_cursor;
use crate::error::ApiError;
use crate::front::LiveDeadline;
use crate::headers::{self, names};
use crate::limits::GZIP_MIN_BYTES;
use crate::options::JsonReads;
use crate::query::{LiveMode, ReadParams};
use crate::render::{self, Answer};

pub async fn get<B, T>(shared: Arc<Shared<B>>, key: StreamKey, req: Request<T>) -> Result<Answer, ApiError>
where
    B: Backend,
{
    let params = ReadParams::parse(req.uri().query())?;
    let expect = headers::incarnation(req.headers())?;
    let from = params.offset.unwrap_or(ReadFrom::Start);
    let ends_at = req.extensions().get::<LiveDeadline>().map(|d| d.0);
    // Linearizable reads, `offset=now` and the registration of a live read
    // go through the group's leader (spec/21); history is served anywhere.
    if params.consistency_leader || params.live != LiveMode::CatchUp || from == ReadFrom::Tail {
        super::leader_read(&shared, &key, &req).await?;
    }
    match params.live {
        LiveMode::Sse => sse::open(shared, key, from, params, expect, ends_at).await,
        LiveMode::CatchUp => {
            let q = query(&shared, from, params.max_bytes);
            let mut read = shared.backend.read_streamed(ReadStream { key: key.clone(), query: q }).await;
            if !params.consistency_leader
                && needs_leader_confirmation(&*shared.backend, &key, read.as_ref().map(|r| &r.0))
            {
                // Its state may lag an acknowledged write: confirm through
                // the leader before marking up-to-date or refusing with 416 or 404.
                shared.backend.confirm_tail(&key).await?;
                read = shared.backend.read_streamed(ReadStream { key, query: q }).await;
            }
            let (view, rest) = read?;
            check_expect(expect, &view.info)?;
            Ok(data_answer(&shared, &view, rest, req.headers(), from == ReadFrom::Tail, None))
        }
        LiveMode::LongPoll => long_poll(&shared, key, from, &params, expect, req.headers(), ends_at).await,
    }
}

/// A read whose answer the leader path decides (spec/21): a follower's
/// read that reached its local tail of an open stream or went past it, and
/// any replica's "no such stream", which may only mean it has not applied
/// the create yet (as after a restart). The HTTP handler and the stream
/// plane (a gateway's reads) both ask.
pub fn needs_leader_confirmation<B: Backend + ?Sized>(
    backend: &B,
    key: &StreamKey,
    read: Result<&ReadView, &BackendError>,
) -> bool {
    let at_tail = match read {
        Err(BackendError::Rejected(Rejection::StreamNotFound | Rejection::BucketNotFound)) => return true,
        Ok(view) => view.up_to_date && !view.closed_at_end,
        Err(BackendError::Rejected(Rejection::OffsetBeyondTail { .. })) => true,
        Err(_) => false,
    };
    at_tail && backend.leader_route(key) != WriteRoute::Local
}

async fn long_poll<B: Backend>(
    shared: &Shared<B>,
    key: StreamKey,
    from: ReadFrom,
    params: &ReadParams,
    expect: Option<Incarnation>,
    request: &HeaderMap,
    ends_at: Option<tokio::time::Instant>,
) -> Result<Answer, ApiError> {
    let cursor = next_cursor(now_ms(), params.cursor.as_deref());
    let mut view =
        shared.backend.read(ReadStream { key: key.clone(), query: query(shared, from, params.max_bytes) }).await?;
    check_expect(expect, &view.info)?;
    // Never past the credential's expiry: the answer is then the timeout's.
    let timeout = tokio::time::Instant::now() + Duration::from_millis(params.timeout_ms);
    let deadline = ends_at.map_or(timeout, |end| end.min(timeout));
    // `offset=now` starts waiting at once: the answer carries only future data.
    while view.is_empty() && !view.closed_at_end {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let waited = shared
            .backend
            .wait(WaitStream { key: key.clone(), incarnation: view.info.incarnation, offset: view.next, timeout: left })
            .await?;
        // A long-poll ends when the stream it registered against is replaced.
        let read = shared
            .backend
            .read(ReadStream { key: key.clone(), query: query(shared, ReadFrom::At(view.next), params.max_bytes) })
            .await;
        view = replaced_answers_412(expect, read)?;
        match waited {
            WaitOutcome::TimedOut => break,
            // The live read behind the wait moved: wait again, briefly later.
            WaitOutcome::Ended => tokio::time::sleep(Duration::from_millis(50)).await,
            WaitOutcome::Changed => {}
        }
    }
    if view.is_empty() {
        let mut b = render::builder(StatusCode::NO_CONTENT)
            .header(names::STREAM_NEXT_OFFSET, view.next.to_string())
            .header(names::STREAM_INCARNATION, view.info.incarnation.to_string())
            .header(names::STREAM_UP_TO_DATE, "true")
            .header(header::CACHE_CONTROL, "no-store");
        if view.closed_at_end {
            b = b.header(names::STREAM_CLOSED, "true");
        } else {
            b = b.header(names::STREAM_CURSOR, cursor.to_string());
        }
        return Ok(render::finish(b, render::empty()));
    }
    Ok(data_answer(shared, &view, None, request, false, Some(cursor)))
}

/// A long-poll's read after its wait, with `Stream-Incarnation`: once the
/// stream it registered against is replaced, it answers `412` with the
/// current token (§2.4, live reads), even where a fresh read of the new
/// stream would answer `416` or `410`.
fn replaced_answers_412(
    expect: Option<Incarnation>,
    read: Result<ReadView, BackendError>,
) -> Result<ReadView, ApiError> {
    match read {
        Ok(view) => {
            check_expect(expect, &view.info)?;
            Ok(view)
        }
        Err(BackendError::Rejected(r)) => match (expect, r.read_incarnation()) {
            (Some(e), Some(current)) if e != current => {
                Err(Rejection::IncarnationMismatch { current: Some(current) }.into())
            }
            _ => Err(BackendError::Rejected(r).into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// The entity tag of a read: the incarnation, the range, and closure.
fn etag(view: &ReadView, weak: bool) -> String {
    let closed = if view.closed_at_end { ":c" } else { "" };
    let tag = format!("\"{}:{}:{}{closed}\"", view.info.incarnation, view.start.bytes(), view.next.bytes());
    if weak { format!("W/{tag}") } else { tag }
}

/// `If-None-Match`, compared weakly (RFC 9110 §13.1.2).
pub fn none_match(request: &HeaderMap, tag: &str) -> bool {
    let strip = |t: &str| t.trim().trim_start_matches("W/").to_string();
    let ours = strip(tag);
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == "*" || strip(t) == ours)
}

/// The bytes of a read in the representation clients get.
/// The body of a read as the chunks it is made of (no copy of stored bytes),
/// and the JSON read type when it differs from the stream's content type.
pub fn representation<B>(shared: &Shared<B>, view: &ReadView) -> (Vec<Bytes>, &'static str) {
    let json = view.info.content_type.is_json();
    if json && shared.options.json_reads == JsonReads::Array {
        return (vec![json_array(&view.chunks)], "application/json");
    }
    (view.chunks.clone(), if json { "application/x-ndjson" } else { "" })
}

fn data_answer<B>(
    shared: &Shared<B>,
    view: &ReadView,
    rest: Option<ReadRest>,
    request: &HeaderMap,
    at_now: bool,
    cursor: Option<u64>,
) -> Answer {
    let (body, json_type) = representation(shared, view);
    // Bytes still arriving belong to a stream answered as its bytes are.
    let body_len = match rest {
        Some(_) => usize::try_from(view.len()).unwrap_or(usize::MAX),
        None => body.iter().map(Bytes::len).sum(),
    };
    let content_type = if json_type.is_empty() { view.info.content_type.as_str() } else { json_type };
    let gzip_eligible = !json_type.is_empty() && body_len >= GZIP_MIN_BYTES;
    let tag = etag(view, gzip_eligible);
    // No answer of a node may be stored by a shared cache (extensions §4.3
    // note, 0.8 release notes): it cannot tell a private stream from a public
    // one. Relaxing it is the layer in front's decision.
    let mut b = render::builder(StatusCode::OK)
        .header(names::STREAM_NEXT_OFFSET, view.next.to_string())
        .header(names::STREAM_INCARNATION, view.info.incarnation.to_string())
        .header(header::CACHE_CONTROL, "no-store");
    if !at_now {
        b = b.header(header::ETAG, tag.as_str());
    }
    if view.up_to_date {
        b = b.header(names::STREAM_UP_TO_DATE, "true");
    }
    if view.closed_at_end {
        b = b.header(names::STREAM_CLOSED, "true");
    }
    if let Some(cursor) = cursor {
        b = b.header(names::STREAM_CURSOR, cursor.to_string());
    }
    if !at_now && none_match(request, &tag) {
        return render::finish(b.status(StatusCode::NOT_MODIFIED), render::empty());
    }
    b = b.header(header::CONTENT_TYPE, content_type);
    if gzip_eligible {
        b = b.header(header::VARY, "accept-encoding");
        if headers::accepts_gzip(request)
            && let Some(zipped) = gzip(&body)
        {
            return render::finish(b.header(header::CONTENT_ENCODING, "gzip"), render::full(zipped));
        }
    }
    let body = match rest {
        Some(rest) => render::streamed(body, rest),
        None => render::chunks(body),
    };
    render::finish(b.header(header::CONTENT_LENGTH, body_len), body)
}

fn gzip(body: &[Bytes]) -> Option<Bytes> {
    let len: usize = body.iter().map(Bytes::len).sum();
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(len / 4), flate2::Compression::fast());
    for chunk in body {
        encoder.write_all(chunk).ok()?;
    }
    encoder.finish().ok().map(Bytes::from)
}
