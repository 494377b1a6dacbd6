//! A `Read` on a voter's connection for reads, its answer read as the
//! frames arrive, each chunk kept as the piece it came in (no copy when a
//! chunk came in one frame, as a voter of this version sends them:
//! `ursula_proto::read_wire`). Bulk reads have a connection of their own,
//! so 8 MiB answers never hold appends behind the shared connection's
//! flow-control window.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use prost::Message;
use tonic::Status;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use ursula_http::wire::pb;
use ursula_proto::read_wire::{READ_PATH, ReadAnswer, ReadReplyParser};

use super::CallError;

/// A voter's connection for reads, with the trace context added to each call.
pub type ReadChannel = InterceptedService<Channel, ursula_http::telemetry::TraceInterceptor>;

/// `StreamService/Read` on `channel`: the reply, chunks as their pieces.
pub async fn read(mut channel: ReadChannel, request: &pb::ReadRequest) -> Result<ReadAnswer, CallError> {
    use tonic::codegen::Service;
    let message = request.encode_to_vec();
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    framed.extend_from_slice(&message);
    let call = http::Request::builder()
        .method(http::Method::POST)
        .uri(READ_PATH)
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(tonic::body::Body::new(Full::new(Bytes::from(framed)).map_err(|never| match never {})))
        .map_err(|e| Status::internal(format!("a read call: {e}")))?;
    std::future::poll_fn(|cx| channel.poll_ready(cx)).await.map_err(|e| Status::from_error(e.into()))?;
    let answer = channel.call(call).await.map_err(|e| Status::from_error(e.into()))?;
    let (head, mut body) = answer.into_parts();
    // A failure before any message comes in the headers alone.
    failed(&head.headers)?;
    if head.status != http::StatusCode::OK {
        return Err(Status::unknown(format!("a read answered HTTP {}", head.status)).into());
    }
    let mut parser = ReadReplyParser::new(ursula_proto::MAX_MESSAGE_BYTES);
    let mut ended = false;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        match frame.into_data() {
            Ok(data) => parser.push(data).map_err(|e| Status::internal(format!("a read answer: {e}")))?,
            Err(frame) => {
                if let Some(trailers) = frame.trailers_ref() {
                    failed(trailers)?;
                    ended = true;
                }
            }
        }
    }
    if !ended {
        return Err(Status::internal("a read answer without its status").into());
    }
    Ok(parser.finish().map_err(|e| Status::internal(format!("a read answer: {e}")))?)
}

/// The call's status when `headers` say it failed.
fn failed(headers: &http::HeaderMap) -> Result<(), Status> {
    match Status::from_header_map(headers) {
        Some(status) if status.code() != tonic::Code::Ok => Err(status),
        _ => Ok(()),
    }
}

/// A chunk as one buffer: itself when it came in one piece.
pub fn joined(pieces: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(pieces) {
        Ok([one]) => one,
        Err(many) => many.concat().into(),
    }
}
