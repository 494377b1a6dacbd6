//! `HEAD /{bucket}/{stream}` (spec/29-head-stream.md). Never renews a TTL.

use http::HeaderMap;
use http::StatusCode;
use http::header;
use ursula_stream::{Incarnation, Rejection, StreamInfo, StreamKey};

use super::Shared;
use super::write::stream_headers;
use crate::backend::{Backend, SnapshotParts};
use crate::error::ApiError;
use crate::headers::{self, names};
use crate::render::{self, Answer};

pub async fn head<B: Backend>(
    shared: &Shared<B>,
    key: StreamKey,
    h: &HeaderMap,
    request_limit: u64,
) -> Result<Answer, ApiError> {
    let expect = headers::incarnation(h)?;
    let info = shared.backend.head(key).await?;
    check_expect(expect, &info)?;
    let mut b = stream_headers(render::builder(StatusCode::OK), &info)
        .header(header::CACHE_CONTROL, "no-store")
        .header(names::STREAM_RETAINED_OFFSET, info.retained.to_string())
        .header(names::URSULA_MAX_REQUEST_BYTES, request_limit.to_string());
    if let Some(max) = shared.backend.parts().map(SnapshotParts::max_snapshot_bytes) {
        b = b.header(names::URSULA_MAX_SNAPSHOT_BYTES, max.to_string());
    }
    if let Some(previous) = info.previous {
        b = b
            .header(names::STREAM_PREVIOUS_INCARNATION, previous.incarnation.to_string())
            .header(names::STREAM_INHERITED_OFFSET, previous.offset.to_string());
    }
    if let Some(snapshot) = info.snapshot {
        b = b
            .header(names::STREAM_SNAPSHOT_OFFSET, snapshot.offset.to_string())
            .header(names::STREAM_SNAPSHOT_DIGEST, snapshot.digest.to_string());
    }
    Ok(render::finish(b, render::empty()))
}

/// A read's `Stream-Incarnation` precondition, against the state that served it.
pub fn check_expect(expect: Option<Incarnation>, info: &StreamInfo) -> Result<(), ApiError> {
    match expect {
        Some(e) if e != info.incarnation => {
            Err(Rejection::IncarnationMismatch { current: Some(info.incarnation) }.into())
        }
        _ => Ok(()),
    }
}
