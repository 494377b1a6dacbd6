//! `StreamService/Read` answered without copying the view's bytes
//! (`ursula_proto::read_wire`): the mux sends a gateway's `Read` here, and
//! the answer's chunks go out as the buffers the node holds them in, the
//! first as soon as the view is read. The bytes are those tonic's `Read`
//! would send; a malformed request gets the status tonic would give it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Response};
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::Incoming;
use prost::Message;
use tonic::Status;
use ursula_http::wire::pb;
use ursula_proto::read_wire;

use crate::engine::GroupEngine;
use crate::mux::GrpcBody;
use crate::stream_plane::StreamPlane;

/// The mux's hook: answers a `Read` call's request body.
pub type RawReads = Arc<dyn Fn(Incoming) -> BoxFuture<'static, Response<GrpcBody>> + Send + Sync>;

/// A read request is a target and a query: a few hundred bytes.
const MAX_REQUEST_BYTES: usize = 64 * 1024;

pub fn hook<E: GroupEngine>(plane: StreamPlane<E>) -> RawReads {
    let plane = Arc::new(plane);
    Arc::new(move |body| {
        let plane = plane.clone();
        Box::pin(async move { answer(&plane, body).await.unwrap_or_else(|status| status.into_http()) })
    })
}

async fn answer<E: GroupEngine>(plane: &StreamPlane<E>, body: Incoming) -> Result<Response<GrpcBody>, Status> {
    let request = request(body).await?;
    let frames = match plane.read_chunk(request).await {
        Ok(view) => read_wire::view_reply_frames(&view.encoded_view, view.chunks, ursula_proto::MAX_MESSAGE_BYTES)
            .map_err(|n| Status::resource_exhausted(format!("a read answer of {n} bytes")))?,
        Err(failure) => {
            let reply = pb::ReadReply { result: Some(pb::read_reply::Result::Failure(failure)) };
            vec![read_wire::framed(&reply.encode_to_vec())]
        }
    };
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = frames.into_iter().map(|f| Ok(http_body::Frame::data(f)));
    let body = futures_util::stream::iter(frames.chain(std::iter::once(Ok(http_body::Frame::trailers(trailers)))));
    let mut answer = Response::new(StreamBody::new(body).boxed_unsync());
    answer.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    Ok(answer)
}

/// The request's one message, decoded.
async fn request(body: Incoming) -> Result<pb::ReadRequest, Status> {
    let bytes = match Limited::new(body, MAX_REQUEST_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return Err(Status::invalid_argument(format!("a read request: {e}"))),
    };
    let message = read_wire::unframed(bytes).map_err(|e| Status::invalid_argument(format!("a read request: {e}")))?;
    pb::ReadRequest::decode(message).map_err(|e| Status::invalid_argument(format!("a read request: {e}")))
}
