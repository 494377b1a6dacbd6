//! `GET /{bucket}/{stream}/bootstrap` (extensions §3, spec/32): the latest
//! snapshot and the updates after it in one `multipart/mixed` answer.

use bytes::{Bytes, BytesMut};
use http::header;
use http::{Request, StatusCode};
use ursula_stream::StreamKey;

use super::Shared;
use super::head::check_expect;
use crate::backend::{Backend, ReadBootstrap};
use crate::error::ApiError;
use crate::headers::{self, names};
use crate::limits::MAX_RESPONSE_BYTES;
use crate::render::{self, Answer};

pub async fn bootstrap<B: Backend, T>(
    shared: &Shared<B>,
    key: StreamKey,
    req: &Request<T>,
) -> Result<Answer, ApiError> {
    let live = req.uri().query().unwrap_or("").split('&').any(|p| p == "live" || p.starts_with("live="));
    if live {
        return Err(ApiError::InvalidQuery(
            "bootstrap is one-shot; read live from its Stream-Next-Offset with live=sse".into(),
        ));
    }
    let expect = headers::incarnation(req.headers())?;
    let view = shared.backend.bootstrap(ReadBootstrap { key, max_bytes: MAX_RESPONSE_BYTES }).await?;
    check_expect(expect, &view.info)?;

    // A fresh 128-bit random boundary per answer, so no content can hold it.
    let boundary = format!("ursula-{:032x}", fastrand::u128(..));
    let mut body = BytesMut::new();
    let mut part = |content_type: &str, bytes: &[u8]| {
        body.extend_from_slice(format!("--{boundary}\r\nContent-Type: {content_type}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    };
    match &view.snapshot {
        Some(s) => part(s.content_type.as_str(), &s.body),
        None => part("application/octet-stream", b""),
    }
    let stream_type = view.info.content_type.as_str();
    let updates = super::bodies::concat(&view.updates);
    if view.info.content_type.is_json() {
        for message in updates.split(|&b| b == b'\n').filter(|m| !m.is_empty()) {
            part(stream_type, message);
        }
    } else if !updates.is_empty() {
        part(stream_type, &updates);
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());

    let snapshot_offset = view.snapshot.as_ref().map_or_else(|| "-1".to_string(), |s| s.offset.to_string());
    let complete = view.next == view.info.tail;
    let mut b = render::builder(StatusCode::OK)
        .header(header::CONTENT_TYPE, format!("multipart/mixed; boundary={boundary}"))
        .header(names::STREAM_SNAPSHOT_OFFSET, snapshot_offset)
        .header(names::STREAM_NEXT_OFFSET, view.next.to_string())
        .header(names::STREAM_INCARNATION, view.info.incarnation.to_string())
        .header(header::CACHE_CONTROL, "no-store");
    if complete {
        b = b.header(names::STREAM_UP_TO_DATE, "true");
        if view.info.closed {
            b = b.header(names::STREAM_CLOSED, "true");
        }
    }
    Ok(render::finish(b, render::full(Bytes::from(body))))
}
