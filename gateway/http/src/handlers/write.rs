//! Writes: create (`PUT`), append and close (`POST`), delete.

use bytes::Bytes;
use http::header;
use http::{HeaderMap, Request, StatusCode};
use ursula_stream::producer::WriteDigest;
use ursula_stream::{
    AppendKind, AppendOk, AppendStream, Body, ContentType, CreateStream, DeleteStream, Lifetime, StreamInfo, StreamKey,
};

use super::{Shared, read_body};
use crate::backend::{Backend, ForkStream};
use crate::error::ApiError;
use crate::headers::{self, names};
use crate::render::{self, Answer};

/// `PUT`: a create, or with `Stream-Forked-From` a fork, which takes what
/// the request leaves out (content type, lifetime) from its source.
pub async fn create<B, T>(shared: &Shared<B>, key: StreamKey, req: Request<T>) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let h = req.headers();
    let fork = headers::fork(h)?;
    let content_type = headers::content_type(h)?;
    if headers::producer(h)?.is_some() {
        return Err(ApiError::InvalidProducer(
            "a create must not carry producer headers; create, then claim an epoch with an append".into(),
        ));
    }
    let lifetime = match &fork {
        Some(_) if !headers::names_lifetime(h) => None,
        _ => Some(headers::lifetime(h)?),
    };
    let closed = headers::stream_closed(h);
    let stream_seq = headers::stream_seq(h)?;
    let expect = headers::incarnation(h)?;
    let location = absolute_url(h, req.uri());
    let upload = read_body(shared, req).await?;
    let raw = upload.bytes.clone();
    let ok = match fork {
        Some(fork) => {
            if content_type.is_some() {
                text_is_utf8(content_type.as_ref(), &raw)?;
            }
            let (source, offset, sub_offset) = (fork.source, fork.offset, fork.sub_offset);
            let fork = ForkStream {
                key,
                source,
                offset,
                sub_offset,
                content_type,
                lifetime,
                closed,
                stream_seq,
                body: raw,
                expect,
            };
            shared.backend.fork(fork).await?
        }
        None => {
            let content_type = content_type.unwrap_or_else(ContentType::octet_stream);
            let lifetime = lifetime.unwrap_or(Lifetime::Forever);
            text_is_utf8(Some(&content_type), &raw)?;
            let body = Body::prepare(Some(&content_type), raw);
            let create = CreateStream { key, content_type, lifetime, closed, stream_seq, body, expect };
            shared.backend.create(create).await?
        }
    };
    let status = if ok.created { StatusCode::CREATED } else { StatusCode::OK };
    let mut b = stream_headers(render::builder(status), &ok.info);
    if ok.created {
        b = b.header(header::LOCATION, location);
    }
    Ok(render::finish(b, render::empty()))
}

pub async fn append<B, T>(shared: &Shared<B>, key: StreamKey, req: Request<T>) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let h = req.headers();
    let (close, stream_seq, mut producer, claimed_digest, expect) = if headers::any_protocol_header(h) {
        headers::refuse_removed_append_headers(h)?;
        let close = headers::stream_closed(h);
        (close, headers::stream_seq(h)?, headers::producer(h)?, headers::producer_digest(h)?, headers::incarnation(h)?)
    } else {
        (false, None, None, None, None)
    };
    // A close-only request may carry any Content-Type; it is never checked.
    let content_type = headers::content_type(h).or_else(|e| if close { Ok(None) } else { Err(e) })?;
    let upload = read_body(shared, req).await?;
    let raw = upload.bytes.clone();
    if let (Some(producer), Some(claimed)) = (producer.as_mut(), claimed_digest) {
        let matches_body = *blake3::hash(&raw).as_bytes() == claimed;
        producer.digest = Some(WriteDigest { claimed, matches_body });
    }
    text_is_utf8(content_type.as_ref(), &raw)?;
    let body = Body::prepare(content_type.as_ref(), raw);
    let has_body = !body.is_empty();
    let ok =
        shared.backend.append(AppendStream { key, content_type, body, close, stream_seq, producer, expect }).await?;
    Ok(append_answer(&ok, has_body))
}

/// A `text/*` body must be UTF-8 (base protocol §5.8: SSE carries it as
/// text; spec/27: `400`). Checked before anything is proposed, so a log
/// written before the rule replays as it applied.
fn text_is_utf8(content_type: Option<&ContentType>, raw: &Bytes) -> Result<(), ApiError> {
    match content_type {
        Some(ct) if ct.is_text_family() && std::str::from_utf8(raw).is_err() => Err(ApiError::InvalidUtf8),
        _ => Ok(()),
    }
}

fn append_answer(ok: &AppendOk, has_body: bool) -> Answer {
    use http::HeaderValue;
    // A producer's new write with data answers 200 with its ack; everything
    // else (plain appends, closes, repeats) answers 204.
    let status = match (&ok.producer, ok.kind) {
        (Some(_), AppendKind::Applied) if has_body => StatusCode::OK,
        _ => StatusCode::NO_CONTENT,
    };
    let mut answer = render::answer(status);
    let h = answer.headers_mut();
    h.insert(names::STREAM_INCARNATION, HeaderValue::from(ok.info.incarnation.value()));
    match ok.receipt {
        Some(receipt) => {
            h.insert(names::STREAM_NEXT_OFFSET, render::offset_value(receipt.next));
            if ok.producer.is_some() {
                h.insert(names::STREAM_OFFSET, render::offset_value(receipt.start));
            }
        }
        None => {
            h.insert(names::PRODUCER_OUTCOME, HeaderValue::from_static("receipt-evicted"));
        }
    }
    if ok.info.closed {
        h.insert(names::STREAM_CLOSED, HeaderValue::from_static("true"));
    }
    if let Some(ack) = &ok.producer {
        h.insert(names::PRODUCER_EPOCH, HeaderValue::from(ack.epoch));
        h.insert(names::PRODUCER_SEQ, HeaderValue::from(ack.highest_seq));
        if let Some(closed) = ack.closed_epoch {
            h.insert(names::PRODUCER_CLOSED_EPOCH, HeaderValue::from(closed.epoch));
            h.insert(names::PRODUCER_CLOSED_SEQ, HeaderValue::from(closed.seq));
        }
    }
    answer
}

pub async fn delete<B: Backend>(shared: &Shared<B>, key: StreamKey, h: &HeaderMap) -> Result<Answer, ApiError> {
    let expect = headers::incarnation(h)?;
    shared.backend.delete(DeleteStream { key, expect }).await?;
    Ok(render::finish(render::builder(StatusCode::NO_CONTENT), render::empty()))
}

/// The configuration headers of create and `HEAD` answers.
pub fn stream_headers(mut b: http::response::Builder, info: &StreamInfo) -> http::response::Builder {
    b = b
        .header(header::CONTENT_TYPE, info.content_type.as_str())
        .header(names::STREAM_NEXT_OFFSET, info.tail.to_string())
        .header(names::STREAM_INCARNATION, info.incarnation.to_string());
    if info.closed {
        b = b.header(names::STREAM_CLOSED, "true");
    }
    match &info.lifetime {
        Lifetime::Forever => {}
        Lifetime::Ttl { secs } => b = b.header(names::STREAM_TTL, secs.to_string()),
        Lifetime::ExpiresAt { at_ms } => {
            if let Some(text) = rfc3339_ms(*at_ms) {
                b = b.header(names::STREAM_EXPIRES_AT, text);
            }
        }
    }
    b
}

/// An instant as RFC 3339 in UTC, with milliseconds only when it has some,
/// as `Stream-Expires-At` is echoed (the same instant a client sent).
fn rfc3339_ms(at_ms: u64) -> Option<String> {
    let nanos = i128::from(at_ms) * 1_000_000;
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?;
    let text = if at_ms.is_multiple_of(1000) {
        at.format(time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z"))
    } else {
        at.format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
    };
    text.ok()
}

/// `Location` of a created stream: absolute, from the request's `Host`.
fn absolute_url(h: &HeaderMap, uri: &http::Uri) -> String {
    let host = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| h.get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string))
        .unwrap_or_else(|| "localhost".to_string());
    format!("http://{host}{}", uri.path())
}
