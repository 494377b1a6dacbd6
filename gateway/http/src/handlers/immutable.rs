//! Immutable reads (extensions §4, spec/44): a chunk of the stream's bytes
//! on the 4 MiB grid, and the latest snapshot, both named by incarnation
//! token and offset in the path so any cache can key them by URL.

use http::header;
use http::{Request, StatusCode};
use ursula_stream::{Boundary, Incarnation, Offset, ReadFrom, ReadQuery, ReadView, StreamKey};

use super::Shared;
use super::bodies::concat;
use super::head::check_expect;
use super::read::none_match;
use super::snapshot::answer_snapshot;
use crate::backend::{Backend, ReadSnapshot, ReadStream};
use crate::error::ApiError;
use crate::headers::names;
use crate::render::{self, Answer};

/// Ursula's chunk boundaries: the multiples of 4 MiB in its offset space.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;

fn parse_path<T>(req: &Request<T>, token: &str, offset: &str) -> Result<(Incarnation, Offset), ApiError> {
    if req.uri().query().is_some() {
        return Err(ApiError::QueryNotAccepted);
    }
    let token = Incarnation::parse(token).ok_or(ApiError::InvalidResource)?;
    let offset = Offset::parse_token(offset).ok_or(ApiError::InvalidResource)?;
    Ok((token, offset))
}

pub async fn chunk<B: Backend, T>(
    shared: &Shared<B>,
    key: StreamKey,
    token: &str,
    offset: &str,
    req: &Request<T>,
) -> Result<Answer, ApiError> {
    let (token, offset) = parse_path(req, token, offset)?;
    let chunk_end = (offset.bytes() / CHUNK_BYTES + 1) * CHUNK_BYTES;
    let query = ReadQuery {
        from: ReadFrom::At(offset),
        max_bytes: chunk_end - offset.bytes(),
        boundary: Boundary::Byte,
        whole_json_messages: false,
    };
    // 404, 410 and 416 come first; the token in the path is the precondition.
    let view = shared.backend.read(ReadStream { key, query }).await?;
    check_expect(Some(token), &view.info)?;
    let body = concat(&view.chunks);
    let marked = (view.next.bytes() == chunk_end && view.next < view.info.tail) || view.closed_at_end;
    let content_type =
        if view.info.content_type.is_json() { "application/x-ndjson" } else { view.info.content_type.as_str() };
    let tag = chunk_etag(&view, marked, content_type, &body);
    let mut b = render::builder(StatusCode::OK)
        .header(names::STREAM_INCARNATION, view.info.incarnation.to_string())
        .header(names::STREAM_OFFSET, view.start.to_string())
        .header(names::STREAM_NEXT_OFFSET, view.next.to_string())
        .header(header::ETAG, tag.as_str())
        .header(header::CACHE_CONTROL, "no-store");
    if view.closed_at_end {
        b = b.header(names::STREAM_CLOSED, "true");
    }
    if marked {
        b = b.header(names::STREAM_IMMUTABLE, "true");
    }
    if none_match(req.headers(), &tag) {
        return Ok(render::finish(b.status(StatusCode::NOT_MODIFIED), render::empty()));
    }
    b = b.header(header::CONTENT_TYPE, content_type).header(header::CONTENT_LENGTH, body.len());
    let head = req.method() == http::Method::HEAD;
    Ok(render::finish(b, if head { render::empty() } else { render::full(body) }))
}

/// A strong tag over the token, the range, where the answer ends, the
/// content type and the body: a deployment that reused a token for other
/// bytes gets new bytes at revalidation, never a 304.
fn chunk_etag(view: &ReadView, marked: bool, content_type: &str, body: &[u8]) -> String {
    let ends = match (view.closed_at_end, view.up_to_date, marked) {
        (true, _, _) => 2u8,
        (false, true, _) => 1,
        _ => 0,
    };
    let mut hasher = blake3::Hasher::new();
    hasher.update(&view.info.incarnation.value().to_le_bytes());
    hasher.update(&view.start.bytes().to_le_bytes());
    hasher.update(&view.next.bytes().to_le_bytes());
    hasher.update(&[ends]);
    hasher.update(&(content_type.len() as u64).to_le_bytes());
    hasher.update(content_type.as_bytes());
    hasher.update(body);
    let hex = hasher.finalize().to_hex();
    format!("\"{}\"", &hex.as_str()[..32])
}

pub async fn snapshot<B: Backend, T>(
    shared: &Shared<B>,
    key: StreamKey,
    token: &str,
    offset: &str,
    req: &Request<T>,
) -> Result<Answer, ApiError> {
    let (token, offset) = parse_path(req, token, offset)?;
    let view = shared.backend.snapshot(ReadSnapshot { key, offset }).await?;
    answer_snapshot(&view, Some(token), req, true)
}
