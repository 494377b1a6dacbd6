//! The append batcher against a voter on loopback that echoes each
//! append's command as its answer: on one stream, answered out of order;
//! as batch calls when the voter has no stream; one append per stream out
//! at a time; and a new stream after one ended with appends out.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use futures_util::future::join_all;
use tonic::{Request, Response, Status, Streaming};
use ursula_http::wire::pb;
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;
use ursula_proto::stream::v1::stream_service_server::{StreamService, StreamServiceServer};

use super::appends::{Appends, BatchStats};

#[derive(Default)]
struct Seen {
    streams: AtomicUsize,
    calls: AtomicUsize,
    /// Appends that arrived while another of their stream was unanswered.
    overtaking: AtomicUsize,
    /// Targets with an append out on a stream.
    out: Mutex<HashSet<String>>,
    /// `closing` notices sent.
    closings: AtomicUsize,
}

/// The batcher's stall limit here (`STREAM_STALL` in a gateway).
const STALL: Duration = Duration::from_millis(300);

#[derive(Clone, Copy, PartialEq)]
enum First {
    /// The first stream is like the others.
    Answers,
    /// It ends, unanswered, after its first message.
    Drop,
    /// It says the voter stops after its first answers.
    Close,
    /// It reads on but never answers.
    Stall,
}

struct FakeVoter {
    serves_stream: bool,
    first: First,
    seen: Arc<Seen>,
}

fn echo(request: &pb::WriteRequest) -> pb::WriteReply {
    pb::WriteReply { result: Some(pb::write_reply::Result::EncodedOutcome(request.encoded_command.clone())) }
}

fn target_of(request: &pb::WriteRequest) -> String {
    request.target.as_ref().map(|t| t.stream.clone()).unwrap_or_default()
}

type Replies = Pin<Box<dyn Stream<Item = Result<pb::NumberedReplies, Status>> + Send>>;
type Events = Pin<Box<dyn Stream<Item = Result<pb::WatchEvent, Status>> + Send>>;
type Answer<T> = Result<Response<T>, Status>;

fn absent<T>() -> Answer<T> {
    Err(Status::unimplemented("not in this test"))
}

impl FakeVoter {
    /// Each message's appends, answered after a pause, last first; the
    /// first stream ends unanswered after its first message (`Drop`), or
    /// says after its first answers that the voter stops (`Close`) and
    /// answers on until the gateway ends its side.
    fn answer(&self, writes: Streaming<pb::NumberedWrites>) -> Replies {
        let seen = self.seen.clone();
        let first = self.seen.streams.fetch_add(1, Ordering::SeqCst) == 0;
        let (drop_first, close_first) = (first && self.first == First::Drop, first && self.first == First::Close);
        let stall_first = first && self.first == First::Stall;
        let replies = futures_util::stream::unfold((writes, false), move |(mut writes, mut answered)| {
            let seen = seen.clone();
            async move {
                if close_first && answered {
                    seen.closings.fetch_add(1, Ordering::SeqCst);
                    let notice = pb::NumberedReplies { replies: Vec::new(), closing: true };
                    // Told once: what follows is answered as before.
                    return Some((Ok(notice), (writes, false)));
                }
                let message = writes.message().await.ok().flatten()?;
                for write in &message.writes {
                    let target = write.request.as_ref().map(target_of).unwrap_or_default();
                    if !seen.out.lock().expect("unpoisoned").insert(target) {
                        seen.overtaking.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if drop_first {
                    return None;
                }
                if stall_first {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                let mut replies = Vec::new();
                for write in message.writes.iter().rev() {
                    let request = write.request.clone().unwrap_or_default();
                    seen.out.lock().expect("unpoisoned").remove(&target_of(&request));
                    replies.push(pb::NumberedReply { id: write.id, reply: Some(echo(&request)) });
                }
                answered = seen.closings.load(Ordering::SeqCst) == 0;
                Some((Ok(pb::NumberedReplies { replies, closing: false }), (writes, answered)))
            }
        });
        Box::pin(replies)
    }
}

#[tonic::async_trait]
impl StreamService for FakeVoter {
    async fn append_batch(&self, request: Request<pb::WriteBatchRequest>) -> Answer<pb::WriteBatchReply> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(pb::WriteBatchReply { replies: request.get_ref().requests.iter().map(echo).collect() }))
    }

    type AppendStreamStream = Replies;

    async fn append_stream(&self, request: Request<Streaming<pb::NumberedWrites>>) -> Answer<Replies> {
        if !self.serves_stream {
            return absent();
        }
        Ok(Response::new(self.answer(request.into_inner())))
    }

    async fn describe(&self, _: Request<pb::DescribeRequest>) -> Answer<pb::DescribeReply> {
        absent()
    }
    async fn create(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn fork(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn append(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn delete(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn publish_snapshot(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn advance_retention(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn admit_part(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn stage_part(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn commit_parts(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn discard_parts(&self, _: Request<pb::WriteRequest>) -> Answer<pb::WriteReply> {
        absent()
    }
    async fn head(&self, _: Request<pb::HeadRequest>) -> Answer<pb::HeadReply> {
        absent()
    }
    async fn read(&self, _: Request<pb::ReadRequest>) -> Answer<pb::ReadReply> {
        absent()
    }
    async fn snapshot(&self, _: Request<pb::SnapshotRequest>) -> Answer<pb::SnapshotReply> {
        absent()
    }
    async fn bootstrap(&self, _: Request<pb::BootstrapRequest>) -> Answer<pb::BootstrapReply> {
        absent()
    }

    type WatchStream = Events;

    async fn watch(&self, _: Request<pb::WatchRequest>) -> Answer<Events> {
        absent()
    }
}

/// A fake voter on an ephemeral port and a batcher sending to it.
async fn start(serves_stream: bool, first: First) -> (Appends, Arc<Seen>, Arc<BatchStats>) {
    let seen = Arc::new(Seen::default());
    let voter = FakeVoter { serves_stream, first, seen: seen.clone() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        tonic::transport::Server::builder().add_service(StreamServiceServer::new(voter)).serve_with_incoming(incoming),
    );
    let channel = tonic::transport::Endpoint::from_shared(url).expect("a url").connect_lazy();
    let trace: ursula_http::telemetry::TraceInterceptor = ursula_http::telemetry::carry_trace_context;
    let stats = Arc::new(BatchStats::default());
    let client = StreamServiceClient::with_interceptor(channel, trace);
    (Appends::start(client, stats.clone(), STALL), seen, stats)
}

fn append(stream: &str, body: &str) -> pb::WriteRequest {
    let target = pb::Target { cluster_id: "test".into(), bucket: "b".into(), stream: stream.into() };
    pb::WriteRequest { target: Some(target), encoded_command: Bytes::from(body.to_string()) }
}

/// Sends `(stream, body)` appends at once; each answer must echo its own body.
async fn send_all(appends: &Appends, sent: &[(String, String)]) {
    let answers = join_all(sent.iter().map(|(stream, body)| appends.send(append(stream, body)))).await;
    for ((_, body), answer) in sent.iter().zip(answers) {
        let reply = answer.expect("answered");
        let Some(pb::write_reply::Result::EncodedOutcome(echoed)) = reply.result else { panic!("{reply:?}") };
        assert_eq!(echoed, body.as_bytes(), "an append got another's answer");
    }
}

fn appends_to(streams: usize, each: usize) -> Vec<(String, String)> {
    (0..streams).flat_map(|s| (0..each).map(move |n| (format!("s{s}"), format!("s{s}-{n}")))).collect()
}

#[tokio::test]
async fn appends_go_on_one_stream_answered_out_of_order_each_with_its_own_answer() {
    let (appends, seen, stats) = start(true, First::Answers).await;
    send_all(&appends, &appends_to(16, 1)).await;
    send_all(&appends, &appends_to(16, 1)).await;
    assert_eq!(seen.streams.load(Ordering::SeqCst), 1, "one stream carries every append");
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0);
    assert_eq!(stats.appends.load(Ordering::SeqCst), 32);
    assert!(stats.calls.load(Ordering::SeqCst) < 32, "no message carried two appends");
}

#[tokio::test]
async fn a_streams_appends_are_out_one_at_a_time() {
    let (appends, seen, _) = start(true, First::Answers).await;
    // Three streams, five appends each, all sent at once.
    send_all(&appends, &appends_to(3, 5)).await;
    assert_eq!(seen.overtaking.load(Ordering::SeqCst), 0, "an append went out before its stream's last was answered");
}

#[tokio::test]
async fn a_voter_without_the_stream_gets_batch_calls() {
    let (appends, seen, _) = start(false, First::Answers).await;
    send_all(&appends, &appends_to(8, 2)).await;
    assert!(seen.calls.load(Ordering::SeqCst) >= 1);
    assert_eq!(seen.streams.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_stream_that_ends_fails_what_was_out_and_the_next_append_opens_another() {
    let (appends, seen, stats) = start(true, First::Drop).await;
    let lost = appends.send(append("s0", "lost")).await.expect_err("the stream ended unanswered");
    // It may have been applied: not to be sent again (`Broken`, not `Unreached`).
    assert_eq!(lost.code(), tonic::Code::Aborted, "{lost}");
    send_all(&appends, &appends_to(4, 1)).await;
    assert_eq!(seen.streams.load(Ordering::SeqCst), 2);
    assert_eq!((stats.streams_opened.load(Ordering::SeqCst), stats.streams_lost.load(Ordering::SeqCst)), (2, 1));
}

#[tokio::test]
async fn a_voter_that_stops_gets_its_stream_ended_and_the_next_appends_go_on_another() {
    let (appends, seen, stats) = start(true, First::Close).await;
    send_all(&appends, &appends_to(4, 1)).await;
    // The notice follows the first answers; every later append is answered too.
    for _ in 0..3 {
        send_all(&appends, &appends_to(4, 1)).await;
    }
    assert_eq!(seen.closings.load(Ordering::SeqCst), 1);
    assert_eq!(seen.streams.load(Ordering::SeqCst), 2, "a second stream after the notice");
    assert_eq!((stats.streams_closed.load(Ordering::SeqCst), stats.streams_lost.load(Ordering::SeqCst)), (1, 0));
}

#[tokio::test]
async fn a_stream_with_no_answer_in_time_is_given_up_and_the_next_append_opens_another() {
    let (appends, seen, _) = start(true, First::Stall).await;
    let stalled = tokio::time::timeout(Duration::from_secs(20), appends.send(append("s0", "stalled")))
        .await
        .expect("given up within the stall limit")
        .expect_err("no answer came");
    assert_eq!(stalled.code(), tonic::Code::Aborted, "{stalled}");
    send_all(&appends, &appends_to(4, 1)).await;
    assert_eq!(seen.streams.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_stream_idle_longer_than_the_stall_limit_still_carries_the_next_append() {
    let (appends, seen, stats) = start(true, First::Answers).await;
    send_all(&appends, &appends_to(2, 1)).await;
    tokio::time::sleep(STALL * 2).await;
    send_all(&appends, &appends_to(2, 1)).await;
    assert_eq!(seen.streams.load(Ordering::SeqCst), 1);
    assert_eq!(stats.streams_lost.load(Ordering::SeqCst), 0, "an idle stream was given up at its next append");
}
