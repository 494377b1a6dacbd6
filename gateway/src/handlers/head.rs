//! `HEAD /{bucket}/{stream}` (spec/29-head-stream.md). Never renews a TTL.

use http::StatusCode;
use http::header;
use ursula_stream::StreamKey;

use super::Shared;
use super::write::stream_headers;
use crate::backend::Backend;
use crate::error::ApiError;
use crate::headers::names;
use crate::limits::MAX_REQUEST_BYTES;
use crate::render::{self, Answer};

pub async fn head<B: Backend>(shared: &Shared<B>, key: StreamKey) -> Result<Answer, ApiError> {
    let info = shared.backend.head(key).await?;
    let b = stream_headers(render::builder(StatusCode::OK), &info)
        .header(header::CACHE_CONTROL, "no-store")
        .header("stream-retained-offset", ursula_stream::Offset::ZERO.to_string())
        .header(names::URSULA_MAX_REQUEST_BYTES, MAX_REQUEST_BYTES.to_string());
    Ok(render::finish(b, render::empty()))
}
