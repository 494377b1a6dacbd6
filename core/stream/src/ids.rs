//! Bucket and stream identifiers (extensions §1.1, spec/13-streams.md).

use std::borrow::Cow;
use std::fmt;

/// Longest stream id, and longest `{bucket}/{stream}` key.
pub const MAX_STREAM_KEY_BYTES: usize = 122;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("bucket id must match ^[a-z0-9_-]{{4,64}}$")]
    InvalidBucket,
    #[error("stream id must be 1 to 122 bytes without '/', NUL or '..', not start with '$' and not be 'streams'")]
    InvalidStream,
    #[error("bucket and stream id together must not exceed 122 bytes")]
    KeyTooLong,
}

/// A validated bucket id.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketId(String);

impl BucketId {
    pub fn parse(raw: &str) -> Result<BucketId, IdError> {
        BucketId::parse_cow(Cow::Borrowed(raw))
    }

    /// `parse` of a string the caller may already own (a percent-decoded
    /// path segment), which becomes the id without another copy.
    pub fn parse_cow(raw: Cow<'_, str>) -> Result<BucketId, IdError> {
        if BucketId::is_valid(&raw) { Ok(BucketId(raw.into_owned())) } else { Err(IdError::InvalidBucket) }
    }

    /// Whether `raw` is a bucket id (`^[a-z0-9_-]{4,64}$`), without making one.
    pub fn is_valid(raw: &str) -> bool {
        (4..=64).contains(&raw.len())
            && raw.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A validated stream id within a bucket.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(String);

impl StreamId {
    pub fn parse(raw: &str) -> Result<StreamId, IdError> {
        StreamId::parse_cow(Cow::Borrowed(raw))
    }

    /// `parse` of a string the caller may already own (see `BucketId::parse_cow`).
    pub fn parse_cow(raw: Cow<'_, str>) -> Result<StreamId, IdError> {
        let ok = !raw.is_empty()
            && raw.len() <= MAX_STREAM_KEY_BYTES
            && !raw.contains('/')
            && !raw.contains('\0')
            && !raw.contains("..")
            && !raw.starts_with('$')
            && raw != "streams";
        if ok { Ok(StreamId(raw.into_owned())) } else { Err(IdError::InvalidStream) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key of a stream: (bucket, stream).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamKey {
    pub bucket: BucketId,
    pub stream: StreamId,
}

impl StreamKey {
    pub fn new(bucket: BucketId, stream: StreamId) -> Result<StreamKey, IdError> {
        // The combined `{bucket}/{stream}` key counts the separator.
        if bucket.0.len() + 1 + stream.0.len() > MAX_STREAM_KEY_BYTES {
            return Err(IdError::KeyTooLong);
        }
        Ok(StreamKey { bucket, stream })
    }

    pub fn parse(bucket: &str, stream: &str) -> Result<StreamKey, IdError> {
        StreamKey::parse_cow(Cow::Borrowed(bucket), Cow::Borrowed(stream))
    }

    /// `parse` of strings the caller may already own (see `BucketId::parse_cow`).
    pub fn parse_cow(bucket: Cow<'_, str>, stream: Cow<'_, str>) -> Result<StreamKey, IdError> {
        StreamKey::new(BucketId::parse_cow(bucket)?, StreamId::parse_cow(stream)?)
    }
}

impl fmt::Display for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.bucket.0, self.stream.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_ids() {
        for ok in ["demo", "a_b-c", "0123", &"a".repeat(64)] {
            assert!(BucketId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["abc", "Demo", "de.mo", "de/mo", "", &"a".repeat(65)] {
            assert_eq!(BucketId::parse(bad), Err(IdError::InvalidBucket), "{bad}");
        }
    }

    #[test]
    fn stream_ids() {
        for ok in ["hello", "a.b", "$x".trim_start_matches('$'), "stream", "día", "streams2"] {
            assert!(StreamId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b", "a\0b", "a..b", "..", "$meta", "streams", &"x".repeat(123)] {
            assert_eq!(StreamId::parse(bad), Err(IdError::InvalidStream), "{bad:?}");
        }
    }

    #[test]
    fn combined_key_is_capped() {
        let bucket = "b".repeat(10);
        assert!(StreamKey::parse(&bucket, &"s".repeat(111)).is_ok());
        assert_eq!(StreamKey::parse(&bucket, &"s".repeat(112)), Err(IdError::KeyTooLong));
    }
}
