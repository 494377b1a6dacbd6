//! Path routing: `/{bucket}` and `/{bucket}/{stream}`, percent-decoded and
//! validated. Paths under `/__ursula/` are operational endpoints.

use ursula_stream::{BucketId, StreamKey};

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Bucket(BucketId),
    Stream(StreamKey),
    Ops(String),
}

pub fn route(path: &str) -> Result<Route, ApiError> {
    if let Some(rest) = path.strip_prefix("/__ursula/") {
        return Ok(Route::Ops(rest.to_string()));
    }
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let segments: Vec<&str> = trimmed.split('/').collect();
    match segments.as_slice() {
        [bucket] if !bucket.is_empty() => {
            Ok(Route::Bucket(BucketId::parse(&decode(bucket)?).map_err(ApiError::InvalidId)?))
        }
        [bucket, stream] => {
            Ok(Route::Stream(StreamKey::parse(&decode(bucket)?, &decode(stream)?).map_err(ApiError::InvalidId)?))
        }
        _ => Err(ApiError::NotFound),
    }
}

fn decode(segment: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::InvalidId(ursula_stream::IdError::InvalidStream))
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
        assert_eq!(route("/"), Err(ApiError::NotFound));
        assert!(matches!(route("/Demo"), Err(ApiError::InvalidId(_))));
        assert!(matches!(route("/demo/%24x"), Err(ApiError::InvalidId(_))));
        assert!(matches!(route("/demo/%FF"), Err(ApiError::InvalidId(_))));
    }
}
