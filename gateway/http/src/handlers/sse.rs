//! `live=sse` reads (base protocol §5.8, extensions §9.4, §9.5): one
//! `event: data` per batch, each followed in the same write by its
//! `event: control`, until the stream closes or the client leaves.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::{Bytes, BytesMut};
use futures_util::stream;
use http::StatusCode;
use http::header;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use ursula_stream::{Incarnation, ReadFrom, ReadView, Rejection, StreamKey};

use super::Shared;
use super::bodies::{concat, json_array, now_ms, query};
use super::head::check_expect;
use crate::backend::{Backend, BackendError, ReadStream, WaitOutcome, WaitStream};
use crate::cursor::next_cursor;
use crate::error::ApiError;
use crate::headers::names;
use crate::options::JsonReads;
use crate::query::ReadParams;
use crate::render::{self, Answer};

/// How long one wait for new data lasts before it is renewed; the
/// connection itself stays open.
const WAIT_SLICE: Duration = Duration::from_secs(30);

/// The last frame of a session whose credential expired (spec/08).
const CREDENTIAL_EXPIRED: &[u8] = b"event: credential-expired\ndata: {\"reason\":\"credential_expired\"}\n\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    /// UTF-8 text as `data:` lines.
    Text,
    /// JSON streams in the array form: one `data:` line per event.
    JsonArray,
    Base64,
}

struct Live<B> {
    shared: Arc<Shared<B>>,
    key: StreamKey,
    incarnation: Incarnation,
    /// The client named the incarnation: a replacement is a mismatch, not a missing stream.
    expected: bool,
    next: ursula_stream::Offset,
    max_bytes: u64,
    cursor: u64,
    encoding: Encoding,
    first: Option<ReadView>,
    done: bool,
    /// The credential's expiry: the session ends there, once it sent what
    /// was appended before it, with `event: credential-expired`.
    ends_at: Option<tokio::time::Instant>,
}

pub async fn open<B: Backend>(
    shared: Arc<Shared<B>>,
    key: StreamKey,
    from: ReadFrom,
    params: ReadParams,
    expect: Option<Incarnation>,
    ends_at: Option<tokio::time::Instant>,
) -> Result<Answer, ApiError> {
    // The first read decides the status: a missing stream is a plain 404.
    let view = match shared
        .backend
        .read(ReadStream { key: key.clone(), query: sse_query(&shared, from, params.max_bytes) })
        .await
    {
        Ok(view) => view,
        // An offset beyond the tail is reported as an `error` event of the
        // session (spec/21); a missing stream stays a plain 404.
        Err(e @ BackendError::Rejected(Rejection::OffsetBeyondTail { .. })) => {
            let b = render::builder(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/event-stream")
                .header(header::CACHE_CONTROL, render::SSE_CACHE_CONTROL);
            return Ok(render::finish(b, render::full(error_event(&shared.stats, &ApiError::from(e)))));
        }
        Err(e) => return Err(e.into()),
    };
    check_expect(expect, &view.info)?;
    let text_max = params.max_bytes.max(4);
    let view = if view.info.content_type.is_text() && text_max != params.max_bytes {
        // A text SSE event must be able to hold a whole UTF-8 character.
        shared.backend.read(ReadStream { key: key.clone(), query: sse_query(&shared, from, text_max) }).await?
    } else {
        view
    };
    let ct = view.info.content_type.clone();
    let encoding = if !ct.is_text() {
        Encoding::Base64
    } else if ct.is_json() && shared.options.json_reads == JsonReads::Array {
        Encoding::JsonArray
    } else {
        Encoding::Text
    };
    let data_type =
        if ct.is_json() && encoding == Encoding::Text { "application/x-ndjson".to_string() } else { ct.to_string() };
    let mut b = render::builder(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, render::SSE_CACHE_CONTROL)
        .header(names::STREAM_DATA_CONTENT_TYPE, data_type)
        .header(names::STREAM_INCARNATION, view.info.incarnation.to_string());
    if encoding == Encoding::Base64 {
        b = b.header(names::STREAM_SSE_DATA_ENCODING, "base64");
    }
    shared.stats.sse_streams_opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let live = Live {
        shared,
        key,
        incarnation: view.info.incarnation,
        expected: expect.is_some(),
        next: view.next,
        max_bytes: if encoding == Encoding::Base64 { params.max_bytes } else { text_max },
        cursor: next_cursor(now_ms(), params.cursor.as_deref()),
        encoding,
        first: Some(view),
        done: false,
        ends_at,
    };
    let events = stream::unfold(live, |mut live| async move {
        let chunk = live.step().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), live))
    });
    Ok(render::finish(b, StreamBody::new(events).boxed_unsync()))
}

/// A live session whose group lost its leader ends without an `error`
/// event: the client reconnects from its last `streamNextOffset` and meets
/// the new leader (or a `503` to retry) there.
fn ends_cleanly(e: &BackendError) -> bool {
    matches!(e, BackendError::Unavailable { .. } | BackendError::OutcomeUnknown { .. })
}

fn sse_query<B>(shared: &Shared<B>, from: ReadFrom, max_bytes: u64) -> ursula_stream::ReadQuery {
    let mut q = query(shared, from, max_bytes);
    q.boundary = ursula_stream::Boundary::Utf8;
    // Prefer whole messages on JSON streams (base protocol §5.8 max_bytes).
    q.whole_json_messages = true;
    q
}

impl<B: Backend> Live<B> {
    /// One slice of waiting past the cursor, never past the credential's expiry.
    fn wait_request(&self) -> WaitStream {
        let left = self.ends_at.map_or(WAIT_SLICE, |end| end.saturating_duration_since(tokio::time::Instant::now()));
        WaitStream {
            key: self.key.clone(),
            incarnation: self.incarnation,
            offset: self.next,
            timeout: left.min(WAIT_SLICE),
        }
    }

    fn expired(&self) -> bool {
        self.ends_at.is_some_and(|end| tokio::time::Instant::now() >= end)
    }

    /// The next write to the client, or `None` to end the response.
    async fn step(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let view = match self.first.take() {
            Some(view) => view,
            None => loop {
                // Past the expiry there is no wait: what was appended is
                // sent, then the session ends.
                let expired = self.expired();
                if !expired {
                    match self.shared.backend.wait(self.wait_request()).await {
                        Err(e) if ends_cleanly(&e) => return None,
                        Err(e) => {
                            self.done = true;
                            return Some(error_event(&self.shared.stats, &ApiError::from(e)));
                        }
                        // A clean end: the client reconnects from its last streamNextOffset.
                        Ok(WaitOutcome::Ended) => return None,
                        Ok(WaitOutcome::Changed | WaitOutcome::TimedOut) => {}
                    }
                }
                match self
                    .shared
                    .backend
                    .read(ReadStream {
                        key: self.key.clone(),
                        query: sse_query(&self.shared, ReadFrom::At(self.next), self.max_bytes),
                    })
                    .await
                {
                    Err(BackendError::Rejected(r))
                        if r.read_incarnation().is_some_and(|current| current != self.incarnation) =>
                    {
                        // Refused by a replacement (its tail is short of the cursor).
                        return Some(self.replaced(r.read_incarnation()));
                    }
                    Err(e) if ends_cleanly(&e) => return None,
                    Err(e) => {
                        self.done = true;
                        return Some(error_event(&self.shared.stats, &ApiError::from(e)));
                    }
                    Ok(view) if view.info.incarnation != self.incarnation => {
                        return Some(self.replaced(Some(view.info.incarnation)));
                    }
                    Ok(view) if view.is_empty() && !view.closed_at_end && expired => {
                        self.done = true;
                        return Some(Bytes::from_static(CREDENTIAL_EXPIRED));
                    }
                    Ok(view) if view.is_empty() && !view.closed_at_end => continue,
                    Ok(view) => break view,
                }
            },
        };
        self.next = view.next;
        self.cursor = self.cursor.max(next_cursor(now_ms(), None));
        let mut out = BytesMut::new();
        if !view.is_empty() {
            self.data_event(&view, &mut out);
        }
        control_event(&view, self.cursor, &mut out);
        if view.closed_at_end {
            self.done = true;
        }
        Some(out.freeze())
    }

    /// The stream this session was opened against was replaced: the end.
    fn replaced(&mut self, current: Option<Incarnation>) -> Bytes {
        self.done = true;
        let err = if self.expected { Rejection::IncarnationMismatch { current } } else { Rejection::StreamNotFound };
        error_event(&self.shared.stats, &ApiError::from(err))
    }

    fn data_event(&self, view: &ReadView, out: &mut BytesMut) {
        out.extend_from_slice(b"event: data\n");
        match self.encoding {
            Encoding::Base64 => {
                out.extend_from_slice(b"data:");
                out.extend_from_slice(
                    base64::engine::general_purpose::STANDARD.encode(concat(&view.chunks)).as_bytes(),
                );
                out.extend_from_slice(b"\n");
            }
            Encoding::JsonArray => {
                out.extend_from_slice(b"data:");
                out.extend_from_slice(&json_array(&view.chunks));
                out.extend_from_slice(b"\n");
            }
            Encoding::Text => text_lines(&concat(&view.chunks), out),
        }
        out.extend_from_slice(b"\n");
    }
}

/// One `data:` line per line of the payload; CR, LF and CRLF all end a line
/// in SSE, so each is a line break here and no payload can forge an event.
fn text_lines(payload: &[u8], out: &mut BytesMut) {
    let mut rest = payload;
    loop {
        let end = rest.iter().position(|&b| b == b'\n' || b == b'\r');
        let line = &rest[..end.unwrap_or(rest.len())];
        out.extend_from_slice(b"data:");
        if line.first() == Some(&b' ') {
            // A reader strips one space after `data:`; keep the line's own.
            out.extend_from_slice(b" ");
        }
        out.extend_from_slice(line);
        out.extend_from_slice(b"\n");
        let Some(end) = end else { break };
        let skip = if rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n') { 2 } else { 1 };
        rest = &rest[end + skip..];
        if rest.is_empty() {
            // The payload ended with a line break: one empty line keeps it.
            out.extend_from_slice(b"data:\n");
            break;
        }
    }
}

fn control_event(view: &ReadView, cursor: u64, out: &mut BytesMut) {
    let mut control = serde_json::Map::new();
    control.insert("streamNextOffset".into(), view.next.to_string().into());
    if view.closed_at_end {
        control.insert("streamClosed".into(), true.into());
        control.insert("upToDate".into(), true.into());
    } else {
        control.insert("streamCursor".into(), cursor.to_string().into());
        if view.up_to_date {
            control.insert("upToDate".into(), true.into());
        }
    }
    out.extend_from_slice(b"event: control\ndata:");
    out.extend_from_slice(serde_json::Value::Object(control).to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// A live read that ends in error sends the error body as an `error` event.
fn error_event(stats: &crate::telemetry::RequestStats, err: &ApiError) -> Bytes {
    stats.sse_error_events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut out = BytesMut::new();
    out.extend_from_slice(b"event: error\ndata:");
    // The body on one line (extensions §11): without its closing newline.
    out.extend_from_slice(err.answer().body().trim_ascii_end());
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(payload: &str) -> String {
        let mut out = BytesMut::new();
        text_lines(payload.as_bytes(), &mut out);
        String::from_utf8(out.to_vec()).expect("utf8")
    }

    #[test]
    fn every_line_break_becomes_a_data_line() {
        assert_eq!(lines("a"), "data:a\n");
        assert_eq!(lines("a\nb"), "data:a\ndata:b\n");
        assert_eq!(lines("a\r\n\r\nb"), "data:a\ndata:\ndata:b\n");
        assert_eq!(lines("a\rb"), "data:a\ndata:b\n");
        assert_eq!(lines("{\"a\":1}\n"), "data:{\"a\":1}\ndata:\n");
        assert_eq!(lines(" lead"), "data:  lead\n");
    }
}
