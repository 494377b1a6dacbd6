//! Path routing: `/{bucket}` and `/{bucket}/{stream}`, percent-decoded and
//! validated. Paths under `/__ursula/` are operational endpoints.

use std::borrow::Cow;

use ursula_stream::{BucketId, StreamKey};

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Bucket(BucketId),
    Stream(StreamKey),
    /// A subresource of a stream (extensions §2–§4); offsets and tokens stay
    /// raw so each route answers its own malformed-value code.
    Sub(StreamKey, Sub),
    Ops(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sub {
    /// `snapshot/{offset}`
    Snapshot(String),
    /// `snapshot`: the removed latest-snapshot path.
    SnapshotLatest,
    /// `snapshot/{offset}/parts`
    SnapshotParts(String),
    /// `snapshot/parts` (discard)
    DiscardParts,
    /// `retention/{offset}`
    Retention(String),
    Bootstrap,
    /// `incarnation/{token}/chunk/{offset}`
    Chunk {
        token: String,
        offset: String,
    },
    /// `incarnation/{token}/snapshot/{offset}`
    ImmutableSnapshot {
        token: String,
        offset: String,
    },
}

/// Most path segments in a route: `{bucket}/{stream}/incarnation/{token}/snapshot/{offset}`.
const MAX_SEGMENTS: usize = 6;

pub fn route(path: &str) -> Result<Route, ApiError> {
    if let Some(rest) = path.strip_prefix("/__ursula/") {
        return Ok(Route::Ops(rest.to_string()));
    }
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    // The segments on the stack: a route is matched on every request.
    let mut segments = [""; MAX_SEGMENTS];
    let mut count = 0;
    for segment in trimmed.split('/') {
        match segments.get_mut(count) {
            Some(slot) => *slot = segment,
            None => return Err(ApiError::NotFound),
        }
        count += 1;
    }
    match &segments[..count] {
        [bucket] if !bucket.is_empty() => {
            Ok(Route::Bucket(BucketId::parse_cow(decode(bucket)?).map_err(ApiError::InvalidId)?))
        }
        [bucket, stream] => Ok(Route::Stream(key(bucket, stream)?)),
        [bucket, stream, rest @ ..] => {
            let sub = match rest {
                ["snapshot"] => Sub::SnapshotLatest,
                ["snapshot", "parts"] => Sub::DiscardParts,
                ["snapshot", offset] => Sub::Snapshot(decode(offset)?.into_owned()),
                ["snapshot", offset, "parts"] => Sub::SnapshotParts(decode(offset)?.into_owned()),
                ["retention", offset] => Sub::Retention(decode(offset)?.into_owned()),
                ["bootstrap"] => Sub::Bootstrap,
                ["incarnation", token, "chunk", offset] => {
                    Sub::Chunk { token: decode(token)?.into_owned(), offset: decode(offset)?.into_owned() }
                }
                ["incarnation", token, "snapshot", offset] => {
                    Sub::ImmutableSnapshot { token: decode(token)?.into_owned(), offset: decode(offset)?.into_owned() }
                }
                _ => return Err(ApiError::NotFound),
            };
            Ok(Route::Sub(key(bucket, stream)?, sub))
        }
        _ => Err(ApiError::NotFound),
    }
}

fn key(bucket: &str, stream: &str) -> Result<StreamKey, ApiError> {
    StreamKey::parse_cow(decode(bucket)?, decode(stream)?).map_err(ApiError::InvalidId)
}

/// A segment percent-decoded; one without `%` is itself, not a copy.
fn decode(segment: &str) -> Result<Cow<'_, str>, ApiError> {
    if !segment.contains('%') {
        return Ok(Cow::Borrowed(segment));
    }
    // `%` not followed by two hex digits is no escape: decoding it as itself
    // would make `/demo/%` and `/demo/%25` one stream.
    let bytes = segment.as_bytes();
    let malformed = bytes
        .iter()
        .enumerate()
        .any(|(i, b)| *b == b'%' && !bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)));
    if malformed {
        return Err(ApiError::InvalidRequest("a path segment holds a malformed percent-escape"));
    }
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map_err(|_| ApiError::InvalidRequest("a path segment is not UTF-8 once percent-decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert!(matches!(route("/demo"), Ok(Route::Bucket(_))));
        assert!(matches!(route("/demo/hello%20world"), Ok(Route::Stream(k)) if k.stream.as_str() == "hello world"));
        assert!(matches!(route("/__ursula/metrics"), Ok(Route::Ops(p)) if p == "metrics"));
        assert_eq!(route("/demo/a/b"), Err(ApiError::NotFound));
        assert_eq!(route("/demo/a/snapshot/x/y"), Err(ApiError::NotFound));
        assert!(
            matches!(route("/demo/a/snapshot/00000000000000000001"), Ok(Route::Sub(_, Sub::Snapshot(o))) if o.len() == 20)
        );
        assert!(matches!(route("/demo/a/bootstrap"), Ok(Route::Sub(_, Sub::Bootstrap))));
        assert!(matches!(route("/demo/a/incarnation/1/chunk/2"), Ok(Route::Sub(_, Sub::Chunk { .. }))));
        assert_eq!(route("/"), Err(ApiError::NotFound));
        assert!(matches!(route("/Demo"), Err(ApiError::InvalidId(_))));
        assert!(matches!(route("/demo/%24x"), Err(ApiError::InvalidId(_))));
        assert!(matches!(route("/demo/%FF"), Err(ApiError::InvalidRequest(_))));
        for malformed in ["/demo/%", "/demo/a%2", "/demo/%zz", "/%/s", "/demo/s/snapshot/%"] {
            assert!(matches!(route(malformed), Err(ApiError::InvalidRequest(_))), "{malformed}");
        }
        assert!(matches!(route("/demo/%25"), Ok(Route::Stream(k)) if k.stream.as_str() == "%"));
    }
}
