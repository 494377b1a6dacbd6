//! Snapshots (extensions §2.2, §2.5; spec/30, spec/31): publish, read with
//! one byte range, and retention.

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Request, StatusCode};
use ursula_stream::{AdvanceRetention, ContentType, Offset, PublishSnapshot, SnapshotDigest, SnapshotView, StreamKey};

use super::head::check_expect;
use super::{Shared, read_body};
use crate::backend::{Backend, ReadSnapshot};
use crate::error::ApiError;
use crate::headers::{self, names};
use crate::render::{self, Answer};

pub(super) fn offset(raw: &str) -> Result<Offset, ApiError> {
    Offset::parse_token(raw).ok_or(ApiError::InvalidPositionOffset)
}

pub async fn publish<B, T>(
    shared: &Shared<B>,
    key: StreamKey,
    raw_offset: &str,
    req: Request<T>,
) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let offset = offset(raw_offset)?;
    let h = req.headers();
    let content_type = headers::content_type(h)?.unwrap_or_else(ContentType::octet_stream);
    let expect = headers::incarnation(h)?;
    let upload = read_body(shared, req).await?;
    let body = upload.bytes.clone();
    let digest = SnapshotDigest::of(&content_type, &body);
    let cmd = PublishSnapshot { key, offset, content_type, body, digest, expect, cold: None };
    let ok = shared.backend.publish_snapshot(cmd).await?;
    Ok(published(&ok))
}

/// The `204` of a publish (single request or parts).
pub(super) fn published(ok: &ursula_stream::SnapshotOk) -> Answer {
    let b = render::builder(StatusCode::NO_CONTENT)
        .header(names::STREAM_SNAPSHOT_OFFSET, ok.snapshot.offset.to_string())
        .header(names::STREAM_SNAPSHOT_DIGEST, ok.snapshot.digest.to_string())
        .header(names::STREAM_INCARNATION, ok.info.incarnation.to_string());
    render::finish(b, render::empty())
}

pub async fn retention<B: Backend>(
    shared: &Shared<B>,
    key: StreamKey,
    raw_offset: &str,
    h: &HeaderMap,
) -> Result<Answer, ApiError> {
    let offset = offset(raw_offset)?;
    let expect = headers::incarnation(h)?;
    let info = shared.backend.advance_retention(AdvanceRetention { key, offset, expect }).await?;
    let b = render::builder(StatusCode::NO_CONTENT)
        .header(names::STREAM_RETAINED_OFFSET, info.retained.to_string())
        .header(names::STREAM_INCARNATION, info.incarnation.to_string());
    Ok(render::finish(b, render::empty()))
}

pub async fn read<B, T>(
    shared: &Shared<B>,
    key: StreamKey,
    raw_offset: &str,
    req: &Request<T>,
) -> Result<Answer, ApiError>
where
    B: Backend,
{
    let offset = offset(raw_offset)?;
    if let Some(q) = req.uri().query() {
        refuse_query_forms(q)?;
    }
    let expect = headers::incarnation(req.headers())?;
    let view = shared.backend.snapshot(ReadSnapshot { key, offset }).await?;
    answer_snapshot(&view, expect, req, false)
}

/// The query forms that immutable reads replaced.
fn refuse_query_forms(query: &str) -> Result<(), ApiError> {
    for pair in query.split('&') {
        let name = pair.split('=').next().unwrap_or("");
        if name == "incarnation" || name == "aligned" {
            return Err(ApiError::Unsupported(format!(
                "{name} is not a query parameter; immutable reads carry it in the path: {{stream}}/incarnation/{{token}}/snapshot/{{offset}}"
            )));
        }
    }
    Ok(())
}

/// One requested byte range of a body of `total` bytes (RFC 9110 §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAsk {
    Whole,
    Part { first: u64, last: u64 },
    Unsatisfiable,
}

/// Honors a single range; several ranges, a value that does not parse, or
/// `If-Range` get the whole body.
pub fn range_ask(h: &HeaderMap, total: u64) -> RangeAsk {
    if h.contains_key(header::IF_RANGE) {
        return RangeAsk::Whole;
    }
    let Some(spec) = h.get(header::RANGE).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().strip_prefix("bytes="))
    else {
        return RangeAsk::Whole;
    };
    if spec.contains(',') {
        return RangeAsk::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return RangeAsk::Whole };
    let num =
        |s: &str| if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
    match (a.trim(), b.trim()) {
        ("", suffix) => match num(suffix) {
            None => RangeAsk::Whole,
            Some(0) => RangeAsk::Unsatisfiable,
            Some(_) if total == 0 => RangeAsk::Unsatisfiable,
            Some(n) => RangeAsk::Part { first: total.saturating_sub(n), last: total - 1 },
        },
        (first, last) => {
            let Some(first) = num(first) else { return RangeAsk::Whole };
            let last = if last.is_empty() { Some(u64::MAX) } else { num(last) };
            match last {
                None => RangeAsk::Whole,
                Some(last) if last < first => RangeAsk::Whole,
                Some(_) if first >= total => RangeAsk::Unsatisfiable,
                Some(last) => RangeAsk::Part { first, last: last.min(total - 1) },
            }
        }
    }
}

/// A snapshot answer, shared by the stream's snapshot route and the
/// immutable snapshot resource. Precedence: 404 (decided before), then
/// 416, then 412, then 304; a matching `If-None-Match` ignores the range.
pub fn answer_snapshot<T>(
    view: &SnapshotView,
    expect: Option<ursula_stream::Incarnation>,
    req: &Request<T>,
    immutable: bool,
) -> Result<Answer, ApiError> {
    let snapshot = &view.snapshot;
    let total = snapshot.body.len() as u64;
    let tag = format!("\"{}\"", snapshot.digest);
    let h = req.headers();
    let revalidates = super::read::none_match(h, &tag);
    let ask = if revalidates { RangeAsk::Whole } else { range_ask(h, total) };
    let mut b = render::builder(StatusCode::OK)
        .header(names::STREAM_SNAPSHOT_OFFSET, snapshot.offset.to_string())
        .header(names::STREAM_SNAPSHOT_DIGEST, snapshot.digest.to_string())
        .header(names::STREAM_NEXT_OFFSET, snapshot.offset.to_string())
        .header(names::STREAM_INCARNATION, view.info.incarnation.to_string())
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, tag.as_str())
        .header(header::CACHE_CONTROL, "no-store");
    if ask == RangeAsk::Unsatisfiable {
        let mut answer = render::error(&ApiError::RangeNotSatisfiable { total }, false);
        let extra = render::finish(b, render::empty());
        for (name, value) in extra.headers() {
            answer.headers_mut().insert(name, value.clone());
        }
        return Ok(answer);
    }
    check_expect(expect, &view.info)?;
    if immutable {
        b = b.header(names::STREAM_IMMUTABLE, "true");
    } else if snapshot.offset == view.info.tail {
        b = b.header(names::STREAM_UP_TO_DATE, "true");
    }
    if revalidates {
        return Ok(render::finish(b.status(StatusCode::NOT_MODIFIED), render::empty()));
    }
    b = b.header(header::CONTENT_TYPE, snapshot.content_type.as_str());
    let head = req.method() == http::Method::HEAD;
    let (status, body) = match ask {
        RangeAsk::Part { first, last } => {
            b = b.header(header::CONTENT_RANGE, format!("bytes {first}-{last}/{total}"));
            let lo = usize::try_from(first).unwrap_or(usize::MAX);
            let hi = usize::try_from(last).unwrap_or(usize::MAX).saturating_add(1);
            (StatusCode::PARTIAL_CONTENT, snapshot.body.slice(lo..hi.min(snapshot.body.len())))
        }
        _ => (StatusCode::OK, snapshot.body.clone()),
    };
    b = b.status(status).header(header::CONTENT_LENGTH, body.len());
    Ok(render::finish(b, if head { render::empty() } else { render::full(body) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ask(range: &str, total: u64) -> RangeAsk {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, HeaderValue::from_str(range).expect("test header"));
        range_ask(&h, total)
    }

    #[test]
    fn single_byte_ranges() {
        use RangeAsk::*;
        let table = [
            ("bytes=0-55", 100, Part { first: 0, last: 55 }),
            ("bytes=90-", 100, Part { first: 90, last: 99 }),
            ("bytes=-10", 100, Part { first: 90, last: 99 }),
            ("bytes=-500", 100, Part { first: 0, last: 99 }),
            ("bytes=50-500", 100, Part { first: 50, last: 99 }),
            ("bytes=100-", 100, Unsatisfiable),
            ("bytes=-0", 100, Unsatisfiable),
            ("bytes=0-", 0, Unsatisfiable),
            ("bytes=0-1,5-6", 100, Whole),
            ("bytes=a-b", 100, Whole),
            ("bytes=5-1", 100, Whole),
            ("items=0-1", 100, Whole),
        ];
        for (range, total, expected) in table {
            assert_eq!(ask(range, total), expected, "{range}");
        }
    }
}
